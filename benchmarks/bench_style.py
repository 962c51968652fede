"""Style control beside lmarena's: `lineup report --style-control` (each
recipe) on Chatbot Arena battles with a planted style taste, imported into a
store, against the reference written from the published recipe
(`tests.style_planted.reference_fit`) and, given a FastChat checkout
(`--fastchat DIR`: its fastchat/serve/monitor/rating_systems.py is loaded as
it is, with pandas and tqdm installed), against FastChat's own
`compute_style_control` and `compute_bootstrap_style_control`.

Cases (6 models, `--battles` each, default 12,000): no taste, a taste for
length, a taste for Markdown (headers, list items, bold), planted in lmarena's
form (a - b) / (a + b + 1). FastChat gets the counts lineup counts: length in
lineup's unit (cl100k tokens where the tokens extra is installed, else
words), Markdown by FastChat's own expressions. Prints, per case and recipe,
the largest difference in adjusted ratings, whether the ranking is the same,
and (with FastChat) the median ratio of lineup's 95% interval widths to
FastChat's.

    .venv/bin/python benchmarks/bench_style.py [--fastchat DIR] [--battles N] [--rounds R] [--case C] [--smoke]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from core.exchange.importing import import_file  # noqa: E402
from core.report import ReportFilters, build_report  # noqa: E402
from core.stats.style import RECIPES, length_unit, lmarena_counts, token_counter  # noqa: E402
from store import Store  # noqa: E402
from tests.style_planted import planted_battles, reference_fit, reference_markdown  # noqa: E402

CASES = {"none": (0.0, 0.0, 0.0, 0.0), "length": (0.6, 0.0, 0.0, 0.0), "markdown": (0.0, 1.0, 0.4, 0.3)}


def fastchat_module(root: Path):
    """FastChat's rating_systems.py as it is, imported by its own name (its
    bootstrap sends its functions to worker processes, which find them so)."""
    if not (root / "fastchat" / "serve" / "monitor" / "rating_systems.py").is_file():
        sys.exit(f"{root}: no fastchat/serve/monitor/rating_systems.py")
    sys.path.insert(0, str(root))
    return importlib.import_module("fastchat.serve.monitor.rating_systems")


def fastchat_frame(battles: list[dict], tokens):
    import pandas as pd

    rows = []
    for b in battles:
        meta = {}
        for side in ("a", "b"):
            turns = [m["content"] for m in b[f"conversation_{side}"] if m["role"] == "assistant"]
            length = int(lmarena_counts(turns, tokens)[0])
            h, li, bo = reference_markdown("\n".join(turns))
            meta.update({f"sum_assistant_{side}_tokens": length, f"header_count_{side}": int(h),
                         f"list_count_{side}": int(li), f"bold_count_{side}": int(bo)})
        rows.append({"model_a": b["model_a"], "model_b": b["model_b"], "winner": b["winner"], "conv_metadata": meta})
    return pd.DataFrame(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fastchat", type=Path, help="a FastChat checkout to run side by side")
    ap.add_argument("--battles", type=int, default=12_000)
    ap.add_argument("--rounds", type=int, default=100, help="bootstrap rounds for the interval comparison")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--case", choices=list(CASES), action="append", help="only these cases (repeatable)")
    ap.add_argument("--smoke", action="store_true", help="smallest sizes: that it still runs")
    args = ap.parse_args(argv)
    if args.smoke:
        args.battles, args.rounds = 600, 10
    fc = fastchat_module(args.fastchat) if args.fastchat else None
    tokens = token_counter()
    print(f"{args.battles} battles, 6 models; length in {length_unit(tokens)}; "
          f"FastChat: {args.fastchat if fc else 'not given (reference only)'}")
    for case, taste in CASES.items():
        if args.case and case not in args.case:
            continue
        pb = planted_battles(args.battles, recipe="lmarena", taste=taste, seed=args.seed)
        words = (pb.counts_a.copy(), pb.counts_b.copy())     # the lineup recipe counts words
        if tokens is not None:   # the reference counts what lineup counts
            for b, ca, cb in zip(pb.battles, pb.counts_a, pb.counts_b, strict=True):
                ca[0] = lmarena_counts([m["content"] for m in b["conversation_a"] if m["role"] == "assistant"], tokens)[0]
                cb[0] = lmarena_counts([m["content"] for m in b["conversation_b"] if m["role"] == "assistant"], tokens)[0]
        with tempfile.TemporaryDirectory() as tmp:
            src = Path(tmp) / "battles.json"
            src.write_text(json.dumps(pb.battles), encoding="utf-8")
            store = Store.open(Path(tmp) / "s.db")
            try:
                import_file(store, src)
                styles = {r: build_report(store, ReportFilters(), rounds=args.rounds, seed=args.seed,
                                          style_control=True, style_recipe=r).style for r in RECIPES}
            finally:
                store.close()
        fc_point = fc_lo = fc_hi = None
        if fc is not None:
            df = fastchat_frame(pb.battles, tokens)
            fc_point = fc.compute_style_control(df)[0].to_dict()
            np.random.seed(args.seed)
            boot, _ = fc.compute_bootstrap_style_control(df, num_round=args.rounds, num_cpu=2)
            fc_lo, fc_hi = boot.quantile(0.025).to_dict(), boot.quantile(0.975).to_dict()
        truth_order = sorted(pb.truth, key=lambda m: -pb.truth[m])
        for recipe, style in styles.items():
            assert style is not None
            got = {r.name: r.adjusted for r in style.models}
            order = [r.name for r in style.models]
            ref, _ = reference_fit(pb.battles, *((pb.counts_a, pb.counts_b) if recipe == "lmarena" else words),
                                   recipe)
            line = (f"{case:9s} {recipe:8s} vs reference: max {max(abs(got[m] - ref[m]) for m in ref):6.2f} Elo, "
                    f"same ranking {order == sorted(ref, key=lambda m: -ref[m])}")
            if fc_point is not None and fc_lo is not None and fc_hi is not None:
                diff = max(abs(got[m] - fc_point[m]) for m in fc_point)
                same = order == sorted(fc_point, key=lambda m: -fc_point[m])
                ratio = np.median([(r.adjusted_high - r.adjusted_low) / (fc_hi[r.name] - fc_lo[r.name])
                                   for r in style.models if r.adjusted_high is not None and r.adjusted_low is not None])
                line += f" | vs FastChat: max {diff:6.2f} Elo, same ranking {same}, interval width ratio {ratio:.3f}"
            err = max(abs(got[m] - pb.truth[m]) for m in got)
            line += f" | vs planted truth: max {err:5.1f} Elo (truth order {order == truth_order})"
            print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
