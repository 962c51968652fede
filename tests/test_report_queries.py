"""The store's reads for the report (`store.report_queries`) and reading off
the writer thread: the quick read of the answers gives exactly what the plain
read gives, values it does not take send it to the plain read, out-of-range
numbers are counted whatever their type, and `AsyncStore.read` answers while
the writer thread is busy."""

from __future__ import annotations

import random
import threading

import anyio
import numpy as np
import pytest

from store import AsyncStore, ContestantRecord, OutputRecord, SessionRecord, Store, TurnRecord
from store import report_queries as Q

T0 = 1.75e9


def _store_with_answers(path, seed: int = 0, n_turns: int = 60) -> Store:
    rng = random.Random(seed)
    store = Store.open(path)
    aliases = ["m-a", "m-b", "m-c"]
    s = SessionRecord(created=T0, contestants=[ContestantRecord(alias=a, provider="openai", model=a, label="ABC"[i],
                                                                position=i) for i, a in enumerate(aliases)])
    store.create_session(s)
    with store.batch():
        for p in range(n_turns):
            t = TurnRecord(session_id=s.id, position=p, user_message=f"q{p}", created=T0 + p)
            store.add_turn(t)
            for k, a in enumerate(aliases):
                for attempt in (1, 2) if rng.random() < 0.2 else (1,):
                    ttft = rng.choice([None, rng.uniform(10, 900)])
                    store.finish_output(OutputRecord(
                        session_id=s.id, turn_id=t.id, contestant=a, label="ABC"[k], attempt=attempt,
                        status=rng.choice(["complete", "complete", "error", "cancelled", "interrupted"]),
                        ttft_ms=ttft, duration_ms=None if ttft is None else ttft + rng.uniform(0, 5000),
                        input_tokens=rng.choice([None, rng.randint(0, 900)]),
                        output_tokens=rng.choice([None, 0, rng.randint(1, 3000)]),
                        tokens_estimated=rng.random() < 0.3, cost=rng.uniform(0, 0.02),
                        created=T0 + p + 0.01 * k + 0.001 * attempt))
    return store


def _per_model(cols: Q.OutputColumns) -> dict:
    """Each model's values in creation order, whichever order the rows were read in."""
    return {name: {f: getattr(cols, f)[idx].tolist()
                   for f in ("status", "estimated", "input_tokens", "output_tokens", "ttft", "duration", "cost")}
            for name, idx in cols.models}


def _same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for name in a:
        for f, values in a[name].items():
            np.testing.assert_array_equal(np.array(values, dtype=float), np.array(b[name][f], dtype=float),
                                          err_msg=f"{name}.{f}")


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_quick_read_of_the_answers_is_the_plain_read(tmp_path, seed):
    with _store_with_answers(tmp_path / "a.db", seed) as store:
        for scope in (Q.Scope(), Q.Scope(since=T0 + 20), Q.Scope(include_demo=True)):
            quick, plain = Q.read_outputs(store, scope), Q.read_outputs(store, scope, plain=True)
            assert quick.raw is None and plain.raw is not None      # the quick read took these values
            _same(_per_model(quick), _per_model(plain))
            assert quick.answers == plain.answers and quick.stale == plain.stale and quick.kinds == plain.kinds
            assert sum(quick.answers.values()) == (60 - (20 if scope.since else 0)) * 3


@pytest.mark.parametrize("column, value", [
    ("ttft_ms", "fast"),                 # text where a number belongs
    ("duration_ms", -3.0),               # out of range: read as not recorded
    ("output_tokens", 2 ** 31),          # too large for the quick read
    ("input_tokens", 1.5),               # not a whole number
    ("cost", None),                      # not recorded: the prices decide
    ("tokens_estimated", "yes"),
])
def test_a_value_the_quick_read_does_not_take_gives_the_plain_read(tmp_path, column, value):
    with _store_with_answers(tmp_path / "a.db", 3, n_turns=20) as store:
        victim = store.conn.execute("SELECT id FROM output WHERE status = 'complete' ORDER BY id LIMIT 1").fetchone()[0]
        store.conn.execute(f"UPDATE output SET {column} = ? WHERE id = ?", [value, victim])
        got = Q.read_outputs(store, Q.Scope())
        plain = Q.read_outputs(store, Q.Scope(), plain=True)
        if column == "duration_ms":      # the quick read takes it (as not recorded), like the plain one
            assert got.raw is None
        else:
            assert got.raw is not None
        _same(_per_model(got), _per_model(plain))


def test_answers_without_a_recorded_cost_stay_in_the_quick_read_and_are_priced_as_the_plain_one_does(tmp_path):
    # an uncosted answer (a local server, an old record) used to send the whole read to the plain
    # one: the 200k answers were read twice
    from core.report.figures import engineering

    with _store_with_answers(tmp_path / "a.db", 5) as store:
        store.conn.execute("UPDATE output SET cost = NULL WHERE rowid % 3 = 0")
        store.conn.execute("UPDATE output SET cost = 7.5e12 WHERE rowid % 7 = 0")   # out of range: priced too
        quick, plain = Q.read_outputs(store, Q.Scope()), Q.read_outputs(store, Q.Scope(), plain=True)
        assert quick.raw is not None
        _same(_per_model(quick), _per_model(plain))
        prices = {"m-a": {"input_per_mtok": 1.0, "output_per_mtok": 2.0}, "m-b": {"input_per_mtok": 3.0}}
        by_quick, by_plain = (engineering(cols, dict, prices) for cols in (quick, plain))
        assert by_quick == by_plain
        known = {e.model: e.cost_known for e in by_quick}
        assert known["m-a"] > known["m-c"] and known["m-b"] > known["m-c"]    # priced from the config


def test_out_of_range_counts_every_kind_of_bad_number(tmp_path):
    """Text, a blob, an infinity, a negative and a too-large number all count;
    NULLs and numbers in range do not."""
    with _store_with_answers(tmp_path / "a.db", 4, n_turns=10) as store:
        assert store.out_of_range(tables=("output",)) == (0, [])
        ids = [r[0] for r in store.conn.execute("SELECT id FROM output ORDER BY id LIMIT 7")]
        for oid, (column, value) in zip(ids, [("ttft_ms", "slow"), ("duration_ms", b"\x00\x01"),
                                              ("cost", float("inf")), ("input_tokens", -1),
                                              ("output_tokens", 10 ** 13), ("ttft_ms", None), ("cost", 0.0)], strict=True):
            store.conn.execute(f"UPDATE output SET {column} = ? WHERE id = ?", [value, oid])
        n, named = store.out_of_range(tables=("output",), limit=10)
        assert n == 5 and named == [f"output {oid}" for oid in ids[:5]]


def test_async_store_reads_while_the_writer_thread_is_busy(tmp_path):
    """A long read (the report) must not wait for the writer, nor the writes for it."""
    path = tmp_path / "a.db"
    _store_with_answers(path, 6, n_turns=5).close()
    release = threading.Event()

    async def main() -> None:
        store = await AsyncStore.open(path)
        async with anyio.create_task_group() as tg:
            tg.start_soon(store.call, lambda s: release.wait(30))     # the writer thread is held
            await anyio.sleep(0.05)
            with anyio.fail_after(10):
                sessions = await store.read(Q.session_count)
            assert sessions == 1 and not release.is_set()
            release.set()
        await store.aclose()

    anyio.run(main)


def test_async_store_read_of_an_in_memory_database_uses_the_writer(tmp_path):
    async def main() -> None:
        store = await AsyncStore.open(":memory:")
        assert await store.read(lambda s: threading.current_thread().name) == "lineup-store-writer"
        await store.aclose()

    anyio.run(main)
