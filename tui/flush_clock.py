"""One flush clock per app, shared by every StreamView in it.

Why this module exists: each pane used to flush on its own timer, so six
streaming panes flushed at six phases and the screen painted up to six times
per flush interval. Every paint costs the compositor about the same whatever
changed (it re-renders every pane overlapping the changed rows and divides
whole screen rows), so unaligned flushes were most of
the rendering CPU. Here views ask for a flush at a time; one timer flushes,
in one callback, every view whose time has come or will come within half an
interval, and the screen then paints them all at once. When text comes in
faster than it can be read (a replay, a fast model), the ticks' flushing is
kept to about a quarter of the loop: ticks come less often, not later.
"""

from __future__ import annotations

import time
from math import ceil
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from textual.app import App
    from textual.timer import Timer

__all__ = ["FlushClock"]

#: The attribute of an app that holds its clock.
_ON_APP = "_lineup_flush_clock"


class _Flushable(Protocol):
    def _flush(self) -> None: ...


class FlushClock:
    """Coalesces deferred flushes of the views of one app into shared ticks."""

    MAX_PERIOD = 0.25  # ticks at least this often, however long they take
    SHARE = 4          # a tick's flushing takes at most about 1/SHARE of the period

    def __init__(self, app: App, interval: float) -> None:
        self._app = app
        self._interval = interval
        self._slack = interval / 2  # a view due this much later flushes with the others
        self._due: dict[_Flushable, float] = {}
        self._timer: Timer | None = None
        self._timer_at = 0.0
        self._last_tick = -1e9  # ticks keep to a cadence of `_period` from this one
        self._period = interval
        self._spent = 0.0       # time a tick's flushes take (moving average)

    @classmethod
    def of(cls, app: App, interval: float) -> FlushClock:
        """The app's clock, made on first use. Kept on the app, so that it
        goes with it: in a table keyed weakly by the app (as it was), the
        clock's hold on its app kept every app that had streamed alive."""
        clock = getattr(app, _ON_APP, None)
        if not isinstance(clock, FlushClock):
            clock = cls(app, interval)
            setattr(app, _ON_APP, clock)
        return clock

    def request(self, view: _Flushable, at: float) -> Timer:
        """Flush `view` at `at` (perf_counter time) or up to half an interval sooner.

        Returns the timer the flush waits on (shared: never stop it)."""
        self._due[view] = at
        tick = self._next_tick(at)
        if self._timer is None or tick < self._timer_at - self._slack:
            self._arm(tick)
        assert self._timer is not None
        return self._timer

    def _next_tick(self, at: float) -> float:
        """On the cadence: the first tick after the last one that is at most
        half an interval before `at` (views that flushed later in the last
        tick, or less often, still flush on a tick)."""
        ticks = max(1, ceil((at - self._slack - self._last_tick) / self._period))
        tick = self._last_tick + ticks * self._period
        if tick < at - self._slack:  # long idle: no cadence to keep
            tick = at
        return tick

    def cancel(self, view: _Flushable) -> None:
        """The view flushed by itself: drop its request."""
        self._due.pop(view, None)

    def _arm(self, at: float) -> None:
        if self._timer is not None:
            self._timer.stop()
        self._timer_at = at
        # (a Textual timer of 0 s divides by zero)
        self._timer = self._app.set_timer(max(0.001, at - time.perf_counter()), self._tick,
                                          name="stream-flush")

    def _tick(self) -> None:
        self._timer = None
        now = time.perf_counter()
        # Keep the cadence through a late tick (a busy loop), not through a lost one.
        self._last_tick = self._timer_at if now - self._timer_at < self._slack else now
        if not self._due:
            return
        horizon = now + self._slack
        ready = [view for view, at in self._due.items() if at <= horizon]
        for view in ready:
            self._due.pop(view, None)
        for view in ready:
            view._flush()
        spent = time.perf_counter() - now
        self._spent += (spent - self._spent) / 5
        self._period = min(self.MAX_PERIOD, max(self._interval, self.SHARE * self._spent))
        if self._due:
            self._arm(self._next_tick(min(self._due.values())))
