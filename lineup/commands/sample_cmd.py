"""`lineup sample LOGS --by FIELD -n N [--seed S] -o SET.jsonl`: a stratified,
de-duplicated sample of real prompts, written as a sample set."""

from __future__ import annotations

import argparse


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("logs", metavar="LOGS",
                        help="request logs: JSONL, a JSON array (llm logs --json), CSV/TSV, an `llm` logs.db, or a "
                             "trace export (OpenTelemetry OTLP JSON, LangSmith runs, Langfuse, LiteLLM logs)")
    parser.add_argument("--by", required=True, metavar="FIELD",
                        help="stratify by this field / column (dotted path in JSON; a column in logs.db); "
                             "when the logs have no such field, 'length' (prompt length buckets) and "
                             "'language' (a guess from the text) are derived")
    parser.add_argument("-n", type=int, required=True, metavar="N", help="number of cases to draw")
    parser.add_argument("--seed", type=int, default=0, help="random seed (same seed, same sample; default 0)")
    parser.add_argument("--prompt-field", metavar="F",
                        help="the prompt field, a dotted path in JSON (default: prompt, input, question, "
                             "message, messages, text, ..., or request.messages)")
    parser.add_argument("--threshold", type=float, default=None, metavar="J",
                        help="near-duplicate threshold: word-shingle Jaccard (default 0.8; 1 = exact duplicates only)")
    parser.add_argument("--template", action="store_true",
                        help="template-aware de-duplication: numbers, ids, e-mails, URLs, dates and times "
                             "are replaced by placeholders before comparing")
    parser.add_argument("--template-names", action="store_true",
                        help="as --template, and capitalised names too (more merges, some of them wrong)")
    parser.add_argument("--max-chars", type=int, default=None, metavar="C",
                        help="skip conversations longer than C characters (default 100000; 0 = no limit)")
    parser.add_argument("--keep-answers", action="store_true",
                        help="keep each record's logged answer (with its model, latency, tokens and cost) in its "
                             "case, for `lineup run --with-logged` (trace formats: OpenTelemetry, LangSmith, "
                             "Langfuse, LiteLLM)")
    parser.add_argument("-o", "--output", required=True, metavar="SET.jsonl", help="sample set to write")


def run(args: argparse.Namespace) -> int:
    import sys
    from pathlib import Path

    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from core.ground.errors import UsageError
    from core.exchange.logs import DEFAULT_MAX_CHARS, LogError, read_logs
    from core.answering.sampleset import SampleSetError, load_sample_set
    from core.exchange.sampling import DEFAULT_THRESHOLD, image_folder, sample_records, to_cases, write_set
    from core.ground.text import one_line

    threshold = DEFAULT_THRESHOLD if args.threshold is None else args.threshold
    if not 0.0 < threshold <= 1.0:
        raise UsageError(f"--threshold must be in (0, 1], got {threshold}")
    if args.n < 1:
        raise UsageError(f"-n must be at least 1, got {args.n}")
    max_chars = DEFAULT_MAX_CHARS if args.max_chars is None else args.max_chars
    if max_chars < 0:
        raise UsageError(f"--max-chars must be 0 (no limit) or more, got {max_chars}")
    template = "names" if args.template_names else "values" if args.template else None
    out = Path(args.output)
    if not out.parent.is_dir():
        raise UsageError(f"{one_line(out)}: the folder {one_line(out.parent)} does not exist")
    if out.resolve() == Path(args.logs).resolve():
        raise UsageError("-o would overwrite the log file")
    try:
        logs = read_logs(args.logs, args.by, args.prompt_field, max_chars=max_chars)
        result = sample_records(logs, args.n, seed=args.seed, threshold=threshold, template=template)
    except LogError as exc:
        raise UsageError(str(exc)) from None
    except ValueError as exc:
        raise UsageError(f"{one_line(args.logs)}: {exc}") from None
    if not result.chosen:
        raise UsageError(f"{one_line(args.logs)}: no prompts to sample ({_skips_line(logs)})")

    console = Console(highlight=False, soft_wrap=False)
    by = f"{one_line(logs.by, 60)}" + (" (derived from the text)" if logs.derived else "")
    kind = one_line(logs.detail or logs.kind, 80)
    title = f"strata by {by} ({kind}, prompt field {one_line(logs.prompt_field, 60)})"
    table = Table(title=Text(title))
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
    of = " (compared by template)" if d.template is not None else ""
    console.print(Text(f"removed {d.exact} exact and {d.near} near duplicate(s){of} "
                       f"(shingle Jaccard >= {threshold:g})"))
    if d.template is not None:
        what = "numbers, ids, e-mails, URLs, dates, times" + (" and names" if d.template == "names" else "")
        console.print(Text(f"template-aware ({what} as placeholders): merged {d.template_merged} prompt(s) "
                           f"more than plain de-duplication; the commonest template covers "
                           f"{d.largest_template} logged prompt(s)"))
    if logs.skipped:
        console.print(Text(f"skipped {logs.skipped_total} record(s):"))
        for reason, count in sorted(logs.skipped.items(), key=lambda kv: (-kv[1], kv[0])):
            console.print(Text(f"  {count} {reason} (first at {one_line(logs.first_skipped[reason], 120)})"))
    multi = sum(1 for rec in result.chosen if rec.history)
    if multi:
        console.print(Text(f"{multi} case(s) carry earlier turns (written as messages)"))
    remote = sum(1 for rec in result.chosen if rec.image_urls)
    if remote:
        console.print(Text(f"{remote} case(s) name remote images that were not fetched: the case is sent "
                           f"without them (tagged image-url:URL)"))
    if total_sampled < args.n:
        console.print(Text(f"only {total_sampled} unique prompt(s): took them all (asked for {args.n})"))

    def valid(path: Path) -> None:   # what we write must be a valid set
        try:
            load_sample_set(path)
        except SampleSetError as exc:
            raise RuntimeError(f"internal error: the written set does not validate:\n{exc}") from None

    if args.keep_answers:
        kept = sum(1 for rec in result.chosen if rec.logged is not None and rec.logged.text)
        console.print(Text(f"kept the logged answer of {kept} of {total_sampled} case(s)"
                           + ("" if kept else " (this log holds no answers: a trace export does)")))
    output = to_cases(result, image_folder(out), keep_answers=args.keep_answers)
    try:
        write_set(output, out, check=valid)
    except OSError as exc:
        print(f"lineup sample: cannot write {one_line(out)}: {exc.strerror or exc}; nothing was written",
              file=sys.stderr)
        return 1
    console.print(Text(f"wrote {total_sampled} case(s) to {one_line(out)}"
                       + (f", {len(output.images)} image(s) to {one_line(out.parent / image_folder(out))}"
                          if output.images else "")))
    return 0


def _skips_line(logs: object) -> str:
    from core.exchange.logs import LoadedLogs
    from core.ground.text import one_line

    assert isinstance(logs, LoadedLogs)
    if not logs.skipped:
        return "no records"
    return "skipped: " + "; ".join(f"{n} {reason} (first at {one_line(logs.first_skipped[reason], 120)})"
                                   for reason, n in logs.skipped.most_common())
