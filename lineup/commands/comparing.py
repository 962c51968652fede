"""What `lineup diff` and `lineup gate` share: their options, the
comparison of two recorded runs (`core.decide.compare`), and how it is shown
(one line of JSON, or tables with untrusted names as text)."""

from __future__ import annotations

import argparse


def add_common(p: argparse.ArgumentParser) -> None:
    """The options `diff` and `gate` share."""
    p.add_argument("-m", "--model", dest="models", action="append", default=[], metavar="BASE[:CAND]",
                   help="compare the baseline's model BASE with the candidate's CAND (default: the same alias; "
                        "repeatable). Needed when the runs have several models and share none")
    p.add_argument("--alpha", type=float, default=0.05,
                   help="significance level after Holm's correction across every test (default 0.05)")
    p.add_argument("--max-p95-regression", type=float, default=None, metavar="PCT",
                   help="flag a p95 latency (TTFT, duration) that rose by more than PCT%% with its interval "
                        "above zero (default: latency is reported, not gated)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    p.add_argument("--top", type=int, default=10, help="answers that changed most, listed (default 10)")
    p.add_argument("--json", action="store_true", help="print the comparison as JSON (schema lineup.diff/1)")


def compare(args: argparse.Namespace, baseline: str, candidate: str):
    """The `DiffReport` for two session ids given on the command line."""
    from core.decide.compare import compare_runs
    from core.ground.errors import UsageError
    from lineup.commands import open_store, resolve_sessions

    if args.top < 0:
        raise UsageError("--top must be 0 or more")
    with open_store(args, write=False) as store:
        base_id, cand_id = resolve_sessions(store, [baseline, candidate])
        a, b = store.load_session(base_id), store.load_session(cand_id)
    return compare_runs(a, b, models=args.models, alpha=args.alpha, max_p95_regression_pct=args.max_p95_regression,
                        seed=args.seed, top=args.top)


def show(report, as_json: bool) -> None:
    """Print `report`: one line of JSON, or tables (untrusted names as Text)."""
    if as_json:
        from core.ground.text import json_line

        print(json_line(report.model_dump(mode="json", by_alias=True)))
        return
    from rich.console import Console

    console = Console(highlight=False, markup=False)
    for c in report.comparisons:
        for renderable, whole in render(c, report):
            # a line with a session id or a replay command is never wrapped by us (it must stay whole
            # to be copied: the terminal wraps it); a line of figures wraps between words, not mid-number
            console.print(renderable, soft_wrap=whole)


def replay_hint(c) -> str:
    """The two replay commands of a comparison (one if both sides are one run)."""
    a, b = f"lineup replay {c.baseline.session_id}", f"lineup replay {c.candidate.session_id}"
    return a if a == b else f"{a}  /  {b}"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x:,.0f}"


def render(c, report) -> list:
    """The tables and lines of one comparison, each with whether it must stay
    whole (a session id, a replay command: never wrapped by us)."""
    from rich.table import Table
    from rich.text import Text

    from core.ground.text import one_line

    def side(s) -> str:
        served = f", served {', '.join(s.served_models[:3])}" if s.served_models else ""
        prints = f", fingerprint {', '.join(s.fingerprints[:3])}" if s.fingerprints else ""
        return f"{s.alias} ({s.model}{served}{prints}) in {s.session_id}"

    out: list = [(Text(one_line(f"baseline  {side(c.baseline)}")), True),
                 (Text(one_line(f"candidate {side(c.candidate)}")), True),
                 (Text(f"{c.paired_units} paired answers; {c.baseline_only} only in the baseline, "
                       f"{c.candidate_only} only in the candidate"), False)]
    tests = Table(title=Text(f"pass rates: paired McNemar tests, p Holm-adjusted over {report.tests} tests "
                             f"(alpha {report.alpha:g})"), title_justify="left")
    for col in ("test", "pairs", "baseline", "candidate", "worse", "better", "p", ""):
        tests.add_column(col, justify="left" if col in ("test", "") else "right", no_wrap=col != "test")
    for t in c.tests:
        flag = "REGRESSED" if t.regressed else "improved" if t.improved else ""
        name = "answered" if t.scope == "answered" else f"{t.scope} {t.name}"
        tests.add_row(Text(one_line(name, 60)), str(t.pairs), _pct(t.baseline_pass_rate),
                      _pct(t.candidate_pass_rate), str(t.regressions), str(t.improvements), f"{t.p_adjusted:.2g}",
                      flag)
    out.append((tests, False))
    a = c.answers
    out.append((Text(f"answers: {a.identical} of {a.pairs} identical ({_pct(a.identical_rate)}), "
                     f"mean similarity {'-' if a.mean_similarity is None else f'{a.mean_similarity:.3f}'}"), False))
    for m in c.latency:
        if not m.pairs or m.p50_ci is None or m.p95_ci is None:
            out.append((Text(f"{m.metric}: {m.pairs} paired timings, too few to compare"), False))
            continue
        change = "" if m.p95_change_pct is None else f", {m.p95_change_pct:+.0f}%"
        out.append((Text(f"{m.metric} ({m.pairs} pairs; 95% paired bootstrap interval of the difference): "
                         f"p50 {_ms(m.baseline_p50)} -> {_ms(m.candidate_p50)} ms ({m.p50_diff:+,.0f}, "
                         f"{m.p50_ci.low:+,.0f}..{m.p50_ci.high:+,.0f}); p95 {_ms(m.baseline_p95)} -> "
                         f"{_ms(m.candidate_p95)} ms ({m.p95_diff:+,.0f}, {m.p95_ci.low:+,.0f}..{m.p95_ci.high:+,.0f}"
                         f"{change})" + ("  REGRESSED" if m.regressed else "")), False))
    cost = c.cost
    if cost.pairs:
        out.append((Text(f"cost over {cost.pairs} paired answers: ${cost.baseline_total:.4f} -> "
                         f"${cost.candidate_total:.4f}"
                         + ("" if cost.change_pct is None else f" ({cost.change_pct:+.0f}%)")), False))
    r = c.rating
    if r is not None:
        if r.diff is not None and r.ci is not None:
            out.append((Text(f"rating: {r.diff:+.0f} Elo (95% interval {r.ci.low:+.0f}..{r.ci.high:+.0f}; "
                             f"{r.votes} vote{'s' if r.votes != 1 else ''})"), False))
        elif r.note:
            out.append((Text(f"rating: not comparable ({r.note})"), False))
    if c.cases:
        # one line each (not a table: the replay commands must stay whole to be copied)
        out.append((Text(f"cases (open each run with {replay_hint(c)})"), True))
        for k in c.cases:
            where = f"case {k.case_id}, repeat {k.repeat}" + ("" if k.follow_up is None else f", turn {k.follow_up}")
            what = (", ".join(k.checks) if k.checks else
                    f"similarity {k.similarity:.3f}" if k.similarity is not None else "")
            out.append((Text(one_line(f"  {k.change.replace('_', ' ')}: {where}: {what}")), True))
    if c.hidden_cases:
        out.append((Text(f"{c.hidden_cases} changed cases not listed: their run is blind and they are not "
                         "revealed yet (vote on them first)"), False))
    return out
