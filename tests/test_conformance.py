"""Replays the recorded wire corpus (../shared/conformance/wire, third-party
data kept outside the repository) through the loopback server and the real
clients, whole and re-chunked at random byte boundaries, and compares what the
client reports with each case's `expected`."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conformance_support import CASES, CORPUS, check, load, replay
from tests.server import TestServer

pytestmark = pytest.mark.skipif(
    not CASES, reason=f"conformance corpus not found at {CORPUS} (third-party data kept outside the repo)")


@pytest.fixture(scope="module")
def server():
    with TestServer() as srv:
        yield srv


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_case_whole_body(server: TestServer, path: Path) -> None:
    case = load(path)
    result, events = anyio.run(replay, server, case, None)
    check(case, result, events, server)


@pytest.mark.slow
@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_case_rechunked(server: TestServer, path: Path) -> None:
    case = load(path)
    size = len(case["response"]["body"].encode("utf-8"))

    @settings(max_examples=8, deadline=None, derandomize=False,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(st.lists(st.integers(min_value=1, max_value=max(1, size - 1)), min_size=1, max_size=60))
    def rechunked(cuts: list[int]) -> None:
        result, events = anyio.run(replay, server, case, cuts)
        check(case, result, events, server)

    rechunked()


def test_corpus_is_complete() -> None:
    # docs/contributing.md promises 66 cases; a partial copy would silently test less.
    assert len(CASES) == 66
