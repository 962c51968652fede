"""`lineup serve [--port N] [--host H]`: Datasette, read-only, over a copy of
the database made for publishing (`store.publish`: unrevealed blind sessions
and package mappings are not in it), with lineup's metadata: table
descriptions, readable views, canned queries. Needs `pip install lineup[serve]`."""

from __future__ import annotations

import argparse


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--port", type=int, default=8001, help="port (default 8001)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1: this machine only; 0.0.0.0 publishes it)")


def run(args: argparse.Namespace) -> int:
    import importlib.util
    import json
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    from core.errors import UsageError
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
        counts = write_published_copy(db, copy)
        meta = Path(tmp) / "metadata.json"
        meta.write_text(json.dumps(metadata("lineup")))
        print(f"serving {counts['session']} sessions read-only at http://{args.host}:{args.port}/lineup "
              "(unrevealed blind sessions left out); Ctrl-C stops", flush=True)
        try:
            return subprocess.call([sys.executable, "-m", "datasette", "serve", "--immutable", str(copy),
                                    "--metadata", str(meta), "--host", args.host, "--port", str(args.port),
                                    "--setting", "allow_download", "off"])
        except KeyboardInterrupt:
            return 130
