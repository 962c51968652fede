"""What every provider is: something that turns a `ChatRequest` into a
cancellable `ChatStream` of typed events (see `providers.events`)."""

from __future__ import annotations

import asyncio
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator

import anyio

from providers.events import ChatRequest, ErrorKind, Finish, StreamError, StreamEvent

#: The event classes that end a stream (exactly one per stream).
TERMINAL = (Finish, StreamError)


class ChatStream:
    """Async iterator over one response's events, cancellable from any task.

    `cancel()` cancels only the step in flight (never a scope held across a
    yield), which makes httpx close the connection at once; the stream then
    ends with `StreamError(cancelled)`.
    Exactly one terminal event (`finish` or `error`) ends every stream.
    """

    def __init__(self, events: AsyncIterator[StreamEvent]) -> None:
        self._events = events
        self._scope: anyio.CancelScope | None = None
        self._task: asyncio.Task | None = None
        self._cancel_requested = False
        self._done = False

    def cancel(self) -> None:
        self._cancel_requested = True
        if self._scope is not None:
            self._scope.cancel()
        elif self._task is not None:
            self._task.cancel()

    @property
    def cancelled(self) -> bool:
        return self._cancel_requested

    def __aiter__(self) -> "ChatStream":
        return self

    async def __anext__(self) -> StreamEvent:
        if self._done:
            raise StopAsyncIteration
        if self._cancel_requested:
            return await self._finish_cancelled()
        task = _current_asyncio_task()
        event = await (self._step_asyncio(task) if task is not None else self._step_anyio())
        if self._cancel_requested and (event is None or not isinstance(event, TERMINAL)):
            return await self._finish_cancelled()
        if event is None:
            # A provider generator that ended without a terminal event is a bug
            # in that provider; report it rather than hang or pretend success.
            self._done = True
            return StreamError(kind=ErrorKind.truncated, message="stream ended without a terminal event",
                               t=time.perf_counter())
        if isinstance(event, TERMINAL):
            self._done = True
            await self.aclose()
        return event

    async def _step_asyncio(self, task: "asyncio.Task") -> StreamEvent | None:
        """One step on asyncio, cancellable through the task itself: about a
        third of the cost of a cancel scope, on the hot path of every delta.
        A cancellation that was not ours (the app's) is re-raised untouched,
        as `asyncio.timeout` does it."""
        self._task = task
        try:
            return await self._events.__anext__()
        except StopAsyncIteration:
            return None
        except asyncio.CancelledError:
            if not self._cancel_requested or task.uncancel() > 0:
                raise
            return None
        finally:
            self._task = None

    async def _step_anyio(self) -> StreamEvent | None:
        with anyio.CancelScope() as scope:
            self._scope = scope
            try:
                return await self._events.__anext__()
            except StopAsyncIteration:
                return None
            finally:
                self._scope = None
        return None  # our own scope was cancelled

    async def _finish_cancelled(self) -> StreamError:
        await self.aclose()
        return StreamError(kind=ErrorKind.cancelled, message="cancelled", t=time.perf_counter())

    async def aclose(self) -> None:
        self._done = True
        with anyio.CancelScope(shield=True):
            aclose = getattr(self._events, "aclose", None)
            if aclose is not None:
                await aclose()


def _current_asyncio_task() -> "asyncio.Task | None":
    """The running asyncio task, or None under another event loop (trio)."""
    try:
        return asyncio.current_task()
    except RuntimeError:
        return None


class Provider(ABC):
    """One configured model behind one wire protocol."""

    #: True when the provider's answers are synthetic (demo): they are marked
    #: in every record and left out of ratings unless asked for.
    is_demo: bool = False
    #: Whether user messages may carry images for this provider (`providers.accepts_images`).
    accepts_images: bool = True

    def stream(self, request: ChatRequest) -> ChatStream:
        return ChatStream(self.events(request))

    @abstractmethod
    def events(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        """The raw event generator: `RequestSent` first, one terminal event last."""

    async def aclose(self) -> None:  # noqa: B027  (optional hook: most providers hold nothing)
        """Release connections (httpx client) held by this provider."""
