"""Google Vertex AI, two request shapes on one endpoint and one sign-in:

- `provider = "vertex"`: Gemini models, the Gemini request and stream
  (`providers.gemini`) at `{base}/projects/{project}/locations/{region}/
  publishers/google/models/{model}:streamGenerateContent?alt=sse`;
- `provider = "vertex-anthropic"`: Anthropic's models, the Messages body with
  `anthropic_version: "vertex-2023-10-16"` and no `model` (the URL names it),
  at `.../publishers/anthropic/models/{model}:streamRawPredict`, and the
  Anthropic stream (`providers.anthropic`).

The base URL is the region's endpoint (`https://{region}-aiplatform.googleapis.com/v1`).
Both send an OAuth access token from Google application default credentials
(google-auth, the `vertex` extra: `GOOGLE_APPLICATION_CREDENTIALS`, gcloud's
application-default login, the metadata server) as `Authorization: Bearer`.
The token is fetched, or refreshed once expired, in a worker thread before
the request loop starts; from there it is the answer's key: a secret,
scrubbed from every message, never stored. google-auth's refresh goes over
httpx (`_HttpxRequest`), so the extra needs no other HTTP library."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Mapping
from typing import Any
from urllib.parse import quote

import anyio
import httpx

from providers.anthropic import AnthropicProvider
from providers.events import ChatRequest, ErrorKind, StreamError, StreamEvent
from providers.gemini import GeminiProvider
from providers.http import Route, perf_counter, scrub, short
from providers.model_config import ModelConfig
from providers.runtime_secrets import RuntimeSecretsGuard

#: What the token may do: call Vertex AI (the scope Google documents for it).
SCOPES = ("https://www.googleapis.com/auth/cloud-platform",)
#: The `anthropic_version` Vertex AI takes in the body (in place of the header).
VERTEX_ANTHROPIC_VERSION = "vertex-2023-10-16"
#: Seconds a token request may take.
TOKEN_TIMEOUT = 30.0


class _HttpxResponse:
    """google-auth's transport response (`google.auth.transport.Response`)."""

    def __init__(self, resp: httpx.Response) -> None:
        self.status = resp.status_code
        self.headers: Mapping[str, str] = resp.headers
        self.data = resp.content


class _HttpxRequest:
    """google-auth's transport request (`google.auth.transport.Request`) over
    a short-lived httpx client: what a credentials object refreshes through."""

    def __call__(self, url: str, method: str = "GET", body: Any = None, headers: Any = None,
                 timeout: float | None = None, **kwargs: Any) -> _HttpxResponse:
        from google.auth import exceptions

        try:
            with httpx.Client(timeout=timeout or TOKEN_TIMEOUT, follow_redirects=False) as client:
                return _HttpxResponse(client.request(method, url, content=body, headers=headers))
        except httpx.HTTPError as exc:
            raise exceptions.TransportError(f"{type(exc).__name__} from the token endpoint") from None


class GoogleCredentials:
    """One model's Google credentials: application default credentials (or
    the object given, in tests), loaded on first use and refreshed when the
    token is missing or expired. Thread-safe: refreshes run in worker threads."""

    def __init__(self, credentials: Any = None) -> None:
        self._creds = credentials
        self._lock = threading.Lock()

    def ensure(self, renew: bool = False) -> tuple[str | None, ErrorKind, str]:
        """(token, kind, problem): a valid token now (`renew`: a new one even
        if the one held has not expired), else why not (blocking: call in a thread)."""
        with self._lock:
            try:
                if self._creds is None:
                    try:
                        import google.auth
                    except ImportError:
                        return None, ErrorKind.config, ("Vertex AI needs google-auth: pip install 'lineup[vertex]'")
                    self._creds, _ = google.auth.default(scopes=SCOPES)
                creds = self._creds
                if renew or not creds.valid:
                    creds.refresh(_HttpxRequest())
            except Exception as exc:   # google-auth's DefaultCredentialsError, RefreshError, TransportError
                name = type(exc).__name__
                kind = ErrorKind.config if name == "DefaultCredentialsError" else ErrorKind.auth
                how = (" (run `gcloud auth application-default login`, or set GOOGLE_APPLICATION_CREDENTIALS to "
                       "a credentials file)") if kind == ErrorKind.config else ""
                return None, kind, f"Google credentials ({name}): {short(str(exc))}{how}"
            token = creds.token
            if not isinstance(token, str) or not token or not token.isascii() or not token.isprintable():
                return None, ErrorKind.auth, "Google credentials gave no usable access token"
            return token, ErrorKind.auth, ""


class _VertexAuth:
    """The sign-in both Vertex protocols share: a token before the request
    loop, sent as the key (`Authorization: Bearer`)."""

    cfg: ModelConfig
    base_url: str

    def __init__(self, cfg: ModelConfig, *, credentials: Any = None, **options: Any) -> None:
        super().__init__(cfg, **options)  # type: ignore[call-arg]
        self.google = GoogleCredentials(credentials)
        self._token: str | None = None
        self._renewed: dict[int, str] = {}    # a stream's request -> the token its retry was renewed with

    async def _events(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        # This stream's own request object: `_renew` hands a renewed token back by it, and two
        # streams of one request (repeats of a prompt) must not take each other's.
        request = request.model_copy()
        token, kind, problem = await anyio.to_thread.run_sync(self.google.ensure)
        if token is None:
            yield StreamError(kind=kind, message=f"model {self.cfg.alias!r}: {scrub(problem, ())}", t=perf_counter())
            return
        self._token = token
        tokens = [token]
        guard = RuntimeSecretsGuard(tuple(tokens))
        try:
            async for ev in super()._events(request):  # type: ignore[misc]
                for out in guard.events(ev):
                    yield out
                renewed = self._renewed.pop(id(request), None)
                if renewed is not None:   # (after the Retrying: nothing shown, nothing held back)
                    tokens.append(renewed)
                    guard = RuntimeSecretsGuard(tuple(tokens))
        finally:
            self._renewed.pop(id(request), None)

    async def _renew(self, request: ChatRequest, failure: Any) -> Any:
        """A 401 before anything was shown: Google may have revoked the token
        early (a rotated key, a changed account), so a new one is asked for
        and the request sent once more with it."""
        if failure.status != 401:
            return None
        token, _, _ = await anyio.to_thread.run_sync(lambda: self.google.ensure(renew=True))
        if token is None:
            return None
        self._token = token
        self._renewed[id(request)] = token
        prepared = self._prepare(request)  # type: ignore[attr-defined]
        return None if isinstance(prepared, StreamError) else prepared

    def key(self) -> tuple[str | None, str | None]:
        if self._token is None:
            return None, f"model {self.cfg.alias!r}: no Google access token"
        return self._token, None

    def route(self, request: ChatRequest) -> Route:
        route: Route = super().route(request)  # type: ignore[misc]
        return Route(url=route.url, auth="Authorization: Bearer … (Google application default credentials)",
                     headers=route.headers)

    def publisher_url(self, publisher: str) -> str:
        """`.../projects/P/locations/R/publishers/PUB/models/MODEL`."""
        cfg = self.cfg
        return (f"{self.base_url}/projects/{cfg.project}/locations/{cfg.region}/publishers/{publisher}/models/"
                f"{quote(cfg.model, safe='@.-_')}")


class VertexGeminiProvider(_VertexAuth, GeminiProvider):
    name = "vertex"
    protocol = "Gemini on Vertex AI"

    def model_url(self) -> str:
        return self.publisher_url("google")


class VertexAnthropicProvider(_VertexAuth, AnthropicProvider):
    name = "vertex-anthropic"
    protocol = "Anthropic messages on Vertex AI"

    def build(self, request: ChatRequest, key: str | None) -> tuple[str, dict[str, str], dict[str, Any]]:
        _, headers, body = super().build(request, key)
        headers.pop("anthropic-version", None)
        body.pop("model", None)
        body = {"anthropic_version": VERTEX_ANTHROPIC_VERSION, **body}
        return f"{self.publisher_url('anthropic')}:streamRawPredict", headers, body
