"""The median block: the Hodges-Lehmann estimate of a ratio over blocks
paired in random order, the signed-rank test and its inverted interval.
Pure.

The sign-flip test (signflip.py) compares sums: the ratio of means over
blocks.  One block whose process landed in a slow state of its own (a TCG
guest's fresh process read 28% slower than its twin's for a whole block,
a state no other block shared) moves that sum, and the interval over every
block widens with it.  The signed-rank test is the same test on the ranks
of the blocks' log ratios: under "the candidate is the baseline" each
block's label is a fair coin, so the log ratios d are symmetric about 0
and, given |d|, the signs of their ranks are fair coins -- exact under
exactly the assumption the sign-flip test makes, whatever the host's
drift.  Its estimate, the median of the Walsh averages (d_i + d_j)/2, is
the ratio a typical block reads (the pseudo-median), and its interval the
log ratios the test does not reject: two order statistics of the Walsh
averages.  An outlying block then counts as one rank among k."""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy import stats as sst

from .signflip import as_pairs
from .summary import CONFIDENCE, Array, Values

EXACT_RANKS = 300  # up to this many blocks the signed-rank null is counted exactly; beyond, its normal limit


@lru_cache(maxsize=64)
def _null_cdf(k: int) -> Array:
    """P(W+ <= w) for w = 0 .. k(k+1)/2, W+ the sum of the ranks 1..k given a
    positive sign each with chance 1/2 (the number of subsets of 1..k with
    each sum, over 2^k)."""
    top = k * (k + 1) // 2
    counts = np.zeros(top + 1)
    counts[0] = 1.0
    for r in range(1, k + 1):
        counts[r:] = counts[r:] + counts[:-r].copy()
        counts /= 2  # a chance, kept in range for any k
    cdf: Array = np.cumsum(counts)
    return cdf


def _lower_tail(w: float, k: int) -> float:
    """P(W+ <= w) under the null, exact up to EXACT_RANKS blocks."""
    if w < 0:
        return 0.0
    if k <= EXACT_RANKS:
        cdf = _null_cdf(k)
        return float(cdf[min(math.floor(w + 1e-9), cdf.size - 1)])
    mean, sd = k * (k + 1) / 4, math.sqrt(k * (k + 1) * (2 * k + 1) / 24)
    return float(sst.norm.cdf((w + 0.5 - mean) / sd))  # with a continuity correction


def critical(k: int, confidence: float = CONFIDENCE) -> int:
    """The largest c with P(W+ <= c) <= (1 - confidence)/2; -1 when even
    W+ = 0 is more likely than that (too few blocks to reject anything)."""
    half = (1 - confidence) / 2
    if k <= EXACT_RANKS:
        return int(np.searchsorted(_null_cdf(k), half + 1e-12, side="right")) - 1
    mean, sd = k * (k + 1) / 4, math.sqrt(k * (k + 1) * (2 * k + 1) / 24)
    c = math.floor(mean + float(sst.norm.ppf(half)) * sd - 0.5)
    while c >= 0 and _lower_tail(c, k) > half:
        c -= 1
    return c


def blocks_to_call(tests: int, alpha: float = 1 - CONFIDENCE) -> int:
    """The fewest blocks whose signed-rank test can call a row after Holm's
    correction over `tests` rows with its two smallest blocks against it:
    p = 2 P(W+ <= 3) = 10 / 2^k <= alpha / tests.  (A test on ranks cannot
    go below 2 / 2^k, and a row stopped precise on fewer blocks would be
    inconclusive however far its interval lies past a threshold.)"""
    return max(1, math.ceil(math.log2(10 * max(tests, 1) / alpha)))


class RankTest:
    """The signed-rank test of "cand/base = theta" over k paired values,
    on their log ratios; the ratio is exp of the Hodges-Lehmann estimate.
    Ties among |d| take their mean rank, and a d exactly at log(theta)
    carries no sign (Wilcoxon's convention); the p-value is then the
    normal limit with the ties' variance (the exact null assumes ranks
    1..k)."""

    def __init__(self, cand: Values, base: Values):
        c, b = as_pairs(cand, base)
        self.k = c.size
        if self.k < 2:
            raise ValueError("need at least two pairs")
        self.d: Array = np.log(c) - np.log(b)
        i, j = np.triu_indices(self.k)
        self.walsh: Array = np.sort((self.d[i] + self.d[j]) / 2)

    @property
    def ratio(self) -> float:
        return float(math.exp(float(np.median(self.walsh))))

    def p(self, theta: float = 1.0) -> float:
        """Two-sided p-value of "cand/base = theta"."""
        x = self.d - math.log(theta)
        x = x[x != 0]
        n = x.size
        if n == 0:
            return 1.0
        ranks = sst.rankdata(np.abs(x))
        w = float(ranks[x > 0].sum())
        top = n * (n + 1) / 2
        if n <= EXACT_RANKS and np.array_equal(ranks, np.round(ranks)) and np.unique(ranks).size == n:
            tail = min(_lower_tail(w, n), _lower_tail(top - w, n))
            return min(1.0, 2 * tail)
        _, counts = np.unique(ranks, return_counts=True)
        var = n * (n + 1) * (2 * n + 1) / 24 - float(np.sum(counts**3 - counts)) / 48
        if var <= 0:
            return 1.0
        z = (abs(w - top / 2) - 0.5) / math.sqrt(var)
        return float(min(1.0, 2 * sst.norm.sf(max(z, 0.0))))

    def interval(self, confidence: float = CONFIDENCE) -> tuple[float, float]:
        """The ratios the test does not reject at 1 - confidence: exp of the
        (c+1)-th smallest and largest Walsh averages (c: critical()); (-inf,
        inf) when too few blocks can reject anything."""
        c = critical(self.k, confidence)
        if c < 0:
            return float("-inf"), float("inf")
        return float(math.exp(float(self.walsh[c]))), float(math.exp(float(self.walsh[-1 - c])))


def compare_ranked(cand: Values, base: Values, confidence: float = CONFIDENCE) -> tuple[float, float, float, float]:
    """(the median block's ratio, CI low, CI high, p-value of "no
    difference") for values paired block by block: the signed-rank test
    and its inversion (compare_paired's counterpart for --median)."""
    t = RankTest(cand, base)
    lo, hi = t.interval(confidence)
    return t.ratio, lo, hi, t.p(1.0)
