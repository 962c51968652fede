"""Serving the raters' app: uvicorn on a socket the command bound (so the
links printed name the real port), and the owner's progress in the
terminal, a line per rater each time it changes."""

from __future__ import annotations

import asyncio
import socket
import sys
from typing import TYPE_CHECKING, TextIO

import uvicorn

from core.ground.text import one_line

if TYPE_CHECKING:
    from web.app import RateApp

#: Seconds between two looks at the progress for the terminal.
PROGRESS_EVERY = 5.0


async def serve(app: RateApp, sock: socket.socket, *, out: TextIO | None = None) -> None:
    """Serve until interrupted (Ctrl-C, SIGTERM); print progress as it changes."""
    config = uvicorn.Config(app, log_level="warning", lifespan="off", server_header=False, date_header=False,
                            access_log=False)
    server = uvicorn.Server(config)
    printer = asyncio.create_task(_progress(app, out or sys.stdout))
    try:
        await server.serve(sockets=[sock])
    finally:
        printer.cancel()


async def _progress(app: RateApp, out: TextIO) -> None:
    last: list[str] = []
    while True:
        try:
            lines = (await app.progress()).lines()
        except Exception as exc:        # a busy or failing read: said, tried again
            lines = [f"progress unavailable: {type(exc).__name__}"]
        if lines != last:
            print("progress: " + " · ".join(one_line(line) for line in lines), file=out, flush=True)
            last = lines
        await asyncio.sleep(PROGRESS_EVERY)
