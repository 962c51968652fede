"""identity_leak detection: precision and recall on the labelled set of
tests/identity_cases.py, and the time to judge one answer, for the
self-identification detector (core.answering.identity) against the keyword matcher it
replaced (a copy below, as it was in core.answering.sessions.names_itself), both run
in this process on the same answers.

    .venv/bin/python benchmarks/bench_identity.py [--repeat 200]
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from core.answering.identity import self_identification  # noqa: E402
from tests.identity_cases import CASES, HELD_OUT, MODELS  # noqa: E402

# ---- the baseline: the old keyword matcher, verbatim in behaviour
VENDOR_WORDS = {
    "openai": ("OpenAI", "ChatGPT", "GPT"), "anthropic": ("Anthropic", "Claude"),
    "gemini": ("Google", "Gemini", "DeepMind", "Bard"), "ollama": ("Ollama",), "demo": (),
}
FAMILY_WORDS = ("llama", "mistral", "mixtral", "qwen", "gemma", "phi", "deepseek", "grok", "command-r",
                "claude", "gpt", "gemini", "yi", "falcon", "olmo", "granite", "nemotron", "kimi", "glm")


def _old_words(cfg) -> set[str]:
    words = {cfg.model}
    words.update(VENDOR_WORDS.get(cfg.provider, ()))
    words.update(part for part in re.split(r"[/:@]", cfg.model) if len(part) >= 3)
    words.update(f for f in FAMILY_WORDS if f in cfg.model.lower())
    if cfg.base_url:
        host = urlsplit(cfg.base_url).hostname
        if host and host not in ("localhost", "127.0.0.1", "::1"):
            words.add(host)
    words.discard("")
    return words


def old_names_itself(text: str, cfg) -> str | None:
    if cfg.is_demo:
        return None
    ordered = sorted(_old_words(cfg), key=len, reverse=True)
    pattern = re.compile(rf"(?<![A-Za-z0-9])(?:{'|'.join(re.escape(w) for w in ordered)})(?![A-Za-z])",
                         re.IGNORECASE)
    m = pattern.search(text)
    return m.group(0) if m else None


def figures(detect) -> tuple[float, float, int, int]:
    tp = fp = fn = 0
    for c in CASES + HELD_OUT:
        found = detect(c) is not None
        tp += found and c.expected
        fp += found and not c.expected
        fn += c.expected and not found
    return tp / max(tp + fp, 1), tp / max(tp + fn, 1), fp, fn


def per_answer_us(detect, cases, repeat: int, rounds: int = 3) -> float:
    """Median over cases of the time to judge that answer once, in µs (the
    best of `rounds` means of `repeat` runs, so a busy machine counts less)."""
    times = []
    for c in cases:
        best = float("inf")
        for _ in range(rounds):
            start = time.perf_counter()
            for _ in range(repeat):
                detect(c)
            best = min(best, (time.perf_counter() - start) / repeat)
        times.append(best * 1e6)
    return statistics.median(times)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=200)
    ap.add_argument("--smoke", action="store_true", help="smallest sizes, one repeat: that it still runs (tests/test_benchmarks.py)")
    args = ap.parse_args(argv)
    if args.smoke:
        args.repeat = 4
    new = lambda c: self_identification(c.text, MODELS[c.model], [c.prompt])  # noqa: E731
    old = lambda c: old_names_itself(c.text, MODELS[c.model])  # noqa: E731
    cases = CASES + HELD_OUT
    print(f"labelled answers: {len(cases)} ({sum(c.expected for c in cases)} self-identifying)")
    for name, detect in (("self-identification", new), ("keyword baseline", old)):
        p, r, fp, fn = figures(detect)
        print(f"  {name:20s} precision {p:.3f}  recall {r:.3f}  false tags {fp:2d}  missed {fn:2d}")
    # a long answer (about 6 kB of prose and code mentioning vendors) as well as the short ones
    from tests.identity_cases import Case

    long_text = ("You can call GPT-4o or Claude from Python; OpenAI's SDK and Anthropic's SDK differ a little. "
                 "```python\nfrom openai import OpenAI\nclient = OpenAI()\n```\n"
                 "Google's docs, Gemini's docs and the Llama model card say more. ") * 25 + "I'm ChatGPT."
    long_cases = [Case("gpt", long_text, True, "long"), Case("claude", long_text, False, "long")]
    for label, sample, rep in (("short answers", cases, args.repeat), ("~6 kB answers", long_cases, args.repeat // 4)):
        t_new = per_answer_us(new, sample, max(rep, 1))
        t_old = per_answer_us(old, sample, max(rep, 1))
        print(f"  per answer, {label:14s} median: self-identification {t_new:8.1f} µs · "
              f"keyword baseline {t_old:8.1f} µs · ratio {t_new / t_old:5.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
