"""The chat screen itself beside bench_render's bare panes, on the same answers.

bench_render measures StreamViews in a grid, fed by a timer in the same
process. A person runs `lineup`: six `Pane`s (a border, a header of live
figures, the StreamView) with the prompt box, vote bar and footer, fed by
the provider's HTTP client. Here the real `LineupApp` chat screen (240x64
headless) streams 6 answers of `make_markdown` tokens from loopback servers
(`tests/server.py`) in a child process, so that the figure is the app's:
its process CPU per token (HTTP client, record writes and paint) and the
rows its compositor had widgets render, per widget kind. The servers send a
token every 1/300 s and fall behind that on two cores, so the baseline is
`bench_render.run_paced` on the same tokens at the rate the chat screen got,
in the same process, runs taking turns. The chat screen's display lag is
not measured (it has no stamps). Medians of `--runs`; asserts nothing.

    .venv/bin/python benchmarks/bench_chat_screen.py [--runs 3] [--tokens 3000] [--smoke]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_render as B  # noqa: E402  (first: it sets Textual's frame rate as the app does)

PANES = 6


def serve(tokens: int) -> None:
    """The child: one loopback server per pane, each streaming its answer a
    token (4 characters) every 1/300 s; prints their URLs, ends at EOF on stdin."""
    from tests.tui_support import ModelServers, Reply

    names = [(f"m{k}", f"model-{k}") for k in range(PANES)]
    with ModelServers(names) as srv:
        for k, (alias, _) in enumerate(names):
            srv[alias].script(Reply(text="".join(B.make_markdown(tokens, k)), chunk_chars=4, delay=1 / B.RATE))
        print(json.dumps({alias: srv[alias].base_url("openai") for alias, _ in names}), flush=True)
        sys.stdin.read()


async def chat_screen(tokens: int) -> dict:
    """One run of the real chat screen: CPU, wall, the rate it got, and the
    rows rendered per widget kind."""
    from textual._styles_cache import StylesCache

    from core.answering.config import Config
    from providers.model_config import ModelConfig
    from store import AsyncStore
    from tui.app import ChatOptions, LineupApp

    rows: collections.Counter[str] = collections.Counter()
    render_widget = StylesCache.render_widget

    def counting(self, widget, crop):
        lines = render_widget(self, widget, crop)
        rows[type(widget).__name__] += len(lines)
        return lines

    proc = subprocess.Popen([sys.executable, __file__, "--serve", str(tokens)], cwd=ROOT,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        urls = json.loads(proc.stdout.readline())   # type: ignore[union-attr]
        models = [ModelConfig(alias=alias, provider="openai", model=f"model-{k}", base_url=url, max_retries=0,
                              read_timeout=30) for k, (alias, url) in enumerate(urls.items())]
        with tempfile.TemporaryDirectory() as tmp:
            store = await AsyncStore.open(Path(tmp) / "bench.db")
            app = LineupApp(store, Config(models={m.alias: m for m in models}),
                            chat=ChatOptions(models=models), rater="bench")
            async with app.run_test(size=B.SIZE) as pilot:
                while app.chat_screen is None or app.screen is not app.chat_screen:
                    await pilot.pause(0.05)
                app.chat_screen.prompt.focus()
                await pilot.press(*"go")
                StylesCache.render_widget = counting   # type: ignore[method-assign]
                try:
                    cpu, t0 = time.process_time(), time.perf_counter()
                    await pilot.press("enter")
                    # (not pilot.pause: it posts a callback to every widget and forces a
                    # frame each time, ~12% of the CPU measured here, which `lineup` never pays)
                    while not app.chat_screen.sends or app.chat_screen.sending or app.session.streaming:
                        await asyncio.sleep(0.02)
                    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu
                finally:
                    StylesCache.render_widget = render_widget   # type: ignore[method-assign]
                shown = [pane.body.answer_text() for pane in app.chat_screen.panes]
            await store.aclose()
    finally:
        proc.stdin.close()   # type: ignore[union-attr]
        proc.wait(10)
    expected = ["".join(B.make_markdown(tokens, k)) for k in range(PANES)]
    return {"cpu": cpu, "wall": wall, "tokens": PANES * tokens, "rate": tokens / wall, "rows": rows,
            "ok": shown == expected}


async def main(runs: int, tokens: int) -> None:
    load = os.getloadavg()
    print(f"chat screen benchmark: {PANES} panes x {tokens} tokens, {B.SIZE[0]}x{B.SIZE[1]} headless, "
          f"{os.cpu_count()} CPUs, load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}; median of {runs}")
    streams = [B.make_markdown(tokens, k) for k in range(PANES)]
    real, bare = [], []
    for _ in range(runs):
        real.append(await chat_screen(tokens))
        bare.append(await B.run_paced(streams, rate=real[-1]["rate"]))

    def med(results: list[dict], key: str) -> float:
        return statistics.median(r[key] for r in results)

    real_cpu = statistics.median(r["cpu"] / r["tokens"] * 1e6 for r in real)
    bare_cpu = statistics.median(r["cpu"] / r["tokens"] * 1e6 for r in bare)
    print(f"  chat screen (LineupApp, servers in a child)   {real_cpu:6.0f} us CPU per token, wall "
          f"{med(real, 'wall'):.1f} s, {med(real, 'rate'):.0f} tokens/s a pane, every answer shown whole: "
          f"{'yes' if all(r['ok'] for r in real) else 'NO'}")
    print(f"  bare panes (bench_render.run_paced, that rate) {bare_cpu:6.0f} us CPU per token, "
          f"p95 lag {1000 * med(bare, 'p95'):.1f} ms")
    print(f"  ratio chat screen / bare panes: {real_cpu / bare_cpu:.2f}x")
    frames = real[len(real) // 2]["rows"]
    total = sum(frames.values())
    print("  rows rendered in one chat-screen run, by widget kind (the compositor renders every widget "
          "in the box around a frame's changes, covered or not):")
    for kind, count in frames.most_common(8):
        print(f"    {kind:<16} {count:>8,}  {100 * count / total:4.0f}%")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=3000, help="tokens per pane")
    ap.add_argument("--smoke", action="store_true", help="one short run (tests/test_benchmarks.py)")
    ap.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve is not None:
        serve(args.serve)
    else:
        asyncio.run(main(1 if args.smoke else args.runs, 100 if args.smoke else args.tokens))
