"""Pure statistics: no I/O, no clocks.  Checked against scipy and by
property tests (tests/test_stats.py)."""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np
from scipy import stats as sst

from .model import Summary

CONFIDENCE = 0.95


def _t(df: float, confidence: float) -> float:
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
    for v, g in zip(values, groups):
        acc = sums.setdefault(g, [0.0, 0])
        acc[0] += v
        acc[1] += 1
    return [total / count for total, count in sums.values()]


def summarize(values: Sequence[float], confidence: float = CONFIDENCE,
              lower_is_better: bool = True, groups: Sequence[int] | None = None) -> Summary:
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
        half = _t(k - 1, confidence) * float(units.std(ddof=1)) / math.sqrt(k)
    else:
        half = float("inf")
    return Summary(
        n=int(a.size), mean=mean, median=float(np.median(a)),
        stdev=float(a.std(ddof=1)) if a.size > 1 else 0.0,
        ci_low=mean - half, ci_high=mean + half,
        min=float(a.min()), max=float(a.max()),
        best3of5=best_k_of_n(list(a), 3, 5, lower_is_better),
        best18of30=best_k_of_n(list(a), 18, 30, lower_is_better),
        units=int(k),
    )


def _rounded(disc: float, scale: float) -> float:
    """A discriminant that is negative only by rounding (zero-variance
    data) is zero: the interval is the point, not unbounded."""
    return 0.0 if -1e-9 * abs(scale) < disc < 0 else disc


def ratio_ci(cand: Sequence[float], base: Sequence[float],
             confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """Ratio of means cand/base with Fieller's confidence interval for two
    independent samples.  Returns (ratio, low, high); the bounds are -inf/inf
    when the baseline mean is not significantly different from zero (the
    interval is then unbounded)."""
    a, b = np.asarray(cand, float), np.asarray(base, float)
    if a.size < 2 or b.size < 2:
        raise ValueError("need at least two values on each side")
    ma, mb = a.mean(), b.mean()
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    r = ma / mb
    df = welch_df(va, a.size, r * r * vb, b.size)
    t2 = _t(df, confidence) ** 2
    qa = mb * mb - t2 * vb  # quadratic in theta: qa th^2 - 2 ma mb th + qc <= 0
    qc = ma * ma - t2 * va
    disc = _rounded(ma * ma * mb * mb - qa * qc, ma * ma * mb * mb)
    if qa <= 0 or disc < 0:
        return float(r), float("-inf"), float("inf")
    root = math.sqrt(disc)
    lo, hi = (ma * mb - root) / qa, (ma * mb + root) / qa
    return float(r), float(min(lo, hi)), float(max(lo, hi))


def ratio_ci_paired(cand: Sequence[float], base: Sequence[float],
                    confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """Ratio of means cand/base with Fieller's interval for paired
    observations: cand[i] and base[i] were measured side by side (one block
    of the interleaved runner), so host drift moves both, and the
    covariance term of Fieller's theorem takes it out.  Unpaired tails (an
    interrupted block) are dropped."""
    k = min(len(cand), len(base))
    a, b = np.asarray(cand[:k], float), np.asarray(base[:k], float)
    if k < 2:
        raise ValueError("need at least two pairs")
    ma, mb = a.mean(), b.mean()
    va, vb = a.var(ddof=1) / k, b.var(ddof=1) / k
    cov = float(np.cov(a, b, ddof=1)[0, 1]) / k
    r = ma / mb
    t2 = _t(k - 1, confidence) ** 2
    # (ma - th mb)^2 <= t2 (va - 2 th cov + th^2 vb): a quadratic in th
    qa = mb * mb - t2 * vb
    qb = ma * mb - t2 * cov
    qc = ma * ma - t2 * va
    disc = _rounded(qb * qb - qa * qc, qb * qb)
    if qa <= 0 or disc < 0:
        return float(r), float("-inf"), float("inf")
    root = math.sqrt(disc)
    return float(r), float((qb - root) / qa), float((qb + root) / qa)


def paired_p(cand: Sequence[float], base: Sequence[float]) -> float:
    """Two-sided p-value of the paired t-test on the log ratios of pairs
    (on the differences where a value is not positive; 1.0 when every pair
    is identical)."""
    k = min(len(cand), len(base))
    a, b = np.asarray(cand[:k], float), np.asarray(base[:k], float)
    d = np.log(a) - np.log(b) if (a > 0).all() and (b > 0).all() else a - b
    if d.var() == 0:
        return 1.0 if d.mean() == 0 else 0.0
    return float(sst.ttest_1samp(d, 0.0).pvalue)


def welch_df(v1: float, n1: int, v2: float, n2: int) -> float:
    """Welch-Satterthwaite degrees of freedom for variances of means v1, v2."""
    num = (v1 + v2) ** 2
    den = (v1 * v1 / (n1 - 1) if n1 > 1 else 0) + (v2 * v2 / (n2 - 1) if n2 > 1 else 0)
    if den == 0:
        return float(n1 + n2 - 2)
    return num / den


def ratio_ci_rel(ratio: float, low: float, high: float) -> float:
    """Half-width of a ratio's interval as a fraction of the ratio."""
    if not (math.isfinite(low) and math.isfinite(high)) or ratio == 0:
        return float("inf")
    return (high - low) / 2 / abs(ratio)


def geomean(values: Sequence[float]) -> float:
    v = [x for x in values if x > 0 and math.isfinite(x)]
    if not v:
        return float("nan")
    return float(math.exp(sum(math.log(x) for x in v) / len(v)))
