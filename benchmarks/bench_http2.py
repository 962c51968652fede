"""HTTP/2 against HTTP/1.1 over TLS, through httpx (issue 32, item 1:
"HTTP/2 where the server offers it, if it measures better").

The server (`tests/tls_server.py`, its own process) offers both in ALPN and
streams OpenAI chat completions. Each measured run is a fresh child process:

- throughput: N streamed requests (8 deltas each) at C in flight through a
  bare `httpx.AsyncClient`, once with HTTP/1.1 and once with `http2=True`
  (alternating which goes first), each line read by `aiter_lines`: wall,
  process CPU per request, the server's connection count;
- lineup: the same requests through lineup's provider (its pooled client,
  as a run makes them), which stays on HTTP/1.1;
- cancelled streams: long answers (about 300 KB each) cut after their first
  lines, one after another on one client, as a user stopping answers does;
  how many cuts the client takes before a request stalls (2 s), per version.

Medians of `--repeats` runs. Prints figures only; no assertions.

    .venv/bin/python benchmarks/bench_http2.py [--requests 1000] [--concurrency 1,16,64] [--repeats 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


class Server:
    """tests/tls_server.py in a child process, asked for its counters on stdin."""

    def __init__(self, deltas: int) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.tls_server", str(deltas)], cwd=ROOT,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        info = json.loads(self.proc.stdout.readline())   # type: ignore[union-attr]
        self.url, self.ca_file = info["url"], info["ca_file"]

    def ask(self, what: str) -> dict:
        self.proc.stdin.write(what + "\n")   # type: ignore[union-attr]
        self.proc.stdin.flush()              # type: ignore[union-attr]
        return json.loads(self.proc.stdout.readline())   # type: ignore[union-attr]

    def close(self) -> None:
        self.proc.stdin.close()              # type: ignore[union-attr]
        self.proc.wait(10)


def child(mode: str, url: str, n: int, c: int) -> dict:
    """One measured run in this (fresh) process (imports before the clock)."""
    import httpx

    from providers import make_provider
    from providers.events import ChatRequest, Message, StreamResult
    from providers.model_config import ModelConfig

    body = {"model": "test-model", "stream": True, "messages": [{"role": "user", "content": "hi"}]}

    async def bare(http2: bool) -> None:
        async with httpx.AsyncClient(http2=http2, limits=httpx.Limits(max_connections=c),
                                     timeout=30) as client:
            sem = asyncio.Semaphore(c)

            async def one() -> None:
                async with sem, client.stream("POST", url + "/v1/chat/completions", json=body) as r:
                    async for line in r.aiter_lines():
                        if line.startswith("data: {"):
                            json.loads(line[6:])

            await asyncio.gather(*(one() for _ in range(n)))

    async def lineup() -> None:
        provider = make_provider(ModelConfig(alias="t", provider="openai", model="test-model",
                                             base_url=url + "/v1", concurrency=c, max_retries=0))
        sem = asyncio.Semaphore(c)
        request = ChatRequest(model="test-model", messages=(Message(role="user", content="hi"),))

        async def one() -> None:
            async with sem:
                result = StreamResult()
                async for ev in provider.stream(request):
                    result.add(ev)
                assert result.error is None, result.error

        try:
            await asyncio.gather(*(one() for _ in range(n)))
        finally:
            await provider.aclose()

    async def cuts(http2: bool) -> int:
        """Long answers cut after two lines, one after another: how many cuts
        before a request stalls (n when none does)."""
        async with httpx.AsyncClient(http2=http2, timeout=2) as client:
            for k in range(n):
                try:
                    async with client.stream("POST", url + "/v1/chat/completions", json=body) as r:
                        lines = r.aiter_lines()
                        await anext(lines)
                        await anext(lines)
                except httpx.TimeoutException:
                    return k
            return n

    t0, cpu0 = time.perf_counter(), time.process_time()
    if mode == "lineup":
        asyncio.run(lineup())
        out: dict = {}
    elif mode.startswith("cut-"):
        out = {"cuts": asyncio.run(cuts(mode == "cut-h2"))}
    else:
        asyncio.run(bare(mode == "h2"))
        out = {}
    out.update(wall=time.perf_counter() - t0, cpu=time.process_time() - cpu0)
    return out


def run_child(srv: Server, mode: str, n: int, c: int) -> dict:
    srv.ask("reset")
    env = dict(os.environ, SSL_CERT_FILE=srv.ca_file)
    line = subprocess.run([sys.executable, __file__, "--child", mode, "--url", srv.url, "--requests", str(n),
                           "--concurrency", str(c)], cwd=ROOT, env=env, capture_output=True, text=True,
                          check=True).stdout.strip().splitlines()[-1]
    return json.loads(line) | srv.ask("stats")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--concurrency", default="1,16,64")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--cuts", type=int, default=200, help="long answers to cut, one after another")
    ap.add_argument("--smoke", action="store_true", help="smallest sizes, one repeat (tests/test_benchmarks.py)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--url", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.url, args.requests, int(args.concurrency))))
        return
    if args.smoke:
        args.requests, args.concurrency, args.repeats, args.cuts = 40, "4", 1, 3
    print(f"load average {os.getloadavg()[0]:.2f}; {args.requests} requests of 8 deltas, TLS on loopback; "
          f"medians of {args.repeats} runs")
    print(f"{'in flight':>9}  {'client':<12} {'wall s':>7} {'CPU ms/req':>10} {'connections':>11}  version")
    srv = Server(8)
    better: dict[int, bool] = {}
    try:
        for c in (int(x) for x in args.concurrency.split(",")):
            runs: dict[str, list[dict]] = {"h1": [], "h2": [], "lineup": []}
            for k in range(args.repeats):
                for mode in (("h1", "h2", "lineup") if k % 2 == 0 else ("h2", "h1", "lineup")):
                    runs[mode].append(run_child(srv, mode, args.requests, c))
            for mode, label in (("h1", "httpx HTTP/1.1"), ("h2", "httpx HTTP/2"), ("lineup", "lineup")):
                rs = runs[mode]
                wall = statistics.median(r["wall"] for r in rs)
                cpu = statistics.median(r["cpu"] for r in rs) / args.requests * 1000
                conns = statistics.median(r["connections"] for r in rs)
                print(f"{c:>9}  {label:<12} {wall:>7.2f} {cpu:>10.3f} {conns:>11.0f}  {sorted(rs[0]['versions'])}")
            h1 = statistics.median(r["cpu"] for r in runs["h1"])
            h2 = statistics.median(r["cpu"] for r in runs["h2"])
            mine = statistics.median(r["cpu"] for r in runs["lineup"])
            better[c] = h2 < mine
            print(f"{'':>9}  HTTP/2 / HTTP/1.1 CPU: {h2 / h1:.2f}x; HTTP/2 / lineup's CPU: {h2 / mine:.2f}x")
    finally:
        srv.close()
    long = Server(2000)
    stalled: dict[str, bool] = {}
    try:
        for mode, label in (("cut-h1", "HTTP/1.1"), ("cut-h2", "HTTP/2")):
            r = run_child(long, mode, args.cuts, 1)
            stalled[mode] = r["cuts"] < args.cuts
            what = f"a request stalled after {r['cuts']} cuts" if stalled[mode] else "none stalled"
            print(f"cancelled streams, {label}: {args.cuts} long answers cut one after another: {what} "
                  f"({r['connections']} connections, {r['resets']} streams reset by the client)")
    finally:
        long.close()
    cheaper = [c for c, yes in better.items() if yes]
    print(f"goal: HTTP/2 where the server offers it, if it measures better: less client CPU than lineup's "
          f"HTTP/1.1 at {', '.join(map(str, cheaper)) or 'none'} of {', '.join(map(str, better))} in flight; "
          f"{'stalls' if stalled['cut-h2'] else 'does not stall'} on cut answers: "
          f"{'taken' if cheaper and not stalled['cut-h2'] else 'not taken (lineup stays on HTTP/1.1)'}")


if __name__ == "__main__":
    main()
