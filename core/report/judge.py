"""The report's judge section (`lineup report --judge JUDGE`): how an LLM
judge's verdicts compare with people's votes, and ratings from people's
votes alone, the judge's alone, and both combined by prediction-powered
inference, each said for what it is.

Why a module of its own: it is the one place where a judge's votes and
people's meet, and it keeps them apart everywhere but in the figures that
say they combine them. The section's pydantic models (its JSON shape, under
`judge` in the report) are here beside the code that fills them; the
renderers draw them with their own functions.

Comparisons are (case, pair of models): a person's vote on a case says
something about each pair it decides (`core.stats.votes.pair_score`, through its
own decomposition); the judge's verdicts on one pair and case, in both
orders, say one thing (`core.stats.votes.combine_orders`: a flip is a tie and
position-inconsistent). A judge asked with several prompts is several raters:
one prompt (the newest, or `--judge-prompt`) is read, the others named.

Calibrated to people: style control on the judge's own verdicts (length and
Markdown, `core.stats.style`, the fit people's votes get with
`--style-control`) measures a judge's taste for long or formatted answers,
beside people's taste on their own votes, and its style-adjusted ratings
are the judge's verdicts with that taste removed. A judge whose agreement
with people is below the team's threshold (`--min-judge-agreement`) is
flagged unreliable.
"""

from __future__ import annotations

import json
from collections import defaultdict
from itertools import combinations
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, Field

from core.stats import calibration as C
from core.stats import ppi
from core.answering.judge_directed import TAG as DIRECTED_TAG
from core.report.style_section import style_for
from core.stats import ratings as R
from core.stats.ratings import MIN_VOTES_TO_RANK, _components, wilson_interval
from core.stats.style import FEATURE_TEXT, StyleControl
from core.stats.votes import combine_orders, judge_rater, pair_of, pair_score
from store import report_queries as Q
from store.db import Store

#: Fewer comparisons both a person and the judge made, and agreement is not reported.
MIN_OVERLAP = 10
#: Fewer people's comparisons, and no combined ratings.
MIN_LABELED = 10
#: The agreement with people below which a judge is flagged unreliable, unless the team sets another.
DEFAULT_MIN_AGREEMENT = 0.6


class AgreementRow(BaseModel):
    name: str
    comparisons: int = Field(description="comparisons both this group's people and the judge made")
    agreed: int
    rate: float | None
    ci_low: float | None = Field(default=None, description="Wilson 95% interval")
    ci_high: float | None = None


class PositionConsistency(BaseModel):
    """The judge's verdicts on the same pair and case in both orders."""

    pairs_both_orders: int = 0
    consistent: int = 0
    rate: float | None = None
    ci_low: float | None = Field(default=None, description="Wilson 95% interval")
    ci_high: float | None = None
    decisive: int = Field(default=0, description="verdicts naming a winner")
    first_shown_picked: int = Field(default=0, description="... of which the answer shown first (A)")
    first_shown_rate: float | None = None
    summary: str = ""


class Calibration(BaseModel):
    """People against the judge, on the comparisons both made."""

    comparisons: int = 0
    enough: bool = False
    message: str | None = Field(default=None, description="plain words when there is too little to say")
    agreement: float | None = None
    agreement_ci_low: float | None = Field(default=None, description="Wilson 95% interval")
    agreement_ci_high: float | None = None
    kappa: float | None = Field(default=None, description="Cohen's kappa")
    kappa_ci_low: float | None = Field(default=None, description="bootstrap 95% interval")
    kappa_ci_high: float | None = None
    categories: list[str] = Field(default_factory=lambda: list(C.CATEGORIES))
    confusion: list[list[int]] = Field(default_factory=list, description="rows: people, columns: the judge")
    by_category: list[AgreementRow] = Field(default_factory=list)
    by_rater: list[AgreementRow] = Field(default_factory=list)
    min_agreement: float | None = Field(default=None, description="the team's threshold (--min-judge-agreement)")
    unreliable: bool = Field(default=False, description="agreement below the threshold: the judge is flagged")
    flag: str | None = Field(default=None, description="the flag in words")


class JudgeStyle(BaseModel):
    """Style control on the judge's own verdicts (one outcome per case and
    pair, both orders combined) and, beside it, on people's votes in the
    same scope: how much each prefers longer or formatted answers, and the
    judge's ratings with that preference removed (`judge.models`' adjusted)."""

    judge: StyleControl | None = None
    people: StyleControl | None = None
    message: str | None = Field(default=None, description="why the judge's fit is missing, in words")
    summary: str | None = Field(default=None, description="the length coefficients, in words")


class CombinedRow(BaseModel):
    name: str
    rating: float
    ci_low: float
    ci_high: float
    human_comparisons: int = 0
    judge_comparisons: int = 0


class CombinedRatings(BaseModel):
    """One way of rating the models; `method` says whose votes made it."""

    method: Literal["human", "judge", "ppi"]
    title: str
    rows: list[CombinedRow] = Field(default_factory=list)
    lam: float | None = Field(default=None, description="ppi: the judge's weight (0 = people's votes alone)")
    human_comparisons: int = 0
    judge_comparisons: int = 0
    message: str | None = None


class JudgeReport(BaseModel):
    judge: str
    rater: str = Field(description="the rater name its votes carry")
    prompt_hash: str | None = None
    other_prompts: list[str] = Field(default_factory=list, description="hashes of other prompts, not read")
    verdicts: int = 0
    pairs: int = Field(default=0, description="(case, pair) items the judge gave a verdict on")
    human_comparisons: int = 0
    position: PositionConsistency = Field(default_factory=PositionConsistency)
    calibration: Calibration = Field(default_factory=Calibration)
    ratings: list[CombinedRatings] = Field(default_factory=list, description="people only, judge only, combined")
    left_out_directed: int = Field(default=0, description="verdicts left out: a pair with an answer that talks to "
                                   "the judge (tagged judge_directed)")
    style: JudgeStyle = Field(default_factory=JudgeStyle, description="style control on the judge's verdicts")
    notes: list[str] = Field(default_factory=list)


def _load(text: Any) -> Any:
    return json.loads(text) if isinstance(text, str) else text


def judge_report(store: Store, scope: Q.Scope, judge: str, *, rounds: int, seed: int | None,
                 prompt_hash: str | None = None, level: float = 0.95,
                 min_agreement: float = DEFAULT_MIN_AGREEMENT) -> JudgeReport:
    rater = judge_rater(judge)
    report = JudgeReport(judge=judge, rater=rater)
    prompts = Q.judge_prompts(store, rater)
    if not prompts:
        report.notes.append(f"no verdicts of the judge {judge} in this database: run `lineup judge -m {judge}`")
        return report
    known = [p for p, _, _ in prompts]
    if prompt_hash is not None:
        matches = [p for p in known if p and p.startswith(prompt_hash)]
        if len(matches) != 1:
            report.notes.append(f"the judge {judge} has {'no' if not matches else 'several'} prompt hash "
                                f"starting with {prompt_hash!r}; its prompts: {', '.join(str(p)[:12] for p in known)}")
            return report
        chosen: str | None = matches[0]
    else:
        chosen = known[0]
    report.prompt_hash = chosen
    report.other_prompts = [str(p) for p in known if p != chosen]
    if report.other_prompts:
        report.notes.append(f"the judge was also asked with {len(report.other_prompts)} other prompt(s) "
                            f"({', '.join(p[:12] for p in report.other_prompts)}); only {str(chosen)[:12]} is read "
                            "(--judge-prompt HASH to choose)")
    demo = set() if scope.include_demo else Q.demo_contestants(store)
    directed = Q.tagged_conversations(store, DIRECTED_TAG)

    judged: dict[tuple[str, tuple[str, str]], dict[tuple[str, str], float]] = defaultdict(dict)
    judged_vote: dict[tuple[str, tuple[str, str]], str] = {}     # a vote of each item: its texts, for style
    meta: dict[str, str | None] = {}
    human: list[tuple[str, tuple[str, str], str, float]] = []    # (turn, pair, rater, score)
    human_votes: list[str] = []                                   # the vote each of `human` came from
    decisive = first_picked = 0
    for (_vid, turn, category, who, kind, phash, choice, ranking, mapping, positions, session) in \
            Q.pair_vote_rows(store, scope, rater):
        try:
            mapping, positions, ranking = _load(mapping), _load(positions) or [], _load(ranking)
        except ValueError:
            continue
        if not isinstance(mapping, dict) or any((session, alias) in demo for alias in mapping.values()):
            continue
        meta[turn] = category
        models = sorted(set(mapping.values()))
        try:
            if kind == "judge":
                if phash != chosen:
                    continue
                shown = [mapping[lab] for lab in positions if lab in mapping]
                if len(shown) != 2 or shown[0] == shown[1]:
                    continue
                if (turn, shown[0]) in directed or (turn, shown[1]) in directed:
                    report.left_out_directed += 1   # an answer told the judge what to say
                    continue
                pair = pair_of(shown[0], shown[1])
                score = pair_score(choice, ranking, mapping, positions, pair)
                if score is None:
                    continue
                judged[(turn, pair)][(shown[0], shown[1])] = score
                judged_vote.setdefault((turn, pair), _vid)
                report.verdicts += 1
                if choice in mapping:
                    decisive += 1
                    first_picked += int(bool(positions) and choice == positions[0])
                continue
            for x, y in combinations(models, 2):
                score = pair_score(choice, ranking, mapping, positions, (x, y))
                if score is not None:
                    human.append((turn, (x, y), who, score))
                    human_votes.append(_vid)
        except ValueError:
            continue
    report.human_comparisons = len(human)
    if report.left_out_directed:
        n = report.left_out_directed
        report.notes.append(f"warning: {n} verdict{'s' if n != 1 else ''} left out of every judge figure below: "
                            "the pair had an answer that talks to the judge (tagged judge_directed: a verdict "
                            "marker, the judge's names for the answers, or words addressed to it)")

    items: dict[tuple[str, tuple[str, str]], float] = {}
    both = consistent = 0
    for key, orders in judged.items():
        score, same = combine_orders(list(orders.values()))
        items[key] = score
        if len(orders) > 1:
            both += 1
            consistent += int(same)
    report.pairs = len(items)
    report.position = _position(both, consistent, decisive, first_picked)
    overlap = [(turn, pair, who, s, items[(turn, pair)]) for turn, pair, who, s in human if (turn, pair) in items]
    report.calibration = _calibration(overlap, meta, rounds=rounds, seed=seed, level=level)
    _flag(report.calibration, min_agreement)
    report.ratings = _ratings(human, items, overlap, level=level)
    report.style = _style(store, items, judged_vote, human, human_votes, rounds=rounds, seed=seed)
    return report


def _flag(cal: Calibration, threshold: float) -> None:
    """Flag the judge when its agreement with people is below the team's threshold."""
    cal.min_agreement = threshold
    if not cal.enough or cal.agreement is None:
        return
    if cal.agreement < threshold:
        cal.unreliable = True
        whole = (" (its whole 95% interval is below it)" if cal.agreement_ci_high is not None
                 and cal.agreement_ci_high < threshold else "")
        cal.flag = (f"UNRELIABLE: the judge agrees with people on {cal.agreement:.0%} of {cal.comparisons} "
                    f"comparisons, below the team's threshold of {threshold:.0%}{whole}; read its verdicts and "
                    "ratings below with care (--min-judge-agreement sets the threshold)")


def _style(store: Store, items: dict[tuple[str, tuple[str, str]], float],
           judged_vote: dict[tuple[str, tuple[str, str]], str], human: list[tuple[str, tuple[str, str], str, float]],
           human_votes: list[str], *, rounds: int, seed: int | None) -> JudgeStyle:
    """Style control on the judge's verdicts (each (case, pair) one outcome)
    and on people's comparisons, each fitted on the texts of the answers they
    judged (`core.report.style_section.style_for`)."""
    out = JudgeStyle()
    keys = list(items)
    if len(keys) < MIN_LABELED:
        out.message = f"no style control: only {len(keys)} (case, pair)s judged ({MIN_LABELED} needed)"
        return out
    bs = R.BattleSet.from_arrays([p[0] for _, p in keys], [p[1] for _, p in keys], [items[k] for k in keys])
    fitted = style_for(store, bs, [judged_vote[k] for k in keys], None, rounds=rounds,
                       seed=R.stream_seed(seed, "judge style"))
    if fitted is None:
        out.message = "no style control: no verdict has the texts of the answers it judged"
        return out
    out.judge = fitted[0]
    if len(human) >= MIN_LABELED:
        hb = R.BattleSet.from_arrays([p[0] for _, p, _, _ in human], [p[1] for _, p, _, _ in human],
                                     [sc for *_, sc in human])
        people = style_for(store, hb, human_votes, None, rounds=rounds, seed=R.stream_seed(seed, "people style"))
        out.people = people[0] if people else None
    out.summary = _length_words(out.judge, out.people)
    return out


def _length_words(judge: StyleControl, people: StyleControl | None) -> str:
    """The length coefficients of the judge (and of people) in plain words."""
    def said(sc: StyleControl) -> tuple[str, float, bool]:
        c = next(c for c in sc.coefficients if c.feature == "length")
        if not c.varies:
            return "not fitted (every answer the same length)", 0.0, False
        if c.ci_low is None or c.ci_high is None:
            return f"{c.coef:+.2f}", c.coef, False
        return (f"{c.coef:+.2f} (95% interval {c.ci_low:+.2f} .. {c.ci_high:+.2f})", c.coef,
                c.ci_low > 0 or c.ci_high < 0)

    words, coef, clear = said(judge)
    text = f"The judge's {FEATURE_TEXT['length']} coefficient is {words}"
    if clear:
        text += (f": with it, {'longer' if coef > 0 else 'shorter'} answers win more often whoever wrote them "
                 "(a length bias); its style-adjusted ratings remove it")
    text += "."
    others = [f"{FEATURE_TEXT[c.feature]} {c.coef:+.2f}" for c in judge.coefficients
              if c.feature != "length" and c.varies and c.ci_low is not None and c.ci_high is not None
              and (c.ci_low > 0 or c.ci_high < 0)]
    if others:
        text += f" Its verdicts also follow {', '.join(others)} (each interval excludes 0)."
    if people is not None:
        text += f" People's, on their own votes: {said(people)[0]}."
    return text


def _rate(k: int, n: int) -> tuple[float | None, float | None, float | None]:
    if n == 0:
        return None, None, None
    lo, hi = wilson_interval(k, n)
    return k / n, lo, hi


def _position(both: int, consistent: int, decisive: int, first_picked: int) -> PositionConsistency:
    rate, lo, hi = _rate(consistent, both)
    out = PositionConsistency(pairs_both_orders=both, consistent=consistent, rate=rate, ci_low=lo, ci_high=hi,
                              decisive=decisive, first_shown_picked=first_picked,
                              first_shown_rate=first_picked / decisive if decisive else None)
    if both == 0:
        out.summary = "no pair was judged in both orders (run lineup judge with --swap)"
    elif consistent == 0:
        out.summary = (f"fully position-inconsistent: all {both} pairs judged in both orders got a verdict "
                       "that changed with the order (counted as ties)")
    else:
        out.summary = (f"{consistent} of {both} pairs judged in both orders got the same verdict either way "
                       f"({consistent / both:.0%}); the others count as ties")
    return out


def _calibration(overlap: list[tuple[str, tuple[str, str], str, float, float]], meta: dict[str, str | None], *,
                 rounds: int, seed: int | None, level: float) -> Calibration:
    n = len(overlap)
    cal = Calibration(comparisons=n)
    if n < MIN_OVERLAP:
        cal.message = (f"only {n} comparison{'s' if n != 1 else ''} (a pair of models on one case) "
                       f"{'was' if n == 1 else 'were'} judged by both a person and the judge: too few to say how "
                       f"well the judge agrees with people (at least {MIN_OVERLAP} needed; "
                       "`lineup judge --only-voted` judges the pairs people voted on)")
        return cal
    cal.enough = True
    x = np.array([C.category(o[3]) for o in overlap], dtype=np.int64)
    y = np.array([C.category(o[4]) for o in overlap], dtype=np.int64)
    agreed = int(np.sum(x == y))
    cal.agreement, cal.agreement_ci_low, cal.agreement_ci_high = _rate(agreed, n)
    cal.kappa = C.cohen_kappa(x, y)
    ci = C.kappa_interval(x, y, rounds=rounds, seed=seed, level=level) if cal.kappa is not None else None
    if ci is not None:
        cal.kappa_ci_low, cal.kappa_ci_high = ci
    cal.confusion = C.confusion(x, y).tolist()
    for attr, key in (("by_category", lambda o: meta.get(o[0]) or "(none)"), ("by_rater", lambda o: o[2])):
        groups: dict[str, list[bool]] = defaultdict(list)
        for o, same in zip(overlap, (x == y).tolist(), strict=True):
            groups[key(o)].append(same)
        rows = []
        for name in sorted(groups):
            k, m = sum(groups[name]), len(groups[name])
            rate, lo, hi = _rate(k, m)
            rows.append(AgreementRow(name=name, comparisons=m, agreed=k, rate=rate, ci_low=lo, ci_high=hi))
        setattr(cal, attr, rows)
    return cal


def _ratings(human: list[tuple[str, tuple[str, str], str, float]], items: dict[tuple[str, tuple[str, str]], float],
             overlap: list[tuple[str, tuple[str, str], str, float, float]], *, level: float) -> list[CombinedRatings]:
    names = sorted({m for _, pair, _, _ in human for m in pair} | {m for _, pair in items for m in pair})
    out = []
    wald = "Wald (sandwich) 95% intervals"
    Fit = tuple[list[str], ppi.WaldRatings]

    def table(method: Literal["human", "judge", "ppi"], title: str, fit: Fit | None,
              message: str | None, h_counts: dict[str, int], j_counts: dict[str, int]) -> CombinedRatings:
        t = CombinedRatings(method=method, title=title, message=message,
                            human_comparisons=sum(h_counts.values()) // 2, judge_comparisons=sum(j_counts.values()) // 2)
        if fit is not None:
            models, result = fit
            lo, hi = result.interval(level)
            t.lam = result.lam if method == "ppi" else None
            order = np.argsort(-result.rating, kind="stable")
            t.rows = [CombinedRow(name=models[i], rating=float(result.rating[i]), ci_low=float(lo[i]),
                                  ci_high=float(hi[i]), human_comparisons=h_counts.get(models[i], 0),
                                  judge_comparisons=j_counts.get(models[i], 0)) for i in order.tolist()]
        return t

    def counts(pairs: list[tuple[str, str]]) -> dict[str, int]:
        c: dict[str, int] = defaultdict(int)
        for p in pairs:
            c[p[0]] += 1
            c[p[1]] += 1
        return dict(c)

    def connected(rows: list[tuple[tuple[str, str], float]]) -> str | None:
        seen = sorted({m for p, _ in rows for m in p})
        if len(seen) < 2:
            return "fewer than two models"
        sub = {m: i for i, m in enumerate(seen)}
        comp = _components(len(seen), np.array([sub[p[0]] for p, _ in rows]), np.array([sub[p[1]] for p, _ in rows]))
        return None if int(comp.max()) == 0 else "the models were not all compared with each other (connected)"

    def fitted(rows: list[tuple[tuple[str, str], float]], f: np.ndarray | None = None,
               extra: list[tuple[tuple[str, str], float]] | None = None) -> Fit:
        """Ratings of the models these comparisons involve (and only those: the mean is theirs)."""
        models = sorted({m for p, _ in rows + (extra or []) for m in p})
        index = {m: i for i, m in enumerate(models)}

        def items_of(part: list[tuple[tuple[str, str], float]]) -> ppi.Items:
            return ppi.Items.of([index[p[0]] for p, _ in part], [index[p[1]] for p, _ in part], [s for _, s in part])

        return models, ppi.wald_ratings(len(models), items_of(rows), f, items_of(extra) if extra is not None else None)

    # people only
    h_rows = [(pair, s) for _, pair, _, s in human]
    problem = (f"only {len(h_rows)} of people's comparisons ({MIN_LABELED} needed)" if len(h_rows) < MIN_LABELED
               else connected(h_rows))
    out.append(table("human", f"people's votes only ({wald})", None if problem else fitted(h_rows),
                     f"not rated: {problem}" if problem else None, counts([p for p, _ in h_rows]), {}))
    # the judge only
    j_rows = [(pair, s) for (_, pair), s in items.items()]
    problem = (f"only {len(j_rows)} (case, pair)s judged ({MIN_LABELED} needed)" if len(j_rows) < MIN_LABELED
               else connected(j_rows))
    out.append(table("judge", f"the judge's verdicts only ({wald}; not people's opinion)",
                     None if problem else fitted(j_rows), f"not rated: {problem}" if problem else None,
                     {}, counts([p for p, _ in j_rows])))
    # combined: people's votes corrected... the judge on every item, corrected by people where both judged
    lab = [(pair, s) for _, pair, _, s, _ in overlap]
    f = np.array([fj for *_, fj in overlap], dtype=np.float64)
    voted = {(turn, pair) for turn, pair, *_ in overlap}
    unl = [(pair, s) for (turn, pair), s in items.items() if (turn, pair) not in voted]
    per_model = counts([p for p, _ in lab])
    thin = sorted(m for m in names if 0 < per_model.get(m, 0) < MIN_VOTES_TO_RANK or
                  (per_model.get(m, 0) == 0 and any(m in p for p, _ in unl)))
    if thin:   # a model people hardly voted on has no correction to speak of: left out
        lab_keep = [k for k, (p, _) in enumerate(lab) if not (set(p) & set(thin))]
        lab, f = [lab[k] for k in lab_keep], f[lab_keep]
        unl = [(p, s) for p, s in unl if not (set(p) & set(thin))]
    problem = (f"only {len(lab)} of people's comparisons have a judge verdict ({MIN_LABELED} needed)"
               if len(lab) < MIN_LABELED
               else connected(lab + unl))
    ppi_table = table("ppi", "combined: the judge on every pair it judged, corrected by people's votes where both "
                      f"judged (prediction-powered inference, PPI++; {wald})",
                      None if problem else fitted(lab, f, unl), f"not rated: {problem}" if problem else None,
                      per_model, counts([p for p, _ in lab + unl]))
    if thin:
        ppi_table.message = ((ppi_table.message + "; ") if ppi_table.message else "") + (
            f"left out: {', '.join(thin)} (fewer than {MIN_VOTES_TO_RANK} of people's comparisons with a judge "
            "verdict, so nothing to correct the judge with)")
    if not problem:
        ppi_table.rows = [r for r in ppi_table.rows if r.name not in thin]
    without = len(human) - len(overlap)
    if without:
        ppi_table.message = ((ppi_table.message + "; ") if ppi_table.message else "") + (
            f"{without} of people's comparisons have no judge verdict and are not in it")
    out.append(ppi_table)
    return out
