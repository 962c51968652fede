"""The words and tables of the report's prompt x model, judge and
rater-quality sections, once, for every renderer: which prompt is better for
each model and which model with each prompt, what an LLM judge's verdicts say next to people's
votes (each rating table says whose votes made it), gold accuracy per
rater, the blinding audit.

Why a module of its own: the Markdown, HTML, terminal and TUI renderers
each turn these `Block`s into their own form (`markdown.py`, `html.py`,
`terminal.py`, `tui/report_screen.py`), escaping every string their own way:
model names, raters and categories inside them are untrusted. The figures
are our own numbers, written with `core.report.format`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from core.report.format import fmt, fmt_ci, pct
from core.report.graders import GraderAgreement
from core.report.judge import CombinedRatings, JudgeReport, JudgeStyle
from core.report.model import Report
from core.report.rater_quality import RaterQuality
from core.report.variants import VariantGroups, verdict


@dataclass(frozen=True)
class Block:
    """A heading (level 2 or 3), a paragraph, or a table (header, rows)."""

    kind: Literal["h2", "h3", "p", "table"]
    text: str = ""
    header: tuple[str, ...] = ()
    rows: tuple[tuple[str, ...], ...] = field(default_factory=tuple)


def _interval(lo: float | None, hi: float | None, as_pct: bool = True, digits: int = 2) -> str:
    if lo is None or hi is None:
        return "-"
    return f"{pct(lo)} .. {pct(hi)}" if as_pct else f"{lo:.{digits}f} .. {hi:.{digits}f}"


def stretch_blocks(r: Report) -> list[Block]:
    """The prompt x model groups, the judge and rater-quality sections of a
    report, in order; none when there is nothing to say."""
    out: list[Block] = variant_blocks(r.variants)
    if r.judge is not None:
        out += judge_blocks(r.judge)
    elif r.judge_votes_excluded:
        out += [Block("h2", "LLM judges"),
                Block("p", f"{r.judge_votes_excluded} verdict{'s' if r.judge_votes_excluded != 1 else ''} of LLM "
                           "judges match these filters and are in none of the figures above, which are made of "
                           "people's votes only; `lineup report --judge ALIAS` compares a judge with them.")]
    out += grader_blocks(r.graders)
    out += rater_quality_blocks(r.rater_quality)
    return out


def variant_blocks(groups: VariantGroups | None) -> list[Block]:
    """The prompt x model matrix (`core.report.variants`): per model, which
    prompt is better; per prompt, which model is better."""
    if groups is None or not (groups.by_model or groups.by_variant):
        return []
    out = [Block("h2", "Prompts and models"),
           Block("p", "The contestants that are variants (a model with its own prompt and settings), from the "
                      "ratings above: per model, which prompt is better; per prompt, which model is better.")]
    for title, groups_of, col, what in (("For each model: which prompt", groups.by_model, "variant", "prompt"),
                                        ("For each prompt: which model", groups.by_variant, "model", "model")):
        for g in groups_of:
            out.append(Block("h3", f"{title} ({g.name})"))
            out.append(Block("table", header=(col, "contestant", "rating", "95% interval", "votes"),
                             rows=tuple((r.variant if col == "variant" else r.model, r.contestant,
                                         fmt(r.rating.rating), fmt_ci(r.rating), str(r.rating.votes))
                                        for r in g.rows)))
            out.append(Block("p", verdict(g, what)))
    return out


def grader_blocks(rows: list[GraderAgreement]) -> list[Block]:
    """Rubric graders beside people: where a person compared two answers a
    grader graded, the higher grade as its verdict."""
    if not rows:
        return []
    out = [Block("h2", "Rubric graders against people"),
           Block("p", "Where a person's vote compares two answers a rubric grader graded on the same turn, the "
                      "higher grade is the grader's verdict (equal grades: a tie). A pass/fail rubric ties "
                      "whenever both pass or both fail.")]
    out.append(Block("table", header=("check", "grader", "graded", "comparisons", "agreement", "95% interval", "flag"),
                     rows=tuple((g.check, g.grader, str(g.graded), str(g.comparisons), pct(g.rate),
                                 _interval(g.ci_low, g.ci_high),
                                 (f"UNRELIABLE: below {pct(g.min_agreement)}" if g.unreliable else "")
                                 + (g.message or "")) for g in rows)))
    for g in rows:
        if g.confusion:
            out.append(Block("table", header=(f"{g.check} ({g.grader}): people \\ grades", *g.categories),
                             rows=tuple((n, *(str(k) for k in row))
                                        for n, row in zip(g.categories, g.confusion, strict=True))))
    return out


def _ratings_blocks(t: CombinedRatings) -> list[Block]:
    out = [Block("h3", t.title)]
    if t.rows:
        lam = f"; the judge's weight lambda = {t.lam:.2f} (0 = people's votes alone)" if t.lam is not None else ""
        out.append(Block("p", f"{t.human_comparisons} of people's comparisons, {t.judge_comparisons} of the "
                              f"judge's{lam}."))
        out.append(Block("table", header=("model", "rating", "95% interval", "people's comparisons",
                                          "judge's comparisons"),
                         rows=tuple((row.name, fmt(row.rating), f"{row.ci_low:.0f} .. {row.ci_high:.0f}",
                                     str(row.human_comparisons), str(row.judge_comparisons)) for row in t.rows)))
    if t.message:
        out.append(Block("p", t.message))
    return out


def judge_blocks(j: JudgeReport) -> list[Block]:
    out = [Block("h2", f"LLM judge {j.judge} (not people's votes)")]
    head = (f"{j.verdicts} verdicts on {j.pairs} (case, pair)s; prompt {j.prompt_hash[:12]}." if j.prompt_hash
            else "No verdicts.")
    out.append(Block("p", head + " The judge's verdicts are kept apart from people's votes: every other "
                                 "section of this report counts people only."))
    out += [Block("p", note) for note in j.notes]
    if not j.prompt_hash:
        return out
    p = j.position
    first = (f" Of its {p.decisive} verdicts naming a winner, {pct(p.first_shown_rate)} picked the answer shown "
             "first." if p.decisive else "")
    out += [Block("h3", "Position consistency"),
            Block("p", p.summary + (f" (95% interval {_interval(p.ci_low, p.ci_high)})." if p.rate is not None
                                    else ".") + first)]
    c = j.calibration
    out.append(Block("h3", "Agreement with people"))
    if c.flag:
        out.append(Block("p", c.flag))
    if not c.enough:
        out.append(Block("p", c.message or "nothing to compare"))
    else:
        kappa = fmt(c.kappa, 2) if c.kappa is not None else "not defined (one verdict only)"
        out.append(Block("p", f"On {c.comparisons} comparisons both a person and the judge made: raw agreement "
                              f"{pct(c.agreement)} (95% interval {_interval(c.agreement_ci_low, c.agreement_ci_high)}); "
                              f"Cohen's kappa {kappa} (bootstrap 95% interval "
                              f"{_interval(c.kappa_ci_low, c.kappa_ci_high, as_pct=False)})."))
        out.append(Block("table", header=("people \\ judge", *c.categories),
                         rows=tuple((name, *(str(n) for n in row)) for name, row in zip(c.categories, c.confusion, strict=True))))
        for title, rows in (("category", c.by_category), ("rater", c.by_rater)):
            if rows:
                out.append(Block("table", header=(title, "comparisons", "agreed", "rate", "95% interval"),
                                 rows=tuple((a.name, str(a.comparisons), str(a.agreed), pct(a.rate),
                                             _interval(a.ci_low, a.ci_high)) for a in rows)))
    out.append(Block("p", "Ratings three ways, each from the votes it names. The combined one is valid whatever "
                          "the judge's quality (it targets the ratings people's votes would give) and narrows "
                          "when the judge agrees with people; it assumes the pairs people voted on are a random "
                          "sample of those the judge judged."))
    for t in j.ratings:
        out += _ratings_blocks(t)
    out += judge_style_blocks(j.style)
    return out


def judge_style_blocks(st: JudgeStyle) -> list[Block]:
    """Style control on the judge's own verdicts: its coefficients beside
    people's, and its ratings before and after the style is removed."""
    out = [Block("h3", "Style control on the judge's verdicts (length and Markdown)")]
    if st.judge is None:
        out.append(Block("p", st.message or "no style control"))
        return out
    if st.summary:
        out.append(Block("p", st.summary))
    people = {c.feature: c for c in st.people.coefficients} if st.people is not None else {}

    def coef(c) -> tuple[str, str]:
        if c is None:
            return "-", "-"
        if not c.varies:
            return "not fitted", "-"
        return f"{c.coef:+.2f}", _interval(c.ci_low, c.ci_high, as_pct=False)

    out.append(Block("table", header=("feature", "judge", "95% interval", "people", "95% interval"),
                     rows=tuple((c.description, *coef(c), *coef(people.get(c.feature)))
                                for c in st.judge.coefficients)))
    out.append(Block("p", "A coefficient is the change in log-odds of winning per standard deviation of the "
                          "feature's difference between two answers: positive for length means longer answers "
                          "win more often, whoever wrote them. The judge's ratings from its verdicts alone, plain "
                          "and with the style removed (bias-corrected):"))
    out.append(Block("table", header=("model", "judge's rating", "95% interval", "style-adjusted", "95% interval"),
                     rows=tuple((r.name, fmt(r.rating), _interval(r.ci_low, r.ci_high, as_pct=False, digits=0),
                                 fmt(r.adjusted), _interval(r.adjusted_low, r.adjusted_high, as_pct=False, digits=0))
                                for r in st.judge.models)))
    out += [Block("p", w) for w in st.judge.warnings]
    return out


def rater_quality_blocks(q: RaterQuality) -> list[Block]:
    out: list[Block] = []
    if q.gold:
        out += [Block("h2", "Rater quality: gold pairs"),
                Block("p", "Pairs with a known better answer mixed into the vote queue; a tie or 'both bad' "
                           "counts as a miss. Chance is 50% (picking a side without reading)."),
                Block("table", header=("rater", "gold pairs", "correct", "accuracy", "95% interval", "flag"),
                      rows=tuple((g.rater, str(g.gold_pairs), str(g.correct), pct(g.accuracy),
                                  _interval(g.ci_low, g.ci_high), ("AT CHANCE: " if g.at_chance else "") + g.note)
                                 for g in q.gold))]
    if q.blinding:
        out += [Block("h2", "Blinding audit"),
                Block("p", "After a vote, raters guessed which model wrote an answer. Before it they saw the "
                           "answers under labels: no names, speed figures, error text or reasoning (reasoning only "
                           "in chats started with --show-reasoning). Blinding index per pair: "
                           "2 x (share named right) - 1 on the guesses naming one of the two; 0 = chance (the "
                           "blinding held), 1 = always identified."),
                Block("table", header=("models", "guesses", "right", "blinding index", "95% interval", "no idea"),
                      rows=tuple((f"{b.model_a} / {b.model_b}", str(b.guesses), str(b.correct), fmt(b.index, 2),
                                  _interval(b.ci_low, b.ci_high, as_pct=False), str(b.no_idea))
                                 for b in q.blinding))]
    return out
