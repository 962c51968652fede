"""`lineup sample`: reading an `llm` logs.db and de-duplicating, each against a
baseline measured in this run.

- Reading N logged prompts from the llm 0.36 message store (turns into a
  tree of messages and parts), single-turn and as conversations, against
  reading the same N prompts from the legacy `responses` table (the layout
  the reader read before). The schema is the one llm's own migrations make.
- A conversation of many turns: the time per turn read, at 200 and at 2,000
  turns per conversation (each turn's history is cut at --max-chars, so
  this stays flat instead of growing with the conversation).
- De-duplicating N prompts plainly, and template-aware (values; values and
  names), against the plain run.

Figures are medians of `--repeat` runs.

    .venv/bin/python benchmarks/bench_sampling.py [--n 20000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from core.exchange.logs import read_logs  # noqa: E402
from core.exchange.sampling import dedupe  # noqa: E402

WORDS = ("invoice refund password shipping warranty discount address login export report plan tier "
         "order account billing team access token reset delete update change cancel upgrade").split()


TEMPLATES = ("What is included in support plan number {n} for the {w} tier?",
             "Send the invoice for order ORD-{n} to user{n}@example.com by {d}",
             "Summarise ticket {n} opened on 2025-03-{d} about {w}")


def prompts(n: int, seed: int = 1) -> list[str]:
    """Free-text prompts, and one in five filled in from a template."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        if i % 5 == 0:
            out.append(rng.choice(TEMPLATES).format(n=rng.randint(1, 99999), w=rng.choice(WORDS),
                                                    d=rng.randint(10, 28)))
            continue
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 30)))
        out.append(f"Customer {rng.randint(1, 9999)} asks about order {i}: {words}?")
    return out


def llm_schema(path: Path) -> sqlite3.Connection:
    import sqlite_utils
    from llm.migrations import migrate

    migrate(sqlite_utils.Database(path))
    return sqlite3.connect(path)


def legacy_db(path: Path, texts: list[str]) -> None:
    con = llm_schema(path)
    con.executemany("INSERT INTO responses (id, model, prompt, response) VALUES (?, ?, ?, ?)",
                    [(f"r{i:08d}", f"m{i % 4}", t, "an answer") for i, t in enumerate(texts)])
    con.commit()
    con.close()


def turns_db(path: Path, texts: list[str], per_conversation: int) -> None:
    """The message store as llm 0.36 writes it: user and assistant messages
    chained by parent hash, one part each, a turn per user message."""
    con = llm_schema(path)
    messages, parts, turns, threads = [], [], [], []
    parent = None
    for i, text in enumerate(texts):
        thread = f"th{i // per_conversation:08d}"
        if i % per_conversation == 0:
            parent = None
            threads.append((thread, text[:40]))
        user, answer = f"b2:u{i:08d}", f"b2:a{i:08d}"
        messages += [(user, parent, "user"), (answer, user, "assistant")]
        parts += [(user, 0, "text", text), (answer, 0, "text", "an answer of a few words")]
        turns.append((f"t{i:08d}", thread, user, answer, f"m{i % 4}"))
        parent = answer
    con.executemany("INSERT INTO threads (id, name) VALUES (?, ?)", threads)
    con.executemany("INSERT INTO messages (hash, parent_hash, role) VALUES (?, ?, ?)", messages)
    con.executemany("INSERT INTO parts (message_hash, position, type, text) VALUES (?, ?, ?, ?)", parts)
    con.executemany("INSERT INTO turns (id, thread_id, parent_message_hash, tip_message_hash, model) "
                    "VALUES (?, ?, ?, ?, ?)", turns)
    con.commit()
    con.close()


def median_s(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--smoke", action="store_true", help="smallest sizes, one repeat: that it still runs (tests/test_benchmarks.py)")
    args = ap.parse_args(argv)
    if args.smoke:
        args.n, args.repeat = 400, 1
    texts = prompts(args.n)
    try:
        import llm  # noqa: F401
    except ImportError:
        print("llm is not installed (pip install -e '.[test]'): the logs.db figures are left out")
    else:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            legacy_db(folder / "legacy.db", texts)
            turns_db(folder / "single.db", texts, 1)
            turns_db(folder / "convo.db", texts, 10)
            base = median_s(lambda: read_logs(folder / "legacy.db", "model"), args.repeat)
            print(f"reading {args.n} prompts from a logs.db (median of {args.repeat}):")
            print(f"  legacy responses table (baseline)   {base * 1e3:8.1f} ms  {args.n / base:9.0f} prompts/s")
            for label, name in (("0.36 turns, single-turn", "single.db"), ("0.36 turns, 10-turn conversations",
                                                                             "convo.db")):
                t = median_s(lambda name=name: read_logs(folder / name, "model"), args.repeat)
                print(f"  {label:35s} {t * 1e3:8.1f} ms  {args.n / t:9.0f} prompts/s  ratio {t / base:4.2f}x")
            per_turn = {}
            k = min(4000, len(texts))
            for length in (200, 2000):
                turns_db(folder / f"long{length}.db", texts[:k], length)
                t = median_s(lambda length=length: read_logs(folder / f"long{length}.db", "model"), args.repeat)
                per_turn[length] = t / k
            print(f"  {k} turns in conversations of 200: {per_turn[200] * 1e6:7.1f} µs/turn; of 2000: "
                  f"{per_turn[2000] * 1e6:7.1f} µs/turn (ratio {per_turn[2000] / per_turn[200]:4.2f}x; "
                  f"history cut at --max-chars)")
    base = median_s(lambda: dedupe(texts), args.repeat)
    print(f"de-duplicating {args.n} prompts (median of {args.repeat}):")
    print(f"  plain (baseline)                    {base * 1e3:8.1f} ms")
    for mode in ("values", "names"):
        t = median_s(lambda mode=mode: dedupe(texts, template=mode), args.repeat)
        r = dedupe(texts, template=mode)
        print(f"  template={mode:6s} (and plain, for the count) {t * 1e3:8.1f} ms  ratio {t / base:4.2f}x  "
              f"merged {r.template_merged}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
