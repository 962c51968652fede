"""Percentiles and quantiles, value for value numpy's default ("linear") method.

Why not `np.percentile`: for interpolated quantiles numpy calls its plain
`np.unique`, which imports `numpy.ma` (about 40 ms, a tenth of a 100k-vote
report) only to ask whether an array of partition indices is masked. The
same arithmetic here, on a partition at the order statistics it reads (the
same values land at the same places), gives bit-identical results for float
input (tests/test_quantiles.py compares them, NaN and infinities included).
"""

from __future__ import annotations

from typing import Any

import numpy as np


def quantile(a: Any, q: Any, axis: int | None = None) -> Any:
    """`np.quantile(a, q, axis=axis)`: q in [0, 1]; a NaN in a slice makes that slice's answer NaN."""
    arr = np.asarray(a, dtype=np.float64)
    qs = np.asarray(q, dtype=np.float64)
    if qs.size and not (qs.min() >= 0.0 and qs.max() <= 1.0):
        raise ValueError("Quantiles must be in the range [0, 1]")
    if axis is None:
        arr, axis = arr.ravel(), 0
    n = arr.shape[axis]
    if n == 0:
        raise IndexError("quantile of an empty array")
    virtual = np.atleast_1d((n - 1) * qs)
    # Only the order statistics read below need their sorted places (and the
    # last, which is NaN when any is): a partition puts exactly those there.
    kth = np.clip(np.concatenate([np.floor(virtual), np.floor(virtual) + 1, [n - 1]]), 0, n - 1).astype(np.intp)
    arr = np.moveaxis(np.partition(arr, kth, axis=axis), axis, 0)   # NaN goes last, as in a sort
    prev = np.floor(virtual)
    nxt = prev + 1
    above = virtual >= n - 1
    prev[above] = -1
    nxt[above] = -1
    below = virtual < 0
    prev[below] = 0
    nxt[below] = 0
    prev_i, next_i = prev.astype(np.intp), nxt.astype(np.intp)
    gamma = (virtual - prev_i).reshape(virtual.shape + (1,) * (arr.ndim - 1))
    low, high = arr[prev_i], arr[next_i]
    diff = high - low
    result = low + diff * gamma   # numpy's _lerp: from the nearer end, so q=1 gives the top exactly
    np.subtract(high, diff * (1 - gamma), out=result, where=gamma >= 0.5)
    nans = np.isnan(arr[-1, ...])
    if np.any(nans):
        np.copyto(result, arr[-1, ...], where=nans)
    if qs.ndim == 0:
        result = result[0]
        return result[()] if result.ndim == 0 else result
    return result


def percentile(a: Any, q: Any, axis: int | None = None) -> Any:
    """`np.percentile(a, q, axis=axis)`: q in [0, 100]."""
    return quantile(a, np.true_divide(np.asarray(q, dtype=np.float64), 100), axis=axis)
