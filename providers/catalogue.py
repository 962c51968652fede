"""The one list of providers: every name a config may use, the module that
speaks its wire protocol, where its API lives by default, the variable its key
is read from, and the environment variables that make lineup offer a model
with no config at all. Config validation, the providers' factory, key lookup
and autodetection all read these tables; a new provider is one row here and
one module beside this one (ARCHITECTURE.md, "Adding a provider")."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, get_args

#: Every provider name a config may use (checked against `CATALOGUE` on import).
ProviderName = Literal["openai", "openai-responses", "anthropic", "ollama", "gemini", "vertex", "vertex-anthropic",
                       "bedrock", "demo"]


@dataclass(frozen=True, slots=True)
class ProviderEntry:
    name: str
    module: str                    # the module that speaks this wire protocol
    cls: str                       # its Provider class
    default_base_url: str | None   # where the API lives when a model gives no base_url (None: no server)
    default_key_env: str | None    # the key variable when a model names none (None: sends no key)
    protocol: str                  # in words, for `lineup models` and the docs
    auth_header: str = "Authorization"   # where the key goes when a model's `auth` says nothing
    auth_scheme: str | None = "Bearer"   # and the word before it ("Authorization: Bearer KEY")
    reasoning_effort: bool = False  # the protocol takes a reasoning effort (`SamplingParams.reasoning_effort`)
    #: a cloud's project and region the model must name (`ModelConfig.project`, `region`); the
    #: default base URL then holds `{region}` (`default_base_url`)
    cloud: tuple[str, ...] = ()
    #: where each of those is read when the model names none: the variables the cloud's own SDKs
    #: read, in order (`core.answering.config.cloud_defaults`)
    cloud_env: tuple[tuple[str, tuple[str, ...]], ...] = ()


#: Vertex AI's regional endpoint (`region = "global"`: aiplatform.googleapis.com).
VERTEX_BASE_URL = "https://{region}-aiplatform.googleapis.com/v1"

#: Google Cloud's project and location variables (google-auth, gcloud's client libraries, google-genai).
GOOGLE_CLOUD_ENV = (("project", ("GOOGLE_CLOUD_PROJECT",)), ("region", ("GOOGLE_CLOUD_LOCATION",)))

CATALOGUE: dict[str, ProviderEntry] = {e.name: e for e in (
    ProviderEntry("openai", "providers.openai", "OpenAIProvider", "https://api.openai.com/v1",
                  "OPENAI_API_KEY", "OpenAI-compatible chat completions (also vLLM, llama.cpp, LM Studio, gateways)",
                  reasoning_effort=True),
    ProviderEntry("openai-responses", "providers.responses", "ResponsesProvider", "https://api.openai.com/v1",
                  "OPENAI_API_KEY", "OpenAI Responses API (reasoning summaries; models only served there)",
                  reasoning_effort=True),
    ProviderEntry("anthropic", "providers.anthropic", "AnthropicProvider", "https://api.anthropic.com",
                  "ANTHROPIC_API_KEY", "Anthropic Messages", "x-api-key", None),
    ProviderEntry("ollama", "providers.ollama", "OllamaProvider", "http://localhost:11434", None,
                  "Ollama /api/chat", reasoning_effort=True),
    ProviderEntry("gemini", "providers.gemini", "GeminiProvider",
                  "https://generativelanguage.googleapis.com/v1beta", "GEMINI_API_KEY",
                  "Gemini streamGenerateContent", "x-goog-api-key", None),
    ProviderEntry("vertex", "providers.vertex", "VertexGeminiProvider", VERTEX_BASE_URL, None,
                  "Gemini on Google Vertex AI (application default credentials)", cloud=("project", "region"),
                  cloud_env=GOOGLE_CLOUD_ENV),
    ProviderEntry("vertex-anthropic", "providers.vertex", "VertexAnthropicProvider", VERTEX_BASE_URL, None,
                  "Anthropic Messages on Google Vertex AI (application default credentials)",
                  cloud=("project", "region"), cloud_env=GOOGLE_CLOUD_ENV),
    ProviderEntry("bedrock", "providers.bedrock", "BedrockProvider", "https://bedrock-runtime.{region}.amazonaws.com",
                  None, "Amazon Bedrock ConverseStream (SigV4, AWS credential chain)", cloud=("region",),
                  cloud_env=(("region", ("AWS_REGION", "AWS_DEFAULT_REGION")),)),
    ProviderEntry("demo", "providers.demo", "DemoProvider", None, None, "offline demo models (no network)"),
)}
assert tuple(CATALOGUE) == get_args(ProviderName), "ProviderName and CATALOGUE list the same providers"

PROVIDERS: tuple[str, ...] = tuple(CATALOGUE)
#: Where each protocol lives when a model gives no `base_url` (None: the demo).
PROVIDER_DEFAULT_BASE_URL: dict[str, str | None] = {n: e.default_base_url for n, e in CATALOGUE.items()}
def default_base_url(provider: str, region: str | None = None) -> str:
    """Where a provider that has a server (all but the demo) lives by default;
    a cloud's regional endpoint in `region`."""
    url = PROVIDER_DEFAULT_BASE_URL[provider]
    if url is None:
        raise ValueError(f"provider {provider!r} has no server")
    if "{region}" in url:
        if not region:
            raise ValueError(f"provider {provider!r} needs a region")
        if region == "global":
            return url.replace("{region}-", "")
        return url.replace("{region}", region)
    return url


#: The providers whose protocol takes a reasoning effort (OpenAI `reasoning_effort`, Ollama `think`).
REASONING_EFFORT_PROVIDERS: frozenset[str] = frozenset(n for n, e in CATALOGUE.items() if e.reasoning_effort)


#: The key variable a model uses when its table names none (see core.answering.config).
PROVIDER_DEFAULT_KEY_ENV: dict[str, str | None] = {n: e.default_key_env for n, e in CATALOGUE.items()}

OPENROUTER_BASE_URL = "https://openrouter.ai/api/v1"

#: The offline demo's models, one per answering style (`providers.demo.DEMO_STYLES`
#: says how each answers, and checks it has exactly these).
DEMO_MODEL_NAMES: tuple[str, ...] = ("concise", "thorough", "quirky", "thinker")
#: The offline pairwise judge (`lineup judge -m demo/judge`): a demo style that is never a contestant.
DEMO_JUDGE_NAME = "judge"
#: Every style a `provider = "demo"` alias may name.
DEMO_STYLE_NAMES: tuple[str, ...] = (*DEMO_MODEL_NAMES, DEMO_JUDGE_NAME)


@dataclass(frozen=True, slots=True)
class Autodetected:
    """A model lineup offers, with no config, when `env_var` is set."""
    env_var: str
    alias: str
    provider: ProviderName
    model: str
    base_url: str | None = None    # None: the provider's default


AUTODETECT: tuple[Autodetected, ...] = (
    Autodetected("OPENAI_API_KEY", "gpt-4o-mini", "openai", "gpt-4o-mini"),
    Autodetected("ANTHROPIC_API_KEY", "claude-sonnet", "anthropic", "claude-sonnet-4-5"),
    Autodetected("GEMINI_API_KEY", "gemini-flash", "gemini", "gemini-2.5-flash"),
    Autodetected("GOOGLE_API_KEY", "gemini-flash", "gemini", "gemini-2.5-flash"),
    Autodetected("OPENROUTER_API_KEY", "openrouter/gpt-4o-mini", "openai", "openai/gpt-4o-mini", OPENROUTER_BASE_URL),
)
#: Every variable that may hold a key lineup reads (`lineup models` says which are set).
KEY_ENV_VARS: tuple[str, ...] = tuple(dict.fromkeys(
    [e.default_key_env for e in CATALOGUE.values() if e.default_key_env] + [a.env_var for a in AUTODETECT]))


def cloud_default(entry: ProviderEntry, name: str, env: Mapping[str, str]) -> str | None:
    """A cloud's project or region where a model names none: the variables the
    cloud's own SDKs read (`entry.cloud_env`: AWS_REGION, GOOGLE_CLOUD_PROJECT...),
    and for Bedrock's region then the AWS profile's (AWS_PROFILE, else default,
    in the shared config file, read by botocore when the `bedrock` extra is
    installed). None where none is found: the config then says it is missing."""
    variables = dict(entry.cloud_env).get(name, ())
    found = next((env[v] for v in variables if env.get(v)), None)
    if found is not None or (entry.name, name) != ("bedrock", "region"):
        return found
    try:
        from botocore.session import Session
    except ImportError:
        return None
    try:
        session = Session(profile=env.get("AWS_PROFILE") or None)
        if env.get("AWS_CONFIG_FILE"):
            session.set_config_variable("config_file", env["AWS_CONFIG_FILE"])
        region = session.get_config_variable("region")
    except Exception:       # a missing profile or a broken file: the region is then reported missing
        return None
    return region if isinstance(region, str) and region else None
