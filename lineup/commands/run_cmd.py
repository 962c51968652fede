"""`lineup run SET.jsonl -m A -m B [--repeat N] [--concurrency K]`."""

from __future__ import annotations

import argparse

from lineup.commands.running import add_no_exec, check_repeats, execute, run_inputs, use_cache


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("set", metavar="SET.jsonl", help="sample set (JSONL, one case per line)")
    p.add_argument("-m", "--model", dest="models", action="append", default=[], metavar="ALIAS",
                   help="a model alias (repeat for each contestant; default: every configured model)")
    p.add_argument("--variants", metavar="NAMES",
                   help="comma-separated variant names: every model of -m runs as each variant (MODEL@NAME: "
                        "the model's own [variants.\"MODEL@NAME\"], else a generic [variants.NAME]); the "
                        "report then groups the ratings by model and by variant")
    p.add_argument("--with-logged", action="store_true",
                   help="add the answer production gave (the cases' logged answers, from `lineup sample "
                        "--keep-answers`) as a contestant named 'logged', judged blind beside the others; "
                        "nothing is called for it (also: -m logged)")
    p.add_argument("--repeat", type=int, default=1, help="answers per case and model (default 1)")
    p.add_argument("--concurrency", type=int, default=8, help="conversations in flight at once (default 8)")
    p.add_argument("--system", help="system prompt for cases that have none")
    p.add_argument("--temperature", type=float)
    p.add_argument("--max-tokens", type=int)
    p.add_argument("--seed", type=int)
    p.add_argument("--new", action="store_true", help="start a new run even if an identical one can be resumed")
    p.add_argument("--quiet", action="store_true", help="no progress display")
    cache = p.add_mutually_exclusive_group()
    cache.add_argument("--cache", action="store_true", default=None,
                       help="answer a request identical to one already answered (same provider, model, server, "
                            "messages, system, parameters, seed and repeat) from the database, without calling "
                            "the provider (default: [run] cache in the config)")
    cache.add_argument("--refresh", action="store_true",
                       help="call the provider for every request, even with [run] cache = true")
    p.add_argument("--batch", action="store_true",
                   help="send the requests through the providers' batch APIs (OpenAI Batch, Anthropic Message "
                        "Batches: half price, no rate limit, results within 24 h); a killed run resumes its "
                        "batches without submitting them again")
    p.add_argument("--poll", type=float, default=30.0, metavar="SECONDS",
                   help="with --batch: seconds between polls of a running batch (default 30)")
    p.add_argument("--dimension", dest="dimensions", action="append", default=[], metavar="NAME[:WHAT]",
                   help="a dimension people score each answer on, 1-5, in `lineup vote` (repeat for each; WHAT "
                        "is what raters are told it means), besides those the set's header declares; the run "
                        "keeps them, and running again with others starts a new run")
    p.add_argument("--grader", metavar="ALIAS",
                   help="the model that grades the set's rubric checks that name no judge of their own, "
                        "blind (default: the set's header {\"set\": {\"grader\": ...}}; demo/judge works offline)")
    add_no_exec(p)


def run(args: argparse.Namespace) -> int:
    from core.ground.errors import UsageError
    from core.answering.runner import LOGGED_ALIAS, logged_contestant

    with_logged = args.with_logged or LOGGED_ALIAS in args.models
    args.models = [m for m in args.models if m != LOGGED_ALIAS]
    config, models, sample_set, params = run_inputs(args)
    check_repeats(args)
    if args.dimensions:
        sample_set = with_dimensions(sample_set, args.dimensions)
    if with_logged:
        if args.batch:
            raise UsageError("--with-logged: the logged answers need no batch; run without --batch")
        if not any(c.logged is not None and not c.follow_ups for c in sample_set.cases):
            raise UsageError(f"{args.set}: no case holds a logged answer (sample a trace export with "
                             "`lineup sample --keep-answers`)")
        models = [m for m in models if m.alias != LOGGED_ALIAS] + [logged_contestant()]
    if args.batch:
        from providers.batch import BATCH_PROVIDERS

        other = [m for m in models if m.provider not in BATCH_PROVIDERS]
        if other:
            raise UsageError("--batch goes through the OpenAI and Anthropic batch APIs; "
                             + ", ".join(f"{m.alias!r} is {m.provider}" for m in other)
                             + " (run those without --batch)")
        tooled = [m.alias for m in models if m.tools is not None]
        if tooled:   # a batch answers one request per item: no tool loop, so the tools would be dropped
            raise UsageError("--batch sends one request per answer and runs no tool loop; "
                             + ", ".join(repr(a) for a in tooled) + " has tools (a variant's tools = FILE): "
                             "run it without --batch")
        shaped = [c for c in sample_set.cases if c.tools or c.response_format is not None]
        if shaped:   # the batch request carries neither: answers would be recorded as if asked plainly
            more = f" (and {len(shaped) - 1} more cases)" if len(shaped) > 1 else ""
            raise UsageError(f"{sample_set.where(shaped[0])}: case {shaped[0].id!r} has tools or a "
                             f"response_format{more}, which --batch does not send (one plain request per "
                             "answer, no tool loop): run the set without --batch")
        if not args.poll > 0:
            raise UsageError("--poll must be more than 0 seconds")
    return execute(args, config, models, sample_set, params, repeat=args.repeat, concurrency=args.concurrency,
                   system=args.system, new=args.new, quiet=args.quiet, cache=use_cache(args, config),
                   batch=args.poll if args.batch else None)


def with_dimensions(sample_set, given: list[str]):
    """The set with the run's `--dimension`s after its header's own: each
    NAME[:WHAT] checked like a header's (exit 2 naming the option)."""
    from pydantic import ValidationError

    from core.answering.dimensions import Dimension, check_unique
    from core.answering.sampleset import _validation_problems
    from core.ground.errors import UsageError

    header = sample_set.header
    added = []
    for text in given:
        name, _, what = text.partition(":")
        try:
            added.append(Dimension(name=name.strip(), description=what.strip() or None))
        except ValidationError as exc:
            raise UsageError("\n".join(_validation_problems(f"--dimension {text[:60]!r}", exc))) from None
    try:
        dims = check_unique((*header.dimensions, *added))
    except ValueError as exc:
        raise UsageError(f"--dimension: {exc} (the set's header declares {len(header.dimensions)})") from None
    return sample_set.model_copy(update={"header": header.model_copy(update={"dimensions": tuple(dims)})})
