"""Streaming render benchmark: StreamView against Textual's Markdown widget.

Headless (App.run_test), six panes in a 3x2 grid of a 240x64 terminal, fed
with the same generated Markdown (headings, paragraphs, lists, code fences,
a table), split into ~4-character tokens like an LLM stream.

Measured in one run:
- paced: 6 panes x 3,000 tokens at 300 tokens/s each. Display lag = time
  from a token's arrival (its scheduled time, so a stalled loop counts
  against us) to the end of the first paint of the pane after the flush that
  took it in (hooked in the flush and in render_lines). Longest event-loop
  stall = worst lateness of a 5 ms ticker. CPU = process time.
- flat out: the same tokens as fast as the loop allows, until all painted.
- cost vs length: flat out, 6 x 2k, 4k, 8k, 16k and 32k tokens (reasoning
  models write 20k+ tokens: a long answer must cost no more per token), and
  the paced run again with 20k tokens already shown and cached in each pane.
- baselines: per pane `Markdown.get_stream()` written per token, flat out;
  per-token `Markdown.update(full_text)` on 4 panes x 250 tokens (it is
  quadratic; time-boxed so the run ends).

With --runs N the StreamView runs are repeated N times and each figure is
the median (the machine is shared: single runs are noisy); --no-baselines
skips the two Markdown-widget baselines (about 90 s).

Prints a table with each figure beside its target; asserts nothing.
Then the fast-pane goals (issue 32): 8 panes at 1,000 tokens/s each, p95
display lag < 50 ms and no stall over 33 ms; 6 panes at 300 tokens/s, p95
< 33 ms and CPU <= 120 us per token; each beside today's paced run,
interleaved in the same process (--goals runs only these), and 6 panes at
300 tokens/s of code (`make_code`), of 40-row tables (`make_tables`) and
of reasoning (`make_reasoning`) against the same goals. Beside each
paced run's CPU per token, the paced feed's own CPU with no view (a
wake-up per token: the stand-in for the network, included in the figure).

    python benchmarks/bench_render.py [--quick] [--runs N] [--no-baselines] [--goals]
"""

from __future__ import annotations

from itertools import pairwise
import asyncio
import os
import random
import statistics
import sys
import time
from pathlib import Path

# the checkout this file is in, not the one installed (editable) in the venv:
# run from another checkout, the benchmark measured the installed one's views
ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# tui first, as the app imports it: it sets Textual's frame rate before Textual loads
from tui.app import freeze_survivors, release_survivors  # noqa: E402
from tui.stream_view import StreamView  # noqa: E402

from textual.app import App, ComposeResult  # noqa: E402
from textual.containers import Grid, VerticalScroll  # noqa: E402
from textual.widgets import Markdown  # noqa: E402

PANES = 6
SIZE = (240, 64)
RATE = 300.0  # tokens/s per pane, paced run

WORDS = ("the model returns a value when every request is streamed through the "
         "async client so that each pane renders its tokens quickly while users "
         "compare answers side by side and vote on which one reads best").split()
CODE = [
    "def {n}(items: list[int]) -> int:",
    "    total = 0",
    "    for item in items:",
    "        if item % 2 == 0:",
    "            total += item * {k}",
    "    return total",
    "",
    "print({n}([1, 2, 3, {k}]))",
]


def make_markdown(n_tokens: int, seed: int) -> list[str]:
    """Deterministic Markdown, tokenised into exactly n_tokens pieces."""
    rng = random.Random(seed)
    out: list[str] = []
    tokens = 0
    while tokens < n_tokens:
        kind = rng.random()
        if kind < 0.12:
            block = "#" * rng.randint(1, 3) + " " + " ".join(rng.choices(WORDS, k=rng.randint(2, 6))).title()
        elif kind < 0.45:
            block = " ".join(
                (f"**{w}**" if rng.random() < 0.05 else f"`{w}`" if rng.random() < 0.05 else w)
                for w in rng.choices(WORDS, k=rng.randint(20, 70))) + "."
        elif kind < 0.65:
            ordered = rng.random() < 0.5
            block = "\n".join(
                (f"{i + 1}. " if ordered else "- ") + " ".join(rng.choices(WORDS, k=rng.randint(3, 12)))
                for i in range(rng.randint(2, 6)))
        elif kind < 0.92:
            name = rng.choice(WORDS) + "_" + rng.choice(WORDS)
            lines = [line.format(n=name, k=rng.randint(2, 9)) for line in CODE[: rng.randint(4, 8)]]
            block = "```python\n" + "\n".join(lines) + "\n```"
        else:
            rows = [f"| {rng.choice(WORDS)} | {rng.randint(1, 999)} | {rng.choice(WORDS)} |"
                    for _ in range(rng.randint(2, 5))]
            block = "| name | score | note |\n|---|---|---|\n" + "\n".join(rows)
        out.append(block + "\n\n")
        tokens += (len(block) + 2) // 4
    text = "".join(out)
    pieces = [text[i:i + 4] for i in range(0, len(text), 4)]
    return pieces[:n_tokens]


def make_code(n_tokens: int, seed: int) -> list[str]:
    """One long fenced Python block, tokenised like `make_markdown`: a coding
    answer, whose tail is code (committed every `CODE_CHUNK_LINES` lines)."""
    rng = random.Random(seed)
    lines = ["```python"]
    chars = 0
    while chars // 4 < n_tokens:
        name = rng.choice(WORDS) + "_" + rng.choice(WORDS)
        block = [line.format(n=name, k=rng.randint(2, 9)) for line in CODE]
        block.insert(1, f'    """What {name} adds up, {rng.choice(WORDS)} by {rng.choice(WORDS)}."""')
        lines += block + [""]
        chars += sum(len(line) + 1 for line in block) + 1
    text = "\n".join(lines)
    return [text[i:i + 4] for i in range(0, len(text), 4)][:n_tokens]


def make_tables(n_tokens: int, seed: int, rows: int = 40) -> list[str]:
    """Answers that are each a line and a `rows`-row comparison table,
    tokenised like `make_markdown`: the tail is a table growing row by row."""
    rng = random.Random(seed)
    out: list[str] = []
    chars = 0
    while chars // 4 < n_tokens:
        body = "\n".join(f"| {rng.choice(WORDS)}-{rng.randint(1, 99)} | {rng.randint(1, 999)} | "
                         f"{rng.randint(10, 900)} ms | {' '.join(rng.choices(WORDS, k=rng.randint(2, 6)))} |"
                         for _ in range(rows))
        out.append("Here is the comparison.\n\n| model | score | latency | note |\n|---|---:|---:|---|\n"
                   + body + "\n\n")
        chars += len(out[-1])
    text = "".join(out)
    return [text[i:i + 4] for i in range(0, len(text), 4)][:n_tokens]


def make_reasoning(n_tokens: int, seed: int) -> list[str]:
    """Reasoning as thinking models write it, tokenised like `make_markdown`:
    paragraphs of 60-400 words, no markup (fed as reasoning, shown as plain
    text: the tail is the paragraph being written)."""
    rng = random.Random(seed)
    out: list[str] = []
    chars = 0
    while chars // 4 < n_tokens:
        out.append(" ".join(rng.choices(WORDS, k=rng.randint(60, 400))) + ".\n\n")
        chars += len(out[-1])
    text = "".join(out)
    return [text[i:i + 4] for i in range(0, len(text), 4)][:n_tokens]


class BenchView(StreamView):
    """StreamView that stamps tokens: arrival, flush, first paint after it."""

    reasoning = False   # tokens fed as reasoning (shown), not as the answer

    def __init__(self) -> None:
        super().__init__()
        self.arrivals: list[float] = []
        self.painted: list[float] = []
        self._flushed_upto = 0

    def feed(self, token: str, arrival: float) -> None:
        self.arrivals.append(arrival)
        if self.reasoning:
            self.append_reasoning(token)
        else:
            self.append(token)

    def _flush(self) -> None:
        count = len(self.arrivals)
        super()._flush()
        self._flushed_upto = count

    def render_lines(self, crop):
        lines = super().render_lines(crop)
        if self._flushed_upto > len(self.painted):
            now = time.perf_counter()
            self.painted.extend([now] * (self._flushed_upto - len(self.painted)))
        return lines

    @property
    def all_painted(self) -> bool:
        return len(self.painted) == len(self.arrivals) and not self._ops


class ViewsApp(App):
    CSS = "Grid { grid-size: 3 2; } StreamView { border: round $primary; }"

    def __init__(self, panes: int = PANES) -> None:
        super().__init__()
        self.panes = panes

    def compose(self) -> ComposeResult:
        grid = Grid()
        grid.styles.grid_size_columns = (self.panes + 1) // 2   # two rows: 3x2 for six, 4x2 for eight
        with grid:
            for _ in range(self.panes):
                yield BenchView()

    def on_mount(self) -> None:
        self.call_after_refresh(freeze_survivors)   # as LineupApp does once its first screen is up

    def on_unmount(self) -> None:
        release_survivors()   # as LineupApp does


class MarkdownApp(App):
    CSS = "Grid { grid-size: 3 2; } VerticalScroll { border: round $primary; }"

    def __init__(self, panes: int) -> None:
        super().__init__()
        self.panes = panes

    def compose(self) -> ComposeResult:
        with Grid():
            for _ in range(self.panes):
                with VerticalScroll():
                    yield Markdown()


class Ticker:
    """Measures event-loop stalls: how late a 5 ms sleep wakes up."""

    def __init__(self) -> None:
        self.late: list[float] = []
        self._task: asyncio.Task | None = None

    async def _run(self) -> None:
        while True:
            start = time.perf_counter()
            await asyncio.sleep(0.005)
            self.late.append(time.perf_counter() - start - 0.005)

    def __enter__(self) -> Ticker:
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    def __exit__(self, *exc) -> None:
        assert self._task is not None
        self._task.cancel()


async def wait_painted(pilot, views: list[BenchView], limit: float = 120.0) -> None:
    deadline = time.perf_counter() + limit
    while not all(v.all_painted for v in views):
        if time.perf_counter() > deadline:
            raise RuntimeError("tokens never painted")
        await asyncio.sleep(0.001)
    await pilot.pause()


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


async def preload(pilot, views: list[BenchView], n_tokens: int) -> None:
    """Each pane already shows a long answer, every block rendered and cached
    (as after streaming it at a reading pace), before the measured stream."""
    for seed, view in enumerate(views):
        view.set_conversation([("user", "a long question"),
                               ("assistant", "".join(make_markdown(n_tokens, 100 + seed)))])
    await pilot.pause()
    await pilot.pause(0.05)
    for view in views:
        for index in range(len(view._blocks)):
            view._strips_for(index, schedule_fix=False)
        view._apply_layout()
    await pilot.pause(0.3)


async def paced_feed(views: list, streams: list[list[str]], rate: float, begin: float) -> None:
    """Each view gets its stream at `rate` tokens/s from `begin` (a token
    per wake-up, as a slow stream's chunks come): the stand-in for the network."""
    async def feeder(view, tokens: list[str], start: float) -> None:
        view.start_answer()
        for index, token in enumerate(tokens):
            due = start + index / rate
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            view.feed(token, due)
        view.end_answer()

    await asyncio.gather(*(feeder(v, s, begin + i * 0.0005)
                           for i, (v, s) in enumerate(zip(views, streams, strict=True))))


class _Sink:
    """A pane that keeps nothing: what the paced feed costs by itself."""

    def start_answer(self) -> None: ...
    def end_answer(self) -> None: ...
    def feed(self, token: str, arrival: float) -> None: ...


async def run_feed_alone(streams: list[list[str]], rate: float) -> float:
    """CPU per token (us) of the paced feed with no view: included in the
    paced runs' CPU per token, said beside it."""
    cpu = time.process_time()
    await paced_feed([_Sink() for _ in streams], streams, rate, time.perf_counter() + 0.05)
    return (time.process_time() - cpu) / sum(len(s) for s in streams) * 1e6


async def run_paced(streams: list[list[str]], preloaded: int = 0, rate: float = RATE,
                    reasoning: bool = False) -> dict:
    app = ViewsApp(len(streams))
    async with app.run_test(size=SIZE) as pilot:
        views = list(app.query(BenchView))
        for view in views:
            view.reasoning = reasoning
        await pilot.pause()
        if preloaded:
            await preload(pilot, views, preloaded)

        begin = time.perf_counter() + 0.05
        cpu = time.process_time()
        with Ticker() as ticker:
            await paced_feed(views, streams, rate, begin)
            await wait_painted(pilot, views)
        wall = time.perf_counter() - begin
        cpu = time.process_time() - cpu
        lags = [p - a for v in views for a, p in zip(v.arrivals, v.painted, strict=True)]
        return {"wall": wall, "cpu": cpu, "p50": pct(lags, 0.5), "p95": pct(lags, 0.95),
                "max_lag": max(lags), "stall": max(ticker.late), "stall_p99": pct(ticker.late, 0.99),
                "tokens": sum(len(s) for s in streams)}


async def run_flat(streams: list[list[str]]) -> dict:
    app = ViewsApp()
    async with app.run_test(size=SIZE) as pilot:
        views = list(app.query(BenchView))
        await pilot.pause()
        start = time.perf_counter()
        cpu = time.process_time()
        with Ticker() as ticker:
            for view in views:
                view.start_answer()
            for index in range(max(len(s) for s in streams)):
                for view, tokens in zip(views, streams, strict=True):
                    if index < len(tokens):
                        view.feed(tokens[index], time.perf_counter())
                        await asyncio.sleep(0)
            for view in views:
                view.end_answer()
            await wait_painted(pilot, views)
        wall = time.perf_counter() - start
        text_ok = all(v.answer_text() == "".join(s) for v, s in zip(views, streams, strict=True))
        return {"wall": wall, "cpu": time.process_time() - cpu, "tokens": sum(len(s) for s in streams),
                "stall": max(ticker.late), "ok": text_ok}


async def run_get_stream(streams: list[list[str]], limit: float) -> dict:
    app = MarkdownApp(len(streams))
    async with app.run_test(size=SIZE) as pilot:
        widgets = list(app.query(Markdown))
        for container in app.query(VerticalScroll):
            container.anchor()
        await pilot.pause()
        start = time.perf_counter()
        cpu = time.process_time()
        fed = 0
        markdown_streams = [Markdown.get_stream(w) for w in widgets]
        for index in range(max(len(s) for s in streams)):
            for stream, tokens in zip(markdown_streams, streams, strict=True):
                if index < len(tokens):
                    await stream.write(tokens[index])
                    fed += 1
            if time.perf_counter() - start > limit:
                break
        for stream in markdown_streams:
            await stream.stop()
        await pilot.pause()
        wall = time.perf_counter() - start
        return {"wall": wall, "cpu": time.process_time() - cpu, "tokens": fed,
                "complete": fed == sum(len(s) for s in streams)}


async def run_update(streams: list[list[str]], limit: float) -> dict:
    app = MarkdownApp(len(streams))
    async with app.run_test(size=SIZE) as pilot:
        widgets = list(app.query(Markdown))
        await pilot.pause()
        texts = [""] * len(widgets)
        start = time.perf_counter()
        cpu = time.process_time()
        fed = 0
        for index in range(max(len(s) for s in streams)):
            for pane, (widget, tokens) in enumerate(zip(widgets, streams, strict=True)):
                if index < len(tokens):
                    texts[pane] += tokens[index]
                    await widget.update(texts[pane])
                    fed += 1
            if time.perf_counter() - start > limit:
                break
        await pilot.pause()
        wall = time.perf_counter() - start
        return {"wall": wall, "cpu": time.process_time() - cpu, "tokens": fed,
                "complete": fed == sum(len(s) for s in streams)}


def row(name: str, tokens: int, wall: float, extra: str = "") -> str:
    return f"{name:<44} {tokens:>7} {wall:>8.2f} {tokens / wall:>10.0f}  {extra}"


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def median_run(runs: list[dict]) -> dict:
    """Each numeric figure's median over repeated runs (flags: all runs)."""
    out: dict = {}
    for key, value in runs[0].items():
        values = [run[key] for run in runs]
        out[key] = all(values) if isinstance(value, bool) else statistics.median(values)
    return out


FAST_GOALS = (   # issue 32: panes, tokens/s each, p95 lag goal, stall goal, CPU per token goal (None: none)
    (8, 1000.0, 0.050, 0.033, None),
    (6, 300.0, 0.033, None, 120.0),
)


async def fast_pane_goals(n: int, runs: int) -> None:
    """The fast-pane goals, each figure beside its goal: medians of `runs`
    paced runs, with today's paced run (6 panes at 300/s) measured in the
    same process, interleaved, as the baseline the goals are read against."""
    print(f"\n{'fast-pane goals (median of ' + str(runs) + ')':<52} {'value':>10}  goal")
    print("-" * 100)
    base_runs: list[dict] = []
    code_runs: list[dict] = []
    table_runs: list[dict] = []
    reasoning_runs: list[dict] = []
    goal_runs: dict[int, list[dict]] = {i: [] for i in range(len(FAST_GOALS))}
    feed_alone: dict[int, list[float]] = {i: [] for i in range(len(FAST_GOALS))}
    for _ in range(runs):
        base_runs.append(await run_paced([make_markdown(n, seed) for seed in range(PANES)]))
        code_runs.append(await run_paced([make_code(n, seed) for seed in range(PANES)]))
        table_runs.append(await run_paced([make_tables(n, seed) for seed in range(PANES)]))
        reasoning_runs.append(await run_paced([make_reasoning(n, seed) for seed in range(PANES)], reasoning=True))
        for i, (panes, rate, *_) in enumerate(FAST_GOALS):
            streams = [make_markdown(n, seed) for seed in range(panes)]
            goal_runs[i].append(await run_paced(streams, rate=rate))
            feed_alone[i].append(await run_feed_alone(streams, rate))
    base = median_run(base_runs)
    print(f"{f'baseline {PANES} panes @ {RATE:.0f}/s: p95 lag / stall / CPU':<52} {1000 * base['p95']:>8.1f}ms  "
          f"{1000 * base['stall']:.1f} ms stall, {base['cpu'] / base['tokens'] * 1e6:.0f} us/token")
    for i, (panes, rate, p95_goal, stall_goal, cpu_goal) in enumerate(FAST_GOALS):
        r = median_run(goal_runs[i])
        name = f"{panes} panes @ {rate:.0f} tokens/s each"
        cpu = r["cpu"] / r["tokens"] * 1e6
        print(f"{name + ': display lag p95':<52} {1000 * r['p95']:>8.1f}ms  < {1000 * p95_goal:.0f} ms: "
              f"{verdict(r['p95'] < p95_goal)}")
        stall_note = (f"<= {1000 * stall_goal:.0f} ms: {verdict(r['stall'] <= stall_goal)}" if stall_goal
                      else "(no goal)")
        print(f"{name + ': longest stall':<52} {1000 * r['stall']:>8.1f}ms  {stall_note}")
        cpu_note = f"<= {cpu_goal:.0f} us: {verdict(cpu <= cpu_goal)}" if cpu_goal else "(no goal)"
        print(f"{name + ': CPU per token':<52} {cpu:>8.0f}us  {cpu_note}")
        print(f"{'  of which the paced feed alone (no view)':<52} {statistics.median(feed_alone[i]):>8.0f}us  "
              "(the stand-in for the network: a wake-up per token)")
    _, _, p95_goal, _, cpu_goal = FAST_GOALS[-1]   # coding answers and tables: the same goals
    for kind, kind_runs in (("all code", code_runs), ("40-row tables", table_runs), ("reasoning", reasoning_runs)):
        r = median_run(kind_runs)
        cpu = r["cpu"] / r["tokens"] * 1e6
        name = f"{PANES} panes @ {RATE:.0f}/s, {kind}"
        print(f"{name + ': display lag p95':<52} {1000 * r['p95']:>8.1f}ms  < {1000 * p95_goal:.0f} ms: "
              f"{verdict(r['p95'] < p95_goal)}")
        print(f"{name + ': longest stall':<52} {1000 * r['stall']:>8.1f}ms  (no goal)")
        print(f"{name + ': CPU per token':<52} {cpu:>8.0f}us  <= {cpu_goal:.0f} us: "
              f"{verdict(cpu <= (cpu_goal or 0))}")


async def main(quick: bool, runs: int, baselines: bool, smoke: bool = False, goals_only: bool = False) -> None:
    """`smoke`: the smallest sizes, one run (that it still runs: tests/test_benchmarks.py)."""
    n = 100 if smoke else 1000 if quick else 3000
    lengths = (100, 200, 400) if smoke else (500, 1000, 2000, 4000) if quick else (2000, 4000, 8000, 16000, 32000)
    long_answer = 300 if smoke else 5000 if quick else 20000
    streams = [make_markdown(n, seed) for seed in range(PANES)]
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    print(f"render benchmark: {PANES} panes, {SIZE[0]}x{SIZE[1]} headless, python {sys.version.split()[0]}, "
          f"{os.cpu_count()} CPUs, load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} at start "
          f"(other work skews wall times); median of {runs} run(s)")
    t0 = time.perf_counter()

    if goals_only:
        await fast_pane_goals(n, runs)
        return
    paced_runs: list[dict] = []
    paced_long_runs: list[dict] = []
    flat_runs: list[dict] = []
    length_runs: dict[int, list[dict]] = {length: [] for length in lengths}
    for _ in range(runs):
        paced_runs.append(await run_paced(streams))
        paced_long_runs.append(await run_paced(streams, preloaded=long_answer))
        flat_runs.append(await run_flat(streams))
        for length in lengths:
            length_runs[length].append(
                await run_flat([make_markdown(length, seed) for seed in range(PANES)]))
    paced = median_run(paced_runs)
    paced_long = median_run(paced_long_runs)
    flat = median_run(flat_runs)
    by_length = {length: median_run(results) for length, results in length_runs.items()}
    if baselines:
        base_stream = await run_get_stream(streams, limit=60.0)
        update_streams = [s[:250] for s in streams[:4]]
        base_update = await run_update(update_streams, limit=25.0 if not quick else 8.0)

    print()
    print(f"{'run':<44} {'tokens':>7} {'seconds':>8} {'tokens/s':>10}  notes")
    print("-" * 100)
    print(row(f"StreamView paced {PANES}x{n} @ {RATE:.0f}/s", paced["tokens"], paced["wall"],
              f"CPU {paced['cpu']:.2f} s ({100 * paced['cpu'] / paced['wall']:.0f}% of one core)"))
    print(row(f"StreamView paced, {long_answer} tokens already shown", paced_long["tokens"],
              paced_long["wall"], f"CPU {paced_long['cpu']:.2f} s"))
    print(row(f"StreamView flat out {PANES}x{n}", flat["tokens"], flat["wall"],
              f"CPU {flat['cpu']:.2f} s, worst stall {1000 * flat['stall']:.0f} ms, text ok={flat['ok']}"))
    for length, result in by_length.items():
        per_token = 1e6 * result["wall"] / result["tokens"]
        print(row(f"StreamView flat out {PANES}x{length}", result["tokens"], result["wall"],
                  f"{per_token:.1f} us/token, worst stall {1000 * result['stall']:.0f} ms, "
                  f"text ok={result['ok']}"))
    if baselines:
        print(row(f"baseline Markdown.get_stream {PANES}x{n}", base_stream["tokens"], base_stream["wall"],
                  "" if base_stream["complete"] else "time-boxed: stopped early"))
        print(row("baseline Markdown.update per token 4x250", base_update["tokens"], base_update["wall"],
                  "" if base_update["complete"] else "time-boxed: stopped early (quadratic)"))
    print()
    cpu_per_token = paced["cpu"] / paced["tokens"] * 1e6
    print(f"{'figure':<52} {'value':>10}  target")
    print("-" * 100)
    print(f"{'display lag p50 (paced)':<52} {1000 * paced['p50']:>8.1f}ms")
    print(f"{'display lag p95 (paced)':<52} {1000 * paced['p95']:>8.1f}ms  < 50 ms: {verdict(paced['p95'] < 0.05)}")
    print(f"{'display lag max (paced)':<52} {1000 * paced['max_lag']:>8.1f}ms")
    print(f"{'longest event-loop stall (paced)':<52} {1000 * paced['stall']:>8.1f}ms  <= 33 ms (two frames): "
          f"{verdict(paced['stall'] <= 0.033)}")
    print(f"{'event-loop lateness p99 (paced)':<52} {1000 * paced['stall_p99']:>8.1f}ms")
    print(f"{'CPU per token, paced run':<52} {cpu_per_token:>8.0f}us  <= 150 us: {verdict(cpu_per_token <= 150)}")
    long_per_token = paced_long["cpu"] / paced_long["tokens"] * 1e6
    print(f"{f'paced after {long_answer} tokens: display lag p95':<52} {1000 * paced_long['p95']:>8.1f}ms  "
          f"< 50 ms: {verdict(paced_long['p95'] < 0.05)}")
    print(f"{f'paced after {long_answer} tokens: longest stall':<52} {1000 * paced_long['stall']:>8.1f}ms  "
          f"<= 33 ms: {verdict(paced_long['stall'] <= 0.033)}")
    print(f"{f'paced after {long_answer} tokens: CPU per token':<52} {long_per_token:>8.0f}us  "
          f"<= 150 us: {verdict(long_per_token <= 150)} ({long_per_token / cpu_per_token:.2f}x the short run)")
    if baselines:
        throughput = flat["tokens"] / flat["wall"]
        stream_rate = base_stream["tokens"] / base_stream["wall"]
        update_rate = base_update["tokens"] / base_update["wall"]
        print(f"{'flat-out throughput / get_stream':<52} {throughput / stream_rate:>9.1f}x  >= 3x: "
              f"{verdict(throughput / stream_rate >= 3)}")
        print(f"{'flat-out throughput / Markdown.update per token':<52} {throughput / update_rate:>9.1f}x")
    for shorter, longer in pairwise(lengths):
        scaling = by_length[longer]["wall"] / by_length[shorter]["wall"]
        label = f"time {longer} tokens / time {shorter} tokens"
        target = f"  <= 2.1x: {verdict(scaling <= 2.1)}" if longer == lengths[-2] else ""
        print(f"{label:<52} {scaling:>9.2f}x{target}")
    await fast_pane_goals(n, runs)
    print(f"\nwhole benchmark: {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    args = sys.argv[1:]
    runs = int(args[args.index("--runs") + 1]) if "--runs" in args else 1
    asyncio.run(main("--quick" in args, runs, "--no-baselines" not in args and "--smoke" not in args,
                     smoke="--smoke" in args, goals_only="--goals" in args))
