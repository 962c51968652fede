"""`lineup rate [SESSION... | PACKAGE] --rater NAME... [--raters FILE]
[--overlap K] [--reveal after-vote|never] [--host H] [--port N]
[--adaptive [--confidence P]] [--gold-rate R] [--new-links]`: the blind vote
queue served to raters in a browser (`web`, the optional extra), each with
a link of their own; the owner's progress in the terminal and at an
owner-only link. Given a vote package (`lineup share`), the package's own
queue for one rater on this machine. Needs `pip install 'lineup[web]'`."""

from __future__ import annotations

import argparse
from pathlib import Path


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("sessions", metavar="SESSION", nargs="*",
                   help="sessions or runs to rate (ids or unique prefixes; default: every session), "
                        "or one vote package file from `lineup share`")
    p.add_argument("--rater", action="append", default=[], metavar="NAME",
                   help="a rater (repeatable); each gets a link of their own")
    p.add_argument("--raters", metavar="FILE", help="a file of rater names, one a line")
    p.add_argument("--overlap", type=int, default=1, metavar="K",
                   help="raters per case, so agreement can be measured (default 1)")
    p.add_argument("--reveal", choices=("after-vote", "never"), default="never",
                   help="show the model names to a rater after each vote, or never (default)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1: this machine only); the links are bearer tokens")
    p.add_argument("--port", type=int, default=8002, help="port (default 8002; 0: any free port)")
    p.add_argument("--adaptive", action="store_true", help="serve the pairs of models whose order is least certain")
    p.add_argument("--confidence", type=float, default=0.95, metavar="P",
                   help="with --adaptive: the confidence at which the top counts as separated (default 0.95)")
    p.add_argument("--gold-rate", type=float, default=0.0, metavar="R",
                   help="after each case, with this chance, a gold pair (a check of the rater, never a vote)")
    p.add_argument("--new-links", action="store_true",
                   help="issue new links to the raters named (their earlier links stop working)")


def run(args: argparse.Namespace) -> int:
    import importlib.util

    from core.ground.errors import UsageError

    if importlib.util.find_spec("starlette") is None or importlib.util.find_spec("uvicorn") is None:
        raise UsageError("lineup rate needs the web extra: pip install 'lineup[web]'")
    if not 0 <= args.port < 65536:
        raise UsageError(f"--port: {args.port} is not a port")
    if not 0.5 < args.confidence < 1:
        raise UsageError(f"--confidence: a probability between 0.5 and 1, not {args.confidence}")
    if args.confidence != 0.95 and not args.adaptive:
        raise UsageError("--confidence goes with --adaptive")
    if not 0 <= args.gold_rate < 1:
        raise UsageError(f"--gold-rate: a chance from 0 up to (not including) 1, not {args.gold_rate}")
    names = _names(args)
    package = Path(args.sessions[0]) if len(args.sessions) == 1 and Path(args.sessions[0]).is_file() else None
    if package is not None:
        return _package(package, args, names)
    return _team(args, names)


def _names(args: argparse.Namespace) -> list[str]:
    from core.ground.errors import UsageError
    from core.ground.inputs import InputError
    from core.answering.raters import RaterError, check_name, names_from_file

    try:
        names = [check_name(n) for n in args.rater]
        if args.raters:
            names += names_from_file(args.raters)
    except (RaterError, InputError) as exc:
        raise UsageError(str(exc)) from None
    return names


def _bind(host: str, port: int):
    import socket

    from core.ground.errors import UsageError

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        family, _, _, _, addr = infos[0]
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(addr)
        sock.listen(128)
    except OSError as exc:
        raise UsageError(f"--host {host} --port {port}: cannot listen there ({exc.strerror or exc})") from None
    sock.setblocking(False)
    return sock


def _loopback(host: str) -> bool:
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _url(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


def _team(args: argparse.Namespace, names: list[str]) -> int:
    from core.ground.errors import UsageError
    from core.answering.raters import RaterError, open_team
    from core.answering.config import load_config
    from lineup.commands import open_store, resolve_sessions

    config = load_config(args.config)      # a ConfigError is a UsageError: exit 2
    with open_store(args, write=True) as store:      # refuses a database it cannot write (exit 2)
        if args.sessions:
            sessions = sorted(set(resolve_sessions(store, args.sessions)))
        else:
            sessions = sorted(s.id for s in store.list_sessions() if s.turns)
        if not sessions:
            raise UsageError("no session to rate: run a sample set first (lineup run)")
        try:
            team = open_team(store, sessions, names, args.overlap, new_links=args.new_links)
        except RaterError as exc:
            raise UsageError(str(exc)) from None
        db = store.path
    return _serve(db, team, args, tags=config.all_tags, case_seed=None)


def _package(path: Path, args: argparse.Namespace, names: list[str]) -> int:
    """One rater votes in a package file, in a browser on this machine."""
    import os

    from core.answering.config import Config
    from core.ground.errors import UsageError
    from core.ground.inputs import shown_name
    from core.answering.raters import RaterError, open_team
    from core.exchange.share import package_tags
    from store import Store, StoreError
    from store.imports import ImportFileError
    from store.share import package_info_at

    info = package_info_at(path)
    if info is None:
        raise UsageError(f"{shown_name(path)} is not a vote package from `lineup share`")
    if args.adaptive or args.gold_rate:
        raise UsageError("--adaptive and --gold-rate work on a database, not a vote package")
    if len(names) > 1:
        raise UsageError("a vote package is rated by one rater (--rater NAME); send each rater a package")
    if not names:
        names = [os.environ.get("LINEUP_RATER") or _login()]
    try:
        tags = Config(tags=package_tags(info, shown_name(path))).all_tags
    except ImportFileError as exc:
        raise UsageError(str(exc)) from None
    try:
        store = Store.open(path)
    except StoreError as exc:
        raise UsageError(str(exc)) from None
    with store:
        if store.readonly:
            raise UsageError(f"{shown_name(path)} cannot be written: votes could not be recorded there")
        sessions = sorted(s.id for s in store.list_sessions() if s.turns)
        try:
            team = open_team(store, sessions, names, 1, new_links=args.new_links)
        except RaterError as exc:
            raise UsageError(str(exc)) from None
    args.reveal = "never"
    return _serve(path, team, args, tags=tags, case_seed=info.seed)


def _login() -> str:
    import getpass

    try:
        return getpass.getuser() or "rater"
    except Exception:
        return "rater"


def _serve(db, team, args: argparse.Namespace, *, tags: tuple[str, ...], case_seed: str | None) -> int:
    import asyncio
    import sys

    from core.ground.errors import UsageError
    from core.ground.text import one_line
    from store import AsyncStore, StoreError
    from web.app import Options, RateApp
    from web.server import serve

    sock = _bind(args.host, args.port)
    port = sock.getsockname()[1]
    base = _url(args.host, port)
    if not _loopback(args.host):
        print(f"warning: serving on {one_line(args.host)}, beyond this machine, over plain HTTP: each link is a "
              "bearer token (whoever holds it votes as that rater, or sees the progress); send links privately",
              file=sys.stderr, flush=True)
    print(f"rating {len(team.sessions)} session{'s' if len(team.sessions) != 1 else ''}, each case to "
          f"{team.overlap} rater{'s' if team.overlap != 1 else ''}; names {args.reveal.replace('-', ' ')}; "
          "Ctrl-C stops (every acknowledged vote is saved)", flush=True)
    for rater, token in team.links.items():
        link = f"{base}/r/{token}" if token else "(link issued earlier; --new-links replaces it)"
        print(f"  {one_line(rater)}: {link}", flush=True)
    print(f"  owner (progress): {base}/o/{team.owner_token}", flush=True)

    async def main() -> int:
        try:
            store = await AsyncStore.open(db)
        except StoreError as exc:
            raise UsageError(str(exc)) from None
        try:
            opened = store.store
            if opened is not None and opened.readonly:
                raise UsageError(f"{opened.path} cannot be written: votes could not be recorded there")
            app = RateApp(store, team, Options(reveal=args.reveal, adaptive=args.adaptive,
                                               confidence=args.confidence, gold_rate=args.gold_rate,
                                               case_seed=case_seed, tags=tags))
            await serve(app, sock)
            return 0
        finally:
            await store.aclose()

    try:
        return asyncio.run(main())
    finally:
        sock.close()
