"""`lineup models [--check] [--json]`: what aliases exist and whether they
can be reached. Shows the *name* of each key variable (and of each secret
header's variable) and whether it is set, never its value; `--check` sends
one tiny request per model, concurrently, and says which route and auth it
used and, on failure, which part was wrong (URL, auth, format...).

Installed provider plugins (`providers.plugins`) are listed after the
models, each with its protocol or, when it cannot be used, why; `--json`
puts them under `plugins`: [{`name`, `target`, `distribution`, `protocol`,
`ok`, `error`}].

`--json` shape, per model: `alias`, `provider`, `model`, `base_url`
(credentials removed), `api_key_env`, `key` ("present" | "missing" | null),
`headers` ([{`name`, `env` (null for a literal), `set`}]; values never),
`demo`, `configured` (false: a demo alias that `-m` accepts without a
config, such as the offline judge `demo/judge`; never checked); with
`--check`, `check` (null when not configured): {`ok`, `ttft_ms`, `total_ms`, `streamed`,
`error_kind`, `error`, `problem` (null | "url" | "auth" | "format" |
"request" | "server" | "timeout" | "config" | "plugin"), `hint`, `route` (null for the
demo, else {`method`, `url`, `auth`, `headers`})}."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

EXAMPLE = ('[models.gpt4o] provider = "openai", model = "gpt-4o", api_key_env = "OPENAI_API_KEY" '
           "(or just export OPENAI_API_KEY / ANTHROPIC_API_KEY / GEMINI_API_KEY)")
CHECK_PROMPT = "Reply with the single word: ok"
CHECK_MAX_TOKENS = 8


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--check", action="store_true", help="send one tiny request to each model and report "
                                                             "the time to first token or the error")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per check (default 30)")


def run(args: argparse.Namespace) -> int:
    from core.answering.config import ConfigError, config_path, load_config
    from core.ground.credentials import redact_url
    from core.ground.text import one_line
    from lineup.commands import for_terminal
    from providers.model_config import DEMO_JUDGE, DEMO_MODELS, EnvValue

    try:
        config = load_config(args.config, probe_ollama=True)
    except ConfigError as exc:
        print(f"lineup models: bad config:\n{exc}", file=sys.stderr)
        return 2
    rows: list[dict[str, Any]] = [{
        "alias": m.alias, "provider": m.provider, "model": m.model,
        "base_url": redact_url(m.base_url) if m.base_url else None,
        "api_key_env": m.api_key_env,
        "key": None if not m.api_key_env else ("missing" if _unset(m.api_key_env) else "present"),
        "headers": [{"name": name, "env": v.env, "set": "missing" if _unset(v.env) else "present"}
                    if isinstance(v, EnvValue) else {"name": name, "env": None, "set": None}
                    for name, v in m.headers.items()],
        "demo": m.is_demo,
        "configured": True,
    } for m in config.models.values()]
    # the demo aliases `-m` resolves whatever the config says (`core.answering.config.resolve_models`), the judge too
    rows += [{"alias": m.alias, "provider": m.provider, "model": m.model, "base_url": None, "api_key_env": None,
              "key": None, "headers": [], "demo": True, "configured": False}
             for m in (*DEMO_MODELS, DEMO_JUDGE) if m.alias not in config.models]

    # [variants]: a model with its own prompt and settings (`-m NAME`, or `-m MODEL@NAME` for a generic one)
    variants: list[dict[str, Any]] = [
        {"name": name, "model": v.model, "overrides": [k for k in ("system", "template") if getattr(v, k)]
         + (["params"] if v.params.model_dump(exclude_none=True) else [])
         + ([f"tools ({', '.join(t['name'] for t in v.tools['tools'])})"] if v.tools else [])}
        for name, v in config.variants.items()]

    failed = False
    if args.check:
        import anyio

        checks = anyio.run(_check_all, list(config.models.values()), config, args.timeout)
        for row in rows:
            row["check"] = None
        for row, check in zip(rows, checks, strict=False):   # checks cover the configured rows, the first ones
            row["check"] = check
        failed = any(not c["ok"] for c in checks)

    plugins = _plugins()
    path, _ = config_path(args.config)
    if args.json:
        print(json.dumps({"config": config.source, "autodetected": config.autodetected,
                          "demo_only": config.demo_only, "warnings": list(config.warnings), "models": rows,
                          "plugins": plugins, "variants": variants}, indent=2))
        return 1 if failed else 0

    for warning in config.warnings:
        print(f"warning: {one_line(warning)}", file=sys.stderr)
    if config.source:
        print(f"config: {one_line(config.source)}" + (" (no models in it: autodetected)" if config.autodetected else ""))
    elif config.demo_only:
        print(for_terminal("No models configured: using the offline demo models (synthetic answers, kept out of "
                           "ratings)."))
        print(for_terminal(f"Add real ones in {one_line(str(path))}, e.g. {EXAMPLE}"))
    else:
        print(f"No config file ({one_line(str(path))}): models autodetected from the environment.")
    print()
    _print_table([r for r in rows if r["configured"]], args.check)
    offline = [r for r in rows if not r["configured"]]
    if offline:
        print()
        print(for_terminal("Also offline, with -m (demo models, synthetic answers; demo/judge is the offline "
                           "judge: lineup judge -m demo/judge):"))
        _print_table(offline, False)
    if plugins:
        print()
        print("Provider plugins (provider = NAME in a model's table):")
        _print_plugins(plugins)
    if variants:
        print()
        print("Variants (-m NAME; a generic one, without a model, as -m MODEL@NAME or run --variants NAME):")
        for v in variants:
            of = f"of {v['model']}" if v["model"] else "generic"
            print(f"  {one_line(v['name'])}  {one_line(of)}  ({', '.join(v['overrides']) or 'no overrides'})")
    if args.check:
        _print_routes(rows)
    return 1 if failed else 0


def _plugins() -> list[dict[str, Any]]:
    """Every installed provider plugin, loaded: what it is, or why it cannot be used."""
    from providers.plugins import plugins

    return [{"name": p.name, "target": p.target, "distribution": p.dist, "protocol": p.protocol if p.cls else None,
             "ok": p.cls is not None, "error": p.error} for p in plugins()]


def _print_plugins(plugins: list[dict[str, Any]]) -> None:
    """One line per plugin; one that cannot be used says why (its text is the plugin's: made inert)."""
    from core.ground.text import one_line

    width = max(len(one_line(p["name"])) for p in plugins)
    for p in plugins:
        source = f" ({one_line(p['distribution'])})" if p["distribution"] else ""
        what = one_line(p["protocol"]) if p["ok"] else f"FAILED: {one_line(p['error'])}"
        print(f"  {one_line(p['name']).ljust(width)}  {what}  [{one_line(p['target'])}{source}]")


def _unset(name: str) -> bool:
    return not os.environ.get(name, "").strip()


def _print_table(rows: list[dict], with_check: bool) -> None:
    from core.ground.text import one_line

    headers = ["ALIAS", "PROVIDER", "MODEL", "BASE URL", "KEY"] + (["CHECK"] if with_check else [])
    table = []
    for r in rows:
        keys = [f"{r['api_key_env']} ({r['key']})"] if r["api_key_env"] else []
        keys += [f"{h['env']} ({h['set']}, header {h['name']})" for h in r["headers"] if h["env"]]
        key = ", ".join(keys) or "-"
        cells = [r["alias"], r["provider"], r["model"], r["base_url"] or "-", key]
        if with_check:
            c = r["check"]
            if c["ok"] and c["ttft_ms"] is not None:
                cells.append(f"ok  ttft {c['ttft_ms']:.0f} ms")
            elif c["ok"] and not c["streamed"]:
                cells.append(f"ok  not streamed, {c['total_ms']:.0f} ms")
            else:
                cells.append("ok" if c["ok"] else f"FAILED {c['error_kind']}: {c['error']}")
        table.append([one_line(x) for x in cells])
    widths = [max(len(h), *(len(row[i]) for row in table)) if table else len(h) for i, h in enumerate(headers)]
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip())
    for row in table:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


def _print_routes(rows: list[dict]) -> None:
    """Per checked model: the route and auth used, and on failure which part was wrong."""
    from core.ground.text import one_line

    shown = [r for r in rows if r["check"] and r["check"].get("route")]
    if not shown:
        return
    print()
    width = max(len(one_line(r["alias"])) for r in shown)
    for r in shown:
        c, route = r["check"], r["check"]["route"]
        pad = " " * (width + 2)
        print(f"{one_line(r['alias']).ljust(width)}  {route['method']} {one_line(route['url'])}")
        extra = f"; headers: {one_line(', '.join(route['headers']))}" if route["headers"] else ""
        print(f"{pad}auth: {one_line(route['auth'])}{extra}")
        if not c["ok"] and c["problem"]:
            print(f"{pad}wrong: {c['problem']}: {one_line(c['hint'])}")


#: Which part of a model's set-up an error kind points at, and what to look at.
PROBLEMS: dict[str, tuple[str, str]] = {
    "not_found": ("url", "the server has no such route or model (HTTP 404): check base_url, the path or "
                         "deployment in it, and the model name"),
    "connection": ("url", "nothing answered at that address: check the host and port in base_url"),
    "auth": ("auth", "the server refused the credentials (HTTP 401/403): check the key variable and auth "
                     "(which header carries the key)"),
    "config": ("auth", "a key or secret header variable is not set (export it), or a cloud's credentials "
                       "are not set up (see the error)"),
    "bad_response": ("format", "the reply is not this protocol's stream or response: check provider (the "
                               "wire format) and base_url"),
    "truncated": ("format", "the reply ended before the answer did"),
    "bad_request": ("request", "the server refused the request itself (the model name, a parameter, a "
                               "required header or query parameter such as api-version)"),
    "rate_limited": ("server", "the route and auth worked; the server asks to slow down"),
    "overloaded": ("server", "the route and auth worked; the server is overloaded"),
    "server": ("server", "the route and auth worked; the server failed"),
    "timeout": ("timeout", "no complete answer in time (a host that does not answer, or a slow model)"),
}


async def _check_all(models: list, config, timeout: float) -> list[dict]:
    import anyio

    results: list[dict] = [{} for _ in models]

    async def one(i: int) -> None:
        results[i] = await _check(models[i], config, timeout)

    async with anyio.create_task_group() as tg:
        for i in range(len(models)):
            tg.start_soon(one, i)
    return results


async def _check(model, config, timeout: float) -> dict:
    import anyio

    from core.answering.config import missing_key
    from core.ground.credentials import redact_url
    from providers import make_provider
    from providers.events import ChatRequest, Message, SamplingParams, StreamResult

    params = config.params_for(model, SamplingParams(max_tokens=CHECK_MAX_TOKENS))
    request = ChatRequest(model=model.model, messages=(Message(role="user", content=CHECK_PROMPT),), params=params)
    route: dict | None = None

    def failure(kind: str, message: str, result: StreamResult | None = None, *,
                problem: tuple[str, str] | None = None) -> dict:
        part, hint = problem or PROBLEMS.get(kind, ("config", "see the error"))
        return {"ok": False, "ttft_ms": result.ttft_ms if result else None, "total_ms": None,
                "streamed": result.streamed if result else None, "error_kind": kind,
                "error": _scrub(message, model), "problem": part, "hint": hint, "route": route}

    try:
        provider = make_provider(model)
        describe = getattr(provider, "route", None)
        r = describe(request) if describe is not None else None
        if r is not None:   # a plugin provider may have no route to tell
            route = {"method": "POST", "url": redact_url(r.url), "auth": r.auth, "headers": list(r.headers)}
    except Exception as exc:  # a bad provider set-up is this model's failure, not the command's
        return failure("config", str(exc) or type(exc).__name__,
                       problem=("config", "this model's set-up cannot be used (see the error)"))
    var = missing_key(model)
    if var:
        await provider.aclose()
        return failure("config", f"{var} is not set")
    result = StreamResult()
    started = time.perf_counter()
    try:
        stream = provider.stream(request)
        with anyio.move_on_after(timeout) as scope:
            async for event in stream:
                result.add(event)
        if scope.cancelled_caught:
            await stream.aclose()
            return failure("timeout", f"no complete answer within {timeout:g} s", result)
    except Exception as exc:
        return failure("bad_response", f"{type(exc).__name__}: {exc}", result)
    finally:
        await provider.aclose()
    if result.error is not None:
        from providers.plugin_guard import Unusable

        plugin = ("plugin", "the provider plugin cannot be used (see lineup models: its package, or the "
                            "error it raised)") if isinstance(provider, Unusable) else None
        return failure(str(result.error.kind), result.error.message, result, problem=plugin)
    return {"ok": True, "ttft_ms": result.ttft_ms,
            "total_ms": result.duration_ms if result.duration_ms is not None else (time.perf_counter() - started) * 1000,
            "streamed": result.streamed, "error_kind": None, "error": None, "problem": None, "hint": None,
            "route": route}


def _scrub(message: str, model) -> str:
    """Belt and braces: a key value never leaves this command, whatever a server echoed
    (scrubbed however it comes back: cut, wrapped), before the message is shortened."""
    from providers.catalogue import KEY_ENV_VARS
    from providers.secrets import scrubber_for

    keys = tuple(v for v in (os.environ.get(n or "", "") for n in {*model.secret_envs, *KEY_ENV_VARS}) if len(v) >= 4)
    return (scrubber_for(keys).scrub(message) if keys else message)[:300]
