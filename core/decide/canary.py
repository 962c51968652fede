"""The online canary (`lineup canary plan` / `lineup canary report`): the
gateway configuration that splits traffic between the incumbent and a
candidate, the per-arm and per-category outcomes read back from the traces,
an always-valid sequential test with its verdict, and the calibration of the
offline result against the online one.

Why a module of its own: it is the last step of the method (sample from
production, compare offline, check online before switching) and joins three
sources no other module joins: a gateway's config, trace exports
(`core.exchange.traces`) and the offline record (votes, through `core.report.patterns`).

The plan is LiteLLM proxy's router config: one model group (the experiment's
name) with the two deployments weighted by the share (`simple-shuffle`
routing picks by weight), each deployment's `model_info.id` naming the
experiment and the arm, so every logged request (LiteLLM's logging payload
has `model_id`) says which arm served it; and one group per arm, for an app
that wants a user to stay on one arm (`sticky_arm`: a hash of experiment and
user id against the share), since LiteLLM's weighted pick is per request.

The test (`sequential`): the candidate minus the incumbent on a metric
(oriented so that more is better), d with standard error s from the two
arms' sample variances, against the normal-mixture boundary of
`core.stats.adaptive.boundary` (Robbins; Howard et al. 2021): a Gaussian estimate
whose true value is <= 0 crosses z >= boundary(s, a) at any look with
probability at most a/2, however often it is looked at. Verdicts, at level
`alpha` (a = alpha, so each claim errs with probability <= alpha/2):
- stop: the candidate is worse (-d/s crosses);
- ship: the candidate is better (d/s crosses), or not worse by the margin
  m > 0 ((d + m)/s crosses);
- continue otherwise, or while either arm has fewer than `MIN_REQUESTS`.
`tests/test_canary.py` measures the false "ship" rate under a planted null
with a look every few requests (at or under the nominal rate, where a
fixed-sample test looked at as often is not), and the power to find a
candidate planted 3 points better.

Calibration: per category, the offline win rate of the candidate over the
incumbent (ties half; Wilson interval) beside the online difference (95%
normal interval); Spearman's rank correlation of the two effects across
categories with a Fisher-z interval (Bonett-Wright standard error), and the
categories where offline and online each exclude "no difference" on
opposite sides, named.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from core.stats.adaptive import boundary
from core.stats.quantiles import quantile
from core.ground.inputs import InputError, decode, lines, open_input, read_input, shown_name
from core.ground.jsonl import json_objects
from core.exchange.traces import TraceCall, TraceError, feedback_value

ARMS = ("incumbent", "candidate")
MIN_REQUESTS = 30
Z95 = 1.959963984540054
Verdict = Literal["continue", "stop", "ship"]

# metric -> (what it is read from, more is better, default mixture scale tau)
METRICS: dict[str, tuple[str, bool]] = {
    "feedback": ("users' feedback, 0..1 (thumbs up = 1)", True),
    "errors": ("error rate", False),
    "latency": ("latency, ms", False),
    "ttft": ("time to first token, ms", False),
    "cost": ("cost per request", False),
}

# LiteLLM's provider prefixes for lineup's protocols.
_LITELLM_PREFIX = {"openai": "openai", "openai-responses": "openai", "anthropic": "anthropic", "gemini": "gemini",
                   "ollama": "ollama_chat"}


# ---------------------------------------------------------------- plan


@dataclass(frozen=True)
class Deployment:
    """One arm as the gateway calls it: LiteLLM's model string, server and key variable."""

    name: str                 # what the user called it (a lineup alias or a LiteLLM model string)
    model: str                # LiteLLM's `provider/model`
    api_base: str | None = None
    api_key_env: str | None = None


def deployment(name: str, config: Any | None) -> Deployment:
    """An arm from a lineup model config (`providers.model_config.ModelConfig`),
    or, without one, `name` as LiteLLM's model string."""
    if config is None:
        return Deployment(name=name, model=name)
    prefix = _LITELLM_PREFIX.get(config.provider, config.provider)
    return Deployment(name=name, model=f"{prefix}/{config.model}", api_base=config.base_url,
                      api_key_env=config.api_key_env)


def arm_id(experiment: str, arm: str) -> str:
    """The deployment id the plan gives an arm (LiteLLM logs it as `model_id`)."""
    return f"{experiment}-{arm}"


def plan_config(experiment: str, incumbent: Deployment, candidate: Deployment, share: float) -> dict[str, Any]:
    """LiteLLM proxy's config for the split: the group `experiment` sends
    `share` % of requests to the candidate; `EXPERIMENT-incumbent` and
    `EXPERIMENT-candidate` reach one arm each (sticky routing by the app)."""
    if not 0 < share < 100:
        raise ValueError(f"--share must be between 0 and 100 (exclusive), got {share:g}")
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", experiment):
        raise ValueError("--experiment: letters, digits, '.', '_' and '-' only (at most 64)")

    def params(d: Deployment, weight: float | None) -> dict[str, Any]:
        p: dict[str, Any] = {"model": d.model}
        if d.api_base:
            p["api_base"] = d.api_base
        if d.api_key_env:
            p["api_key"] = f"os.environ/{d.api_key_env}"     # LiteLLM reads the key from the environment
        if weight is not None:
            p["weight"] = weight
        return p

    entries = []
    for arm, d, weight in (("incumbent", incumbent, 100 - share), ("candidate", candidate, share)):
        info = {"id": arm_id(experiment, arm), "lineup_experiment": experiment, "lineup_arm": arm}
        entries.append({"model_name": experiment, "litellm_params": params(d, weight), "model_info": info})
    for arm, d in (("incumbent", incumbent), ("candidate", candidate)):
        info = {"id": arm_id(experiment, arm) + "-sticky", "lineup_experiment": experiment, "lineup_arm": arm}
        entries.append({"model_name": arm_id(experiment, arm), "litellm_params": params(d, None),
                        "model_info": info})
    return {"model_list": entries, "router_settings": {"routing_strategy": "simple-shuffle"}}


def _yaml_scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return f"{value:g}" if isinstance(value, float) else str(value)
    return json.dumps(str(value), ensure_ascii=True)      # a YAML double-quoted scalar: nothing interpreted


def to_yaml(obj: Any, indent: int = 0) -> str:
    """The plan as YAML (maps, lists, scalars; every string double-quoted)."""
    pad = "  " * indent
    lines: list[str] = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            if isinstance(v, (dict, list)) and v:
                lines.append(f"{pad}{k}:")
                lines.append(to_yaml(v, indent + 1))
            else:
                lines.append(f"{pad}{k}: {_yaml_scalar(v) if not isinstance(v, (dict, list)) else '{}'}")
    else:
        for item in obj:
            body = to_yaml(item, indent + 1).lstrip() if isinstance(item, dict) else _yaml_scalar(item)
            lines.append(f"{pad}- {body}")
    return "\n".join(lines)


def sticky_arm(experiment: str, user: str, share: float) -> str:
    """The arm a user stays on: the candidate for `share` % of users, chosen
    by a hash of (experiment, user), the same every time."""
    h = int.from_bytes(hashlib.sha256(f"{experiment}:{user}".encode()).digest()[:8], "big")
    return "candidate" if h % 10_000 < share * 100 else "incumbent"


# ---------------------------------------------------------------- outcomes


@dataclass
class Outcome:
    """One request of the canary."""

    arm: str
    category: str
    error: bool
    latency_ms: float | None
    ttft_ms: float | None
    cost: float | None
    tokens: int | None
    feedback: float | None
    trace_id: str | None

    def value(self, metric: str) -> float | None:
        if metric == "errors":
            return 1.0 if self.error else 0.0
        if self.error and metric != "feedback":
            return None          # a failed request has no latency or cost to compare
        return {"feedback": self.feedback, "latency": self.latency_ms, "ttft": self.ttft_ms,
                "cost": self.cost}[metric]


def _dig(obj: Any, dotted: str) -> Any:
    if isinstance(obj, dict) and dotted in obj:
        return obj[dotted]
    cur = obj
    for part in dotted.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return None
        cur = cur[part]
    return cur


def arm_of(call: TraceCall, experiment: str | None, incumbent: str, candidate: str) -> str | None:
    """Which arm served a call: a `lineup.arm` / `lineup_arm` field (the app's
    tag), the deployment id the plan gave it (`model_id`), else its model
    name compared with the two arms' (a lineup alias or the model itself)."""
    for key in ("lineup.arm", "lineup_arm", "metadata.lineup_arm", "arm"):
        value = _dig(call.fields, key)
        if value in ARMS:
            got_exp = _dig(call.fields, "lineup.experiment") or _dig(call.fields, "lineup_experiment")
            if experiment is None or got_exp in (None, experiment):
                return str(value)
    hidden = call.fields.get("hidden_params")
    model_id = call.fields.get("model_id") or (hidden.get("model_id") if isinstance(hidden, dict) else None)
    if isinstance(model_id, str) and experiment:
        for arm in ARMS:
            if model_id in (arm_id(experiment, arm), arm_id(experiment, arm) + "-sticky"):
                return arm
    names = {incumbent: "incumbent", candidate: "candidate"}
    if call.model is not None:
        if call.model in names:
            return names[call.model]
        bare = call.model.split("/", 1)[-1]
        for name, arm in names.items():
            if name.split("/", 1)[-1] == bare:
                return arm
    return None


def outcomes(calls: Sequence[TraceCall], *, incumbent: str, candidate: str, experiment: str | None,
             category: str | None, feedback: Mapping[str, float] | None = None,
             feedback_field: str | None = None) -> tuple[list[Outcome], int]:
    """The canary's requests (and how many calls belonged to neither arm).
    Feedback: the file's, joined on the trace id, else `feedback_field` of
    the call, else what the trace itself holds (Langfuse scores, LangSmith
    feedback)."""
    out: list[Outcome] = []
    other = 0
    for call in calls:
        arm = arm_of(call, experiment, incumbent, candidate)
        if arm is None:
            other += 1
            continue
        cat = _dig(call.fields, category) if category else None
        fb = None
        if feedback and call.trace_id is not None:
            fb = feedback.get(call.trace_id)
        if fb is None and feedback_field:
            fb = feedback_value(_dig(call.fields, feedback_field))
        if fb is None:
            fb = call.feedback
        out.append(Outcome(arm=arm, category=str(cat)[:200] if cat not in (None, "") else "(none)",
                           error=call.error is not None, latency_ms=call.latency_ms, ttft_ms=call.ttft_ms,
                           cost=call.cost, tokens=(call.input_tokens or 0) + (call.output_tokens or 0)
                           if call.input_tokens is not None or call.output_tokens is not None else None,
                           feedback=fb, trace_id=call.trace_id))
    return out, other


_ID_KEYS = ("trace_id", "traceId", "run_id", "id")
_VALUE_KEYS = ("score", "value", "thumbs", "feedback", "rating")


def read_feedback(path: Any) -> dict[str, float]:
    """Users' feedback by trace id, from JSON Lines or CSV (a column or key
    named trace_id / traceId / run_id / id, and score / value / thumbs /
    feedback / rating: thumbs up/down, true/false, 1/0/-1, or a score in
    [0, 1]). A row that cannot be read is an error naming FILE:LINE."""
    import csv
    import io

    shown = shown_name(path)
    rows: list[tuple[str, dict[str, Any]]] = []
    try:
        with open_input(path, limit=0) as f:
            head = f.read(1).lstrip()
        if head == b"{" or str(path).endswith((".jsonl", ".ndjson")):
            with open_input(path) as f:
                for _, where, obj, problem in json_objects(lines(f, shown), shown, "a feedback record"):
                    if problem:
                        raise TraceError(problem)
                    assert obj is not None
                    rows.append((where, obj))
        else:
            text = decode(read_input(path), shown)
            reader = csv.DictReader(io.StringIO(text))
            for row in reader:
                rows.append((f"{shown}:{reader.line_num}", {k.strip(): v for k, v in row.items() if k}))
    except InputError as exc:
        raise TraceError(str(exc)) from None
    except csv.Error as exc:
        raise TraceError(f"{shown}: bad CSV: {exc}") from None
    out: dict[str, float] = {}
    for where, row in rows:
        ident = next((row[k] for k in _ID_KEYS if row.get(k) not in (None, "")), None)
        if ident is None:
            raise TraceError(f"{where}: no trace id (a field named {', '.join(_ID_KEYS)})")
        key = next((k for k in _VALUE_KEYS if k in row), None)
        value = feedback_value(row[key]) if key else None
        if value is None:
            raise TraceError(f"{where}: {key or 'score'}: expected thumbs (up/down, 1/0/-1, true/false) "
                             f"or a score in [0, 1]")
        out[str(ident)[:100].lower() if re.fullmatch(r"[0-9A-Fa-f]{32}", str(ident)) else str(ident)[:100]] = value
    return out


# ---------------------------------------------------------------- figures


@dataclass
class Interval:
    value: float
    low: float
    high: float


def wilson(successes: float, n: int, z: float = Z95) -> Interval | None:
    if n <= 0:
        return None
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return Interval(p, max(0.0, centre - half), min(1.0, centre + half))


def mean_interval(values: np.ndarray, z: float = Z95) -> Interval | None:
    """A mean with its normal interval; Wilson's for 0/1 values."""
    n = len(values)
    if n == 0:
        return None
    if np.all((values == 0) | (values == 1)):
        return wilson(float(values.sum()), n, z)
    m = float(values.mean())
    se = float(values.std(ddof=1)) / math.sqrt(n) if n > 1 else math.inf
    return Interval(m, m - z * se, m + z * se)


def quantile_interval(values: np.ndarray, q: float, z: float = Z95) -> Interval | None:
    """A quantile with its distribution-free interval (order statistics around n q)."""
    n = len(values)
    if n == 0:
        return None
    s = np.sort(values)
    half = z * math.sqrt(n * q * (1 - q))
    lo = max(0, int(math.floor(n * q - half)) - 1)
    hi = min(n - 1, int(math.ceil(n * q + half)))
    return Interval(float(quantile(s, q)), float(s[lo]), float(s[hi]))


@dataclass
class ArmFigures:
    arm: str
    requests: int
    errors: Interval | None
    latency_p50: Interval | None
    latency_p95: Interval | None
    ttft_p50: Interval | None
    tokens_mean: float | None
    cost_mean: Interval | None
    feedback: Interval | None
    feedback_n: int


def _values(rows: Sequence[Outcome], metric: str) -> np.ndarray:
    return np.array([v for r in rows if (v := r.value(metric)) is not None], dtype=float)


def arm_figures(arm: str, rows: Sequence[Outcome]) -> ArmFigures:
    lat, ttft, cost, fb = (_values(rows, m) for m in ("latency", "ttft", "cost", "feedback"))
    tokens = [r.tokens for r in rows if r.tokens is not None]
    return ArmFigures(
        arm=arm, requests=len(rows), errors=wilson(sum(r.error for r in rows), len(rows)),
        latency_p50=quantile_interval(lat, 0.5), latency_p95=quantile_interval(lat, 0.95),
        ttft_p50=quantile_interval(ttft, 0.5), tokens_mean=float(np.mean(tokens)) if tokens else None,
        cost_mean=mean_interval(cost), feedback=mean_interval(fb), feedback_n=len(fb))


# ---------------------------------------------------------------- the sequential test


@dataclass
class Sequential:
    metric: str
    difference: float | None        # candidate - incumbent, oriented: more is better
    se: float | None
    z: float | None
    boundary: float | None          # the z a claim needs now
    low: float | None               # the always-valid interval of the oriented difference
    high: float | None
    verdict: Verdict
    reason: str


def default_tau(metric: str, incumbent_mean: float | None) -> float:
    """The mixture's scale in the metric's units: tightest for differences
    of this order; any value keeps the guarantee (a proportion: 5 points;
    a time or a cost: a tenth of the incumbent's mean)."""
    if metric in ("feedback", "errors"):
        return 0.05
    return max(abs(incumbent_mean or 0.0) * 0.1, 1e-9)


def sequential(metric: str, n_a: int, mean_a: float, var_a: float, n_b: int, mean_b: float, var_b: float,
               *, alpha: float = 0.05, margin: float = 0.0, tau: float | None = None,
               min_requests: int = MIN_REQUESTS) -> Sequential:
    """The always-valid test of the candidate (b) against the incumbent (a)
    from each arm's count, mean and variance (see the module docstring)."""
    higher = METRICS[metric][1]
    if n_a < min_requests or n_b < min_requests:
        return Sequential(metric, None, None, None, None, None, None, "continue",
                          f"fewer than {min_requests} requests with a {metric} value in an arm")
    d = (mean_b - mean_a) if higher else (mean_a - mean_b)
    se = math.sqrt(var_a / n_a + var_b / n_b)
    if not se > 0:
        return Sequential(metric, d, se, None, None, None, None, "continue",
                          "no variation yet: the arms' values are all equal")
    bound = boundary(se, alpha, tau if tau is not None else default_tau(metric, mean_a))
    z = d / se
    low, high = d - bound * se, d + bound * se
    if -z >= bound:
        return Sequential(metric, d, se, z, bound, low, high, "stop", "the candidate is worse")
    if z >= bound:
        return Sequential(metric, d, se, z, bound, low, high, "ship", "the candidate is better")
    if margin > 0 and (d + margin) / se >= bound:
        return Sequential(metric, d, se, z, bound, low, high, "ship",
                          f"the candidate is not worse by more than the margin {margin:g}")
    return Sequential(metric, d, se, z, bound, low, high, "continue", "not decided yet")


def sequential_of(rows: Sequence[Outcome], metric: str, **options: Any) -> Sequential:
    a = _values([r for r in rows if r.arm == "incumbent"], metric)
    b = _values([r for r in rows if r.arm == "candidate"], metric)

    def stats(x: np.ndarray) -> tuple[int, float, float]:
        return len(x), float(x.mean()) if len(x) else 0.0, float(x.var(ddof=1)) if len(x) > 1 else 0.0

    return sequential(metric, *stats(a), *stats(b), **options)


# ---------------------------------------------------------------- calibration


@dataclass
class OfflinePair:
    """The offline votes of one category between the two (candidate wins, incumbent wins, ties)."""

    candidate_wins: int = 0
    incumbent_wins: int = 0
    ties: int = 0

    @property
    def n(self) -> int:
        return self.candidate_wins + self.incumbent_wins + self.ties


@dataclass
class CategoryCalibration:
    category: str
    online_requests: int
    online: Interval | None          # candidate - incumbent on the metric, oriented, 95%
    offline_votes: int
    offline: Interval | None         # the candidate's offline win rate (ties half), 95%
    agree: str                       # "agree", "DISAGREE", "unclear" (an interval holds no difference)


@dataclass
class Calibration:
    categories: list[CategoryCalibration]
    spearman: float | None
    spearman_low: float | None
    spearman_high: float | None
    disagreements: list[str] = field(default_factory=list)


def _online_difference(rows: Sequence[Outcome], metric: str) -> Interval | None:
    a = _values([r for r in rows if r.arm == "incumbent"], metric)
    b = _values([r for r in rows if r.arm == "candidate"], metric)
    if len(a) < 2 or len(b) < 2:
        return None
    sign = 1.0 if METRICS[metric][1] else -1.0
    d = sign * (float(b.mean()) - float(a.mean()))
    se = math.sqrt(float(a.var(ddof=1)) / len(a) + float(b.var(ddof=1)) / len(b))
    return Interval(d, d - Z95 * se, d + Z95 * se)


def _ranks(x: Sequence[float]) -> np.ndarray:
    """Average ranks (ties share theirs)."""
    arr = np.asarray(x, dtype=float)
    order = np.argsort(arr, kind="stable")
    ranks = np.empty(len(arr))
    ranks[order] = np.arange(len(arr), dtype=float)
    for value in np.unique(arr):
        same = arr == value
        ranks[same] = ranks[same].mean()
    return ranks


def spearman(x: Sequence[float], y: Sequence[float]) -> tuple[float, float | None, float | None] | None:
    """Spearman's rho with a 95% Fisher-z interval (Bonett-Wright: se =
    sqrt((1 + rho^2 / 2) / (k - 3)); None below 4 categories)."""
    k = len(x)
    if k < 3:
        return None
    rx, ry = _ranks(x), _ranks(y)
    if rx.std() == 0 or ry.std() == 0:
        return None
    rho = float(np.corrcoef(rx, ry)[0, 1])
    if k < 4:
        return rho, None, None
    zr = math.atanh(max(min(rho, 0.999999), -0.999999))
    se = math.sqrt((1 + rho * rho / 2) / (k - 3))
    return rho, math.tanh(zr - Z95 * se), math.tanh(zr + Z95 * se)


def calibrate(rows: Sequence[Outcome], offline: Mapping[str, OfflinePair], metric: str) -> Calibration:
    by_cat: dict[str, list[Outcome]] = defaultdict(list)
    for r in rows:
        by_cat[r.category].append(r)
    cats: list[CategoryCalibration] = []
    for cat in sorted(set(by_cat) | set(offline)):
        on = _online_difference(by_cat.get(cat, []), metric)
        pair = offline.get(cat)
        off = wilson(pair.candidate_wins + 0.5 * pair.ties, pair.n) if pair and pair.n else None
        sign_on = 0 if on is None else (1 if on.low > 0 else -1 if on.high < 0 else 0)
        sign_off = 0 if off is None else (1 if off.low > 0.5 else -1 if off.high < 0.5 else 0)
        agree = "DISAGREE" if sign_on * sign_off < 0 else "agree" if sign_on == sign_off != 0 else "unclear"
        cats.append(CategoryCalibration(cat, len(by_cat.get(cat, [])), on, pair.n if pair else 0, off, agree))
    both = [c for c in cats if c.online is not None and c.offline is not None]
    got = spearman([c.offline.value for c in both if c.offline], [c.online.value for c in both if c.online])
    rho, lo, hi = got if got is not None else (None, None, None)
    return Calibration(cats, rho, lo, hi, [c.category for c in cats if c.agree == "DISAGREE"])


# ---------------------------------------------------------------- the report


@dataclass
class CanaryReport:
    incumbent: str
    candidate: str
    experiment: str | None
    metric: str
    requests: int
    other_calls: int
    arms: list[ArmFigures]
    categories: dict[str, list[ArmFigures]]
    test: Sequential
    category_tests: dict[str, Sequential]
    calibration: Calibration | None

    def to_json(self) -> str:
        from dataclasses import asdict

        def clean(obj: Any) -> Any:
            if isinstance(obj, float) and not math.isfinite(obj):
                return None
            if isinstance(obj, dict):
                return {k: clean(v) for k, v in obj.items()}
            if isinstance(obj, list):
                return [clean(v) for v in obj]
            return obj

        return json.dumps({"schema": "lineup.canary/1", **clean(asdict(self))}, indent=2, ensure_ascii=False)


def canary_report(rows: Sequence[Outcome], *, incumbent: str, candidate: str, experiment: str | None,
                  metric: str, other_calls: int = 0, offline: Mapping[str, OfflinePair] | None = None,
                  alpha: float = 0.05, margin: float = 0.0, tau: float | None = None) -> CanaryReport:
    if metric not in METRICS:
        raise ValueError(f"--metric must be one of {', '.join(METRICS)}")
    by_cat: dict[str, list[Outcome]] = defaultdict(list)
    for r in rows:
        by_cat[r.category].append(r)
    options = dict(alpha=alpha, margin=margin, tau=tau)
    return CanaryReport(
        incumbent=incumbent, candidate=candidate, experiment=experiment, metric=metric, requests=len(rows),
        other_calls=other_calls,
        arms=[arm_figures(arm, [r for r in rows if r.arm == arm]) for arm in ARMS],
        categories={c: [arm_figures(arm, [r for r in rs if r.arm == arm]) for arm in ARMS]
                    for c, rs in sorted(by_cat.items())},
        test=sequential_of(rows, metric, **options),
        category_tests={c: sequential_of(rs, metric, **options) for c, rs in sorted(by_cat.items())},
        calibration=calibrate(rows, offline, metric) if offline is not None else None)
