"""core.stats.quantiles gives np.percentile's and np.quantile's answers bit for bit."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from core.stats.quantiles import percentile, quantile


def _same(ours, theirs) -> None:
    ours, theirs = np.asarray(ours), np.asarray(theirs)
    assert ours.shape == theirs.shape
    assert ours.dtype == theirs.dtype
    assert np.array_equal(ours.view(np.uint64), theirs.view(np.uint64)) or np.array_equal(ours, theirs, equal_nan=True)


CASES = [[tail, 100.0 - tail] for tail in (2.5, 5.0, 0.5)] + [[5, 25, 50, 75, 95], 95, 50.0, [0, 100], 100, 0, 2.5]


@pytest.mark.parametrize("q", CASES, ids=str)
def test_percentiles_of_bootstrap_shaped_arrays_match_numpy_bit_for_bit(q) -> None:
    rng = np.random.default_rng(7)
    for n in (1, 2, 3, 7, 200, 1001):
        for cols in (1, 2, 5):
            a = rng.normal(size=(n, cols)) * rng.choice([1e-9, 1.0, 1e9])
            _same(percentile(a, q, axis=0), np.percentile(a, q, axis=0))
            _same(percentile(a.T, q, axis=1), np.percentile(a.T, q, axis=1))
            _same(percentile(a, q), np.percentile(a, q))
            _same(percentile(a[:, 0].tolist(), q), np.percentile(a[:, 0].tolist(), q))


def test_values_that_repeat_and_nans_anywhere_match_numpy_bit_for_bit() -> None:
    """The order statistics come from a partition, not a sort: many equal
    values, and NaNs at any place of a slice, still give numpy's answers."""
    rng = np.random.default_rng(11)
    for n in (2, 5, 64, 999):
        a = rng.integers(0, 3, size=(n, 6)).astype(float)
        a[rng.random(a.shape) < 0.05] = np.nan
        for q in ([2.5, 97.5], [5, 25, 50, 75, 95], 0, 100, 37.5):
            with np.errstate(invalid="ignore"):
                _same(percentile(a, q, axis=0), np.percentile(a, q, axis=0))
                _same(percentile(a, q), np.percentile(a, q))


def test_nan_makes_its_slice_nan_and_infinities_stay_numpys() -> None:
    a = np.arange(40, dtype=float).reshape(10, 4)
    a[3, 1] = np.nan
    a[0, 2] = np.inf
    a[5, 3] = -np.inf
    for q in ([2.5, 97.5], 50, [0, 100], [10, 90]):
        with np.errstate(invalid="ignore"):      # inf - inf, in numpy's arithmetic as in ours
            ours, theirs = percentile(a, q, axis=0), np.percentile(a, q, axis=0)
        _same(ours, theirs)
        assert np.isnan(ours[..., 1]).all()   # column 1 holds the NaN
    _same(percentile([1.0, np.nan], 50), np.percentile([1.0, np.nan], 50))


def test_quantile_takes_fractions_and_refuses_what_numpy_refuses() -> None:
    s = np.sort(np.random.default_rng(3).exponential(size=333))
    for q in (0.0, 0.05, 0.5, 0.9, 0.975, 1.0, [0.1, 0.2]):
        _same(quantile(s, q), np.quantile(s, q))
    for bad in (-0.1, 1.5, [0.5, 2.0]):
        with pytest.raises(ValueError):
            quantile(s, bad)
    with pytest.raises(ValueError):
        percentile(s, 101)
    with pytest.raises(IndexError):
        percentile([], 50)


def test_the_report_path_never_imports_numpy_ma() -> None:
    """Why the module exists: np.percentile imports numpy.ma, 40 ms of every report."""
    code = ("import sys, numpy as np; from core.stats.quantiles import percentile; from core.stats import ratings as R; "
            "from core.report import patterns; "
            "percentile(np.random.default_rng(1).normal(size=(100, 3)), [2.5, 97.5], axis=0); "
            "print('numpy.ma' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
