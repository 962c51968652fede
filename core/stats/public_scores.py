"""Scores from outside lineup beside its own ratings: public leaderboard
scores (screening: "public scores only screen") and online canary metrics
(calibration: do offline conclusions hold in production?).

Why a module of its own: it owns the two CSV formats (parsed here, every
bad cell reported as FILE:LINE: field: what is wrong, nothing imported then)
and the figures that compare them with the report's ratings: Kendall's tau
(tau-b) between the public and the own ranking with a bootstrap interval
(tau recomputed on each bootstrap round of the own ratings,
`RatingResult.replicates`: the uncertainty of the own ranking; the public
scores are taken as given), the models whose rank changes most, each
online rate with its Wilson interval, and whether the online and offline
orderings agree. The SQL is `store.public_scores`.

CSV formats (a header row; columns in any order; extra columns ignored):
- leaderboard: `model`, `score`, optional `ci_low`, `ci_high`, `source`, `date`;
- online: `model`, `metric`, `value`, `n`, optional `period`,
  `higher_is_better` (true/false, default true: a rework rate is false).
  A value between 0 and 1 is a rate: its interval is Wilson's on
  round(value * n) of n.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, Field

from core.stats.quantiles import percentile
from core.stats.ratings import RatingResult, wilson_interval


class PublicScoreError(ValueError):
    """A bad CSV: the message names the file, the line and the field."""


# ----------------------------------------------------------------- parsing

LEADERBOARD_REQUIRED = ("model", "score")
ONLINE_REQUIRED = ("model", "metric", "value", "n")
_TRUE = {"true", "yes", "1", "higher"}
_FALSE = {"false", "no", "0", "lower"}


def _rows(path: Path, required: Sequence[str]) -> list[tuple[int, dict[str, str]]]:
    shown = str(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise PublicScoreError(f"{shown}: cannot read it ({getattr(exc, 'strerror', None) or exc})") from None
    reader = csv.DictReader(io.StringIO(text, newline=""))
    header = [h.strip().lower() for h in (reader.fieldnames or [])]
    missing = [c for c in required if c not in header]
    if missing:
        raise PublicScoreError(f"{shown}:1: header: missing column{'s' if len(missing) > 1 else ''} "
                               f"{', '.join(missing)} (needs {', '.join(required)})")
    reader.fieldnames = header
    out = []
    for row in reader:
        line = reader.line_num
        if None in row:
            raise PublicScoreError(f"{shown}:{line}: more cells than columns")
        clean = {k: (v or "").strip() for k, v in row.items()}
        if not any(clean.values()):
            continue
        out.append((line, clean))
    if not out:
        raise PublicScoreError(f"{shown}: no rows under the header")
    return out


def _number(shown: str, line: int, field: str, text: str, *, optional: bool = False) -> float | None:
    if not text:
        if optional:
            return None
        raise PublicScoreError(f"{shown}:{line}: {field}: empty (a number is needed)")
    try:
        value = float(text)
    except ValueError:
        raise PublicScoreError(f"{shown}:{line}: {field}: {text[:40]!r} is not a number") from None
    if not math.isfinite(value):
        raise PublicScoreError(f"{shown}:{line}: {field}: {text[:40]!r} is not a finite number")
    return value


def _name(shown: str, line: int, field: str, text: str) -> str:
    if not text:
        raise PublicScoreError(f"{shown}:{line}: {field}: empty")
    return text


def parse_leaderboard(path: Path) -> list[tuple[Any, ...]]:
    """Rows in `store.public_scores.LEADERBOARD_COLS` order."""
    shown = str(path)
    out = []
    for line, r in _rows(path, LEADERBOARD_REQUIRED):
        model = _name(shown, line, "model", r["model"])
        score = _number(shown, line, "score", r["score"])
        lo = _number(shown, line, "ci_low", r.get("ci_low", ""), optional=True)
        hi = _number(shown, line, "ci_high", r.get("ci_high", ""), optional=True)
        if (lo is None) != (hi is None):
            raise PublicScoreError(f"{shown}:{line}: ci_low/ci_high: give both bounds or neither")
        if lo is not None and hi is not None and not lo <= (score or 0.0) <= hi:
            raise PublicScoreError(f"{shown}:{line}: ci_low/ci_high: the interval {lo} .. {hi} "
                                   f"does not contain the score {score}")
        out.append((model, score, lo, hi, r.get("source", ""), r.get("date", ""), path.name, line))
    return out


def parse_online(path: Path) -> list[tuple[Any, ...]]:
    """Rows in `store.public_scores.ONLINE_COLS` order."""
    shown = str(path)
    out = []
    for line, r in _rows(path, ONLINE_REQUIRED):
        model = _name(shown, line, "model", r["model"])
        metric = _name(shown, line, "metric", r["metric"])
        value = _number(shown, line, "value", r["value"])
        n = _number(shown, line, "n", r["n"])
        if n is None or n < 1 or n != int(n):
            raise PublicScoreError(f"{shown}:{line}: n: {r['n']!r} is not a whole number of 1 or more")
        flag = r.get("higher_is_better", "").lower()
        if flag and flag not in _TRUE | _FALSE:
            raise PublicScoreError(f"{shown}:{line}: higher_is_better: {flag[:20]!r} is not true or false")
        out.append((model, metric, value, int(n), r.get("period", ""), int(flag not in _FALSE), path.name, line))
    return out


# ----------------------------------------------------------------- figures


class PublicRow(BaseModel):
    model: str
    score: float
    ci_low: float | None = None
    ci_high: float | None = None
    public_rank: int = Field(description="1 = best by the public score, among the models both rank")
    own_rank: int = Field(description="1 = best by lineup's rating")
    rank_change: int = Field(description="public_rank - own_rank: positive = better here than in public")


class Leaderboard(BaseModel):
    source: str
    date: str
    models: list[PublicRow] = Field(default_factory=list, description="the models both rate, by own rank")
    only_public: list[str] = Field(default_factory=list, description="public models without own votes")
    tau: float | None = Field(default=None, description="Kendall tau-b between the two rankings")
    tau_low: float | None = None
    tau_high: float | None = None
    biggest_changes: list[str] = Field(default_factory=list, description="models whose rank moves most")


class OnlineRow(BaseModel):
    model: str
    value: float
    n: int
    ci_low: float | None = Field(default=None, description="Wilson 95% interval for a rate; None otherwise")
    ci_high: float | None = None
    offline_rank: int | None = None


class OnlineMetric(BaseModel):
    metric: str
    period: str
    higher_is_better: bool
    models: list[OnlineRow] = Field(default_factory=list, description="best first by the online value")
    tau: float | None = Field(default=None, description="Kendall tau-b: online against offline ordering")
    agrees: bool | None = Field(default=None, description="the online and offline orderings are the same")


class PublicScores(BaseModel):
    """`leaderboards`: one per (source, date); `online`: one per (metric, period)."""

    leaderboards: list[Leaderboard] = Field(default_factory=list)
    online: list[OnlineMetric] = Field(default_factory=list)


def kendall_tau(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Kendall's tau-b of x against each row of y (y: (m,) or (R, m)); nan
    where either has no pair that is not tied."""
    x = np.asarray(x, dtype=float)
    y2 = np.atleast_2d(np.asarray(y, dtype=float))
    iu = np.triu_indices(x.size, 1)
    sx = np.sign(x[:, None] - x[None, :])[iu]
    sy = np.sign(y2[:, :, None] - y2[:, None, :])[:, iu[0], iu[1]]
    num = (sy * sx).sum(axis=1)
    den = np.sqrt(np.abs(sx).sum() * np.abs(sy).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def _ranks(values: Sequence[float]) -> list[int]:
    order = sorted(range(len(values)), key=lambda k: -values[k])
    rank = [0] * len(values)
    for r, k in enumerate(order, 1):
        rank[k] = r
    return rank


def _own(result: RatingResult) -> dict[str, float]:
    return {m.name: m.rating for m in result.models if m.ranked and m.component == 0}


def leaderboards(rows: Sequence[Mapping[str, Any]], result: RatingResult, level: float = 0.95) -> list[Leaderboard]:
    own = _own(result)
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["source"] or "", r["date"] or ""), []).append(r)
    out = []
    for (source, date), found in sorted(groups.items()):
        both = [r for r in found if r["model"] in own]
        board = Leaderboard(source=source, date=date, only_public=sorted(r["model"] for r in found
                                                                         if r["model"] not in own))
        if both:
            pub_rank = _ranks([r["score"] for r in both])
            own_rank = _ranks([own[r["model"]] for r in both])
            board.models = sorted((PublicRow(model=r["model"], score=r["score"], ci_low=r["ci_low"],
                                             ci_high=r["ci_high"], public_rank=p, own_rank=o, rank_change=p - o)
                                   for r, p, o in zip(both, pub_rank, own_rank, strict=True)), key=lambda row: row.own_rank)
        if len(both) >= 2:
            pub = np.array([r["score"] for r in both])
            board.tau = float(kendall_tau(pub, np.array([own[r["model"]] for r in both]))[0])
            if result.replicates is not None:
                col = {n: k for k, n in enumerate(result.replicate_models)}
                reps = result.replicates[:, [col[r["model"]] for r in both]]
                taus = kendall_tau(pub, reps)
                taus = taus[np.isfinite(taus)]
                if taus.size:
                    tail = (1 - level) / 2 * 100
                    board.tau_low, board.tau_high = (float(v) for v in percentile(taus, [tail, 100 - tail]))
            most = max((abs(row.rank_change) for row in board.models), default=0)
            board.biggest_changes = [row.model for row in board.models if most and abs(row.rank_change) == most]
        out.append(board)
    return out


def online_metrics(rows: Sequence[Mapping[str, Any]], result: RatingResult) -> list[OnlineMetric]:
    own = _own(result)
    own_rank = dict(zip(own, _ranks(list(own.values())), strict=True))
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["metric"], r["period"] or ""), []).append(r)
    out = []
    for (metric, period), found in sorted(groups.items()):
        higher = all(bool(r["higher_is_better"]) for r in found)
        sign = 1.0 if higher else -1.0
        found = sorted(found, key=lambda r: -sign * r["value"])
        rows_out = []
        for r in found:
            lo = hi = None
            if 0.0 <= r["value"] <= 1.0:
                lo, hi = wilson_interval(int(round(r["value"] * r["n"])), int(r["n"]))
            rows_out.append(OnlineRow(model=r["model"], value=r["value"], n=r["n"], ci_low=lo, ci_high=hi,
                                      offline_rank=own_rank.get(r["model"])))
        m = OnlineMetric(metric=metric, period=period, higher_is_better=higher, models=rows_out)
        both = [r for r in found if r["model"] in own]
        if len(both) >= 2:
            online = np.array([sign * r["value"] for r in both])
            offline = np.array([own[r["model"]] for r in both])
            m.tau = float(kendall_tau(online, offline)[0])
            m.agrees = bool(np.isfinite(m.tau) and math.isclose(m.tau, 1.0))
        out.append(m)
    return out


def public_scores(leaderboard_rows: Sequence[Mapping[str, Any]], online_rows: Sequence[Mapping[str, Any]],
                  result: RatingResult) -> PublicScores | None:
    """The section of the report; None when nothing was imported."""
    if not leaderboard_rows and not online_rows:
        return None
    return PublicScores(leaderboards=leaderboards(leaderboard_rows, result),
                        online=online_metrics(online_rows, result))
