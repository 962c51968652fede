"""The layering rules of DESIGN.md, checked: the core works without Textual,
providers know nothing of storage or UI, the store nothing of HTTP or UI, and
the TUI does no HTTP and no SQL of its own."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# folder in the repository -> modules its files must not import
FORBIDDEN = {
    "providers": ("textual", "lineup.tui", "lineup.store", "lineup.sessions", "sqlite3", "sqlite_utils"),
    "store": ("textual", "lineup.tui", "lineup.providers", "lineup.sessions", "httpx"),
    "lineup": ("textual", "lineup.tui"),
    "tui": ("httpx", "sqlite3", "sqlite_utils"),
}
# command modules that open the TUI import it lazily inside run(); that is allowed
LAZY_TUI_OK = {"chat_cmd.py", "replay_cmd.py", "vote_cmd.py", "report_cmd.py"}


def _imports(path: Path, top_level_only: bool) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    names: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _violations(folder: str) -> list[str]:
    found = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        lazy_ok = folder == "lineup" and path.name in LAZY_TUI_OK
        for name in _imports(path, top_level_only=lazy_ok):
            for bad in FORBIDDEN[folder]:
                if name == bad or name.startswith(bad + "."):
                    found.append(f"{path.relative_to(ROOT)} imports {name}")
    return found


@pytest.mark.parametrize("folder", sorted(FORBIDDEN))
def test_layer_imports(folder):
    assert _violations(folder) == []


def test_rule_checker_sees_a_violation(tmp_path, monkeypatch):
    """The checker itself must be able to fail."""
    fake = tmp_path / "providers"
    fake.mkdir()
    (fake / "bad.py").write_text("from lineup.store import Store\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert _violations("providers") == ["providers/bad.py imports lineup.store"]


def test_core_and_batch_commands_run_without_textual():
    """Import every core module and every non-TUI command, then check sys.modules."""
    core = [p for p in (ROOT / "lineup").rglob("*.py") if p.name not in LAZY_TUI_OK and p.name != "__main__.py"]
    modules = ["lineup." + ".".join(p.relative_to(ROOT / "lineup").with_suffix("").parts) for p in core]
    modules = [m.removesuffix(".__init__") for m in modules]
    for pkg in ("providers", "store"):
        for p in (ROOT / pkg).rglob("*.py"):
            modules.append(f"lineup.{pkg}." + ".".join(p.relative_to(ROOT / pkg).with_suffix("").parts))
    modules = sorted(m.removesuffix(".__init__") for m in modules)
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "from lineup.cli import build_parser; build_parser()\n"
        "bad = sorted(m for m in sys.modules if m == 'textual' or m.startswith('textual.'))\n"
        "print(len(bad)); sys.exit(1 if bad else 0)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(modules) > 10
