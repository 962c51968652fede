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
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))   # kept bootstrap rounds too
    monkeypatch.setenv("LINEUP_RATER", "tester")
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY",
                "OPENROUTER_API_KEY", "OLLAMA_HOST"):
        monkeypatch.delenv(var, raising=False)
    yield


# Whole files left out of the fast subset (`pytest -m "not slow"`): what they
# run is slow by nature. Slow tests in other files carry `@pytest.mark.slow`.
SLOW_FILES = {
    # subprocesses killed, racing or huge inputs
    "test_importing_hostile.py", "test_inputs_huge.py", "test_store_kill.py", "test_runs_at_scale.py",
    "test_secrets.py", "test_import_races.py", "test_runner_processes.py",
    # time limits waited out, checks run in processes
    "test_patterns.py", "test_code_checks.py", "test_custom_checks.py",
    # the app under a pilot, snapshots, real terminals
    "test_tui_chat.py", "test_tui_workbench.py", "test_tui_vote_queue.py", "test_tui_tools.py",
    "test_tui_report.py", "test_tui_replay.py", "test_tui_tag_picker.py", "test_tui_small_terminals.py",
    "test_tui_snapshots.py", "test_tui_workbench_snapshots.py", "test_tui_report_snapshot.py",
    "test_tui_small_snapshots.py", "test_tui_blind_snapshots.py", "test_tui_terminal.py",
    "test_tui_terminal_blind.py", "test_tui_terminal_sizes.py", "test_blind_matrix.py",
    "test_vote_attribution.py", "test_demo_flow.py",
    # servers in processes and a real browser
    "test_rate_web.py", "test_rate_browser.py", "test_serve.py", "test_benchmarks.py",
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.name in SLOW_FILES:
            item.add_marker(pytest.mark.slow)
