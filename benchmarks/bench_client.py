"""Streaming-client benchmark: 20 concurrent streams from the loopback test
server (run in its own process, so its CPU time is not the client's).

1. Delivery delay: the server writes its `perf_counter()` into each text delta;
   the consumer of `ChatStream` subtracts it from its own clock when the event
   arrives (same monotonic clock across processes). p50 / p99, next to the
   same figure for a bare httpx `aiter_lines` loop. Paced: one delta every 5 ms
   per stream, as a fast model would send them.
2. Client CPU per stream, unpaced (the paced run also prints its CPU ratio): process CPU time for 20 streams through our
   client vs. a bare httpx `aiter_lines` loop over the same responses, in the
   same run, alternating, median of several rounds; printed as a ratio
   (target <= 1.2x). A second baseline (aiter_lines + json.loads of each data
   line) shows what any client that reads the JSON pays.
3. Whole-body replies (a gateway that answers a stream request with one
   complete response, ~96 KiB of text): client CPU per reply, from the
   request to the last event, vs. bare httpx reading the body and
   `json.loads` of it, in the same run.
4. The network layer alone: the bare httpx loop of 1 on the paced streams
   (each delta its own read), through httpcore's default backend (anyio) and
   through lineup's (`providers.network`: asyncio's streams), rounds taking
   turns: client CPU per delta, and their ratio.

Prints figures only; no assertions. `python benchmarks/bench_client.py [--quick]`
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from providers import make_provider, network  # noqa: E402
from providers.events import ChatRequest, Message  # noqa: E402
from providers.model_config import ModelConfig  # noqa: E402

STREAMS = 20
PROTOCOLS = [("openai", {}), ("anthropic", {}), ("ollama", {}), ("gemini", {"stream_form": "sse"}),
             ("gemini", {"stream_form": "json"})]
REQUEST = ChatRequest(model="bench", messages=(Message(role="user", content="go"),))


def start_server(reply: dict) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "server.py"), "--reply", json.dumps(reply)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    if not url.startswith("http://127.0.0.1:"):
        proc.kill()
        raise SystemExit(f"test server did not start: {url!r}")
    return proc, url


def base_url(url: str, provider: str) -> str:
    return {"openai": url + "/v1", "gemini": url + "/v1beta"}.get(provider, url)


def label(provider: str, opts: dict) -> str:
    return f"{provider}-{opts['stream_form']}" if "stream_form" in opts else provider


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


# --- our client -------------------------------------------------------------------------

async def client_round(url: str, provider: str, opts: dict, stamped: bool) -> tuple[float, list[float], int]:
    cfg = ModelConfig(alias="bench", provider=provider, model="bench", base_url=base_url(url, provider),
                      max_retries=0, concurrency=STREAMS)
    providers = [make_provider(cfg, **opts) for _ in range(STREAMS)]
    delays: list[float] = []
    count = 0
    perf = time.perf_counter

    async def one(p) -> None:
        nonlocal count
        async for ev in p.stream(REQUEST):
            if ev.type == "text":
                count += 1
                if stamped:
                    delays.append(perf() - float(ev.text))
            elif ev.type == "error":
                raise RuntimeError(ev.message)

    cpu = time.process_time()
    await asyncio.gather(*(one(p) for p in providers))
    cpu = time.process_time() - cpu
    for p in providers:
        await p.aclose()
    return cpu, delays, count


# --- the baseline: bare httpx -------------------------------------------------------------

def raw_request(url: str, provider: str, opts: dict) -> tuple[str, dict]:
    """The same HTTP request our provider would send (URL and body), built by it."""
    cfg = ModelConfig(alias="bench", provider=provider, model="bench", base_url=base_url(url, provider))
    p = make_provider(cfg, **opts)
    target, _headers, body = p.build(REQUEST, None)
    return target, body


async def baseline_round(url: str, provider: str, opts: dict, stamped: bool, parse: bool,
                         asyncio_streams: bool = False) -> tuple[float, list[float], int]:
    target, body = raw_request(url, provider, opts)
    clients = [httpx.AsyncClient(timeout=60, transport=network.transport(httpx.Limits(), True)
                                 if asyncio_streams else None) for _ in range(STREAMS)]
    delays: list[float] = []
    count = 0
    perf = time.perf_counter
    loads = json.loads

    async def one(c: httpx.AsyncClient) -> None:
        nonlocal count
        async with c.stream("POST", target, json=body) as r:
            async for line in r.aiter_lines():
                if parse and line.startswith("data: "):
                    loads(line[6:]) if line[6:] != "[DONE]" else None
                elif parse and line.startswith("{") and line.endswith("}"):
                    loads(line)
                if stamped and ('"text"' in line or '"content"' in line):
                    # find the stamp "NNN.NNNNNN " inside the line
                    for piece in line.split('"'):
                        if piece.endswith(" ") and piece[:-1].replace(".", "", 1).isdigit():
                            delays.append(perf() - float(piece))
                            count += 1
                            break
                elif line:
                    count += 1

    cpu = time.process_time()
    await asyncio.gather(*(one(c) for c in clients))
    cpu = time.process_time() - cpu
    for c in clients:
        await c.aclose()
    return cpu, delays, count


async def whole_baseline_round(url: str, provider: str, opts: dict) -> float:
    """Bare httpx: the same request, the whole body read and parsed once."""
    target, body = raw_request(url, provider, opts)
    clients = [httpx.AsyncClient(timeout=60) for _ in range(STREAMS)]

    async def one(c: httpx.AsyncClient) -> None:
        r = await c.post(target, json=body)
        json.loads(r.content)

    cpu = time.process_time()
    await asyncio.gather(*(one(c) for c in clients))
    cpu = time.process_time() - cpu
    for c in clients:
        await c.aclose()
    return cpu


# --- main ------------------------------------------------------------------------------------

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer rounds and chunks")
    ap.add_argument("--smoke", action="store_true", help="smallest sizes, one repeat: that it still runs (tests/test_benchmarks.py)")
    args = ap.parse_args()
    rounds = 1 if args.smoke else 3 if args.quick else 7
    paced_chunks = 20 if args.smoke else 100 if args.quick else 300
    cpu_chunks = 50 if args.smoke else 300 if args.quick else 1000

    print(f"bench_client: {STREAMS} concurrent streams, loopback server in its own process")
    paced, paced_url = start_server({"text": "x" * paced_chunks, "chunk_chars": 1, "delay": 0.005, "stamp": True})
    fast, fast_url = start_server({"text": "token " * cpu_chunks, "chunk_chars": 6})
    whole, whole_url = start_server({"text": "token " * 16_000, "whole": True})
    try:
        print(f"\n1. delivery delay, server write -> event at the consumer ({paced_chunks} deltas/stream, 5 ms apart)")
        print(f"   {'protocol':<13} {'client p50':>11} {'p99':>9} {'max':>9}   {'bare httpx p50':>15} {'p99':>9}"
              f"   {'CPU ratio':>9}")
        for provider, opts in PROTOCOLS:
            cpu, lat, n = asyncio.run(client_round(paced_url, provider, opts, True))
            bcpu, blat, _ = asyncio.run(baseline_round(paced_url, provider, opts, True, False))
            assert n == STREAMS * paced_chunks, n
            print(f"   {label(provider, opts):<13} {pct(lat, .5) * 1e3:>8.3f} ms {pct(lat, .99) * 1e3:>6.3f} ms "
                  f"{max(lat) * 1e3:>6.3f} ms   {pct(blat, .5) * 1e3:>12.3f} ms {pct(blat, .99) * 1e3:>6.3f} ms"
                  f"   {cpu / bcpu:>8.2f}x")

        print(f"\n2. client CPU per stream ({cpu_chunks} deltas/stream, unpaced; median of {rounds} rounds)")
        print(f"   {'protocol':<13} {'client':>10} {'bare lines':>11} {'ratio':>6}   {'lines+json':>10} {'ratio':>6}")
        for provider, opts in PROTOCOLS:
            ours, bare, parsed = [], [], []
            asyncio.run(client_round(fast_url, provider, opts, False))   # warm-up
            for _ in range(rounds):
                cpu, _, n = asyncio.run(client_round(fast_url, provider, opts, False))
                assert n == STREAMS * cpu_chunks, n
                ours.append(cpu / STREAMS)
                bare.append(asyncio.run(baseline_round(fast_url, provider, opts, False, False))[0] / STREAMS)
                parsed.append(asyncio.run(baseline_round(fast_url, provider, opts, False, True))[0] / STREAMS)
            o, b, pj = statistics.median(ours), statistics.median(bare), statistics.median(parsed)
            print(f"   {label(provider, opts):<13} {o * 1e3:>7.2f} ms {b * 1e3:>8.2f} ms {o / b:>5.2f}x   "
                  f"{pj * 1e3:>7.2f} ms {o / pj:>5.2f}x")

        print(f"\n3. whole-body replies, client CPU per reply (~96 KiB of text; median of {rounds} rounds)")
        print(f"   {'protocol':<13} {'client':>10} {'read+json':>10} {'ratio':>6}")
        for provider, opts in PROTOCOLS:
            ours, bare = [], []
            asyncio.run(client_round(whole_url, provider, opts, False))   # warm-up
            for _ in range(rounds):
                cpu, _, n = asyncio.run(client_round(whole_url, provider, opts, False))
                assert n == STREAMS, n
                ours.append(cpu / STREAMS)
                bare.append(asyncio.run(whole_baseline_round(whole_url, provider, opts)) / STREAMS)
            o, b = statistics.median(ours), statistics.median(bare)
            print(f"   {label(provider, opts):<13} {o * 1e3:>7.2f} ms {b * 1e3:>7.2f} ms {o / b:>5.2f}x")

        print(f"\n4. the network layer: bare httpx on the paced streams, client CPU per delta (median of {rounds})")
        provider, opts = PROTOCOLS[0]
        layers: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(rounds):
            for asyncio_streams, runs in layers.items():
                cpu, stamps, _ = asyncio.run(baseline_round(paced_url, provider, opts, True, False, asyncio_streams))
                assert len(stamps) == STREAMS * paced_chunks, len(stamps)
                runs.append(cpu / len(stamps))
        anyio_cpu, asyncio_cpu = statistics.median(layers[False]), statistics.median(layers[True])
        print(f"   httpcore's backend (anyio) {anyio_cpu * 1e6:6.1f} us   providers.network (asyncio streams) "
              f"{asyncio_cpu * 1e6:6.1f} us   ratio {asyncio_cpu / anyio_cpu:.2f}x")
    finally:
        for proc in (paced, fast, whole):
            proc.kill()
            proc.wait()


if __name__ == "__main__":
    main()
