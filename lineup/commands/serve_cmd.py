"""`lineup serve [--port N] [--host H]`: Datasette, read-only, over a copy of
the database made for publishing (`store.publish`: of a blind session only
its cases or turns revealed so far, no package mappings), with lineup's metadata: table
descriptions, readable views, canned queries. Needs `pip install lineup[serve]`."""

from __future__ import annotations

import argparse
from collections.abc import Callable


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--port", type=int, default=8001, help="port (default 8001)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1: this machine only; 0.0.0.0 publishes it)")


def run(args: argparse.Namespace) -> int:
    import importlib.util
    import json
    import sys
    import tempfile
    from pathlib import Path

    from core.ground.errors import UsageError
    from lineup.commands import open_store
    from store.publish import metadata, write_published_copy

    if importlib.util.find_spec("datasette") is None:
        raise UsageError("lineup serve needs Datasette: pip install 'lineup[serve]'")
    if not 0 < args.port < 65536:
        raise UsageError(f"--port: {args.port} is not a port")
    store = open_store(args, write=False)       # a lineup database, or exit 2
    db = Path(store.path)
    store.close()
    with tempfile.TemporaryDirectory(prefix="lineup-serve-") as tmp:
        copy = Path(tmp) / "lineup.db"
        published = write_published_copy(db, copy)
        meta = Path(tmp) / "metadata.json"
        meta.write_text(json.dumps(metadata("lineup")))
        print(f"serving {published.shown()} read-only at http://{args.host}:{args.port}/lineup; "
              "Ctrl-C stops", flush=True)
        if left := published.left_out():
            print(f"left out until revealed (blind: vote on them or reveal them, then restart): {left}",
                  flush=True)
        return _serve([sys.executable, "-m", "datasette", "serve", "--immutable", str(copy),
                       "--metadata", str(meta), "--host", args.host, "--port", str(args.port),
                       "--setting", "allow_download", "off"])


class _Stop(Exception):
    def __init__(self, signum: int) -> None:
        self.signum = signum


def _serve(cmd: list[str]) -> int:
    """Datasette's exit status, or 128 + the signal that stopped lineup.

    Ctrl-C reaches the whole foreground group, Datasette too; SIGTERM (a
    service manager's stop) and SIGHUP (a closed terminal) reach lineup
    alone. Left to Python's default, they ended lineup at once: Datasette
    went on serving, orphaned, and the published copy stayed on disk. Here
    each stops Datasette (terminate, then kill after 10 s) before the copy's
    folder is removed. kill -9 cannot be handled: on Linux Datasette is
    started to get SIGTERM when lineup dies (`_dies_with`), so even then it
    stops serving (the copy stays, with nothing left to remove it)."""
    import os
    import signal
    import subprocess
    import sys

    def stop(signum: int, frame: object) -> None:
        raise _Stop(signum)

    linux = sys.platform.startswith("linux")
    proc = subprocess.Popen(cmd, preexec_fn=_dies_with(os.getpid()) if linux else None)
    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        return proc.wait()
    except KeyboardInterrupt:
        return 130
    except _Stop as e:
        return 128 + e.signum
    finally:
        for sig in previous:        # a second signal while Datasette stops must not cut the clean-up short
            signal.signal(sig, signal.SIG_IGN)
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _dies_with(parent: int) -> Callable[[], None]:
    """What the child runs before exec: ask Linux for SIGTERM when its parent
    dies (prctl PR_SET_PDEATHSIG), then exit if the parent already has."""
    def child() -> None:
        import ctypes
        import os
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)     # 1 = PR_SET_PDEATHSIG
        if os.getppid() != parent:
            os._exit(1)
    return child
