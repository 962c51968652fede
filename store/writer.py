"""`AsyncStore`: the Store on its own writer thread, so a slow disk never
freezes the event loop (the TUI's or the runner's).

Every Store method is an `async` method of the same name; calls run in the
order they were made, one at a time, on the one thread that owns the
connection. `checkpoint_output` is coalesced: while a checkpoint for an output
waits in the queue, newer ones replace its arguments (latest wins). A caller
that is cancelled while waiting does not cancel the write: what was handed
over is still saved."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import anyio.lowlevel

from store.db import Store, StoreError

T = TypeVar("T")

# Store methods exposed as `await astore.<name>(...)`.
_METHODS = (
    "create_session", "update_session", "reveal_session", "add_turn", "start_output", "finish_output",
    "add_vote", "retract_vote", "reveal_votes", "add_reveal", "add_tag", "remove_tag", "add_check_result", "list_sessions", "load_session", "get_session",
    "resolve_session", "latest_session_id", "search", "votes_per_model", "query", "counts",
    "open_run_session", "claim_unit", "finish_claim", "release_claims", "run_unit", "ensure_turn",
    "images", "rename_session", "delete_session", "deleted_sessions", "prompt_history",
)


class _Waiter:
    """Completion of one job, signalled to the event loop without blocking the writer."""

    __slots__ = ("event", "token", "result", "error")

    def __init__(self) -> None:
        self.event = anyio.Event()
        self.token = anyio.lowlevel.current_token()
        self.result: Any = None
        self.error: BaseException | None = None

    def resolve(self, result: Any = None, error: BaseException | None = None) -> None:
        self.result, self.error = result, error
        try:
            self.token.backend_class.run_sync_soon(self.event.set, (), self.token.native_token)
        except Exception:  # the event loop is gone: nobody is waiting any more
            pass

    async def wait(self) -> Any:
        await self.event.wait()
        if self.error is not None:
            raise self.error
        return self.result


class _PendingCheckpoint:
    __slots__ = ("args", "waiters")

    def __init__(self, args: tuple, waiter: _Waiter):
        self.args = args
        self.waiters = [waiter]


class AsyncStore:
    """`AsyncStore(store)` or `await AsyncStore.open(path, ...)`; `await aclose()` when done."""

    def __init__(self, store: Store | None = None):
        self.store = store
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._checkpoints: dict[str, _PendingCheckpoint] = {}
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="lineup-store-writer", daemon=True)
        self._thread.start()

    @classmethod
    async def open(cls, path: Any = None, **kwargs: Any) -> "AsyncStore":
        """Open (and migrate) on the writer thread."""
        self = cls()
        try:
            self.store = await self._submit(lambda: Store.open(path, **kwargs))
        except BaseException:
            self._queue.put(None)
            raise
        return self

    async def __aenter__(self) -> "AsyncStore":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # ------------------------------------------------------------------ the writer thread

    def _run(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                return
            if isinstance(job, str):  # a coalesced checkpoint: take the latest arguments
                with self._lock:
                    pending = self._checkpoints.pop(job)
                self._execute(lambda: self._require().checkpoint_output(job, *pending.args), pending.waiters)
            else:
                fn, waiter = job
                self._execute(fn, [waiter])

    @staticmethod
    def _execute(fn: Callable[[], Any], waiters: list[_Waiter]) -> None:
        try:
            result, error = fn(), None
        except BaseException as exc:  # handed to the caller, never lost in the thread
            result, error = None, exc
        for w in waiters:
            w.resolve(result, error)

    def _require(self) -> Store:
        if self.store is None:
            raise StoreError("the store is not open")
        return self.store

    async def _submit(self, fn: Callable[[], T]) -> T:
        if self._closed:
            raise StoreError("the store is closed")
        waiter = _Waiter()
        self._queue.put((fn, waiter))
        return await waiter.wait()

    # ------------------------------------------------------------------ API

    async def call(self, fn: Callable[[Store], T]) -> T:
        """Run `fn(store)` on the writer thread (e.g. several writes in `store.batch()`)."""
        return await self._submit(lambda: fn(self._require()))

    async def checkpoint_output(self, output_id: str, text: str, reasoning: str | None = None,
                                chunk_ms: list[int] | None = None, chunk_chars: list[int] | None = None) -> None:
        if self._closed:
            raise StoreError("the store is closed")
        # copies: the caller keeps appending to its lists while this waits
        args = (text, reasoning, list(chunk_ms or ()), list(chunk_chars or ()))
        waiter = _Waiter()
        with self._lock:
            pending = self._checkpoints.get(output_id)
            if pending is not None:
                pending.args = args
                pending.waiters.append(waiter)
            else:
                self._checkpoints[output_id] = _PendingCheckpoint(args, waiter)
                self._queue.put(output_id)
        return await waiter.wait()

    async def aclose(self) -> None:
        """Finish every queued write, close the database, stop the thread."""
        if self._closed:
            return
        try:
            await self._submit(lambda: self.store.close() if self.store is not None else None)
        finally:
            self._closed = True
            self._queue.put(None)
            await anyio.to_thread.run_sync(self._thread.join)


def _make(name: str) -> Callable[..., Any]:
    async def method(self: AsyncStore, *args: Any, **kwargs: Any) -> Any:
        return await self._submit(lambda: getattr(self._require(), name)(*args, **kwargs))

    method.__name__ = name
    method.__qualname__ = f"AsyncStore.{name}"
    method.__doc__ = getattr(Store, name).__doc__
    return method


for _name in _METHODS:
    setattr(AsyncStore, _name, _make(_name))
del _name
