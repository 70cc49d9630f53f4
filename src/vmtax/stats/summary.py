"""Summaries of one side: the mean and its Student-t interval over process
means, best k of n, and the figures made of several (a ratio's relative half-width,
a geometric mean, Jain's index, an unpaired ratio).  Pure: no I/O."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt
from scipy import stats as sst

from ..model import Interval, Summary

CONFIDENCE = 0.95
Array: TypeAlias = npt.NDArray[Any]  # a numpy array (of floats, or of indices)
Values: TypeAlias = Sequence[float] | Array  # a side's values: a list, or a numpy array of floats


@functools.lru_cache(maxsize=4096)
def t_quantile(df: float, confidence: float) -> float:
    """Student's t at two-sided confidence (cached: scipy's ppf is slow, and
    an analysis asks for the same few quantiles over and over)."""
    return float(sst.t.ppf(0.5 + confidence / 2, df))


def best_k_of_n(values: Sequence[float], k: int, n: int, lower_is_better: bool = True) -> float | None:
    """Mean of the best k of the first n values (seed 001: "best 3 of 5")."""
    if len(values) < n:
        return None
    head = sorted(values[:n], reverse=not lower_is_better)
    return float(np.mean(head[:k]))


def cluster_means(values: Sequence[float], groups: Sequence[int] | None) -> list[float]:
    """Mean of the values of each group (agent process), in order of first
    appearance; the values themselves when there are no groups.

    Samples of one process share its memory layout, CPU placement and
    caches, so they are not independent: the process is the unit of
    replication, and intervals and tests are computed over process means.
    (Pooling samples as if independent flagged 7 of 31 rows of a real A/A
    comparison; see README.)"""
    if groups is None:
        return [float(v) for v in values]
    if len(groups) != len(values):
        raise ValueError("one group per value")
    sums: dict[int, list[float]] = {}
    for v, g in zip(values, groups, strict=True):
        acc = sums.setdefault(g, [0.0, 0])
        acc[0] += v
        acc[1] += 1
    return [total / count for total, count in sums.values()]


def summarize(
    values: Sequence[float],
    confidence: float = CONFIDENCE,
    lower_is_better: bool = True,
    groups: Sequence[int] | None = None,
) -> Summary:
    """The mean with its Student-t confidence interval, computed over the
    means of the groups (processes) when given, and the descriptive figures
    (median, min, best k of n) over all values."""
    a = np.asarray(values, dtype=float)
    if a.size == 0:
        raise ValueError("no values to summarize")
    units = np.asarray(cluster_means(values, groups), dtype=float)
    mean = float(units.mean())
    k = units.size
    if k > 1:
        half = t_quantile(k - 1, confidence) * float(units.std(ddof=1)) / math.sqrt(k)
    else:
        half = float("inf")
    return Summary(
        n=int(a.size),
        ci=Interval(mean, mean - half, mean + half, confidence),
        median=float(np.median(a)),
        stdev=float(a.std(ddof=1)) if a.size > 1 else 0.0,
        min=float(a.min()),
        max=float(a.max()),
        best3of5=best_k_of_n(list(a), 3, 5, lower_is_better),
        best18of30=best_k_of_n(list(a), 18, 30, lower_is_better),
        units=int(k),
    )


def ratio_ci_rel(ratio: float, low: float, high: float) -> float:
    """Half-width of a ratio's interval as a fraction of the ratio."""
    return Interval(ratio, low, high).rel_halfwidth


def geomean(values: Sequence[float]) -> float:
    v = [x for x in values if x > 0 and math.isfinite(x)]
    if not v:
        return float("nan")
    return float(math.exp(sum(math.log(x) for x in v) / len(v)))


# -- many instances at once (vmtax scale) -----------------------------------------
def jain(values: Sequence[float]) -> float:
    """Jain's fairness index (sum x)^2 / (n * sum x^2): 1 when every
    instance got the same, 1/n when one got everything."""
    x = np.asarray(values, dtype=float)
    if x.size == 0 or not np.all(np.isfinite(x)) or np.any(x < 0):
        raise ValueError("Jain's index needs finite values >= 0")
    sq = float((x * x).sum())
    return float(x.sum() ** 2 / (x.size * sq)) if sq > 0 else 1.0


def welch_df(sa: float, na: int, sb: float, nb: int) -> float:
    """Welch's degrees of freedom of a difference of two means whose squared
    standard errors are sa and sb, over na and nb values (a side with no
    spread adds nothing; 1 where neither has any)."""
    den = (sa**2 / (na - 1) if sa else 0.0) + (sb**2 / (nb - 1) if sb else 0.0)
    return (sa + sb) ** 2 / den if den else 1.0


def ratio_unpaired(a: Values, b: Values, confidence: float = CONFIDENCE) -> Interval:
    """mean(a) / mean(b) and its interval for independent samples (rounds
    at one instance count against rounds at another): the delta method on
    the log of the ratio (so the interval stays positive), its standard
    error from the two means' relative standard errors, with Welch's
    degrees of freedom.  Unbounded when either side has fewer than two."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    ma, mb = float(a.mean()), float(b.mean())
    r = ma / mb
    if a.size < 2 or b.size < 2:
        return Interval(r, float("-inf"), float("inf"), confidence)
    ra = float(a.var(ddof=1)) / a.size / ma**2  # squared relative standard errors
    rb = float(b.var(ddof=1)) / b.size / mb**2
    if ra + rb == 0:
        return Interval(r, r, r, confidence)
    half = t_quantile(welch_df(ra, a.size, rb, b.size), confidence) * math.sqrt(ra + rb)
    return Interval(r, r * math.exp(-half), r * math.exp(half), confidence)


def ratio_over_replicates(ratios: Sequence[float], confidence: float = CONFIDENCE) -> tuple[Interval, float]:
    """(the geometric mean of replicates' ratios with its Student-t interval
    over their logs, the two-sided p-value of "the ratio is 1"): each
    replicate one run, its ratio an average over many blocks (near normal
    on the log scale); a replicate far off widens the interval (the SD
    counts it) rather than moving the verdict alone.  At least two
    positive ratios (ValueError); with equal logs the interval is a point
    and p is 0 or 1."""
    logs = np.log(np.asarray(ratios, dtype=float))
    k = logs.size
    if k < 2 or not np.isfinite(logs).all():
        raise ValueError("need two or more positive, finite ratios")
    mean, se = float(logs.mean()), float(logs.std(ddof=1)) / math.sqrt(k)
    if se == 0:
        return Interval(math.exp(mean), math.exp(mean), math.exp(mean), confidence), float(mean == 0)
    half = t_quantile(k - 1, confidence) * se
    p = float(2 * sst.t.sf(abs(mean) / se, k - 1))
    return Interval(math.exp(mean), math.exp(mean - half), math.exp(mean + half), confidence), p
