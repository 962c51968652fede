"""`AsyncStore`: the Store on its own writer thread, so a slow disk never
freezes the event loop (the TUI's or the runner's).

The Store methods the app calls from the event loop are `async` methods of
the same name, declared below (each a one-line hand-off to the writer thread;
anything else goes through `call`). Calls run in the order they were made,
one at a time, on the one thread that owns the connection.
`checkpoint_output` is coalesced: while a checkpoint for an output waits in
the queue, newer ones replace its arguments (latest wins). A caller that is
cancelled while waiting does not cancel the write: what was handed over is
still saved."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import anyio
import anyio.lowlevel

from store.db import Store, StoreError
from store.records import (
    BlindGuessRecord,
    CheckResultRecord,
    GoldCheckRecord,
    LoadedSession,
    OutputRecord,
    RevealRecord,
    SessionRecord,
    SessionSummary,
    ScoreRecord,
    TagRecord,
    TurnRecord,
    VoteRecord,
)

T = TypeVar("T")


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
                args = (job, *pending.args)
                self._execute(lambda: self._require().checkpoint_output(*args), pending.waiters)  # noqa: B023
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

    async def read(self, fn: Callable[[Store], T]) -> T:
        """Run `fn(store)` off the writer thread: in a worker thread, on a
        read-only connection of its own (WAL: it reads the last committed
        state and never waits for the writer), so a long read (the report's
        bootstrap) does not hold up the writes queued behind it. `fn` must only
        read. An in-memory database has no second connection: there, and if
        the file cannot be opened again, on the writer thread (`call`)."""
        path = self._require().path
        if str(path) == ":memory:":
            return await self.call(fn)

        def job() -> tuple[bool, Any]:
            try:
                reader = Store.open(path, readonly=True)
            except StoreError:
                return False, None
            with reader:
                return True, fn(reader)

        opened, result = await anyio.to_thread.run_sync(job)
        return result if opened else await self.call(fn)

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

    # ------------------------------------------------------------------ the Store's methods, on the writer thread
    # Each is `Store.<name>` (see its docstring there), awaited here.

    async def create_session(self, rec: SessionRecord) -> None:
        return await self.call(lambda s: s.create_session(rec))

    async def reveal_session(self, session_id: str, at: float | None = None) -> None:
        return await self.call(lambda s: s.reveal_session(session_id, at))

    async def add_turn(self, rec: TurnRecord, images: Sequence[tuple[str, str, bytes]] = ()) -> None:
        return await self.call(lambda s: s.add_turn(rec, images))

    async def start_output(self, rec: OutputRecord) -> None:
        return await self.call(lambda s: s.start_output(rec))

    async def finish_output(self, rec: OutputRecord) -> None:
        return await self.call(lambda s: s.finish_output(rec))

    async def add_vote(self, rec: VoteRecord) -> None:
        return await self.call(lambda s: s.add_vote(rec))

    async def retract_vote(self, vote_id: str, at: float | None = None) -> bool:
        return await self.call(lambda s: s.retract_vote(vote_id, at))

    async def reveal_votes(self, vote_ids: list[str], at: float | None = None) -> int:
        return await self.call(lambda s: s.reveal_votes(vote_ids, at))

    async def add_reveal(self, rec: RevealRecord) -> None:
        return await self.call(lambda s: s.add_reveal(rec))

    async def add_gold_check(self, rec: GoldCheckRecord) -> None:
        return await self.call(lambda s: s.add_gold_check(rec))

    async def retract_gold_check(self, check_id: str, at: float | None = None) -> bool:
        return await self.call(lambda s: s.retract_gold_check(check_id, at))

    async def add_blind_guess(self, rec: BlindGuessRecord) -> None:
        return await self.call(lambda s: s.add_blind_guess(rec))

    async def add_score(self, rec: ScoreRecord) -> None:
        return await self.call(lambda s: s.add_score(rec))

    async def add_tag(self, rec: TagRecord) -> None:
        return await self.call(lambda s: s.add_tag(rec))

    async def remove_tag(self, tag_id: str, at: float | None = None) -> bool:
        return await self.call(lambda s: s.remove_tag(tag_id, at))

    async def add_check_result(self, rec: CheckResultRecord) -> None:
        return await self.call(lambda s: s.add_check_result(rec))

    async def list_sessions(self, limit: int | None = None, kind: str | None = None,
                            search: str | None = None) -> list[SessionSummary]:
        return await self.call(lambda s: s.list_sessions(limit, kind, search))

    async def load_session(self, session_id: str) -> LoadedSession:
        return await self.call(lambda s: s.load_session(session_id))

    async def open_run_session(self, rec: SessionRecord, key: str,
                               differences: Callable[[SessionRecord], list[str]]
                               ) -> tuple[SessionRecord, bool, tuple[str, list[str]] | None]:
        return await self.call(lambda s: s.open_run_session(rec, key, differences))

    async def claim_unit(self, session_id: str, unit: str, owner: str) -> str:
        return await self.call(lambda s: s.claim_unit(session_id, unit, owner))

    async def finish_claim(self, session_id: str, unit: str, owner: str, done: bool) -> None:
        return await self.call(lambda s: s.finish_claim(session_id, unit, owner, done))

    async def release_claims(self, session_id: str, owner: str) -> None:
        return await self.call(lambda s: s.release_claims(session_id, owner))

    async def run_unit(self, session_id: str, case_id: str, repeat_index: int, contestant: str
                       ) -> tuple[list[TurnRecord], list[OutputRecord], list[CheckResultRecord]]:
        return await self.call(lambda s: s.run_unit(session_id, case_id, repeat_index, contestant))

    async def ensure_turn(self, rec: TurnRecord) -> TurnRecord:
        return await self.call(lambda s: s.ensure_turn(rec))

    async def get_session(self, session_id: str) -> SessionRecord:
        return await self.call(lambda s: s.get_session(session_id))

    async def images(self, hashes: Sequence[str]) -> dict[str, tuple[str, bytes]]:
        return await self.call(lambda s: s.images(hashes))

    async def rename_session(self, session_id: str, title: str | None) -> SessionRecord:
        return await self.call(lambda s: s.rename_session(session_id, title))

    async def delete_session(self, session_id: str, at: float | None = None) -> SessionRecord:
        return await self.call(lambda s: s.delete_session(session_id, at))

    async def deleted_sessions(self) -> dict[str, float]:
        return await self.call(lambda s: s.deleted_sessions())

    async def prompt_history(self, limit: int = 500, session_id: str | None = None) -> list[str]:
        return await self.call(lambda s: s.prompt_history(limit, session_id))

    # ------------------------------------------------------------------ closing

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
