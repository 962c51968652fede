"""Display helpers for the vote queue screen. The queue's logic (cases,
order, shuffle, votes, undo, reveal) lives in `lineup.vote_queue`."""

from __future__ import annotations

from lineup.vote_queue import LABELS, QueueItem, build_items, check_summary, shuffled_positions  # noqa: F401
