"""Saved records as `StreamView.set_conversation` entries, shared by the
resumed chat, the replay and the vote queue."""

from __future__ import annotations

Entry = tuple[str, str]


def answer_entries(out, note: str | None = None) -> list[Entry]:
    """One saved answer: its reasoning, its text, then a note line if any."""
    entries: list[Entry] = []
    if out.reasoning:
        entries.append(("reasoning", out.reasoning))
    entries.append(("assistant", out.text or ""))
    if note:
        entries.append(("note", note))
    return entries


def pane_status(out) -> str:
    """The pane header status of a saved answer."""
    return {"complete": "done"}.get(out.status, out.status)


def status_note(out, scrub=None) -> str | None:
    """'error (kind): message', 'cancelled' or 'interrupted' (None when complete)."""
    if out.status == "error":
        message = out.error_message or ""
        return f"error ({out.error_kind}): {scrub(message) if scrub else message}"
    if out.status in ("cancelled", "interrupted"):
        return out.status
    return None
