"""Per-request overhead of lineup's provider path against a bare httpx
client (issue 32, items 1 and 5), on the same loopback server.

The server (`tests/server.py`) runs in its own process, so its CPU is not
the client's, and counts the TCP connections it accepts (`GET /_stats`).
Each measured run is a fresh child process that sends N small streamed
chat requests (an OpenAI-compatible stream of ~8 deltas) at C in flight:

- lineup: one provider from `make_provider` (its pooled httpx client), each
  answer read through `provider.stream` into a `StreamResult`, as a run does;
- bare: one `httpx.AsyncClient` with the same pool size, the same request
  (built by the provider), the body read by `aiter_lines` and each data line
  parsed by `json.loads` (what any client that reads the JSON pays).

Printed per concurrency: wall time, process CPU (and per request), peak
resident memory and the server's connection count for both, as medians of
`--repeats` runs (alternating which goes first), and lineup / bare. Goal
(issue 32): lineup's CPU per request <= 1.2x the bare client's; connections
no more than the requests in flight. Prints figures only; no assertions.

    .venv/bin/python benchmarks/bench_http.py [--requests 2000] [--concurrency 1,16,64] [--repeats 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

REPLY = {"text": "Hello from the loopback server, a short answer.", "chunk_chars": 6}
CPU_GOAL = 1.2


# --- the child: one measured run --------------------------------------------------------

def _config(url: str, concurrency: int):
    from providers.model_config import ModelConfig

    return ModelConfig(alias="bench", provider="openai", model="bench", base_url=url + "/v1", max_retries=0,
                       concurrency=concurrency)


def _request():
    from providers.events import ChatRequest, Message

    return ChatRequest(model="bench", messages=(Message(role="user", content="go"),))


async def _lineup(url: str, n: int, concurrency: int) -> int:
    from providers import make_provider
    from providers.events import StreamResult

    provider = make_provider(_config(url, concurrency))
    request = _request()
    left, chars = n, 0

    async def worker() -> None:
        nonlocal left, chars
        while left > 0:
            left -= 1
            result = StreamResult()
            async for ev in provider.stream(request):
                result.add(ev)
            if result.error is not None:
                raise SystemExit(f"lineup: {result.error.message}")
            chars += len(result.text)

    try:
        await asyncio.gather(*(worker() for _ in range(concurrency)))
    finally:
        await provider.aclose()
    return chars


async def _bare(url: str, n: int, concurrency: int) -> int:
    import httpx

    from providers import make_provider

    target, _, body = make_provider(_config(url, concurrency)).build(_request(), None)
    content = json.dumps(body).encode()
    left, chars = n, 0
    loads = json.loads
    async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=max(8, 2 * concurrency),
                                                                 max_keepalive_connections=concurrency)) as client:
        async def worker() -> None:
            nonlocal left, chars
            while left > 0:
                left -= 1
                async with client.stream("POST", target, content=content,
                                         headers={"content-type": "application/json"}) as r:
                    async for line in r.aiter_lines():
                        if line.startswith("data: ") and line != "data: [DONE]":
                            for choice in loads(line[6:]).get("choices") or ():
                                chars += len((choice.get("delta") or {}).get("content") or "")

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return chars


def child(path: str, url: str, n: int, concurrency: int) -> None:
    import httpx  # noqa: F401  (imports are not the run: loaded before the clocks start)

    import providers.openai  # noqa: F401
    from providers import make_provider  # noqa: F401
    from providers.events import StreamResult  # noqa: F401

    run = _lineup if path == "lineup" else _bare
    wall, cpu = time.perf_counter(), time.process_time()
    chars = asyncio.run(run(url, n, concurrency))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    if chars != n * len(REPLY["text"]):
        raise SystemExit(f"{path}: {chars} characters for {n} answers")
    print(json.dumps({"wall": wall, "cpu": cpu, "rss_mb": peak_kb() / 1024}))


def peak_kb() -> int:
    """This process's peak resident size: VmHWM (its own; `ru_maxrss` also
    counts what the parent held when it forked), else `ru_maxrss`."""
    try:
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


# --- the parent ---------------------------------------------------------------------------

def stats(url: str) -> dict:
    import httpx

    return httpx.get(url + "/_stats", timeout=10).json()


def measured(path: str, url: str, n: int, concurrency: int) -> dict:
    before = stats(url)["connections"]
    done = subprocess.run([sys.executable, __file__, "--child", path, "--url", url, "--requests", str(n),
                           "--concurrency", str(concurrency)], capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"{path} run failed:\n{done.stderr[-2000:]}")
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    figures["connections"] = stats(url)["connections"] - before - 1    # less the stats request's own
    return figures


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--concurrency", default="1,16,64", help="requests in flight, comma-separated")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--smoke", action="store_true", help="smallest sizes, one repeat (tests/test_benchmarks.py)")
    ap.add_argument("--child", choices=("lineup", "bare"), help=argparse.SUPPRESS)
    ap.add_argument("--url", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args.child, args.url, args.requests, int(args.concurrency))
    n = 40 if args.smoke else args.requests
    repeats = 1 if args.smoke else args.repeats
    levels = [int(x) for x in args.concurrency.split(",")]

    server = subprocess.Popen([sys.executable, str(ROOT / "tests" / "server.py"), "--reply", json.dumps(REPLY)],
                              stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None
    url = server.stdout.readline().strip()
    if not url.startswith("http://127.0.0.1:"):
        server.kill()
        raise SystemExit(f"test server did not start: {url!r}")
    print(f"bench_http: {n} streamed requests per run, loopback server in its own process, "
          f"medians of {repeats} run(s) each in a fresh process")
    try:
        for c in levels:
            runs: dict[str, list[dict]] = {"lineup": [], "bare": []}
            for i in range(repeats):
                for path in (("lineup", "bare") if i % 2 == 0 else ("bare", "lineup")):
                    runs[path].append(measured(path, url, n, c))
            med = {p: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for p, rs in runs.items()}
            print(f"\n{c} in flight")
            print(f"   {'client':<7} {'wall':>8} {'req/s':>7} {'CPU':>8} {'CPU/req':>9} {'peak RSS':>9} {'connections':>12}")
            for p in ("lineup", "bare"):
                m = med[p]
                print(f"   {p:<7} {m['wall']:>6.2f} s {n / m['wall']:>7.0f} {m['cpu']:>6.2f} s "
                      f"{m['cpu'] / n * 1e3:>6.3f} ms {m['rss_mb']:>6.1f} MB {m['connections']:>12.0f}")
            lo, ba = med["lineup"], med["bare"]
            print(f"   lineup/bare: wall {lo['wall'] / ba['wall']:.2f}x, CPU {lo['cpu'] / ba['cpu']:.2f}x "
                  f"(goal <= {CPU_GOAL}x: {'met' if lo['cpu'] / ba['cpu'] <= CPU_GOAL else 'not met'}), "
                  f"peak memory {lo['rss_mb'] / ba['rss_mb']:.2f}x, connections {lo['connections']:.0f} "
                  f"for {n} requests (bare {ba['connections']:.0f})")
    finally:
        server.kill()
        server.wait()


if __name__ == "__main__":
    main()
