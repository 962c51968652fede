"""The report's data model: one pydantic structure, whose JSON
(`lineup report --json`, `Report.to_json`) is a stable shape.

Why a module of its own: everything else in the package either fills it
(`build`) or draws it (`markdown`, `html`, `terminal`, and the TUI's report
screen and charts); none of them needs the others. A rating line and a gap
between neighbours are `core.stats.ratings`' own `ModelRating` and `Gap`, carried
as they are.

The shape, top level: `generated_at` (epoch seconds), `database`, `filters`,
`message` (why there are no ratings), `rounds`, `seed`, `votes_used`,
`votes_demo_excluded`; the ratings (`models`, `groups`, `gaps`,
`components`, `warnings`) and the same per category and per rater
(`by_category`, `by_rater`: name -> `RatingTable`); `position_bias`,
`consistency`, `failure_modes`, `engineering`, `checks`,
`checks_by_category`, `structured` (structured output per model), `stability`;
`judge_votes_excluded`, `judge` (`core.report.judge.JudgeReport`, with
`--judge`) and `rater_quality` (`core.report.rater_quality.RaterQuality`).
Every figure but `judge` is made of people's votes only.
`agreement` (inter-rater: Krippendorff's alpha, `core.report.agreement`).
`matchups` (model against model: win / tie / loss counts and the predicted
win probability, `core.report.matchups`), `decision` (P(best) for the mix of
the report's own votes, the recommendation, routing and the Pareto frontiers:
`core.decide.model`), `style` (with `--style-control`: the style covariates'
coefficients and the style-adjusted ratings beside the raw ones,
`core.stats.style`), `public` (imported leaderboard scores and online metrics
beside the ratings, `core.stats.public_scores`; None when none were imported),
`variants` (the ratings of a prompt x model matrix grouped by model and by
variant, `core.report.variants`; None without variants).
Fields are only ever added.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from core.decide.model import CheckRate, Decision, Engineering, Quantiles  # noqa: F401  (the report names them)
from core.stats.public_scores import PublicScores
from core.stats.ratings import Gap, ModelRating
from core.report.agreement import Agreement
from core.report.graders import GraderAgreement
from core.report.judge import JudgeReport
from core.report.matchups import Matchups
from core.report.rater_quality import RaterQuality
from core.report.dimensions import DimensionReport
from core.report.structured import StructuredRow
from core.stats.style import StyleControl
from core.report.variants import VariantGroups
from core.report.start import NO_CATEGORY, ReportFilters  # noqa: F401  (the report names them)

#: What every rendering of a report marks it with when it is of demo models only (`Report.demo`).
DEMO_NOTE = ("DEMO: every vote here is on demo models (synthetic, offline answers), so they are shown; "
             "these figures rate no real model. Configure real models (`lineup models`) to rate them.")



class RatingTable(BaseModel):
    models: list[ModelRating] = Field(default_factory=list)
    groups: list[list[str]] = Field(default_factory=list)
    gaps: list[Gap] = Field(default_factory=list)
    components: list[list[str]] = Field(default_factory=list)
    n_votes: int = 0
    n_battles: int = 0
    warnings: list[str] = Field(default_factory=list)


class PositionRow(BaseModel):
    position: int = Field(description="0 = leftmost on screen")
    votes: int = Field(description="votes with a single winner where this position was shown")
    wins: int
    win_rate: float
    ci_low: float = Field(description="Wilson 95% interval")
    ci_high: float
    expected: float = Field(description="win rate without position bias (mean of 1/contestants)")


class PositionBias(BaseModel):
    rows: list[PositionRow] = Field(default_factory=list)
    decisive_votes: int = 0
    no_winner_votes: int = 0


class RaterAgreement(BaseModel):
    rater: str
    repeated: int = Field(description="pairs of this rater's votes on the same prompt and models")
    agreed: int
    rate: float | None


class Consistency(BaseModel):
    """Votes on the same prompt (case id, else prompt text) and the same set of
    models: does the same rater give the same answer twice, and do raters agree?"""

    raters: list[RaterAgreement] = Field(default_factory=list)
    inter_rater_pairs: int = 0
    inter_rater_agreed: int = 0
    inter_rater_rate: float | None = None


class TagStat(BaseModel):
    count: int
    rate: float = Field(description="share of the model's answers with this tag")


class FailureModes(BaseModel):
    model: str
    answers: int
    tagged: int = Field(description="answers with at least one tag")
    tags: dict[str, TagStat] = Field(default_factory=dict)


class StabilityRow(BaseModel):
    """Spread over repeats (`lineup run --repeat N`) of the same case."""

    model: str
    cases: int = Field(description="cases answered at least twice")
    runs: int
    exact_match_rate: float | None = Field(default=None, description="mean over cases")
    mean_similarity: float | None = None
    min_similarity: float | None = Field(default=None, description="worst pair over all cases")
    flaky_checks: int = Field(default=0, description="checks that passed in some repeats and failed in others")
    checks: int = 0
    pass_rate_sd_mean: float | None = Field(
        default=None, description="per case: sd over repeats of the share of checks passed; mean over cases")
    pass_rate_sd_max: float | None = None


class Report(BaseModel):
    generated_at: float
    database: str | None = None
    filters: ReportFilters
    message: str | None = Field(default=None, description="why there are no ratings, when there are none")
    rounds: int
    seed: int | None
    votes_used: int = 0
    votes_demo_excluded: int = 0
    demo: bool = Field(default=False, description="every vote in scope is on demo models: they are counted "
                                                  "(filters.include_demo) and every figure is of demo models")
    models: list[ModelRating] = Field(default_factory=list)
    groups: list[list[str]] = Field(default_factory=list)
    gaps: list[Gap] = Field(default_factory=list)
    components: list[list[str]] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    by_category: dict[str, RatingTable] = Field(default_factory=dict)
    by_rater: dict[str, RatingTable] = Field(default_factory=dict)
    position_bias: PositionBias = Field(default_factory=PositionBias)
    consistency: Consistency = Field(default_factory=Consistency)
    failure_modes: list[FailureModes] = Field(default_factory=list)
    engineering: list[Engineering] = Field(default_factory=list)
    checks: list[CheckRate] = Field(default_factory=list)
    checks_by_category: list[CheckRate] = Field(default_factory=list)
    structured: list[StructuredRow] = Field(default_factory=list, description="structured output per model")
    stability: list[StabilityRow] = Field(default_factory=list)
    dimensions: DimensionReport = Field(default_factory=DimensionReport, description=(
        "scores on the sets' dimensions, people and judges apart (`core.report.dimensions`)"))
    # issue 14: judges and rater quality (each a self-contained section, `core.report.judge`,
    # `core.report.rater_quality`); every figure above is made of people's votes only
    judge_votes_excluded: int = Field(default=0, description="LLM judges' votes in scope, in no figure above")
    judge: JudgeReport | None = Field(default=None, description="`--judge JUDGE`: calibration and combined ratings")
    graders: list[GraderAgreement] = Field(default_factory=list, description="rubric graders' grades as pairwise "
                                           "verdicts beside people's votes (`core.report.graders`)")
    rater_quality: RaterQuality = Field(default_factory=RaterQuality, description="gold accuracy, blinding audit")
    agreement: Agreement = Field(default_factory=Agreement, description="between raters (core.report.agreement)")
    matchups: Matchups = Field(default_factory=Matchups)
    decision: Decision | None = Field(default=None, description="for the mix of the report's own votes; "
                                                                "None without votes by category")
    style: StyleControl | None = Field(default=None, description="style control (`--style-control` only)")
    public: PublicScores | None = Field(default=None, description="leaderboard scores and online metrics "
                                                                  "(`lineup import --leaderboard/--online`)")
    variants: VariantGroups | None = Field(default=None, description="the prompt x model matrix: ratings of "
                                                                     "the variants by model and by variant "
                                                                     "(`core.report.variants`); None without any")

    @property
    def empty(self) -> bool:
        """Nothing at all to show (no votes, answers or checks)."""
        return not (self.models or self.engineering or self.checks or self.structured or self.dimensions.scores)

    def to_json(self, indent: int | None = 2) -> str:
        """The stable JSON shape (what `lineup report --json` prints)."""
        return self.model_dump_json(indent=indent)
