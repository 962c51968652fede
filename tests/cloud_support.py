"""Google Cloud's sign-in in tests, with no network: google-auth credentials
that hand out a fixed token and count their refreshes. Needs google-auth (the
vertex extra): a module importing this skips without it."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

pytest.importorskip("google.auth")

from google.auth import credentials as ga_credentials  # noqa: E402


class FixedTokenCredentials(ga_credentials.Credentials):
    """google-auth credentials that hand out `ya29.fixed-token-N` on the Nth
    refresh, valid for an hour; no network."""

    def __init__(self) -> None:
        super().__init__()
        self.refreshes = 0

    def refresh(self, request) -> None:
        self.refreshes += 1
        self.token = f"ya29.fixed-token-{self.refreshes}"
        self.expiry = _utcnow() + timedelta(hours=1)

    def expire(self) -> None:
        self.expiry = _utcnow() - timedelta(minutes=1)


def _utcnow() -> datetime:
    return datetime.utcnow()   # google-auth keeps expiry as naive UTC  # noqa: DTZ003
