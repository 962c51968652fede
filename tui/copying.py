"""Copy text and say what happened (`tui.clipboard` decides and words it):
the terminal clipboard sequence is written at once (Textual's
`copy_to_clipboard`, and wrapped for tmux's passthrough where that is the
only way out), the system clipboard tool runs off the event loop, and the
notification says where the text went. When nothing can be confirmed and
the way out is known to drop it (tmux without `set-clipboard on`, GNU screen,
the Linux console) a dialog offers to write the text to a file; the palette
offers the same for the last copy at any time."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from tui.clipboard import copy_report, default_copy_path, osc52, terminal_route, write_copy
from tui.dialogs import TextPrompt

if TYPE_CHECKING:
    from tui.host import Host


def copy_and_tell(app: Host, text: str, what: str) -> None:
    """Copy `text` ("what" names it in the notification: "the answer of A (1,234 characters)")."""
    app.copy_to_clipboard(text)
    app.last_copy = (text, what)
    written = app._driver is not None

    def work() -> None:
        route = terminal_route(os.environ)
        if route.kind == "tmux" and route.passthrough and route.set_clipboard != "on" and written:
            app.call_from_thread(_write_passthrough, app, text)
        report = copy_report(text, os.environ, route=route, osc52_written=written)
        app.call_from_thread(_told, app, report.message(what), report.doubtful, report.confirmed)

    app.run_worker(work, thread=True, group="copy", exit_on_error=False)


def _write_passthrough(app: Host, text: str) -> None:
    driver = app._driver
    if driver is not None:
        driver.write(osc52(text, tmux_passthrough=True))


def _told(app: Host, message: str, doubtful: bool, confirmed: bool) -> None:
    app.copies_told += 1
    if doubtful:
        app.say(message, severity="warning")
        offer_file(app, message)
    else:
        app.say(message, severity="information" if confirmed else "warning")


def offer_file(app: Host, why: str = "") -> None:
    """Ask for a file and write the last copy there (the dialog says what failed)."""
    if app.last_copy is None:
        app.say("Nothing copied yet.")
        return
    text, what = app.last_copy

    def write(path: str) -> str | None:
        try:
            written = write_copy(text, path)
        except OSError as exc:
            return f"cannot write {path}: {exc.strerror or exc}"
        app.say(f"Wrote {what} to {written}.")
        return None

    app.push_screen(TextPrompt(
        "Write the copied text to a file?", value=str(default_copy_path()), dialog_id="copy-dialog", note=why,
        help_text="enter: write · esc: no, thanks",
        placeholder="a file to write",
        check=lambda value: write(value) if value.strip() else "name a file"))
