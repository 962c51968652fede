"""Shared fixtures. Every test gets its own database and config paths, so no
test ever touches a user's real data."""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
CONFORMANCE = SHARED / "conformance" / "wire"


@pytest.fixture(autouse=True)
def _isolated_paths(tmp_path, monkeypatch):
    monkeypatch.setenv("LINEUP_DB", str(tmp_path / "lineup.db"))
    # no config file unless a test writes one: the user config dir is a fresh folder
    monkeypatch.delenv("LINEUP_CONFIG", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))
    monkeypatch.setenv("LINEUP_RATER", "tester")
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY",
                "OPENROUTER_API_KEY", "OLLAMA_HOST"):
        monkeypatch.delenv(var, raising=False)
    yield
