"""`lineup judge [SESSION ...] -m JUDGE [--rubric FILE] [--reference] [--swap/--no-swap]
[--only-voted | --only-unvoted] [--limit N]`: an LLM judges pairs of answers
blind; its verdicts are votes of rater kind "judge" (`core.answering.judge`)."""

from __future__ import annotations

import argparse

#: The most a rubric file may hold: instructions, not a corpus.
MAX_RUBRIC_BYTES = 64 * 1024


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("sessions", metavar="SESSION", nargs="*",
                   help="sessions to judge (id or unique prefix; default: every session)")
    p.add_argument("-m", "--model", dest="judge", required=True, metavar="JUDGE",
                   help="the judge's model alias (any configured alias; demo/judge works offline)")
    p.add_argument("--rubric", metavar="FILE", help="instructions that replace the default ones (the verdict "
                                                     "format [[A]] / [[B]] / [[C]] is always added)")
    p.add_argument("--reference", action="store_true",
                   help="reference-guided judging: each case's reference answer goes in the judge's prompt "
                        "(cases without one are left out); another prompt, so another rater than without it")
    p.add_argument("--swap", action=argparse.BooleanOptionalAction, default=True,
                   help="judge every pair in both orders (default); a verdict that flips is a tie")
    only = p.add_mutually_exclusive_group()
    only.add_argument("--only-voted", action="store_true", help="only pairs a person has voted on (calibration)")
    only.add_argument("--only-unvoted", action="store_true", help="only pairs no person has voted on")
    p.add_argument("--limit", type=int, metavar="N", help="judge at most N (case, pair)s in this run")
    p.add_argument("--concurrency", type=int, default=4, help="requests in flight at once (default 4; the "
                                                                  "judge server's own limit applies too)")
    p.add_argument("--same-family", action="store_true",
                   help="let the judge judge pairs with a model of its own family (with a warning)")
    p.add_argument("--quiet", action="store_true", help="no progress line")


def run(args: argparse.Namespace) -> int:
    from core.answering.config import ConfigError, load_config, resolve_models
    from core.ground.errors import UsageError
    from core.ground.inputs import InputError, decode, read_input
    from core.answering.judge import JudgePrompt
    from lineup.commands.running import require_keys

    if args.limit is not None and args.limit < 1:
        raise UsageError("--limit must be at least 1")
    if args.concurrency < 1:
        raise UsageError("--concurrency must be at least 1")
    try:
        config = load_config(args.config)
        (judge,) = resolve_models(config, [args.judge])
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    require_keys(config, [judge])
    rubric = None
    if args.rubric:
        try:
            rubric = decode(read_input(args.rubric, limit=MAX_RUBRIC_BYTES), args.rubric)
        except InputError as exc:
            raise UsageError(str(exc)) from None
        if not rubric.strip():
            raise UsageError(f"{args.rubric}: the rubric is empty")
    return _execute(args, judge, JudgePrompt(rubric=rubric, reference=args.reference))


def _execute(args: argparse.Namespace, judge, prompt) -> int:
    import anyio
    from rich.console import Console
    from rich.control import Control, ControlType

    from core.answering.judge import JudgeRunner, Only, plan_units
    from core.ground.text import one_line
    from lineup.commands import open_store, resolve_sessions
    from lineup.commands.running import StopSignals
    from store import AsyncStore

    err = Console(stderr=True, highlight=False, markup=False)
    out = Console(highlight=False, markup=False)
    store = open_store(args, write=True)
    try:
        ids = resolve_sessions(store, args.sessions) if args.sessions else \
            [s.id for s in reversed(store.list_sessions())]
        only: Only = "voted" if args.only_voted else "unvoted" if args.only_unvoted else "all"
        units, already, pairs, kin, warnings, directed, no_reference = [], 0, 0, set(), [], 0, 0
        for sid in ids:
            plan = plan_units(store.load_session(sid), judge, prompt, swap=args.swap, only=only,
                              same_family=args.same_family)
            units += plan.units
            already += plan.already
            pairs += plan.pairs
            kin.update(plan.skipped_family)
            warnings += plan.warnings
            no_reference += plan.no_reference
            # answers recorded before they were checked for it; a tag a rater removed stays removed
            refused = sum(not store.add_tag_once(rec) for rec in plan.new_tags)
            directed += plan.directed - refused
    except BaseException:
        store.close()
        raise
    if args.limit is not None:   # whole (case, pair) items: both orders of a pair go together
        keep = list(dict.fromkeys(u.case_key for u in units))[:args.limit]
        chosen = set(keep)
        units = [u for u in units if u.case_key in chosen]
    if directed:
        warnings.append(f"{directed} answer{'s' if directed != 1 else ''} talk{'s' if directed == 1 else ''} to the "
                        "judge (tagged judge_directed): the judge still sees them, but its verdicts on their pairs "
                        "are left out of its figures (lineup report --judge)")
    for w in warnings:
        err.print(one_line(f"warning: {w}"))
    if no_reference:
        err.print(f"left out: {no_reference} (case, pair)s whose case has no reference answer (--reference)")
    if kin:
        err.print(one_line(f"left out: pairs with {', '.join(sorted(kin))}, of the judge's own family "
                           "(--same-family to judge them anyway)"))

    def progress(tally) -> None:
        if not args.quiet and err.is_terminal:
            # a control, not "\r" in the text: Rich strips control characters from what it prints
            err.control(Control(ControlType.CARRIAGE_RETURN))
            err.print(f"{tally.done + tally.n_failed + tally.already + tally.elsewhere}/{tally.planned}", end="")

    with StopSignals(err) as stop:
        async def main():
            astore = AsyncStore(store)
            runner = JudgeRunner(astore, judge, units, prompt, concurrency=args.concurrency, on_progress=progress)
            try:
                with anyio.CancelScope() as scope:
                    stop.attach(scope)
                    await runner.run()
                return runner.tally
            finally:
                stop.detach()
                with anyio.CancelScope(shield=True):
                    await astore.aclose()

        tally = anyio.run(main)
    if not args.quiet and err.is_terminal and units:
        err.print()
    cost = f", cost ${tally.cost:.4f}" if tally.cost_known else ""
    verdicts = ", ".join(f"{k} {n}" for k, n in sorted(tally.verdicts.items())) or "none"
    out.print(one_line(f"judge {judge.alias}: {tally.done} verdicts recorded ({verdicts}); "
                       f"{already + tally.already} already recorded; {pairs} (case, pair)s in "
                       f"{len(ids)} session{'s' if len(ids) != 1 else ''}"
                       f"{' in both orders' if args.swap else ''}; "
                       f"tokens {tally.input_tokens} in / {tally.output_tokens} out{cost}"))
    if stop.requested and tally.done + tally.n_failed + tally.already + tally.elsewhere < tally.planned:
        err.print("stopped: run the same command again to resume (verdicts recorded are kept)")
        return 130
    if tally.elsewhere:
        err.print(f"{tally.elsewhere} requests were being judged by another lineup process; they are left to it")
    if tally.n_failed:
        reasons = "; ".join(f"{k}: {n}" for k, n in sorted(tally.failed.items()))
        err.print(one_line(f"exit 1: {tally.n_failed} of {tally.planned} requests got no verdict ({reasons}); "
                           "run the same command again to retry them"))
        return 1
    if tally.done:
        err.print(f"calibrate it against your votes: lineup report --judge {one_line(judge.alias)}")
    return 0
