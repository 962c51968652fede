"""`lineup sample LOGS --by FIELD -n N [--seed S] -o SET.jsonl`: a stratified,
de-duplicated sample of real prompts, written as a sample set."""

from __future__ import annotations

import argparse


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("logs", metavar="LOGS", help="request logs: JSONL, CSV/TSV, or an `llm` logs.db")
    parser.add_argument("--by", required=True, metavar="FIELD",
                        help="stratify by this field / column (dotted path in JSONL; a responses column in logs.db)")
    parser.add_argument("-n", type=int, required=True, metavar="N", help="number of cases to draw")
    parser.add_argument("--seed", type=int, default=0, help="random seed (same seed, same sample; default 0)")
    parser.add_argument("--prompt-field", metavar="F",
                        help="the prompt field (default: prompt, input, question, message, text, ...)")
    parser.add_argument("--threshold", type=float, default=None, metavar="J",
                        help="near-duplicate threshold: word-shingle Jaccard (default 0.8; 1 = exact duplicates only)")
    parser.add_argument("-o", "--output", required=True, metavar="SET.jsonl", help="sample set to write")


def run(args: argparse.Namespace) -> int:
    import sys
    from pathlib import Path

    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from core.errors import UsageError
    from core.sampleset import SampleSetError, load_sample_set
    from core.sampling import DEFAULT_THRESHOLD, LogError, read_logs, sample_records, to_cases, write_jsonl
    from core.text import one_line

    threshold = DEFAULT_THRESHOLD if args.threshold is None else args.threshold
    if not 0.0 < threshold <= 1.0:
        raise UsageError(f"--threshold must be in (0, 1], got {threshold}")
    if args.n < 1:
        raise UsageError(f"-n must be at least 1, got {args.n}")
    out = Path(args.output)
    if not out.parent.is_dir():
        raise UsageError(f"{one_line(out)}: the folder {one_line(out.parent)} does not exist")
    if out.resolve() == Path(args.logs).resolve():
        raise UsageError("-o would overwrite the log file")
    try:
        logs = read_logs(args.logs, args.by, args.prompt_field)
        result = sample_records(logs, args.n, seed=args.seed, threshold=threshold)
    except LogError as exc:
        raise UsageError(str(exc)) from None
    except ValueError as exc:
        raise UsageError(f"{one_line(args.logs)}: {exc}") from None
    if not result.chosen:
        raise UsageError(f"{one_line(args.logs)}: no prompts to sample")

    console = Console(highlight=False, soft_wrap=False)
    table = Table(title=Text(f"strata by {one_line(logs.by, 60)} ({logs.kind}, prompt field {one_line(logs.prompt_field, 60)})"))
    for col in ("stratum", "logged", "unique", "sampled", "% unique", "% sample"):
        table.add_column(col, justify="left" if col == "stratum" else "right")
    total_unique = sum(r.unique for r in result.rows) or 1
    total_sampled = len(result.chosen)
    for r in result.rows:
        table.add_row(
            Text(one_line(r.stratum, 60)), str(r.logged), str(r.unique), str(r.sampled),
            f"{100 * r.unique / total_unique:.1f}", f"{100 * r.sampled / total_sampled:.1f}",
        )
    table.add_row(Text("total"), str(sum(r.logged for r in result.rows)), str(sum(r.unique for r in result.rows)),
                  str(total_sampled), "100.0", "100.0", style="bold")
    console.print(table)
    d = result.dedup
    console.print(Text(f"removed {d.exact} exact and {d.near} near duplicate(s) (shingle Jaccard >= {threshold:g})"))
    if logs.skipped:
        console.print(Text(f"skipped {logs.skipped} record(s) without a prompt (first at line/row {logs.first_skipped})"))
    if total_sampled < args.n:
        console.print(Text(f"only {total_sampled} unique prompt(s): took them all (asked for {args.n})"))

    def valid(path: Path) -> None:   # what we write must be a valid set
        try:
            load_sample_set(path)
        except SampleSetError as exc:
            raise RuntimeError(f"internal error: the written set does not validate:\n{exc}") from None

    try:
        write_jsonl(to_cases(result), out, check=valid)
    except OSError as exc:
        print(f"lineup sample: cannot write {one_line(out)}: {exc.strerror or exc}; nothing was written",
              file=sys.stderr)
        return 1
    console.print(Text(f"wrote {total_sampled} case(s) to {one_line(out)}"))
    return 0
