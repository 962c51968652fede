"""Display helpers for the vote queue screen. The queue's logic (cases,
order, shuffle, votes, undo, reveal) lives in `lineup.vote_queue`."""

from __future__ import annotations

from types import SimpleNamespace

from lineup.vote_queue import LABELS, QueueItem, build_items, check_summary, shuffled_positions  # noqa: F401


def scrub(text: str, contestants) -> str:
    """Provider text with every contestant's identity hidden (see `blind_safe`)."""
    from lineup.config import ModelConfig
    from lineup.sessions import HIDDEN, blind_safe

    fakes = []
    for c in contestants:
        try:
            cfg = ModelConfig(alias=c.alias, provider=c.provider, model=c.model, base_url=c.base_url)
        except Exception:   # an imported provider name we do not know: hide the names at least
            cfg = ModelConfig(alias=c.alias, provider="demo", model=c.model, base_url=c.base_url)
            for word in (c.provider,):
                text = text.replace(word, HIDDEN)
        fakes.append(SimpleNamespace(config=cfg))
    return blind_safe(text, fakes)
