"""`lineup chat [-m ALIAS]... [--blind] [--system TEXT] [-p KEY=VALUE]...
[--temperature X] [--max-tokens N] [--seed N] [--resume SESSION] [--tools FILE]
[--rater NAME] [--show-reasoning]`
(also plain `lineup`). With more than `PICKER_AT` configured models and no
`-m`, the chat opens on the model picker instead of putting them all side by side."""

from __future__ import annotations

import argparse

PICKER_AT = 4     # more configured models than this, and no -m: choose them in the picker

DEMO_HINT = ("Demo models (offline, synthetic answers). Add real ones in {path} under [models.NAME] "
             "(provider, model, api_key_env) or set OPENAI_API_KEY; see `lineup models`.")


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("-m", "--model", dest="models", action="append", default=[], metavar="ALIAS",
                   help="a model alias (repeat, 1 to 8; default: every configured model, at most 8)")
    p.add_argument("--blind", action="store_true", help="hide which model wrote which answer until you vote")
    p.add_argument("--system", help="system prompt for every contestant")
    p.add_argument("-p", "--param", dest="param_items", action="append", default=[], metavar="KEY=VALUE",
                   help="a sampling parameter for every contestant (repeat): temperature, top_p, max_tokens, "
                        "seed, stop, reasoning_effort (minimal|low|medium|high, where the protocol has it), "
                        "extra_body (a JSON object) or extra_body.NAME; checked like a config's params")
    p.add_argument("--temperature", type=float)
    p.add_argument("--max-tokens", type=int)
    p.add_argument("--seed", type=int, help="sampling seed sent to every model (where supported)")
    p.add_argument("--resume", metavar="SESSION", help="continue a saved session (id or unique prefix)")
    p.add_argument("--tools", metavar="FILE",
                   help="a JSON file of tools every answer may call, with their scripted results (the tool "
                        "fields of a sample-set case: tools, tool_results, tool_default, max_steps)")
    p.add_argument("--rater", help="who is voting and tagging (default: LINEUP_RATER, else the login name)")
    p.add_argument("--show-reasoning", action="store_true",
                   help="show reasoning in blind mode before the vote (only some models reason, so this can "
                        "give them away; recorded with the session)")
    p.add_argument("--show-figures", action="store_true",
                   help="show time-to-first-token and speed in blind mode before the vote (they can give a model away)")


def prepare(args: argparse.Namespace):
    """(store path, config, ChatOptions) from the arguments; UsageError when wrong.
    Kept apart from `run` so it is tested without a terminal."""
    from core.answering.config import ConfigError, config_path, load_config, resolve_models
    from core.answering.typed_params import params_from_assignments
    from core.ground.errors import UsageError
    from core.answering.sessions import MAX_CONTESTANTS
    from lineup.commands import checked_params
    from store import default_db_path
    from tui.app import ChatOptions

    try:
        config = load_config(args.config, probe_ollama=True)
        models = resolve_models(config, args.models) if args.models else list(config.models.values())
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    templated = [m.alias for m in models if m.template is not None]
    if templated:
        raise UsageError(f"-m {templated[0]}: a variant's template fills a sample set's cases (`lineup run`); "
                         "in the chat you type the message: use a variant without a template")
    pick = not args.resume and not args.models and len(models) > PICKER_AT
    if not args.resume:
        if not args.models:
            models = models[:MAX_CONTESTANTS]
        if len(models) < 1:
            raise UsageError("no models: name them with -m ALIAS (see `lineup models`)")
        if len(models) > MAX_CONTESTANTS:
            raise UsageError(f"at most {MAX_CONTESTANTS} models side by side, not {len(models)}")
    params = params_from_assignments(args.param_items).merged(
        checked_params({"temperature": args.temperature, "max_tokens": args.max_tokens, "seed": args.seed}))
    script = None
    if getattr(args, "tools", None):
        if args.resume:
            raise UsageError("--tools starts a new chat: a resumed one keeps the tools it was started with")
        from core.answering.sampleset import SampleSetError, load_tool_script

        try:
            script = load_tool_script(args.tools)
        except SampleSetError as exc:
            raise UsageError(str(exc)) from None
    hint = None
    if models and all(m.is_demo for m in models) and not args.models:
        hint = DEMO_HINT.format(path=config_path(args.config)[0])
    opts = ChatOptions(models=models, blind=args.blind, system=args.system, params=params, seed=args.seed,
                       resume=args.resume, hint=hint, script=script, pick=pick,
                       show_reasoning=args.show_reasoning)
    return args.db or default_db_path(), config, opts


def run(args: argparse.Namespace) -> int:
    from lineup.launch import run_app

    from lineup.commands import checked_rater

    rater = checked_rater(args.rater)
    db, config, opts = prepare(args)
    return run_app(db, config, chat=opts, figures_when_blind=args.show_figures, rater=rater)
