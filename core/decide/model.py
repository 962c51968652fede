"""The decision's data model: `lineup decide --json` prints `Decision`, and the
report carries one (`Report.decision`, for the mix of its own votes).

Why a module of its own: the report's model and every renderer read it, and
it must import nothing of the report (see `core.decide`).

The JSON shape, stable (fields are only ever added, after these):

    {"mix": {category: share},
     "models": [{"name", "p_best", "feasible", "why_infeasible", "rating", "ci_low", "ci_high",
                 "p95_ttft_ms", "p95_duration_ms", "cost_per_1k", "pass_rate", ...}],
     "recommendation": name | null,
     "tied_with_best": [name, ...],
     "routing": [{"category", "choose", "p_best", "saving", ...}],
     ...}

What the fields mean:
- `mix`: each category's share of the traffic (summing to 1); `mix_source`
  says where it came from ("shares given", the logs and field, or "the votes":
  each category's share of the votes when no mix is given).
- `p_best`: the share of bootstrap rounds in which the model has the highest
  mix score among the feasible, rated models (the mix score of a round: the
  sum over categories of share x that category's rating in the round; each
  category's rounds are its own, seeded bootstrap of its votes, combined
  round by round). 0 for an infeasible model; null for a model that cannot
  be scored for the mix (`missing_categories`: in a category with a share,
  fewer votes than the report ranks on (10), or none that connect it to the
  other models there).
- `rating`, `ci_low`, `ci_high`: the mix score (Elo scale; each category's
  ratings have mean 1000 over its models) and its bootstrap interval at
  `confidence`.
- `p95_ttft_ms`, `p95_duration_ms` (and the p50s): over the model's completed
  answers; `cost_per_1k`: the mean recorded cost of an answer (a request)
  times 1,000, from the recorded cost, else the session's or the config's
  price and the recorded tokens (`cost_estimated`: some token counts were
  estimates); `pass_rate`: the share of its check results that passed.
- `feasible`: within every limit given (`limits`); a limit on a figure that
  was never recorded for the model makes it infeasible (`why_infeasible`).
- `recommendation`: the cheapest feasible model whose mix score cannot be
  told apart from the best's (`best`: the feasible model with the highest
  P(best)): the `confidence` interval of the round-by-round difference to
  the best includes 0 (`tied_with_best` lists them, the best first). A
  model of unknown cost is never "cheaper". `saving_vs_best`: what it saves
  per 1,000 answers against the best. null when no model is feasible;
  `binding_limit` then names the limit that rules out the most models.
- `routing`: per category with a share, the cheapest feasible model tied
  with that category's best, its P(best) in that category, and `saving`: its
  share x (cost of the recommendation - its cost), per 1,000 answers;
  `routing_saving` is their sum.
- `pareto_cost`, `pareto_latency`: the feasible models on the frontier of
  mix score against cost per 1,000 answers and against p95 duration (no
  other feasible model is at least as good on both and better on one).
- `style_control`, `style_by_category`: with `--style-control`, P(best) is
  computed from each category's style-adjusted ratings (`core.stats.style`), whose
  fits are given per category.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from core.stats.style import StyleControl


class DecisionModel(BaseModel):
    name: str
    p_best: float | None = Field(description="None: cannot be scored for the mix (missing_categories)")
    feasible: bool
    why_infeasible: str | None = None
    rating: float | None = Field(default=None, description="the mix score, Elo scale")
    ci_low: float | None = None
    ci_high: float | None = None
    p95_ttft_ms: float | None = None
    p95_duration_ms: float | None = None
    cost_per_1k: float | None = Field(default=None, description="per 1,000 answers (requests)")
    pass_rate: float | None = None
    p50_ttft_ms: float | None = None
    p50_duration_ms: float | None = None
    cost_estimated: bool = Field(default=False, description="some of the tokens priced were estimates")
    answers: int = Field(default=0, description="completed answers behind the speed and cost figures")
    checks: int = Field(default=0, description="check results behind the pass rate")
    missing_categories: list[str] = Field(default_factory=list)
    on_cost_frontier: bool = False
    on_latency_frontier: bool = False


class Route(BaseModel):
    category: str
    choose: str | None
    p_best: float | None = Field(description="P(best) of the chosen model in this category")
    saving: float | None = Field(description="share x (cost of the recommendation - cost of the choice), per 1,000")
    share: float = 0.0
    best: str | None = Field(default=None, description="the feasible model with the highest P(best) here")
    tied: list[str] = Field(default_factory=list, description="feasible models tied with the category's best")
    votes: int = 0


class Limits(BaseModel):
    max_p95_ttft_ms: float | None = None
    max_p95_duration_ms: float | None = None
    max_cost_per_1k: float | None = None
    min_pass_rate: float | None = None

    def given(self) -> bool:
        return any(v is not None for v in self.model_dump().values())


class Decision(BaseModel):
    mix: dict[str, float] = Field(default_factory=dict)
    models: list[DecisionModel] = Field(default_factory=list)
    recommendation: str | None = None
    tied_with_best: list[str] = Field(default_factory=list)
    routing: list[Route] = Field(default_factory=list)
    mix_source: str = "the votes"
    confidence: float = 0.95
    rounds: int = 0
    seed: int | None = 0
    limits: Limits = Field(default_factory=Limits)
    best: str | None = None
    saving_vs_best: float | None = Field(default=None, description="per 1,000 answers")
    saving_vs_best_share: float | None = Field(default=None, description="of the best's cost")
    binding_limit: str | None = None
    routing_cost_per_1k: float | None = None
    single_cost_per_1k: float | None = None
    routing_saving: float | None = None
    votes_by_category: dict[str, int] = Field(default_factory=dict)
    unrated_categories: list[str] = Field(default_factory=list,
                                          description="mix categories without a single vote: left out, "
                                                      "the other shares scaled up")
    left_out_categories: list[str] = Field(default_factory=list,
                                           description="the default mix (of the votes) only: categories with "
                                                       "votes where not every model is rated, left out of it")
    pareto_cost: list[str] = Field(default_factory=list)
    pareto_latency: list[str] = Field(default_factory=list)
    message: str | None = Field(default=None, description="why there is no P(best), when there is none")
    warnings: list[str] = Field(default_factory=list)
    demo: bool = Field(default=False, description="every vote in scope is on demo models: they are counted, "
                                                  "and the decision is between demo models")
    style_control: bool = Field(default=False, description="P(best) from style-adjusted ratings")
    style_by_category: dict[str, StyleControl] = Field(default_factory=dict)

    def to_json(self, indent: int | None = 2) -> str:
        return self.model_dump_json(indent=indent)


# The report's per-model figures that a decision reads (the report's model re-exports them).
class Quantiles(BaseModel):
    n: int
    p5: float
    p25: float
    p50: float
    p75: float
    p95: float


class Engineering(BaseModel):
    model: str
    requests: int
    completed: int
    errors: int
    error_rate: float | None
    errors_by_kind: dict[str, int] = Field(default_factory=dict)
    cancelled: int = 0
    interrupted: int = 0
    ttft_ms: Quantiles | None = None
    duration_ms: Quantiles | None = None
    output_tokens_per_s_p50: float | None = Field(
        default=None, description="output tokens / (duration - time to first token), median")
    input_tokens: int = 0
    output_tokens: int = 0
    mean_output_tokens: float | None = None
    tokens_estimated: int = Field(default=0, description="answers whose token counts are estimates")
    cost: float | None = Field(default=None, description="recorded cost, else from prices; None if unknown")
    cost_known: int = Field(default=0, description="answers with a known cost")


class CheckRate(BaseModel):
    model: str
    category: str | None = None
    check: str | None = None
    passed: int
    total: int
    rate: float
