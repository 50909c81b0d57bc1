"""Interval estimates over seeds, from SciPy: paired ratios of means, interquartile means, probability of improvement.

One place for the statistics sfenv reports over episode seeds, on :func:`scipy.stats.bootstrap`
rather than hand-written resampling:

- :func:`mean_ci` -- the mean and the half-width of its Student-t confidence interval, the
  ``mean ± CI`` of every results table;
- :func:`paired_ratio` -- ``mean(a) / mean(b)`` of two agents on the *same* seeds with a paired
  bootstrap interval (the seeds are resampled together, ``paired=True``), BCa by default;
- :func:`iqm_interval` -- the interquartile mean (the mean of the middle 50 %,
  :func:`scipy.stats.trim_mean` with 25 % cut at each end) with a bootstrap interval, the robust
  aggregate Agarwal et al. recommend for RL results ("Deep RL at the Edge of the Statistical
  Precipice", NeurIPS 2021, whose ``rliable`` library computes the same figure);
- :func:`probability_of_improvement` -- ``P(X < Y) + P(X = Y) / 2`` over seeds for a
  lower-is-better metric, the Mann-Whitney U statistic divided by ``n m`` (the definition of
  Agarwal et al. and rliable), from :func:`scipy.stats.mannwhitneyu`.

Every resampling uses a fixed ``random_state``, so a number is the same on every run.  SciPy is
imported inside the functions (``import sfenv`` stays light).  rliable itself is not used: its
``library`` module needs ``arch``, which fails to import with current pandas; its metrics are
one-liners over SciPy.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Protocol, TypeAlias

import numpy as np

from sfenv.errors import InvalidInput

__all__ = [
    "RANDOM_STATE",
    "RESAMPLES",
    "SeedValues",
    "iqm_interval",
    "mean_ci",
    "paired_ratio",
    "probability_of_improvement",
]

#: one value per seed: a sequence or a 1-D array
SeedValues: TypeAlias = "Sequence[float] | np.ndarray"

#: bootstrap resamples of every interval
RESAMPLES = 10_000
#: the fixed seed of every bootstrap
RANDOM_STATE = 0


def mean_ci(values: SeedValues, level: float = 0.95) -> tuple[float, float]:
    """Mean and half-width of its two-sided Student-t confidence interval (NaN values dropped).

    ``mean ± t_{(1+level)/2, n-1} * s / sqrt(n)`` with ``s`` the sample standard deviation
    (``ddof=1``); the half-width is NaN with fewer than two values, 0 if they are all equal.

    :param values: one value per seed.
    :param level: confidence level, in (0, 1).
    :return: ``(mean, half-width)``.
    :raises InvalidInput: for a ``level`` outside (0, 1).
    """
    from scipy.stats import t as student_t  # scipy comes with pymoo; imported here to keep imports light

    _check_level(level)

    x = np.asarray([v for v in values if not math.isnan(v)], dtype=float)
    if x.size == 0:
        return math.nan, math.nan
    mean = float(np.mean(x))
    if x.size < 2:
        return mean, math.nan
    return mean, float(student_t.ppf(0.5 + level / 2, x.size - 1) * np.std(x, ddof=1) / math.sqrt(x.size))


def _check_level(level: float) -> None:
    """Refuse a confidence level outside (0, 1) (``95`` for 95 %, ``2``, NaN, a bool or a text), naming ``level``."""
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0 < level < 1:
        raise InvalidInput(f"level = {level!r}; expected a confidence level strictly between 0 and 1, e.g. 0.95")


def _values(name: str, values: SeedValues) -> np.ndarray:
    x = np.asarray(values, dtype=float)
    if x.ndim != 1 or x.size == 0 or not np.all(np.isfinite(x)):
        raise InvalidInput(f"{name}: expected a non-empty list of finite numbers")
    return x


class _Interval(Protocol):
    """A ``scipy.stats.bootstrap`` interval (``ConfidenceInterval``): its ends."""

    low: float
    high: float


class _BootstrapResult(Protocol):
    """What :func:`_ci` reads of a ``scipy.stats.bootstrap`` result (``BootstrapResult``; SciPy has no type hints)."""

    confidence_interval: _Interval


def _ci(result: _BootstrapResult, fallback: float) -> tuple[float, float]:
    """The interval of a ``scipy.stats.bootstrap`` result; a degenerate (NaN) one collapses to ``fallback``."""
    ci = result.confidence_interval
    lo, hi = float(ci.low), float(ci.high)
    if math.isnan(lo) or math.isnan(hi):
        return fallback, fallback
    return lo, hi


def paired_ratio(a: SeedValues, b: SeedValues, level: float = 0.95, method: str = "BCa",
                 n_resamples: int = RESAMPLES, random_state: int = RANDOM_STATE) -> tuple[float, float, float]:
    """``mean(a) / mean(b)`` and its paired bootstrap interval over seeds.

    ``a[i]`` and ``b[i]`` are two agents' values on the same seed ``i``; the bootstrap resamples
    seed indices (``scipy.stats.bootstrap(..., paired=True)``), so the interval accounts for the
    pairing.  With all resampled ratios equal (e.g. identical agents) the interval is the ratio.

    :param level: confidence level, in (0, 1).
    :param method: ``"BCa"``, ``"percentile"`` or ``"basic"`` (scipy's names).
    :return: ``(ratio, low, high)``.
    :raises InvalidInput: for empty, non-finite or unequal-length inputs, ``mean(b) == 0``, or a ``level``
        outside (0, 1).
    """
    from scipy.stats import bootstrap

    _check_level(level)

    x, y = _values("a", a), _values("b", b)
    if x.size != y.size:
        raise InvalidInput(f"paired_ratio: {x.size} values against {y.size}; expected the same seeds")
    if y.mean() == 0:
        raise InvalidInput("paired_ratio: mean(b) is 0; the ratio is undefined")
    ratio = float(x.mean() / y.mean())
    if x.size < 2:
        return ratio, math.nan, math.nan

    def statistic(p: np.ndarray, q: np.ndarray, axis: int = -1) -> np.ndarray:
        return np.mean(p, axis=axis) / np.mean(q, axis=axis)

    with warnings.catch_warnings():  # a degenerate sample (every ratio equal) warns; its interval is the ratio
        warnings.simplefilter("ignore")
        res = bootstrap((x, y), statistic, paired=True, vectorized=True, confidence_level=level, method=method,
                        n_resamples=n_resamples, random_state=random_state)
    lo, hi = _ci(res, ratio)
    return ratio, lo, hi


def iqm_interval(values: SeedValues, level: float = 0.95, method: str = "percentile",
                 n_resamples: int = RESAMPLES, random_state: int = RANDOM_STATE) -> tuple[float, float, float]:
    """Interquartile mean of ``values`` and its bootstrap interval.

    :return: ``(iqm, low, high)``; the interval is NaN with one value.
    :raises InvalidInput: for empty or non-finite ``values``, or a ``level`` outside (0, 1).
    """
    from scipy.stats import bootstrap, trim_mean

    _check_level(level)

    x = _values("values", values)
    iqm = float(trim_mean(x, 0.25))
    if x.size < 2:
        return iqm, math.nan, math.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = bootstrap((x,), lambda s, axis=-1: trim_mean(s, 0.25, axis=axis), vectorized=True,
                        confidence_level=level, method=method, n_resamples=n_resamples, random_state=random_state)
    lo, hi = _ci(res, iqm)
    return iqm, lo, hi


def probability_of_improvement(x: SeedValues, y: SeedValues) -> float:
    """Probability that a seed of ``x`` is lower (better, e.g. a JCT) than one of ``y``, ties counting half.

    ``U / (n m)`` with ``U`` the Mann-Whitney statistic of ``y`` against ``x``
    (:func:`scipy.stats.mannwhitneyu`): 1 if every value of ``x`` is below every value of ``y``,
    0.5 for identical samples.
    """
    from scipy.stats import mannwhitneyu

    a, b = _values("x", x), _values("y", y)
    u = mannwhitneyu(b, a, alternative="two-sided").statistic
    return float(u) / (a.size * b.size)
