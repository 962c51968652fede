"""The traffic mix a decision is made for: shares given on the command line
(`--mix code=0.3 writing=0.7`, any positive numbers, scaled to sum to 1), or
the strata of request logs (`--mix-from LOGS --by FIELD`: each stratum's share
of the logged records, read by `core.exchange.logs` and counted by
`core.exchange.sampling.strata_sizes`, exactly the strata `lineup sample` shows).

Why a module of its own: both forms end as {category: share} with a line
saying where it came from; bad input is a `ValueError` that names the
argument or the file."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from core.ground.text import one_line


def parse_mix(items: Sequence[str]) -> dict[str, float]:
    """`CATEGORY=SHARE` items -> {category: share} (shares as given; a
    trailing % is allowed). ValueError names the item."""
    out: dict[str, float] = {}
    for item in items:
        name, sep, value = item.rpartition("=")
        if not sep or not name:
            raise ValueError(f"--mix {one_line(item)!r}: expected CATEGORY=SHARE (e.g. code=0.3)")
        text = value.strip()
        scale = 1.0
        if text.endswith("%"):
            text, scale = text[:-1], 0.01
        try:
            share = float(text) * scale
        except ValueError:
            raise ValueError(f"--mix {one_line(item)!r}: the share {one_line(value)!r} is not a number") from None
        if not math.isfinite(share) or share < 0:
            raise ValueError(f"--mix {one_line(item)!r}: a share must be a finite number of 0 or more")
        if name in out:
            raise ValueError(f"--mix: category {one_line(name)!r} is given twice")
        out[name] = share
    if out and sum(out.values()) <= 0:
        raise ValueError("--mix: at least one share must be above 0")
    return out


def mix_from_logs(path: str | Path, by: str) -> tuple[dict[str, float], str]:
    """The strata of a request log as shares, and where they came from.
    `core.exchange.logs.LogError` (naming FILE:LINE) for unreadable logs."""
    from core.exchange.logs import read_logs
    from core.exchange.sampling import strata_sizes

    logs = read_logs(path, by)
    sizes = strata_sizes(logs)
    total = sum(sizes.values())
    if not total:
        raise ValueError(f"{one_line(path)}: no records to take a mix from")
    source = (f"{one_line(path)} by {one_line(logs.by)}" + (" (derived from the text)" if logs.derived else "")
              + f": {total:,} records")
    return {s: n / total for s, n in sorted(sizes.items())}, source
