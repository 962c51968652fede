"""How the `lineup` command ends (`lineup.cli.entry`, `quick_exit`): with the
exit code, output and exit handlers of `sys.exit`, without the interpreter's
teardown, and the usual way where the teardown could still matter."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from store import Store
from tests.cli_support import TIMEOUT, lineup, lineup_env
from tests.synthetic import synthetic_session, write_synthetic


def python(code: str, tmp_path: Path) -> subprocess.CompletedProcess:
    """`python -c CODE` in `tmp_path`, the checkout on its path."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                          env=lineup_env(None), timeout=TIMEOUT)


def test_a_report_ends_with_its_whole_output_and_files_written(tmp_path):
    with Store.open(tmp_path / "lineup.db") as store:
        for seed in range(3):
            write_synthetic(store, *synthetic_session(turns=30, seed=seed, created=1.7e9 + seed,
                                                      aliases=["m-a", "m-b"]))
    proc = lineup(["report", "--json", "--md", str(tmp_path / "report.md")], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["votes_used"] == 90
    markdown = (tmp_path / "report.md").read_text(encoding="utf-8")
    assert "m-a" in markdown and "m-b" in markdown and markdown.endswith("\n")


def test_exit_handlers_run_and_the_teardown_is_skipped(tmp_path):
    code = f"""
import atexit, sys
class Finalised:
    def __del__(self, _open=open):     # builtins may be gone by then
        _open({str(tmp_path / 'teardown')!r}, 'w').write('ran')
keep = Finalised()
atexit.register(lambda: open({str(tmp_path / 'atexit')!r}, 'w').write('ran'))
sys.argv = ['lineup', '--version']
from lineup.cli import entry
entry()
"""
    proc = python(code, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("lineup ")
    assert (tmp_path / "atexit").read_text() == "ran"
    assert not (tmp_path / "teardown").exists()     # module teardown did not run: the time saved

    proc = python(code.replace("from lineup.cli import entry\nentry()", "sys.exit(0)"), tmp_path)
    assert (tmp_path / "teardown").read_text() == "ran"   # ... which a plain exit runs (the check can fail)


def test_a_thread_still_running_is_waited_for(tmp_path):
    code = f"""
import threading, time
def late():
    time.sleep(0.3)
    open({str(tmp_path / 'late')!r}, 'w').write('done')
threading.Thread(target=late).start()
from lineup.cli import quick_exit
quick_exit(3)
"""
    proc = python(code, tmp_path)
    assert proc.returncode == 3, proc.stderr
    assert (tmp_path / "late").read_text() == "done"


def test_exit_codes_are_those_of_sys_exit(tmp_path):
    assert lineup(["--help"], cwd=tmp_path).returncode == 0
    bad = lineup(["report", "--no-such-option"], cwd=tmp_path)
    assert bad.returncode == 2 and "usage:" in bad.stderr and "Traceback" not in bad.stderr
    none = python("from lineup.cli import quick_exit; quick_exit(None)", tmp_path)
    assert none.returncode == 0, none.stderr
    text = python("from lineup.cli import quick_exit; quick_exit('stopped: no database')", tmp_path)
    assert text.returncode == 1 and text.stderr.strip() == "stopped: no database"


def test_output_buffered_at_the_end_is_flushed(tmp_path):
    code = "import sys; sys.stdout.write('x' * 200_000); from lineup.cli import quick_exit; quick_exit(0)"
    proc = python(code, tmp_path)
    assert proc.returncode == 0 and proc.stdout == "x" * 200_000
