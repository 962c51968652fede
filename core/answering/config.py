"""Configuration: which models exist (aliases), how to reach them, and the
sampling parameters fixed for a session. Keys are never stored here: only the
*name* of the environment variable that holds one.

The file is TOML (``LINEUP_CONFIG``, else ``config.toml`` in the platform's
user config dir; see `default_config_path`)::

    tags = ["too_formal", "wrong_language"]   # custom failure-mode tags (top level)

    [run]
    cache = true               # `lineup run` reuses identical requests' answers (--refresh: not this time)

    [defaults]                 # sampling parameters for every model
    temperature = 0.7
    max_tokens = 1024

    [models.gpt4o]             # the table key is the alias
    provider = "openai"        # openai | anthropic | ollama | gemini | demo
    model = "gpt-4o"
    base_url = "https://api.openai.com/v1"   # provider default when omitted
    api_key_env = "OPENAI_API_KEY"           # the variable's NAME, never the key
    params = { temperature = 0.2 }
    price = { input_per_mtok = 2.5, output_per_mtok = 10.0 }

    [models.azure-4o]          # gateways and enterprise endpoints
    provider = "openai"
    model = "gpt-4o"
    base_url = "https://RESOURCE.openai.azure.com/openai/deployments/DEPLOYMENT"
    api_key_env = "AZURE_OPENAI_API_KEY"
    auth = "api-key"           # bearer | x-api-key | api-key | x-goog-api-key | none | { header, scheme }
    query = { "api-version" = "2024-10-21" }
    headers = { "X-Org" = "research", "X-Gateway-Key" = { env = "GATEWAY_KEY" } }

    [models.claude-vertex]     # Vertex AI: vertex (Gemini) | vertex-anthropic; Google ADC, no key variable
    provider = "vertex-anthropic"
    model = "claude-sonnet-4-5@20250929"
    project = "my-project"     # else GOOGLE_CLOUD_PROJECT / _LOCATION; the endpoint is the region's
    region = "us-east5"

    [models.nova]              # Amazon Bedrock: SigV4 with botocore's credentials, no key variable
    provider = "bedrock"
    model = "amazon.nova-pro-v1:0"
    region = "us-east-1"       # else AWS_REGION, AWS_DEFAULT_REGION, the AWS profile's

    [variants."gpt4o@terse"]   # the same model with its own prompt: a contestant of its own
    model = "gpt4o"
    system = "Answer in one sentence."
    template = "Customer: {{customer_message}}"   # the user message ({{prompt}}: the case's own)
    params = { temperature = 0 }

    [variants."gpt4o@tools"]   # the same model with tools (the shape `lineup chat --tools` reads)
    model = "gpt4o"
    tools = "tools/weather.json"   # relative to this file; a case's own tools win over it

    [variants.detailed]        # generic (no model): -m ANY_MODEL@detailed, run --variants detailed
    system = "Answer step by step."

Key rules: when ``api_key_env`` is omitted, openai models without their own
``base_url`` use ``OPENAI_API_KEY`` and anthropic / gemini models always use
their vendor's variable; ollama and local OpenAI-compatible servers (own
``base_url``) send no key. ``api_key_env = ""`` means "no key" explicitly.
A literal key written where a variable name belongs, or a key inside a
``base_url``, is refused without ever repeating it.

``auth`` says how the key is sent (the protocol's own way when omitted:
``Authorization: Bearer`` for openai and ollama, ``x-api-key`` for anthropic,
``x-goog-api-key`` for gemini). ``headers`` adds request headers: a literal
value for what is not a secret, ``{ env = "NAME" }`` for what is (read when a
request is built, never stored, scrubbed from text like a key). A literal in a
header whose name says credential (key, token, secret, auth, password,
cookie), or one that looks like a key, is refused without repeating it.
``query`` adds query parameters (``api-version``); a credential there is
refused (keys go in headers).

Without a file (or a file that defines no models) aliases are autodetected
from the environment's keys and, when asked, a reachable Ollama; with nothing
found, the offline demo models are used (`Config.autodetected` is True).

Why one file past 600 lines: every table of the config file is checked here,
with its key paths in the errors (models, gateways, parameters typed as text,
the run, report and tag tables), so that one reader owns what a config may say.

Why this file is past 600 lines: a config is read in one pass that checks
every table (models, variants, gateways, defaults, tags) and reports every
problem with its key path at once; parameters typed as text are
`core.answering.typed_params`."""

from __future__ import annotations

import difflib
import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from core.ground.credentials import SECRET_QUERY, looks_like_key, looks_like_secret, redact_url, url_secrets
from core.ground.errors import UsageError
from core.ground.inputs import InputError, read_input, shown_name
from providers.catalogue import (
    AUTODETECT,
    CATALOGUE,
    DEMO_STYLE_NAMES,
    PROVIDER_DEFAULT_BASE_URL,
    PROVIDER_DEFAULT_KEY_ENV,
    PROVIDERS,
    cloud_default,
    default_base_url,
)
from providers.events import SamplingParams
from providers.model_config import DEMO_JUDGE, DEMO_MODELS, ModelConfig, Price, known_providers  # noqa: F401  (Price: part of a model's table)

OLLAMA_PROBE_TIMEOUT = 0.3


class Variant(BaseModel):
    """`[variants.NAME]`: a model with its own prompt and settings, a
    contestant of its own (label, rating, report line). With `model`, NAME
    is an alias of its own (`-m gpt4o@terse`); without, it is generic and
    applies to any model as `-m MODEL@NAME` (and `lineup run --variants NAME`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    model: str | None = Field(default=None, description="the model alias it is a variant of (none: generic)")
    system: str | None = Field(default=None, description="system prompt, in place of the run's and the case's")
    template: str | None = Field(default=None, description="the user message: {{prompt}} and the case's {{vars}}")
    params: SamplingParams = SamplingParams()
    tools: dict[str, Any] | None = Field(default=None, description=(
        "the tools file `tools = FILE` names (read at load, relative to the config file), as JSON: "
        "for the cases that declare no tools of their own"))


class Config(BaseModel):
    model_config = ConfigDict(frozen=True)
    defaults: SamplingParams = SamplingParams()
    models: dict[str, ModelConfig] = Field(default_factory=dict)
    variants: dict[str, Variant] = Field(default_factory=dict)   # [variants.NAME]
    tags: tuple[str, ...] = ()          # custom failure-mode tags, after the default taxonomy
    run_cache: bool = False             # [run] cache: `lineup run` reuses identical requests' answers
    source: str | None = None           # the file it came from, for messages
    autodetected: bool = False          # no config file: aliases from the environment (or demo)
    warnings: tuple[str, ...] = ()      # things the loader fixed or ignored (never containing a secret)

    @property
    def all_tags(self) -> tuple[str, ...]:
        """The default failure-mode taxonomy followed by the custom tags."""
        return DEFAULT_TAGS + tuple(t for t in self.tags if t not in DEFAULT_TAGS)

    @property
    def demo_only(self) -> bool:
        return bool(self.models) and all(m.is_demo for m in self.models.values())

    def params_for(self, model: ModelConfig, override: SamplingParams | None = None) -> SamplingParams:
        """Effective sampling params: [defaults], then the model's own, then `override`."""
        return self.defaults.merged(model.params).merged(override)


DEFAULT_TAGS: tuple[str, ...] = (
    "format_error", "factual_error", "reasoning_break", "instruction_violation",
    "unwarranted_refusal", "hallucination", "truncated", "too_verbose",
    "off_topic", "identity_leak", "unsafe",
)


# --------------------------------------------------------------------------- errors


class ConfigError(UsageError):
    """A bad config (exit 2). Each problem names the file and the key path,
    e.g. ``config.toml: models.gpt4o.params.temperature: must be a number``.
    Messages never contain a key."""

    def __init__(self, problems: list[tuple[str, str]], file: str | None = None) -> None:
        self.file = file
        self.problems = problems
        prefix = f"{file}: " if file else ""
        lines = [f"{prefix}{path}: {what}" if path else f"{prefix}{what}" for path, what in problems]
        super().__init__("\n".join(lines))


def _key(part: Any) -> str:
    """A key path segment as TOML writes it: bare when it can be, else quoted."""
    s = str(part)
    return s if re.fullmatch(r"[A-Za-z0-9_-]+", s) else '"' + s.replace('"', '\\"') + '"'


def _join(*parts: Any) -> str:
    return ".".join(_key(p) for p in parts if p != "")


_TYPE_NAMES = {str: "a string", int: "an integer", float: "a number", bool: "a boolean",
               list: "an array", dict: "a table", tuple: "an array"}


def _describe(value: Any) -> str:
    return _TYPE_NAMES.get(type(value), type(value).__name__)


def validation_problems(exc: ValidationError, prefix: tuple[Any, ...]) -> list[tuple[str, str]]:
    """pydantic errors as (key path, what is wrong); input values are never
    repeated (only their type), since a misplaced key could be among them."""
    out = []
    for err in exc.errors(include_url=False):
        loc = [p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-"))]
        path = _join(*prefix, *loc)
        kind = err["type"]
        if kind == "extra_forbidden":
            what = "unknown key"
            if loc and str(loc[-1]).lower() in ("api_key", "key", "token", "apikey", "secret"):
                what += ' (keys never go in the config: put it in an environment variable and set api_key_env = "ITS_NAME")'
        elif kind == "missing":
            what = "required key is missing"
        elif kind == "value_error":   # our own checks (SamplingParams ranges): the message says it all
            what = err["msg"].removeprefix("Value error, ")
        else:
            what = err["msg"][0].lower() + err["msg"][1:]
            what = what.replace("valid tuple", "valid array").replace("valid dictionary", "valid table")
            if "input" in err and kind not in ("greater_than", "greater_than_equal", "less_than_equal",
                                               "less_than"):
                what += f" (got {_describe(err['input'])})"
        out.append((path, what))
    return out


# --------------------------------------------------------------------------- paths


def default_config_path() -> Path:
    """``config.toml`` in the platform's user config dir for "lineup"."""
    import platformdirs

    return Path(platformdirs.user_config_dir("lineup", appauthor=False)) / "config.toml"


def config_path(path: str | os.PathLike | None = None, env: Mapping[str, str] = os.environ) -> tuple[Path, bool]:
    """(the file to read, whether it was named explicitly by argument or LINEUP_CONFIG)."""
    if path:
        return Path(path).expanduser(), True
    if env.get("LINEUP_CONFIG"):
        return Path(env["LINEUP_CONFIG"]).expanduser(), True
    return default_config_path(), False


# --------------------------------------------------------------------------- loading


def load_config(path: str | os.PathLike | None = None, env: Mapping[str, str] = os.environ, *,
                probe_ollama: bool = False) -> Config:
    """Read the config (see the module doc for where and what).

    A file named explicitly (argument or ``LINEUP_CONFIG``) must exist. With
    no file, or one that defines no ``[models.*]``, aliases are autodetected
    from `env` (and from Ollama when `probe_ollama`), else the demo models.
    Raises `ConfigError` naming the file, the key path and what is wrong.
    """
    file, explicit = config_path(path, env)
    if not file.exists():
        if explicit:
            raise ConfigError([("", "config file not found")], str(file))
        return autodetect(env, probe_ollama=probe_ollama)
    try:
        raw = read_input(file).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError([("", f"not UTF-8 text (byte {exc.start})")], str(file)) from None
    except InputError as exc:
        raise ConfigError([("", exc.problem if exc.shown == shown_name(file) else str(exc))], str(file)) from None
    try:
        data = tomllib.loads(raw)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError([("", _toml_error(exc))], str(file)) from None
    cloud_defaults(data, env)
    config = parse_config(data, source=str(file))
    if not config.models:
        found = autodetect(env, probe_ollama=probe_ollama)
        config = config.model_copy(update={"models": found.models, "autodetected": True,
                                           "warnings": config.warnings + found.warnings})
    return config


def cloud_defaults(data: dict, env: Mapping[str, str]) -> None:
    """A cloud model's project and region, where its table names none, where
    the cloud's own SDKs find them (`providers.catalogue.cloud_default`). The
    value used ends up in the model's endpoint, so the record keeps it."""
    models = data.get("models")
    for table in models.values() if isinstance(models, dict) else ():
        entry = CATALOGUE.get(str(table.get("provider"))) if isinstance(table, dict) else None
        if entry is None:
            continue
        for name, _ in entry.cloud_env:
            found = None if name in table else cloud_default(entry, name, env)
            if found is not None:
                table[name] = found


def _toml_error(exc: tomllib.TOMLDecodeError) -> str:
    msg = str(exc)
    m = re.search(r"\(at line (\d+), column (\d+)\)", msg)
    if m:
        what = msg[: m.start()].strip()
        return f"line {m.group(1)}, column {m.group(2)}: TOML syntax error: {what}"
    m = re.search(r"\(at end of document\)", msg)
    if m:
        return f"end of file: TOML syntax error: {msg[: m.start()].strip()}"
    return f"TOML syntax error: {msg}"


def parse_config(data: Mapping[str, Any], source: str | None = None) -> Config:
    """A `Config` from already-parsed TOML data; collects every problem found."""
    problems: list[tuple[str, str]] = []
    for key in data:
        if key not in ("defaults", "models", "variants", "tags", "run"):
            problems.append((_key(key), "unknown key (expected defaults, models, variants, tags or run)"))

    defaults = SamplingParams()
    if "defaults" in data:
        if not isinstance(data["defaults"], dict):
            problems.append(("defaults", f"must be a table (got {_describe(data['defaults'])})"))
        else:
            defaults_p = _params(data["defaults"], ("defaults",), problems)
            defaults = defaults_p or defaults

    tags = _tags(data.get("tags", []), problems)
    run_cache = _run_table(data.get("run", {}), problems)

    models: dict[str, ModelConfig] = {}
    raw_models = data.get("models", {})
    if not isinstance(raw_models, dict):
        problems.append(("models", f"must be a table of [models.ALIAS] tables (got {_describe(raw_models)})"))
        raw_models = {}
    for alias, table in raw_models.items():
        model = _model(alias, table, problems)
        if model is not None:
            models[alias] = model

    variants = _variants(data.get("variants", {}), models, problems,
                         Path(source).parent if source else Path.cwd())

    if problems:
        raise ConfigError(problems, source)
    return Config(defaults=defaults, models=models, variants=variants, tags=tags, run_cache=run_cache,
                  source=source)


#: Most characters of a variant's system prompt or template (a prompt, not a document).
MAX_PROMPT_CHARS = 100_000


def _variants(raw: Any, models: Mapping[str, ModelConfig], problems: list, base: Path) -> dict[str, Variant]:
    """`[variants.NAME]` tables, checked with their key paths: the name is an
    alias (not a model's), `model` a configured or demo alias, the texts
    bounded, the parameters checked as a model's are, a tools file (relative
    to `base`, the config file's folder) read and checked as `chat --tools` does."""
    if not isinstance(raw, dict):
        problems.append(("variants", f"must be a table of [variants.NAME] tables (got {_describe(raw)})"))
        return {}
    known = set(models) | {m.alias for m in DEMO_MODELS}
    out: dict[str, Variant] = {}
    for name, table in raw.items():
        where = ("variants", name)
        if not isinstance(table, dict):
            problems.append((_join(*where), f"must be a table (got {_describe(table)})"))
            continue
        before = len(problems)
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._/:@+-]{0,63}", name):
            problems.append((_join(*where), "a variant's name must start with a letter or digit and hold only "
                                            "letters, digits and . _ / : @ + - (at most 64 characters)"))
        if name in known:
            problems.append((_join(*where), "is a model's alias already: give the variant a name of its own "
                                            "(e.g. MODEL@terse)"))
        data = dict(table)
        model = data.get("model")
        if model is not None and (not isinstance(model, str) or model not in known):
            shown = repr(model) if isinstance(model, str) and len(model) < 70 else "this value"
            problems.append((_join(*where, "model"), f"unknown model alias {shown}; expected one of "
                                                     f"{', '.join(sorted(known))}"))
        elif model is not None and "@" in name and name.rpartition("@")[0] != model:
            problems.append((_join(*where, "model"), f"is {model!r}, but the name says it is a variant of "
                                                     f"{name.rpartition('@')[0]!r}"))
        elif model is None and "@" in name:
            problems.append((_join(*where, "model"), "required for a name with @ (MODEL@NAME names a variant of "
                                                     "MODEL; a generic variant's name has no @)"))
        for key in ("system", "template"):
            text = data.get(key)
            if text is None:
                continue
            if not isinstance(text, str):
                problems.append((_join(*where, key), f"must be a string (got {_describe(text)})"))
            elif not text.strip():
                problems.append((_join(*where, key), "is empty (leave it out instead)"))
            elif len(text) > MAX_PROMPT_CHARS:
                problems.append((_join(*where, key), f"longer than {MAX_PROMPT_CHARS:,} characters"))
        if "params" in data:
            if isinstance(data["params"], dict):
                if _params(data["params"], (*where, "params"), problems) is None:
                    data.pop("params")
            else:
                problems.append((_join(*where, "params"), f"must be a table (got {_describe(data['params'])})"))
                data.pop("params")
        if "tools" in data:
            data["tools"] = _variant_tools(data["tools"], (*where, "tools"), base, problems)
        try:
            variant = Variant.model_validate(data)
        except ValidationError as exc:
            problems.extend(validation_problems(exc, where))
            continue
        if len(problems) == before:
            out[name] = variant
    return out


def _variant_tools(value: Any, where: tuple, base: Path, problems: list) -> dict[str, Any] | None:
    """A variant's `tools = FILE`: the file read and checked by the loader of
    `lineup chat --tools` (one owner for the shape), kept as its JSON so that
    the contestant record holds what was used, not a path that may change."""
    if not isinstance(value, str) or not value.strip():
        problems.append((_join(*where), f"must be the path of a tools file (got {_describe(value)})"))
        return None
    from core.answering.sampleset import SampleSetError, load_tool_script   # only when a variant has tools

    try:
        script = load_tool_script(base / Path(value).expanduser())
    except SampleSetError as exc:
        problems.extend((_join(*where), problem) for problem in exc.problems)
        return None
    return script.model_dump(mode="json")


def apply_variant(base: ModelConfig, alias: str, variant: Variant) -> ModelConfig:
    """`base` as the contestant `alias`: its parameters under the variant's,
    the variant's system prompt, template and tools (the provider sees the
    same model; the core sends what the variant says)."""
    return base.model_copy(update={
        "alias": alias, "variant_of": base.alias, "params": base.params.merged(variant.params),
        "system": variant.system, "template": variant.template, "tools": variant.tools})


def _run_table(raw: Any, problems: list) -> bool:
    """`[run]`: defaults of `lineup run` (`cache = true`: reuse the answers of identical requests)."""
    if not isinstance(raw, dict):
        problems.append(("run", f"must be a table (got {_describe(raw)})"))
        return False
    for key in raw:
        if key != "cache":
            problems.append((_join("run", key), "unknown key (expected cache)"))
    cache = raw.get("cache", False)
    if not isinstance(cache, bool):
        problems.append(("run.cache", f"must be true or false (got {_describe(cache)})"))
        return False
    return cache


def _params(table: dict, prefix: tuple[str, ...], problems: list) -> SamplingParams | None:
    """Sampling parameters, their ranges checked by `SamplingParams` itself."""
    try:
        return SamplingParams.model_validate(table)
    except ValidationError as exc:
        problems.extend(validation_problems(exc, prefix))
        return None


def _tags(raw: Any, problems: list) -> tuple[str, ...]:
    if not isinstance(raw, list):
        problems.append(("tags", f"must be an array of strings (got {_describe(raw)})"))
        return ()
    out: list[str] = []
    for i, tag in enumerate(raw):
        if not isinstance(tag, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]{0,39}", tag):
            problems.append((f"tags[{i}]", "must be a word of letters, digits, _ or - (at most 40 characters)"))
        elif tag in out:
            problems.append((f"tags[{i}]", f"duplicate tag {tag!r}"))
        elif tag not in DEFAULT_TAGS:
            out.append(tag)
    return tuple(out)


#: The path each protocol adds to `base_url` (a base_url already ending with it is refused).
_ROUTE_SUFFIX = {"openai": "/chat/completions", "openai-responses": "/responses", "anthropic": "/v1/messages",
                 "ollama": "/api/chat"}


def _plugin_declared(name: str) -> bool:
    """Whether an installed provider plugin declares `name` (read only for a name the catalogue lacks)."""
    from providers.plugins import plugin_names

    return name in plugin_names()


def _model(alias: str, table: Any, problems: list) -> ModelConfig | None:
    """A `[models.ALIAS]` table as a `ModelConfig`, or None with its problems
    added: the alias, the provider, then each step below, then pydantic."""
    where = ("models", alias)
    if not isinstance(table, dict):
        problems.append((_join(*where), f"must be a table (got {_describe(table)})"))
        return None
    before = len(problems)
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._/:@+-]{0,63}", alias):
        problems.append((_join(*where), "alias must start with a letter or digit and hold only letters, digits "
                                        "and . _ / : @ + - (at most 64 characters)"))
    data = dict(table)
    if "alias" in data:
        problems.append((_join(*where, "alias"), "unknown key (the alias is the table's name: [models.ALIAS])"))
        data.pop("alias")

    provider = data.get("provider")
    plugin = isinstance(provider, str) and provider not in PROVIDERS and _plugin_declared(provider)
    if provider is None:
        problems.append((_join(*where, "provider"),
                         f"required key is missing (one of {', '.join(known_providers())})"))
    elif provider not in PROVIDERS and not plugin:
        shown = repr(provider) if isinstance(provider, str) and len(provider) < 30 and not looks_like_key(
            provider.replace("-", "_")) else "this value"
        problems.append((_join(*where, "provider"),
                         f"unknown provider {shown}; expected one of {', '.join(known_providers())}"))

    _no_secrets_in(data, where, provider, problems)
    _gateway(data, table, where, problems)
    _model_params(data, where, provider, problems)
    _model_defaults(data, table, where, provider, plugin, problems)
    try:
        model = ModelConfig.model_validate({"alias": alias, **data})
    except ValidationError as exc:
        problems.extend(p for p in validation_problems(exc, where) if p[0] != _join(*where, "alias"))
        return None
    return model if len(problems) == before else None


def _no_secrets_in(data: dict, where: tuple, provider: Any, problems: list) -> None:
    """A key pasted where a variable's name goes, credentials in a
    `base_url`, or a whole endpoint pasted as `base_url`: refused (never
    echoed) and left out, so the other fields are still checked."""
    key_env = data.get("api_key_env")
    if isinstance(key_env, str) and key_env != "":
        if looks_like_key(key_env):
            problems.append((_join(*where, "api_key_env"),
                             "this looks like an API key, not the name of an environment variable (value not "
                             "shown). Put the key in the environment, e.g. export MY_API_KEY=..., and write "
                             'api_key_env = "MY_API_KEY"'))
            data.pop("api_key_env")

    base_url = data.get("base_url")
    if isinstance(base_url, str):
        secrets = url_secrets(base_url)
        if secrets:
            problems.append((_join(*where, "base_url"),
                             f"contains credentials ({', '.join(secrets)}; shown redacted: {redact_url(base_url)}). "
                             "Keys come from the environment: set api_key_env to the variable's name"))
            data.pop("base_url")
        else:
            try:
                parts = urlsplit(base_url)
                ok = parts.scheme in ("http", "https") and bool(parts.hostname)
            except ValueError:
                ok = False
            if not ok:
                problems.append((_join(*where, "base_url"), "must be an http:// or https:// URL with a host"))
            elif isinstance(provider, str) and provider in _ROUTE_SUFFIX and \
                    parts.path.rstrip("/").endswith(_ROUTE_SUFFIX[provider]):
                # a whole endpoint pasted (Azure's portal shows one): lineup adds the route itself
                problems.append((_join(*where, "base_url"), (
                    f"ends with {_ROUTE_SUFFIX[provider]}, which lineup adds itself: give the URL without it "
                    "(and any ?api-version=... as query = { \"api-version\" = \"...\" })")))
                data.pop("base_url")


def _model_params(data: dict, where: tuple, provider: Any, problems: list) -> None:
    """`params` checked like the command line's; a demo model's style named."""
    if "params" in data:
        if isinstance(data["params"], dict):
            params = _params(data["params"], (*where, "params"), problems)
            if params is None:
                data.pop("params")
        else:
            problems.append((_join(*where, "params"), f"must be a table (got {_describe(data['params'])})"))
            data.pop("params")

    if provider == "demo" and isinstance(data.get("model"), str):
        if data["model"] not in DEMO_STYLE_NAMES:
            problems.append((_join(*where, "model"),
                             f"unknown demo style {data['model']!r}; expected one of {', '.join(DEMO_STYLE_NAMES)}"))


_CLOUD_EXAMPLE = {"project": 'project = "my-project"', "region": 'region = "us-east5"'}


def _model_defaults(data: dict, table: Any, where: tuple, provider: Any, plugin: bool, problems: list) -> None:
    """The protocol's default server and key variable where the table gives
    none, and how the key is sent (`auth`), checked against the headers."""
    if provider not in PROVIDERS and not plugin:
        data["provider"] = "demo"   # already reported; a placeholder so the other fields are still checked
    if provider in PROVIDERS:
        for name in CATALOGUE[provider].cloud:
            if not isinstance(table.get(name), str):
                what = "required key is missing" if name not in table else f"must be a string (got {_describe(table[name])})"
                variables = dict(CATALOGUE[provider].cloud_env).get(name, ())
                where_else = f", or set {' or '.join(variables)}" if variables else ""
                problems.append((_join(*where, name), f"{what}: provider {provider} calls the model in a cloud "
                                                      f"{name} (e.g. {_CLOUD_EXAMPLE[name]}{where_else})"))
        if "base_url" not in data and "base_url" not in table:
            region = data.get("region")
            try:
                data["base_url"] = default_base_url(provider, region if isinstance(region, str) else None) \
                    if PROVIDER_DEFAULT_BASE_URL[provider] else None
            except ValueError:
                data["base_url"] = None   # no region: reported above
        if "api_key_env" not in table:
            default_key = PROVIDER_DEFAULT_KEY_ENV[provider]
            if provider in ("openai", "openai-responses") and "base_url" in table:
                default_key = None
            data["api_key_env"] = default_key
    if data.get("api_key_env") == "":
        data["api_key_env"] = None
    auth = data.get("auth")
    if isinstance(auth, dict) and auth.get("header") is None and "api_key_env" not in table:
        data["api_key_env"] = None   # auth = "none": the protocol's default key variable is not read
    elif isinstance(auth, dict) and auth.get("header") is not None and not data.get("api_key_env"):
        problems.append((_join(*where, "auth"), "says how the key is sent, but this model has no key: set "
                                                'api_key_env = "VARIABLE" (or remove auth)'))
    elif data.get("api_key_env") and provider in PROVIDERS:
        into = auth["header"] if isinstance(auth, dict) else CATALOGUE[provider].auth_header
        clash = next((h for h in data.get("headers", {}) if h.lower() == into.lower()), None)
        if clash is not None:
            problems.append((_join(*where, "headers", clash), f"the key from api_key_env already goes in header "
                                                              f"{into} (auth): remove one of them"))


# --------------------------------------------------------------------------- gateways

#: Headers lineup sets itself (the body's type and length, the connection).
RESERVED_HEADERS = frozenset({"host", "content-length", "content-type", "transfer-encoding", "connection",
                              "te", "upgrade", "trailer", "keep-alive", "proxy-connection", "content-encoding"})
_CREDENTIAL_WORDS = frozenset({"key", "apikey", "token", "secret", "password", "passwd", "auth", "authorization",
                               "cookie", "signature", "sig", "credential", "credentials", "session"})


def _credential_header(name: str) -> bool:
    """Whether a header's name says it carries a credential (one of its words:
    `X-Api-Key`, `Authorization`, `X-Auth-Token`; not `x-portkey-provider`)."""
    return any(word in _CREDENTIAL_WORDS for word in re.split(r"[-_.]", name.lower()))


def _gateway(data: dict, table: dict, where: tuple[str, ...], problems: list) -> None:
    """`auth`, `headers` and `query` of a model table: checked with their key
    paths (a value that is or may be a secret never repeated), put in the
    shape `ModelConfig` takes; a bad one is reported and dropped."""
    from providers.model_config import AUTH_PRESETS, HEADER_NAME

    if "auth" in data:
        auth = data.pop("auth")
        path = _join(*where, "auth")
        if isinstance(auth, str):
            preset = AUTH_PRESETS.get(auth.lower())
            if preset is None:
                shown = repr(auth) if len(auth) < 30 and not looks_like_secret(auth) else "this value"
                problems.append((path, f"unknown auth {shown}; expected one of {', '.join(AUTH_PRESETS)}, or a "
                                       'table { header = "NAME", scheme = "Bearer" }'))
            else:
                data["auth"] = preset.model_dump()
        elif isinstance(auth, dict):
            ok = True
            for k in auth:
                if k not in ("header", "scheme"):
                    problems.append((_join(*where, "auth", k), "unknown key (expected header and scheme)"))
                    ok = False
            header, scheme = auth.get("header"), auth.get("scheme")
            if not isinstance(header, str) or not HEADER_NAME.fullmatch(header):
                problems.append((_join(*where, "auth", "header"), "must be an HTTP header name (letters, digits "
                                                                  "and -), e.g. \"api-key\""))
                ok = False
            elif header.lower() in RESERVED_HEADERS:
                problems.append((_join(*where, "auth", "header"), f"{header} is set by lineup itself"))
                ok = False
            if scheme is not None and not (isinstance(scheme, str) and re.fullmatch(r"[A-Za-z][A-Za-z0-9_.-]{0,30}",
                                                                                    scheme)):
                problems.append((_join(*where, "auth", "scheme"), "must be one word, e.g. \"Bearer\" (the key "
                                                                  "follows it after a space)"))
                ok = False
            if ok:
                data["auth"] = {"header": header, "scheme": scheme}
        else:
            problems.append((path, f"must be a string or a table (got {_describe(auth)})"))
        if isinstance(data.get("auth"), dict) and data["auth"]["header"] is None and table.get("api_key_env"):
            problems.append((path, 'is "none", which sends no key, but api_key_env names one: remove one of them'))

    if "headers" in data:
        raw = data.pop("headers")
        if not isinstance(raw, dict):
            problems.append((_join(*where, "headers"), f"must be a table of header names (got {_describe(raw)})"))
        else:
            data["headers"] = _headers(raw, (*where, "headers"), problems)

    if "query" in data:
        raw = data.pop("query")
        if not isinstance(raw, dict):
            problems.append((_join(*where, "query"), f"must be a table of query parameters (got {_describe(raw)})"))
        else:
            query: dict[str, str] = {}
            for name, value in raw.items():
                path = _join(*where, "query", name)
                if SECRET_QUERY.search(name):
                    problems.append((path, "looks like a credential (value not shown): keys never go in a URL; "
                                           "send them in a header (api_key_env with auth, or headers = { NAME = "
                                           '{ env = "VARIABLE" } })'))
                elif not isinstance(value, str):
                    problems.append((path, f"must be a string (got {_describe(value)})"))
                elif looks_like_secret(value):
                    problems.append((path, "this looks like a key or token (value not shown): keys never go in a "
                                           "URL; send them in a header"))
                elif not value.isprintable() or not name.isprintable():
                    problems.append((path, "holds a control character"))
                else:
                    query[name] = value
            data["query"] = query


def _headers(raw: dict, where: tuple[str, ...], problems: list) -> dict[str, Any]:
    from providers.model_config import HEADER_NAME

    out: dict[str, Any] = {}
    seen: dict[str, str] = {}
    for name, value in raw.items():
        path = _join(*where, name)
        if not HEADER_NAME.fullmatch(name):
            problems.append((path, "not an HTTP header name (letters, digits and - only)"))
            continue
        if name.lower() in RESERVED_HEADERS:
            problems.append((path, f"{name} is set by lineup itself"))
            continue
        if name.lower() in seen:
            problems.append((path, f"given twice (as {seen[name.lower()]} too; header names ignore case)"))
            continue
        seen[name.lower()] = name
        if isinstance(value, dict):
            extra = [k for k in value if k != "env"]
            env = value.get("env")
            if extra:
                problems.append((_join(*where, name, extra[0]), 'unknown key (expected { env = "VARIABLE" })'))
            elif not isinstance(env, str) or not env:
                problems.append((_join(*where, name, "env"), "must be the name of an environment variable"))
            elif looks_like_key(env):
                problems.append((_join(*where, name, "env"), "this looks like a secret, not the name of an "
                                                             "environment variable (value not shown). Put it in "
                                                             'the environment and write { env = "ITS_NAME" }'))
            else:
                out[name] = {"env": env}
        elif isinstance(value, str):
            if _credential_header(name):
                problems.append((path, "a credential header (value not shown): its value never goes in the file; "
                                       'write { env = "VARIABLE" } and export VARIABLE'))
            elif looks_like_secret(value):
                problems.append((path, "this looks like a key or token (value not shown): write "
                                       '{ env = "VARIABLE" } and export VARIABLE instead'))
            elif not value.isascii() or not value.isprintable():
                problems.append((path, "a header value must be printable ASCII (no control characters)"))
            else:
                out[name] = value
        else:
            problems.append((path, f'must be a string or {{ env = "VARIABLE" }} (got {_describe(value)})'))
    return out


# --------------------------------------------------------------------------- autodetect

def autodetect(env: Mapping[str, str] = os.environ, *, probe_ollama: bool = False) -> Config:
    """Aliases for the keys present in `env` (and a reachable Ollama when
    `probe_ollama`); the demo models when nothing is found."""
    models: dict[str, ModelConfig] = {}
    warnings: list[str] = []
    for a in AUTODETECT:
        if env.get(a.env_var, "").strip() and a.alias not in models:
            models[a.alias] = ModelConfig(alias=a.alias, provider=a.provider, model=a.model, api_key_env=a.env_var,
                                          base_url=a.base_url or PROVIDER_DEFAULT_BASE_URL[a.provider])
    if probe_ollama:
        base, warning = ollama_base_url(env)
        if warning:
            warnings.append(warning)
        from providers.discovery import list_ollama_models

        for name in list_ollama_models(base, OLLAMA_PROBE_TIMEOUT):
            alias = "ollama/" + name.removesuffix(":latest")
            models.setdefault(alias, ModelConfig(alias=alias, provider="ollama", model=name, base_url=base))
    if not models:
        models = {m.alias: m for m in DEMO_MODELS}
    return Config(models=models, autodetected=True, warnings=tuple(warnings))


def ollama_base_url(env: Mapping[str, str] = os.environ) -> tuple[str, str | None]:
    """(Ollama's base URL from OLLAMA_HOST or the default, a warning or None).
    Accepts the forms Ollama itself does: ``host``, ``host:port``, ``http://host:port``."""
    host = env.get("OLLAMA_HOST", "").strip()
    if not host:
        return default_base_url("ollama"), None
    if "://" not in host:
        host = "http://" + host
    warning = None
    if url_secrets(host):
        warning = f"OLLAMA_HOST contains credentials; they were removed (using {redact_url(host)})"
    try:
        parts = urlsplit(host)
        hostname = parts.hostname or "localhost"
        port = parts.port or (443 if parts.scheme == "https" else 11434)   # Ollama's own defaults
    except ValueError:
        return default_base_url("ollama"), "OLLAMA_HOST is not a valid host[:port]; using the default"
    if hostname in ("0.0.0.0", "::"):
        hostname = "127.0.0.1"     # a listen-everywhere address; connect locally
    netloc = f"[{hostname}]" if ":" in hostname else hostname
    return urlunsplit((parts.scheme, f"{netloc}:{port}", parts.path.rstrip("/"), "", "")), warning


# --------------------------------------------------------------------------- use


def resolve_models(config: Config, aliases: list[str]) -> list[ModelConfig]:
    """The models for `aliases`, in order; all configured models when empty.
    ``demo/...`` aliases always resolve, configured or not."""
    if not aliases:
        return list(config.models.values())
    demo = {m.alias: m for m in (*DEMO_MODELS, DEMO_JUDGE)}
    out: list[ModelConfig] = []
    seen: set[str] = set()
    for alias in aliases:
        if alias in seen:
            raise ConfigError([("", f"model alias {alias!r} given twice")], config.source)
        seen.add(alias)
        model = config.models.get(alias) or demo.get(alias) or _variant(config, alias, demo)
        if model is None:
            known = list(config.models) + [a for a in demo if a not in config.models] + [
                v for v, spec in config.variants.items() if spec.model is not None]
            close = difflib.get_close_matches(alias, known, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise ConfigError([("", f"unknown model alias {alias!r}.{hint} Known aliases: {', '.join(known)} "
                                    "(see `lineup models`)")], config.source)
        out.append(model)
    return out


def _variant(config: Config, alias: str, demo: Mapping[str, ModelConfig]) -> ModelConfig | None:
    """The contestant `alias` names as a variant: a `[variants.ALIAS]` with a
    model, else MODEL@NAME for a generic `[variants.NAME]`; None when neither."""
    spec = config.variants.get(alias)
    if spec is not None and spec.model is not None:
        base = config.models.get(spec.model) or demo.get(spec.model)
        return apply_variant(base, alias, spec) if base is not None else None
    model, at, name = alias.rpartition("@")
    spec = config.variants.get(name) if at else None
    if spec is None or spec.model is not None:
        return None
    base = config.models.get(model) or demo.get(model)
    return apply_variant(base, alias, spec) if base is not None else None


def variant_matrix(config: Config, aliases: list[str], names: list[str]) -> list[str]:
    """`-m A -m B --variants x,y`: every model with every variant, as the
    aliases `resolve_models` takes (A@x, A@y, B@x, B@y). A name is the model's
    own `[variants."A@x"]`, else a generic `[variants.x]`; `ConfigError` names
    a pair that is neither."""
    out, problems = [], []
    for alias in aliases:
        for name in names:
            full = f"{alias}@{name}"
            own = config.variants.get(full)
            generic = config.variants.get(name)
            if own is not None and own.model == alias or generic is not None and generic.model is None:
                out.append(full)
            else:
                problems.append(("", f"--variants {name}: no [variants.{_key(full)}] with model = {alias!r} "
                                     f"and no generic [variants.{_key(name)}] (without model)"))
    if problems:
        raise ConfigError(problems, config.source)
    return out


def missing_key(model: ModelConfig, env: Mapping[str, str] = os.environ) -> str | None:
    """The name of the first secret variable `model` needs (its key, then its
    `{ env = ... }` headers) that `env` lacks, else None."""
    for name in model.secret_envs:
        if not env.get(name, "").strip():
            return name
    return None
