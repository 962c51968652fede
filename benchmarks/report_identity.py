"""Is the report the same, byte for byte, from two versions of the code?

Why a script and not a test: the point is to compare the report of one
checkout with the report of another (before and after a change to how the
report reads the store or computes its figures), on the same databases. A
test has only one version of the code to run.

    # 1. build the seeded stores and write the reports of the code in OLD
    python benchmarks/report_identity.py --stores /tmp/stores --code OLD --write /tmp/before
    # 2. the same stores, the code of this checkout, compared with step 1
    python benchmarks/report_identity.py --stores /tmp/stores --write /tmp/after --compare /tmp/before

Each store is built from its seed (sessions of 2-4 models, demo models,
categories, case ids and repeated prompts, repeats, retries, every status,
missing and out-of-range timings, costs recorded or from prices, tokens too
big for the packed read, ties in creation time, two-way and N-way votes,
rankings, ties, superseded and withdrawn votes, several raters, labels in
another case, unreadable votes, tags removed or not, check results), and
reported under a few filter sets and bootstrap sizes. Compared: the JSON
(`generated_at` aside), the Markdown, the HTML and the terminal tables.
Stores are built once and reused (ids are random: a rebuilt store is a
different store).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import random
import re
import sys
from pathlib import Path

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

T0 = 1.75e9
POOL = ["alpha", "beta", "gamma", "delta", "eps", "zeta", "demo-fast", "demo-slow"]
CATEGORIES = [None, "code", "math", "writing"]
RATERS = ["ann", "bob", "cy"]


def build_store(path: Path, seed: int) -> None:
    from store import (
        CheckResultRecord,
        ContestantRecord,
        OutputRecord,
        SessionRecord,
        Store,
        TagRecord,
        TurnRecord,
        VoteRecord,
    )

    rng = random.Random(seed)
    odd = seed % 3 == 0          # values that need the plain reads (huge counts, ties in time)
    store = Store.open(path)
    n_models = rng.choice([3, 4, 6, 8])
    pool = POOL[:n_models]
    outputs: list[OutputRecord] = []
    votes: list[VoteRecord] = []
    with store.batch():
        for s in range(rng.randint(2, 9)):
            k = rng.choice([2, 2, 2, 3, 4])
            aliases = rng.sample(pool, min(k, len(pool)))
            created = T0 + s * 3600 + rng.random()
            prices = {a: {"input_per_mtok": rng.choice([0.5, 1.0, 3.0]), "output_per_mtok": rng.choice([2.0, 15.0])}
                      for a in aliases if rng.random() < 0.5}
            cs = [ContestantRecord(alias=a, provider="demo" if a.startswith("demo") else "openai",
                                   model=a + "-v1", label="ABCDEFGH"[i], position=i, is_demo=a.startswith("demo"),
                                   price=prices.get(a)) for i, a in enumerate(aliases)]
            sess = SessionRecord(created=created, kind=rng.choice(["chat", "run"]), contestants=cs, blind=True)
            store.create_session(sess)
            n_turns = rng.randint(3, 40)
            repeats = rng.choice([1, 1, 2, 3])
            for p in range(n_turns):
                for r in range(repeats):
                    t_created = created + p * 10 + r
                    case = f"case-{rng.randint(0, 12)}" if rng.random() < 0.6 else None
                    turn = TurnRecord(session_id=sess.id, position=p * repeats + r, case_id=case,
                                      category=rng.choice(CATEGORIES), repeat_index=r,
                                      follow_up_index=rng.choice([0, 0, 0, 1]),
                                      user_message=rng.choice(["Say hi", "Sum 2+2", f"Q{rng.randint(0, 5)}"]),
                                      created=t_created)
                    store.add_turn(turn)
                    for c in cs:
                        attempts = 2 if rng.random() < 0.1 else 1
                        for a in range(1, attempts + 1):
                            status = rng.choices(["complete", "error", "cancelled", "interrupted"],
                                                 [20, 3, 1, 1])[0] if a == attempts else "error"
                            ttft = None if rng.random() < 0.1 else round(rng.uniform(50, 3000), rng.choice([0, 3]))
                            dur = None if ttft is None or rng.random() < 0.05 else ttft + rng.uniform(0, 9000)
                            out_tok = None if rng.random() < 0.08 else rng.choice([0, rng.randint(1, 2000)])
                            if odd and rng.random() < 0.01:
                                out_tok = 2 ** 31           # does not fit the packed read
                            o_created = t_created + (rng.choice([0.1 * a, 0.5]) if odd else 0.1 * a)
                            rec = OutputRecord(
                                session_id=sess.id, turn_id=turn.id, contestant=c.alias, label=c.label,
                                attempt=a, status=status, text=rng.choice(["ok", "The answer is 4.", "four", ""]),
                                error_kind=rng.choice(["rate_limit", "server", "", None]) if status == "error" else None,
                                ttft_ms=ttft, duration_ms=dur, output_tokens=out_tok,
                                input_tokens=None if rng.random() < 0.05 else rng.randint(1, 500),
                                tokens_estimated=rng.random() < 0.1,
                                cost=None if seed % 4 == 1 and rng.random() < 0.4 else rng.uniform(0, 0.01),
                                is_demo=c.is_demo, created=o_created)
                            store.finish_output(rec)
                            outputs.append(rec)
                            if rng.random() < 0.15:
                                store.add_check_result(CheckResultRecord(
                                    output_id=rec.id, check=rng.choice(["valid_json", "contains", "length"]),
                                    passed=rng.random() < 0.6))
                            if rng.random() < 0.1:
                                store.add_tag(TagRecord(output_id=rec.id, tag=rng.choice(
                                    ["too_verbose", "hallucination", "refusal"]), rater=rng.choice(RATERS)))
                    if rng.random() < 0.8:
                        labels = [c.label for c in cs]
                        positions = labels[:]
                        rng.shuffle(positions)
                        mapping = {c.label: c.alias for c in cs}
                        if rng.random() < 0.1:          # imported, other case
                            mapping = {lab.lower(): a for lab, a in mapping.items()}
                            positions = [lab.lower() for lab in positions]
                        keys = list(mapping)
                        bad = "both_bad" if len(keys) == 2 else "all_bad"
                        choice = rng.choice(keys + ["tie", bad])
                        ranking = None
                        if len(keys) > 2 and rng.random() < 0.3 and choice != "tie":
                            ranking = rng.sample(keys, len(keys))
                            if choice != bad:
                                ranking.remove(choice)
                                ranking.insert(0, choice)
                        v = VoteRecord(session_id=sess.id, turn_id=turn.id, rater=rng.choice(RATERS), choice=choice,
                                       ranking=ranking, mapping=mapping, positions=positions,
                                       created=t_created + 1 + rng.random())
                        store.add_vote(v)
                        votes.append(v)
                        if rng.random() < 0.05:        # changed their mind
                            v2 = VoteRecord(session_id=sess.id, turn_id=turn.id, rater=v.rater,
                                            choice=rng.choice(keys), mapping=mapping, positions=positions,
                                            created=v.created + 5, supersedes=v.id)
                            store.add_vote(v2)
        conn = store.conn
        for o in rng.sample(outputs, min(len(outputs), 3)):       # out of range, written by hand
            conn.execute("UPDATE output SET ttft_ms = ? WHERE id = ?", [rng.choice([-5.0, 1e12]), o.id])
        if votes and rng.random() < 0.5:
            conn.execute("UPDATE vote SET mapping = '{not json' WHERE id = ?", [rng.choice(votes).id])
        if votes and rng.random() < 0.5:
            conn.execute("UPDATE vote SET choice = 'Z' WHERE id = ?", [rng.choice(votes).id])
        if votes and rng.random() < 0.5:
            conn.execute("UPDATE vote SET current = 0, retracted_at = ? WHERE id = ?",
                         [T0 + 9e5, rng.choice(votes).id])
        if seed % 4 == 2:              # no recorded cost: from the prices
            conn.execute("UPDATE output SET cost = NULL")
        tags = [r[0] for r in conn.execute("SELECT id FROM tag")]
        for t in rng.sample(tags, len(tags) // 4):
            conn.execute("UPDATE tag SET removed_at = ? WHERE id = ?", [T0 + 1e6, t])
    store.close()


def variants(path: Path, seed: int) -> list[tuple[str, dict, int, int]]:
    """(name, filters, rounds, seed) for one store."""
    import sqlite3

    rng = random.Random(seed * 7 + 1)
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    sessions = [r[0] for r in conn.execute("SELECT id FROM session ORDER BY id")]
    conn.close()
    out = [("all", {}, rng.choice([0, 20, 200]), seed),
           ("demo", {"include_demo": True}, 50, seed + 1),
           ("code", {"category": "code"}, 30, 2),
           ("ann", {"rater": "ann", "since": T0 + 7200}, 30, 3)]
    if sessions:
        out.append(("sessions", {"sessions": rng.sample(sessions, max(1, len(sessions) // 2))}, 40, 4))
    return out


def reports(path: Path, seed: int) -> dict[str, str]:
    from core.report import ReportFilters, build_report, render_html, render_markdown
    from store import Store

    try:
        from core.report.terminal import print_report
    except ImportError:
        from lineup.commands.report_cmd import print_report   # before the report became a package
    out = {}
    prices = {"alpha": _Price(2.0, 8.0)} if seed % 2 else {}
    for name, filters, rounds, rseed in variants(path, seed):
        with Store.open(path, readonly=True) as store:
            r = build_report(store, ReportFilters(**filters), rounds=rounds, seed=rseed, prices=prices)
        out[f"{name}.json"] = re.sub(r'^(  "generated_at": )[^,\n]+', r"\g<1>0", r.to_json(), count=1, flags=re.M)
        out[f"{name}.md"] = render_markdown(r)
        out[f"{name}.html"] = render_html(r)
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            print_report(r)
        out[f"{name}.txt"] = buf.getvalue()
    return out


class _Price:
    """A config price (what `core.answering.config` gives): `cost(input, output)`."""

    def __init__(self, inp: float, outp: float):
        self.inp, self.outp = inp, outp

    def cost(self, input_tokens, output_tokens) -> float:
        return ((input_tokens or 0) * self.inp + (output_tokens or 0) * self.outp) / 1e6


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--stores", type=Path, required=True, help="folder of the seeded stores (built if missing)")
    ap.add_argument("--n", type=int, default=40, help="number of stores")
    ap.add_argument("--code", type=Path, help="import the report from this checkout (default: this one)")
    ap.add_argument("--write", type=Path, required=True, help="folder for the reports")
    ap.add_argument("--compare", type=Path, help="folder of reports to compare with")
    args = ap.parse_args(argv)
    sys.path.insert(0, str((args.code or Path(__file__).resolve().parents[1]).resolve()))
    args.stores.mkdir(parents=True, exist_ok=True)
    args.write.mkdir(parents=True, exist_ok=True)
    for seed in range(args.n):
        path = args.stores / f"s{seed:03d}.db"
        if not path.exists():
            build_store(path, seed)
        for name, text in reports(path, seed).items():
            (args.write / f"s{seed:03d}.{name}").write_text(text, encoding="utf-8")
    if args.compare is None:
        print(f"wrote the reports of {args.n} stores to {args.write}")
        return 0
    names = sorted(p.name for p in args.write.iterdir())
    before = sorted(p.name for p in args.compare.iterdir())
    differ = [n for n in names if n not in before or
              (args.compare / n).read_bytes() != (args.write / n).read_bytes()]
    missing = [n for n in before if n not in names]
    print(f"{len(names)} reports from {args.n} stores: {len(names) - len(differ)} identical, "
          f"{len(differ)} different, {len(missing)} missing")
    for n in differ[:20] + missing[:20]:
        print(f"  differs: {n}")
    return 1 if differ or missing else 0


if __name__ == "__main__":
    raise SystemExit(main())
