"""Long-line benchmark: one SSE `data:` line (and one NDJSON line, one Gemini
array element) of many megabytes, arriving in 64 KiB network reads, as a
hostile or broken server can send it.

Baseline, in the same run: the SSE line assembly lineup used before (the
buffer re-joined with each chunk and re-scanned for line ends: quadratic in
the line's length), reimplemented below. Figures: median wall time of the
repeats per size, and the ratio. The old algorithm is run only at sizes that
keep it under about a minute.

Prints figures only; no assertions. `python benchmarks/bench_lines.py [--quick]`
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from providers.sse import JSONArrayDecoder, NDJSONDecoder, SSEDecoder  # noqa: E402

CHUNK = 64 * 1024
MB = 1_000_000


class OldSSELines:
    """The previous `SSEDecoder.feed` line assembly (kept here as the baseline):
    `buf = self._buf + chunk`, CR folding and `rfind` over the whole buffer."""

    def __init__(self) -> None:
        self._buf = b""
        self._skip_lf = False

    def feed(self, chunk: bytes) -> list[str]:
        if self._skip_lf:
            self._skip_lf = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        buf = self._buf + chunk if self._buf else chunk
        if b"\r" in buf:
            if buf[-1:] == b"\r":
                self._skip_lf = True
            buf = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        cut = buf.rfind(b"\n")
        if cut < 0:
            self._buf = buf
            return []
        self._buf = buf[cut + 1:]
        return buf[:cut].decode("utf-8").split("\n")


def sse_body(size: int) -> bytes:
    text = ("lorem ipsum dolor sit amet " * (size // 27 + 1))[:size]
    return b"data: " + json.dumps({"choices": [{"delta": {"content": text}}]}).encode() + b"\n\n"


def chunks(body: bytes) -> list[bytes]:
    return [body[i:i + CHUNK] for i in range(0, len(body), CHUNK)]


def time_feed(make, pieces: list[bytes]) -> float:
    dec = make()
    start = time.perf_counter()
    n = 0
    for p in pieces:
        n += len(dec.feed(p))
    elapsed = time.perf_counter() - start
    assert n, "the line was never completed"
    return elapsed


def median_of(make, pieces: list[bytes], repeats: int) -> float:
    return statistics.median(time_feed(make, pieces) for _ in range(repeats))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes, fewer repeats")
    ap.add_argument("--smoke", action="store_true", help="smallest sizes, one repeat: that it still runs (tests/test_benchmarks.py)")
    args = ap.parse_args()
    repeats = 1 if args.smoke else 3
    both = [MB // 4, MB // 2] if args.smoke else [2 * MB, 10 * MB] if args.quick else [10 * MB, 30 * MB, 60 * MB]
    new_only = [] if args.quick or args.smoke else [100 * MB]
    print(f"one SSE line in {CHUNK // 1024} KiB reads; median of {repeats} runs")
    print(f"{'size':>8} {'old (s)':>10} {'new (s)':>10} {'old/new':>9}")
    for size in both + new_only:
        pieces = chunks(sse_body(size))
        new = median_of(SSEDecoder, pieces, repeats)
        if size in both:
            old = median_of(OldSSELines, pieces, repeats)
            print(f"{size // MB:>6}MB {old:>10.3f} {new:>10.3f} {old / new:>8.0f}x", flush=True)
        else:
            print(f"{size // MB:>6}MB {'(skipped)':>10} {new:>10.3f}", flush=True)
    size = both[-1]
    nd = chunks(json.dumps({"message": {"content": "x" * size}}).encode() + b"\n")
    arr = chunks(b"[" + json.dumps({"candidates": [{"content": {"parts": [{"text": "x" * size}]}}]}).encode() + b"]")
    print(f"new, {size // MB} MB: NDJSON line {median_of(NDJSONDecoder, nd, repeats):.3f} s, "
          f"Gemini array element {median_of(JSONArrayDecoder, arr, repeats):.3f} s")


if __name__ == "__main__":
    main()
