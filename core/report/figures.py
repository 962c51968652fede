"""The figures the report derives from what the store returns: position
bias (Wilson intervals), rater consistency, failure modes, speed, errors and
cost (quantiles, medians, exact token sums), check pass rates and stability
over repeats.

Why a module of its own: these are the report's arithmetic, pure functions
of vote patterns (`core.report.patterns`) and of the store's columns and
rows (`store.report_queries`), with no SQL; `build` calls them and fills the
model. Their figures are part of the report's stable JSON, so each is
computed exactly as it always was (the same operations in the same order:
a cost, for one, is summed answer after answer in creation order).
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from core.stats.quantiles import percentile
from core.stats.ratings import wilson_interval
from core.report.model import (
    NO_CATEGORY,
    CheckRate,
    Consistency,
    Engineering,
    FailureModes,
    PositionBias,
    PositionRow,
    Quantiles,
    RaterAgreement,
    StabilityRow,
    TagStat,
)
from core.report.patterns import Votes, pattern_counts
from core.report.structured import StructuredRow, structured_rows
from core.stats.votes import TIE_CHOICES
from store.report_queries import OutputColumns, codes


def position_bias(votes: Votes) -> PositionBias:
    wins: Counter[int] = Counter()
    shown: Counter[int] = Counter()
    expected: defaultdict[int, float] = defaultdict(float)
    decisive = no_winner = 0
    for v, n in pattern_counts(votes):          # votes that read the same count the same
        lab = None if v.choice in TIE_CHOICES else v.label_of(v.choice)
        if lab is None or lab not in v.positions:
            no_winner += n
            continue
        decisive += n
        k = len(v.positions)
        for pos in range(k):
            shown[pos] += n
            expected[pos] += n / k
        wins[v.positions.index(lab)] += n
    rows = []
    for pos in sorted(shown):
        lo, hi = wilson_interval(wins[pos], shown[pos])
        rows.append(PositionRow(position=pos, votes=shown[pos], wins=wins[pos],
                                win_rate=wins[pos] / shown[pos], ci_low=lo, ci_high=hi,
                                expected=expected[pos] / shown[pos]))
    return PositionBias(rows=rows, decisive_votes=decisive, no_winner_votes=no_winner)


def _ranks(key: np.ndarray) -> np.ndarray:
    """Each non-negative key's rank among the distinct keys (what
    `np.unique(key, return_inverse=True)[1]` gives), by counting when the
    keys span little more than their number: no sort of 100k votes."""
    top = int(key.max()) + 1 if key.size else 0
    if top > 4 * key.size + 1024:
        return np.unique(key, return_inverse=True)[1].reshape(-1)
    present = np.bincount(key, minlength=top) > 0
    return (np.cumsum(present) - 1)[key]


def _group_counts(*keys: np.ndarray, weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Group ids (0..G-1, one per row) of the rows' key tuples, and each
    group's size (the sum of its rows' `weights`, when given)."""
    gid = np.zeros(keys[0].size, dtype=np.int64)
    for key in keys:
        gid = _ranks(gid * (int(key.max()) + 1 if key.size else 1) + key)
    if weights is None:
        return gid, np.bincount(gid)
    return gid, np.bincount(gid, weights=weights).astype(np.int64)


def consistency(votes: Votes) -> Consistency:
    """Votes on the same prompt (case id, else prompt text) and the same set of
    models: pairs with the same verdict, counted from tallies per (prompt and
    models, rater, verdict) rather than pair by pair, and those from the
    tallies of each distinct (pattern, meta): what a vote says and where."""
    if not len(votes):
        return Consistency()
    ms_of_pat = codes(p.models if p.error is None else None for p in votes.patterns)[0]
    verdict_of_pat = codes(p.verdict() if p.error is None else "" for p in votes.patterns)[0]
    prompt_of_meta = codes(m[2] for m in votes.metas)[0]
    rater_names = sorted({m[1] for m in votes.metas})
    rater_index = {r: k for k, r in enumerate(rater_names)}
    rater_of_meta = np.array([rater_index[m[1]] for m in votes.metas], dtype=np.int64)

    width = len(votes.patterns)
    seen, n_seen = np.unique(votes.meta * width + votes.pattern, return_counts=True)
    meta, pattern = seen // width, seen % width
    group = _group_counts(prompt_of_meta[meta], ms_of_pat[pattern])[0]
    rater = rater_of_meta[meta]
    verdict = verdict_of_pat[pattern]

    def pairs(n: np.ndarray) -> np.ndarray:
        return n * (n - 1) // 2

    gr, n_gr = _group_counts(group, rater, weights=n_seen)               # votes per (prompt, rater)
    grd, n_grd = _group_counts(group, rater, verdict, weights=n_seen)    # ... with the same verdict
    _, n_gd = _group_counts(group, verdict, weights=n_seen)
    n_g = np.bincount(group, weights=n_seen).astype(np.int64)
    rater_of_gr = np.zeros(n_gr.size, dtype=np.int64)
    rater_of_gr[gr] = rater
    rater_of_grd = np.zeros(n_grd.size, dtype=np.int64)
    rater_of_grd[grd] = rater
    repeated = np.zeros(len(rater_names), dtype=np.int64)
    np.add.at(repeated, rater_of_gr, pairs(n_gr))
    agreed = np.zeros(len(rater_names), dtype=np.int64)
    np.add.at(agreed, rater_of_grd, pairs(n_grd))
    listed = np.zeros(len(rater_names), dtype=bool)
    listed[rater_of_gr[n_gr >= 2]] = True
    same_pairs, same_agree = int(pairs(n_gr).sum()), int(pairs(n_grd).sum())
    inter_pairs = int(pairs(n_g).sum()) - same_pairs
    inter_agreed = int(pairs(n_gd).sum()) - same_agree
    return Consistency(
        raters=[RaterAgreement(rater=r, repeated=int(repeated[k]), agreed=int(agreed[k]),
                               rate=int(agreed[k]) / int(repeated[k]) if repeated[k] else None)
                for k, r in enumerate(rater_names) if listed[k]],
        inter_rater_pairs=inter_pairs, inter_rater_agreed=inter_agreed,
        inter_rater_rate=inter_agreed / inter_pairs if inter_pairs else None)


def quantiles(values: Sequence[float]) -> Quantiles | None:
    if not len(values):
        return None
    q = percentile(np.asarray(values, dtype=float), [5, 25, 50, 75, 95])
    return Quantiles(n=len(values), p5=q[0], p25=q[1], p50=q[2], p75=q[3], p95=q[4])


def _cost(cost: Any, input_tokens: Any, output_tokens: Any, session_id: Any, contestant: str,
          recorded_prices: Mapping, config_prices: Mapping) -> float | None:
    if cost is not None:
        return float(cost)
    if input_tokens is None and output_tokens is None:
        return None
    price = recorded_prices.get((session_id, contestant)) or config_prices.get(contestant)
    if price is None:
        return None
    if hasattr(price, "cost"):
        return float(price.cost(input_tokens, output_tokens))
    try:
        return ((input_tokens or 0) * float(price.get("input_per_mtok", 0))
                + (output_tokens or 0) * float(price.get("output_per_mtok", 0))) / 1e6
    except (TypeError, ValueError, AttributeError):
        return None


def _int_sum(values: np.ndarray) -> int:
    """Exact sum of integer counts held as float64 (nan = missing)."""
    total = np.nansum(values)
    if np.nansum(np.abs(values)) < 2.0 ** 53:     # every partial sum exact
        return int(total)
    return sum(int(x) for x in values.tolist() if x == x)


def engineering(outputs: OutputColumns, recorded_prices: Callable[[], Mapping[tuple[str, str], Any]],
                config_prices: Mapping[str, Any]) -> list[Engineering]:
    """Per model, from the columns; percentiles and speeds with numpy. The cost
    is summed one answer after another in creation order, as it always was;
    where it was not recorded, from the price the session recorded
    (`recorded_prices()`, read only then), else from the config's."""
    o = outputs
    status, ttft, dur, out_f = o.status, o.ttft, o.duration, o.output_tokens
    has_ttft, has_dur, has_out = ~np.isnan(ttft), ~np.isnan(dur), ~np.isnan(out_f)
    with np.errstate(invalid="ignore"):
        timed = (status == 0) & (out_f != 0) & has_out & has_ttft & has_dur & (dur > ttft)
    recorded: Mapping[tuple[str, str], Any] | None = None
    rows = []
    for model, idx in o.models:
        if o.cached is not None:
            idx = idx[~o.cached[idx]]   # reused answers made no request
        st = status[idx]
        done = st == 0
        n_err = int(np.count_nonzero(st == 1))
        m = idx[timed[idx]]
        speed = np.sort(out_f[m] / ((dur[m] - ttft[m]) / 1000.0))
        done_out = idx[done & has_out[idx]]
        cost = o.cost[idx]
        if np.isnan(cost).any() and o.raw is not None:   # not recorded: from the prices
            if recorded is None:
                recorded = recorded_prices()
            in_raw, out_raw, cost_raw, session = o.raw
            costs = [x for x in (_cost(cost_raw[k], in_raw[k], out_raw[k], session[k], model, recorded,
                                       config_prices) for k in idx.tolist()) if x is not None]
        else:
            costs = cost.tolist()
        requests = int(idx.size)
        rows.append(Engineering(
            model=model, requests=requests, completed=int(np.count_nonzero(done)), errors=n_err,
            error_rate=n_err / requests if requests else None,
            errors_by_kind=dict(sorted(o.kinds[model].items())),
            cancelled=int(np.count_nonzero(st == 2)), interrupted=int(np.count_nonzero(st == 3)),
            ttft_ms=quantiles(ttft[idx[done & has_ttft[idx]]]),
            duration_ms=quantiles(dur[idx[done & has_dur[idx]]]),
            output_tokens_per_s_p50=_median(speed),
            input_tokens=_int_sum(o.input_tokens[idx]), output_tokens=_int_sum(out_f[idx]),
            mean_output_tokens=_int_sum(out_f[done_out]) / int(done_out.size) if done_out.size else None,
            tokens_estimated=int(np.count_nonzero(o.estimated[idx])),
            cost=sum(costs) if costs else None, cost_known=len(costs)))
    return rows


def _median(xs: Sequence[float] | np.ndarray) -> float | None:
    """Median of values already sorted."""
    if not len(xs):
        return None
    mid = len(xs) // 2
    return float(xs[mid]) if len(xs) % 2 else (float(xs[mid - 1]) + float(xs[mid])) / 2


def failure_modes(outputs: OutputColumns, tags: Iterable[tuple[str, str, str]]) -> list[FailureModes]:
    """Per model: the share of its answers with each tag (`tags`: (output
    id, tag, model); tags on attempts that are not the answer do not count)."""
    n_answers = outputs.answers
    tagged: defaultdict[str, defaultdict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    any_tag: defaultdict[str, set[str]] = defaultdict(set)
    for output_id, tag, model in tags:
        if output_id in outputs.stale:
            continue
        tagged[model][tag].add(output_id)
        any_tag[model].add(output_id)
    rows = []
    for model in sorted(n_answers):
        n = n_answers[model]
        stats = {t: TagStat(count=len(ids), rate=len(ids) / n)
                 for t, ids in sorted(tagged[model].items(), key=lambda kv: (-len(kv[1]), kv[0]))}
        rows.append(FailureModes(model=model, answers=n, tagged=len(any_tag[model]), tags=stats))
    return rows


def checks(outputs: OutputColumns, results: Iterable[Sequence[Any]]
           ) -> tuple[list[CheckRate], list[CheckRate], dict[str, list[tuple[str, dict[str, Any], bool, str | None]]],
                      list[StructuredRow]]:
    """Pass rates per model (overall and per check) and per model and
    category, each answer's results (name, spec, passed, detail) for
    stability, and the structured-output figures per model (from the
    `structured_output` checks). `results`: (output id, check, spec as JSON
    text, passed, detail, model, category)."""
    structured: list[tuple[str, dict[str, Any], bool]] = []
    by_model: defaultdict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    by_cat: defaultdict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    per_output: defaultdict[str, list[tuple[str, dict[str, Any], bool, str | None]]] = defaultdict(list)
    for output_id, name, spec, passed, detail, model, category in results:
        if output_id in outputs.stale:
            continue
        cat = category or NO_CATEGORY
        for table, key in ((by_model, (model, name)), (by_cat, (model, cat))):
            table[key][0] += int(bool(passed))
            table[key][1] += 1
        try:
            spec_d = json.loads(spec) if spec else {}
        except ValueError:
            spec_d = {}
        per_output[output_id].append((name, spec_d, bool(passed), detail))
        if isinstance(spec_d, dict) and spec_d.get("type") == "structured_output":
            structured.append((model, spec_d, bool(passed)))
    overall: defaultdict[str, list[int]] = defaultdict(lambda: [0, 0])
    for (model, _), (k, n) in by_model.items():
        overall[model][0] += k
        overall[model][1] += n
    rates = [CheckRate(model=m, passed=k, total=n, rate=k / n) for m, (k, n) in sorted(overall.items())]
    rates += [CheckRate(model=m, check=c, passed=k, total=n, rate=k / n)
              for (m, c), (k, n) in sorted(by_model.items())]
    cats = [CheckRate(model=m, category=c, passed=k, total=n, rate=k / n)
            for (m, c), (k, n) in sorted(by_cat.items())]
    return rates, cats, per_output, structured_rows(structured)


def stability(answers: Sequence[Sequence[Any]], per_output: Mapping[str, list[tuple[str, dict[str, Any], bool, str | None]]],
              texts_of: Callable[[list[str]], Mapping[str, str]]) -> list[StabilityRow]:
    """Groups the answers to the same case (session, case id or prompt,
    follow-up) by model across repeat_index, and measures their spread with
    `core.report.stability` (`texts_of(ids)`: the answers' texts, read only then)."""
    found: defaultdict[tuple[Any, ...], dict[int, Sequence[Any]]] = defaultdict(dict)
    for o in answers:
        oid, _, contestant, _, status, session, prompt, follow_up, repeat = o
        if status != "complete":
            continue
        found[(contestant, session, prompt, follow_up)][repeat] = o
    groups = {k: v for k, v in found.items() if len(v) >= 2}
    if not groups:
        return []
    # only now: the checks' models cost ~50 ms to import, and most records have no repeats
    from core.report import stability as stab
    from core.answering.checks import CheckOutcome

    texts = texts_of([o[0] for runs in groups.values() for o in runs.values()])
    per_model: defaultdict[str, list[dict[str, Any]]] = defaultdict(list)
    for (model, *_), runs in groups.items():
        ordered = [runs[k][0] for k in sorted(runs)]
        shares = [sum(c[2] for c in per_output.get(oid, [])) / len(per_output[oid])
                  for oid in ordered if per_output.get(oid)]
        sd = _sd(shares) if len(shares) >= 2 else None
        item: dict[str, Any] = {"runs": len(ordered), "sd": sd}
        outcomes = [[CheckOutcome(type=str(spec.get("type", name)), name=name, spec=spec, passed=passed,
                                  score=1.0 if passed else 0.0, detail=detail or "")
                     for name, spec, passed, detail in per_output.get(oid, [])] for oid in ordered]
        res = stab.stability([texts.get(oid, "") for oid in ordered], outcomes)
        item.update(exact=res.exact_match_rate, sim=res.mean_similarity, min_sim=res.min_similarity,
                    flaky=res.flaky_checks, checks=len(res.checks))
        per_model[model].append(item)
    rows = []
    for model in sorted(per_model):
        items = per_model[model]
        sds = [i["sd"] for i in items if i["sd"] is not None]
        exact = [i["exact"] for i in items if i["exact"] is not None]
        sims = [i["sim"] for i in items if i["sim"] is not None]
        mins = [i["min_sim"] for i in items if i["min_sim"] is not None]
        rows.append(StabilityRow(
            model=model, cases=len(items), runs=sum(i["runs"] for i in items),
            exact_match_rate=sum(exact) / len(exact) if exact else None,
            mean_similarity=sum(sims) / len(sims) if sims else None,
            min_similarity=min(mins) if mins else None,
            flaky_checks=sum(i["flaky"] for i in items), checks=sum(i["checks"] for i in items),
            pass_rate_sd_mean=sum(sds) / len(sds) if sds else None,
            pass_rate_sd_max=max(sds) if sds else None))
    return rows


def _sd(xs: Sequence[float]) -> float:
    m = sum(xs) / len(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / len(xs))
