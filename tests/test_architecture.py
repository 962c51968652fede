"""The import contracts of ARCHITECTURE.md, checked on the real import graph.

Import names are the folder names (no package-dir mapping), so the graph read
here from the files is the one Python runs and the one every tool that reads
the tree (type checker, IDE, code map) sees. Every import counts: at the top
of a module or inside a function, and those under `if TYPE_CHECKING:` too
(they never run, but a reader and a code map see them: a screen typed
against the app that imports it drew a circle; `tui/host.py` is how the
screens name the app instead)."""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("lineup", "core", "providers", "store", "tui", "web")

# Floors, top to bottom: a package imports only itself and the floors below.
# `web` (the raters' browser front end) is a front end beside the TUI: neither imports the other.
FLOORS: tuple[tuple[str, ...], ...] = (("lineup",), ("tui", "web"), ("core",), ("providers", "store"))
# Third-party modules a package never imports.
FORBIDDEN_THIRD_PARTY = {
    "core": ("textual", "starlette", "uvicorn"),
    "providers": ("textual", "sqlite3", "sqlite_utils"),
    "store": ("textual", "httpx"),
    "tui": ("httpx", "sqlite3", "sqlite_utils", "starlette", "uvicorn"),
    "web": ("textual", "httpx", "sqlite3", "sqlite_utils"),
}
# The wings of the core, bottom to top: a wing imports only itself and the wings
# below it (each wing's __init__ docstring says what it owns). Every module of the
# core lives in a wing.
CORE_WINGS = ("core.ground", "core.stats", "core.answering", "core.exchange", "core.decide", "core.report")
# What the wings take from the ground floor of the house (providers, store).
WING_MAY_IMPORT_FROM_BELOW = {
    "core.ground": ("store.bounds",),
    "core.stats": ("store.records", "store.ids", "store.db"),  # a vote's record, its ids, StoreError
}
# What the TUI may take from the floors below the core: the event contract and
# a model's definition to show; no HTTP, and nothing of the store (records, SQL).
TUI_MAY_IMPORT_FROM_BELOW = ("providers.events", "providers.model_config", "providers.catalogue")
# Commands that open the TUI import it inside run(), so the others never load Textual.
TUI_COMMANDS = {"chat_cmd", "replay_cmd", "vote_cmd", "report_cmd"}
# The command that serves the web front end imports it inside run(), like the TUI's.
WEB_COMMANDS = {"rate_cmd"}


@dataclass(frozen=True)
class Import:
    source: str         # importing module
    target: str         # imported module (a submodule when `from pkg import sub` names one)
    lazy: bool          # inside a function
    typing_only: bool   # under `if TYPE_CHECKING:`
    line: int


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports_of(root: Path, path: Path, modules: set[str]) -> list[Import]:
    source = module_name(root, path)
    package = source if path.name == "__init__.py" else source.rpartition(".")[0]
    found: list[Import] = []

    def visit(node: ast.AST, lazy: bool, typing_only: bool) -> None:
        for child in ast.iter_child_nodes(node):
            child_lazy = lazy or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            child_typing = typing_only or (isinstance(child, ast.If) and _is_type_checking(child.test))
            if isinstance(child, ast.Import):
                for alias in child.names:
                    found.append(Import(source, alias.name, lazy, typing_only, child.lineno))
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base_parts = package.split(".")[: len(package.split(".")) - (child.level - 1)]
                    base = ".".join(p for p in (*base_parts, child.module or "") if p)
                else:
                    base = child.module or ""
                for alias in child.names:
                    sub = f"{base}.{alias.name}"
                    found.append(Import(source, sub if sub in modules else base, lazy, typing_only, child.lineno))
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                for stmt in child.body:
                    visit(ast.Module(body=[stmt], type_ignores=[]), child_lazy, True)
                for stmt in child.orelse:
                    visit(ast.Module(body=[stmt], type_ignores=[]), child_lazy, typing_only)
            else:
                visit(child, child_lazy, child_typing)

    visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)), False, False)
    return found


def graph(root: Path = ROOT) -> tuple[set[str], list[Import]]:
    files = [p for pkg in PACKAGES if (root / pkg).is_dir() for p in sorted((root / pkg).rglob("*.py"))]
    modules = {module_name(root, p) for p in files}
    edges = [imp for p in files for imp in _imports_of(root, p, modules)]
    return modules, edges


def top(name: str) -> str:
    return name.split(".")[0]


def floor_of(package: str) -> int:
    return next(i for i, floor in enumerate(FLOORS) if package in floor)


def violations(root: Path = ROOT) -> list[str]:
    modules, edges = graph(root)
    found = []
    for e in edges:
        src, dst = top(e.source), top(e.target)
        where = f"{e.source}:{e.line} imports {e.target}"
        if dst in PACKAGES:
            if dst != src and floor_of(dst) <= floor_of(src):
                found.append(f"{where}: {dst} is not below {src}")
            if src in ("tui", "web") and dst in ("providers", "store") and not any(
                    e.target == ok or e.target.startswith(ok + ".") for ok in TUI_MAY_IMPORT_FROM_BELOW):
                found.append(f"{where}: the {'TUI' if src == 'tui' else 'web front end'} takes only the event "
                             "contract and model definitions from below the core")
            if e.target not in modules:
                found.append(f"{where}: no such module in the tree")
        for bad in FORBIDDEN_THIRD_PARTY.get(src, ()):
            if e.target == bad or e.target.startswith(bad + "."):
                found.append(f"{where}: {src} never imports {bad}")
        if src == "lineup" and dst == "tui" and not e.lazy:
            found.append(f"{where}: commands open the TUI inside run(), never at import")
        if src == "lineup" and dst == "tui" and e.source.rpartition(".")[2] not in TUI_COMMANDS | {"launch"}:
            found.append(f"{where}: only the interactive commands open the TUI")
        if src == "lineup" and dst == "web" and (not e.lazy or e.source.rpartition(".")[2] not in WEB_COMMANDS):
            found.append(f"{where}: only `lineup rate` loads the web front end, inside run()")
    return found


def cycles(root: Path = ROOT) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    modules, edges = graph(root)
    succ: dict[str, set[str]] = {m: set() for m in modules}
    for e in edges:
        # imports for the type checker count too: tools that draw the graph (and readers) see them
        if e.target in modules and e.target != e.source:
            succ[e.source].add(e.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(succ[v]):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for m in sorted(modules):
        if m not in index:
            strong(m)
    return out


@pytest.mark.slow
def test_the_layers_hold():
    assert violations() == []


@pytest.mark.slow
def test_the_report_has_no_sql():
    """The SQL the report runs lives with the schema (`store.report_queries`):
    nothing in `core.report` imports sqlite3 or runs a statement. (Only the
    report: `core.exchange.sampling` reads a foreign SQLite file of its own.)"""
    _, edges = graph()
    assert [f"{e.source}:{e.line} imports {e.target}" for e in edges if e.source.startswith("core.report")
            and (e.target == "sqlite3" or e.target.startswith("sqlite3."))] == []
    for path in sorted((ROOT / "core" / "report").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        assert ".execute(" not in text and ".conn" not in text, path


def wing_of(module: str) -> str | None:
    return next((w for w in CORE_WINGS if module == w or module.startswith(w + ".")), None)


def wing_violations(root: Path = ROOT) -> list[str]:
    modules, edges = graph(root)
    found = [f"{m}: every module of the core lives in a wing" for m in sorted(modules)
             if top(m) == "core" and m != "core" and wing_of(m) is None]
    for e in edges:
        src = wing_of(e.source)
        if src is None:
            continue
        where = f"{e.source}:{e.line} imports {e.target}"
        dst = wing_of(e.target)
        if dst is not None and CORE_WINGS.index(dst) > CORE_WINGS.index(src):
            found.append(f"{where}: {dst} is not below {src}")
        allowed = WING_MAY_IMPORT_FROM_BELOW.get(src)
        if allowed is not None and top(e.target) in ("providers", "store") and not any(
                e.target == ok or e.target.startswith(ok + ".") for ok in allowed):
            found.append(f"{where}: {src} takes only {', '.join(allowed)} from below the core")
    return found


@pytest.mark.slow
def test_each_wing_of_the_core_imports_only_the_wings_below():
    assert wing_violations() == []


def test_a_wing_reaching_up_is_reported(tmp_path):
    """The wing check itself: a ground module importing a stats module is named."""
    for d in ("core", "core/ground", "core/stats"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "__init__.py").write_text("")
    (tmp_path / "core/stats/votes.py").write_text("X = 1\n")
    (tmp_path / "core/ground/text.py").write_text("from core.stats.votes import X\n")
    (tmp_path / "core/loose.py").write_text("")
    assert wing_violations(tmp_path) == [
        "core.loose: every module of the core lives in a wing",
        "core.ground.text:1 imports core.stats.votes: core.stats is not below core.ground",
    ]


# The TUI holds the app's store (`LineupApp.store`, an AsyncStore) for what
# the screens read and for housekeeping of whole sessions; every judgement
# record (turns, answers, votes, tags, notes, reveals) is written through the
# core (`ChatSession`, `VoteQueue`), which owns its rules.
TUI_STORE_CALLS = frozenset({"load_session", "list_sessions", "prompt_history", "read", "images",
                             "rename_session", "delete_session"})


def tui_store_violations(root: Path = ROOT) -> list[str]:
    """Each `<x>.store.<method>` in tui/ whose method is not a read or a
    session's housekeeping (`TUI_STORE_CALLS`)."""
    found = []
    for path in sorted((root / "tui").rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute)
                    and node.value.attr == "store" and node.attr not in TUI_STORE_CALLS):
                found.append(f"{path.relative_to(root)}:{node.lineno}: store.{node.attr}")
    return found


def test_the_tui_only_reads_the_store_and_tidies_sessions():
    assert tui_store_violations() == []


def test_a_screen_writing_a_vote_itself_is_reported(tmp_path):
    (tmp_path / "tui").mkdir()
    (tmp_path / "tui" / "screen.py").write_text("async def f(self, v):\n    await self.app.store.add_vote(v)\n")
    assert tui_store_violations(tmp_path) == ["tui/screen.py:2: store.add_vote"]


@pytest.mark.slow
def test_no_module_imports_itself_back():
    assert cycles() == []


@pytest.mark.slow
def test_nothing_below_the_command_line_imports_it():
    _, edges = graph()
    assert [f"{e.source} imports {e.target}" for e in edges
            if top(e.target) == "lineup" and top(e.source) != "lineup"] == []


def test_the_tree_is_the_package_layout():
    """No package-dir mapping: the import names are the folder names, so tools
    that read the tree see the graph Python runs."""
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "package-dir" not in setuptools
    assert {top(p) for p in setuptools["packages"]} == set(PACKAGES)
    for p in setuptools["packages"]:
        assert (ROOT / p.replace(".", "/") / "__init__.py").is_file(), p


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_the_checker_sees_each_kind_of_violation(tmp_path):
    """The checker itself must be able to fail."""
    _write(tmp_path, {
        "lineup/__init__.py": "", "lineup/commands/__init__.py": "",
        "lineup/commands/run_cmd.py": "def run():\n    import tui.app\n",
        "core/__init__.py": "", "core/a.py": "from . import b\n", "core/b.py": "def f():\n    from core import a\n",
        "providers/__init__.py": "", "providers/bad.py": "from store.db import Store\nimport textual\n",
        "store/__init__.py": "", "store/db.py": "from core.a import x\n",
        "tui/__init__.py": "", "tui/app.py": "from store.records import X\nfrom providers.http import H\n",
        "web/__init__.py": "", "web/app.py": "from tui import app\nfrom store.db import Store\nimport sqlite3\n",
        "lineup/commands/vote_cmd.py": "import web.app\n",
    })
    found = violations(tmp_path)
    expected = [
        "providers.bad:1 imports store.db: store is not below providers",
        "providers.bad:2 imports textual: providers never imports textual",
        "store.db:1 imports core.a: core is not below store",
        "tui.app:1 imports store.records: the TUI takes only",
        "tui.app:2 imports providers.http: no such module",
        "lineup.commands.run_cmd:2 imports tui.app: only the interactive commands",
        "web.app:1 imports tui.app: tui is not below web",
        "web.app:2 imports store.db: the web front end takes only",
        "web.app:3 imports sqlite3: web never imports sqlite3",
        "lineup.commands.vote_cmd:1 imports web.app: only `lineup rate` loads the web front end",
    ]
    for want in expected:
        assert any(f.startswith(want) for f in found), (want, found)
    assert cycles(tmp_path) == [["core.a", "core.b"]]


@pytest.mark.slow
def test_core_and_batch_commands_run_without_textual():
    """Import every module of the core, providers and store and every non-TUI
    command, build the parser, then check sys.modules."""
    modules, _ = graph()
    wanted = sorted(m for m in modules if top(m) in ("core", "providers", "store")
                    or (m.startswith("lineup.") and m.rpartition(".")[2] not in TUI_COMMANDS | {"launch", "__main__"}))
    code = (
        "import importlib, sys\n"
        f"for m in {wanted!r}: importlib.import_module(m)\n"
        "from lineup.cli import build_parser; build_parser()\n"
        "bad = sorted(m for m in sys.modules if m == 'textual' or m.startswith('textual.'))\n"
        "print(len(bad)); sys.exit(1 if bad else 0)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(wanted) > 40


@pytest.mark.parametrize("package", ["core", "providers", "store"])
def test_each_lower_package_imports_on_its_own(package):
    """`import store` alone works (no hidden reliance on a module imported first elsewhere)."""
    proc = subprocess.run([sys.executable, "-c", f"import {package}"], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr


#: Dotted names the docs use that are not modules: entry-point groups, trace attributes.
NOT_MODULES = frozenset({"lineup.checks", "lineup.providers", "lineup.arm", "lineup.experiment"})


def named_paths_missing(root: Path = ROOT) -> list[str]:
    """Every source path the map and the docs name (`core/answering/runner.py`,
    a dotted `core.stats.votes`) that is not in the tree."""
    import re

    found = []
    docs = [root / "ARCHITECTURE.md", *sorted((root / "docs").glob("*.md"))]
    tops = ("lineup", "core", "providers", "store", "tui", "web")
    for doc in docs:
        text = doc.read_text(encoding="utf-8")
        for m in re.finditer(rf"(?<![\w./-])((?:{'|'.join(tops)})/[\w/]+\.py)\b", text):
            if "NAME" not in m.group(1) and not (root / m.group(1)).exists():     # NAME: a placeholder
                found.append(f"{doc.name}: {m.group(1)}")
        for m in re.finditer(rf"`((?:{'|'.join(tops)})(?:\.\w+)+)`", text):
            name = m.group(1)
            parts = name.split(".")
            if name in NOT_MODULES:
                continue
            # a module, or a name in one: the longest prefix that is a module or package must exist,
            # and a name in a package's __init__ must be found there
            ok = any((root / Path(*parts[:k])).with_suffix(".py").exists() or (root / Path(*parts[:k])).is_dir()
                     for k in range(len(parts), 1, -1))
            init = root / parts[0] / "__init__.py"
            ok = ok or (len(parts) == 2 and init.exists()
                        and re.search(rf"\b{parts[1]}\b", init.read_text(encoding="utf-8")) is not None)
            if not ok:
                found.append(f"{doc.name}: {name}")
    return found


def test_every_path_the_map_and_the_docs_name_exists():
    assert named_paths_missing() == []


def test_a_path_the_map_names_wrongly_is_reported(tmp_path):
    (tmp_path / "core").mkdir()
    (tmp_path / "core" / "real.py").write_text("")
    (tmp_path / "docs").mkdir()
    (tmp_path / "ARCHITECTURE.md").write_text("`core/real.py`, `core/gone.py`, `core.real.f`, `core.gone`\n")
    assert named_paths_missing(tmp_path) == ["ARCHITECTURE.md: core/gone.py", "ARCHITECTURE.md: core.gone"]


def command_sibling_imports(root: Path = ROOT) -> list[str]:
    """A command module importing another command's module: what they share
    belongs in `lineup/commands/__init__.py` or `lineup/commands/running.py`."""
    _, edges = graph(root)
    return [f"{e.source}:{e.line} imports {e.target}" for e in edges
            if e.source.startswith("lineup.commands.") and e.source.endswith("_cmd")
            and e.target.startswith("lineup.commands.") and e.target.endswith("_cmd") and e.target != e.source]


@pytest.mark.slow
def test_no_command_imports_another_commands_module():
    assert command_sibling_imports() == []


def misplaced_test_imports(root: Path = ROOT) -> list[str]:
    """What test files import from the tests folder the wrong way: another test
    module (its module-level code ran twice, once under each name, and a test
    broke when a file it never named changed), or a helper by its bare name
    (`tui_support` beside `tests.tui_support`: two modules, two TestServer
    classes). Helpers live in support modules, imported as `tests.NAME`."""
    folder = root / "tests"
    local = {p.stem for p in folder.glob("*.py")}
    found = []
    for path in sorted(folder.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            for name in names:
                top, _, rest = name.partition(".")
                target = rest.partition(".")[0] if top == "tests" else top if top in local else None
                if target is None:
                    continue
                if target.startswith("test_") or top != "tests":
                    found.append(f"{path.name}:{node.lineno}: {name}")
    return found


def test_test_modules_import_only_support_modules_by_one_name():
    assert misplaced_test_imports() == []


def test_a_test_importing_another_test_module_is_reported(tmp_path):
    _write(tmp_path, {"tests/test_a.py": "from tests.test_b import helper\nimport run_support\n",
                      "tests/test_b.py": "def helper(): ...\n", "tests/run_support.py": "",
                      "tests/test_c.py": "from tests.run_support import x\nimport json\n"})
    assert misplaced_test_imports(tmp_path) == ["test_a.py:1: tests.test_b", "test_a.py:2: run_support"]
