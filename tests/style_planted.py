"""Arena battles with a planted style taste, and a reference style control
written from lmarena's published description, for tests/test_style_recipe.py
and benchmarks/bench_style.py.

`planted_battles` writes battles in Chatbot Arena's JSON shape (model_a on the
left, conversations with Markdown answers) whose outcome is drawn from
logit P(a wins) = ln 10 * (R_a - R_b) / 400 + sum_k taste_k * f_k, where f_k is
the style difference in the form asked for: "lmarena" (a - b) / (a + b + 1),
"lineup" (a - b) / (a + b) (0 when both are 0), of (words, headers, list
items, bold spans) over the answers.

`reference_fit` is the recipe as published (FastChat `preprocess_for_style`,
`fit_contextual_bt`, `compute_style_control`): one row per battle, model_a as
given; each feature normalised ("lmarena": with the +1, then centred and
divided by its standard deviation; "lineup": without it, divided by the root
mean square); a logistic regression on the Bradley-Terry design (ln 10 times
+1/-1 for the two models) and the style columns, with a ridge penalty whose
gradient is `reg` times the parameters, solved by scipy's L-BFGS-B; ratings
400 * theta + 1000. Its Markdown counts are FastChat's own regular
expressions (`reference_counts`), the facts lineup's counting must match."""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass

import numpy as np

STYLE_LAMBDA_LINEUP = (400.0 / 4000.0) ** 2
STYLE_LAMBDA_LMARENA = 0.5


@dataclass
class Answerer:
    words: float              # mean words of prose per answer
    headers: float            # mean Markdown headers per answer (Poisson)
    items: float              # mean list items
    bold: float               # mean bold spans


def answer_text(rng: random.Random, who: Answerer) -> str:
    n_words = max(1, int(rng.gammavariate(4.0, who.words / 4.0)))
    lines = []
    for _ in range(_poisson(rng, who.headers)):
        lines.append(f"## Part {rng.randint(1, 9)}")
    prose = ["word"] * n_words
    for _ in range(_poisson(rng, who.bold)):
        prose[rng.randrange(len(prose))] = "**key point**"
    lines.append(" ".join(prose))
    for _ in range(_poisson(rng, who.items)):
        lines.append(f"- step {rng.randint(1, 9)}")
    return "\n".join(lines)


def _poisson(rng: random.Random, mean: float) -> int:
    if mean <= 0:
        return 0
    k, p, limit = 0, 1.0, math.exp(-mean)
    while True:
        p *= rng.random()
        if p < limit:
            return k
        k += 1


# FastChat's counting rules (fastchat/serve/monitor/add_markdown_info.py), as published
_REF_CODE = re.compile("```([^`]*)```")
_REF = {
    "headers": [re.compile(rf"^#{{{k}}}\s", re.MULTILINE) for k in range(1, 7)],
    "list_items": [re.compile(r"^\s*\d+\.\s", re.MULTILINE), re.compile(r"^\s*[-*+]\s", re.MULTILINE)],
    "bold": [re.compile(r"\*\*[^*\n]+\*\*"), re.compile(r"__[^_\n]+__")],
}


def reference_markdown(text: str) -> tuple[int, int, int]:
    for block in _REF_CODE.findall(text):
        text = text.replace(block, "")
    return tuple(sum(len(p.findall(text)) for p in _REF[k]) for k in ("headers", "list_items", "bold"))  # type: ignore[return-value]


def reference_counts(turns: list[str]) -> tuple[float, float, float, float]:
    """(words over the turns, headers, list items, bold) as lmarena counts them, length in words."""
    h, li, b = reference_markdown("\n".join(turns))
    return float(sum(len(t.split()) for t in turns)), float(h), float(li), float(b)


def form(ca: np.ndarray, cb: np.ndarray, recipe: str) -> np.ndarray:
    diff, total = ca - cb, ca + cb
    if recipe == "lmarena":
        return diff / (total + 1.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, diff / np.where(total > 0, total, 1.0), 0.0)


@dataclass
class PlantedBattles:
    battles: list[dict]            # Arena JSON records
    models: list[str]
    truth: dict[str, float]        # Elo, mean 1000
    counts_a: np.ndarray           # (n, 4) reference counts of model_a's answers
    counts_b: np.ndarray


DEFAULT_ANSWERERS = [Answerer(120, 0.2, 1, 0.5), Answerer(300, 3, 6, 4), Answerer(80, 0, 0, 0),
                     Answerer(200, 1.5, 3, 2), Answerer(150, 0.5, 2, 1), Answerer(250, 2.5, 0.5, 3)]


def planted_battles(n: int, *, recipe: str, taste: tuple[float, float, float, float], seed: int = 0,
                    ratings: tuple[float, ...] = (1080, 1050, 1010, 990, 960, 910), tie: float = 0.05,
                    answerers: list[Answerer] | None = None, turns: int = 1) -> PlantedBattles:
    """`n` battles among len(ratings) models (m0, m1, ...), pairs and sides at
    random, each answer written by its model's `Answerer`, the winner drawn
    with the planted `taste` (per feature: length, headers, list items, bold)
    in `recipe`'s form; a tie with probability `tie` first."""
    rng = random.Random(seed)
    who = answerers or DEFAULT_ANSWERERS
    models = [f"m{k}" for k in range(len(ratings))]
    mean = sum(ratings) / len(ratings)
    truth = {m: r - mean + 1000.0 for m, r in zip(models, ratings, strict=True)}
    battles, ca, cb = [], [], []
    for k in range(n):
        i, j = rng.sample(range(len(models)), 2)
        conv_a, conv_b = [], []
        for t in range(turns):
            q = {"role": "user", "content": f"question {k}.{t}"}
            conv_a += [q, {"role": "assistant", "content": answer_text(rng, who[i % len(who)])}]
            conv_b += [q, {"role": "assistant", "content": answer_text(rng, who[j % len(who)])}]
        a = reference_counts([m["content"] for m in conv_a if m["role"] == "assistant"])
        b = reference_counts([m["content"] for m in conv_b if m["role"] == "assistant"])
        ca.append(a)
        cb.append(b)
        f = form(np.array([a]), np.array([b]), recipe)[0]
        z = math.log(10.0) * (ratings[i] - ratings[j]) / 400.0 + float(np.dot(taste, f))
        if rng.random() < tie:
            winner = "tie"
        else:
            winner = "model_a" if rng.random() < 1.0 / (1.0 + math.exp(-z)) else "model_b"
        battles.append({"model_a": models[i], "model_b": models[j], "winner": winner, "question_id": f"q{k}",
                        "tstamp": 1.7e9 + k, "judge": f"rater{k % 7}", "turn": turns,
                        "conversation_a": conv_a, "conversation_b": conv_b})
    return PlantedBattles(battles, models, truth, np.array(ca), np.array(cb))


def reference_fit(battles: list[dict], counts_a: np.ndarray, counts_b: np.ndarray, recipe: str
                  ) -> tuple[dict[str, float], np.ndarray]:
    """The published recipe on the battles as given (model_a first): Elo ratings and coefficients."""
    from scipy.optimize import minimize
    from scipy.special import expit

    index: dict[str, int] = {}
    for b in battles:
        index.setdefault(b["model_a"], len(index))
    for b in battles:
        index.setdefault(b["model_b"], len(index))
    ia = np.array([index[b["model_a"]] for b in battles])
    ib = np.array([index[b["model_b"]] for b in battles])
    y = np.array([1.0 if b["winner"] == "model_a" else 0.0 if b["winner"] == "model_b" else 0.5 for b in battles])
    x = form(counts_a, counts_b, recipe)
    if recipe == "lmarena":
        x = (x - x.mean(axis=0)) / x.std(axis=0)
        reg = STYLE_LAMBDA_LMARENA
    else:
        x = x / np.sqrt((x * x).mean(axis=0))
        reg = STYLE_LAMBDA_LINEUP
    m, alpha = len(index), math.log(10.0)

    def loss_grad(p: np.ndarray) -> tuple[float, np.ndarray]:
        z = alpha * (p[ia] - p[ib]) + x @ p[m:]
        q = expit(z)
        loss = -np.sum(y * np.log(q) + (1 - y) * np.log(1 - q)) + reg / 2 * np.dot(p, p)
        e = y - q
        g = reg * p
        np.add.at(g, ia, -alpha * e)
        np.add.at(g, ib, alpha * e)
        g[m:] -= x.T @ e
        return float(loss), g

    res = minimize(loss_grad, np.zeros(m + x.shape[1]), jac=True, method="L-BFGS-B",
                   options={"maxiter": 1000, "gtol": 1e-9})
    theta = res.x[:m]
    elo = (theta - theta.mean()) * 400.0 + 1000.0
    return {name: float(elo[k]) for name, k in index.items()}, res.x[m:]
