"""What looks like a credential in text a person or a server wrote: a key
pasted where a variable's name goes, a token in a URL, a secret-looking
metadata value. One rule for the config, the traces read as logs and the
parameters typed as text; values are recognised, never repeated."""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlsplit, urlunsplit

_KEY_PREFIXES = ("sk-", "sk_", "sk-ant-", "sk-or-", "AIza", "gsk_", "xai-", "hf_", "ghp_", "github_pat_",
                 "pplx-", "nvapi-", "r8_", "AKIA", "ya29.", "Bearer ")
SECRET_QUERY = re.compile(r"(key|api[_-]?key|apikey|token|access[_-]?token|secret|password|auth|sig)",
                           re.IGNORECASE)


_TOKEN_RUN = re.compile(r"[A-Za-z0-9+/=_.~-]{32,}")
_SCHEMES = ("bearer ", "basic ", "token ", "apikey ")


ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")   # an environment variable's name


def looks_like_secret(value: str) -> bool:
    """Whether a literal value (a header's, a query parameter's) looks like a
    key or token: a vendor key prefix or an auth scheme, or a word that mixes
    cases and digits (20 characters or more) or is a long run of key
    characters with digits and lower case (32 or more: hex and base64 keys)."""
    v = value.strip()
    if v.startswith(_KEY_PREFIXES) or v.lower().startswith(_SCHEMES):
        return True
    for word in v.split():
        has_lower, has_upper = any(c.islower() for c in word), any(c.isupper() for c in word)
        has_digit = any(c.isdigit() for c in word)
        if len(word) >= 20 and has_lower and has_upper and has_digit:
            return True
        if has_digit and has_lower and _TOKEN_RUN.fullmatch(word):
            return True
    return False


def looks_like_key(value: str) -> bool:
    """Whether `value` (meant to be a variable *name*) looks like a key itself."""
    if not ENV_NAME.fullmatch(value):
        return True     # not a variable name at all: treat as a possible secret, never echo
    # variable names are UPPER_SNAKE (sometimes lower); keys mix cases and digits
    return len(value) >= 40 or looks_like_secret(value)


def url_secrets(url: str) -> list[str]:
    """What in `url` looks like a credential: 'userinfo' and/or query names."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return []
    found = []
    if "@" in parts.netloc:
        found.append("user:password@")
    for name, _ in parse_qsl(parts.query, keep_blank_values=True):
        if SECRET_QUERY.search(name):
            found.append(f"?{name}=")
    return found


def redact_url(url: str) -> str:
    """`url` with any userinfo and credential-like query values replaced by ***."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable URL>"
    netloc = parts.netloc
    if "@" in netloc:
        netloc = "***@" + netloc.rsplit("@", 1)[1]
    query = "&".join(
        f"{name}=***" if SECRET_QUERY.search(name) else (f"{name}={value}" if value else name)
        for name, value in parse_qsl(parts.query, keep_blank_values=True)
    )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
