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


def _normal_limit(k: int) -> tuple[float, float]:
    """W+'s mean and SD under the null: its normal limit beyond EXACT_RANKS."""
    return k * (k + 1) / 4, math.sqrt(k * (k + 1) * (2 * k + 1) / 24)


def _lower_tail(w: float, k: int) -> float:
    """P(W+ <= w) under the null, exact up to EXACT_RANKS blocks."""
    if w < 0:
        return 0.0
    if k <= EXACT_RANKS:
        cdf = _null_cdf(k)
        return float(cdf[min(math.floor(w + 1e-9), cdf.size - 1)])
    mean, sd = _normal_limit(k)
    return float(sst.norm.cdf((w + 0.5 - mean) / sd))  # with a continuity correction


def critical(k: int, confidence: float = CONFIDENCE) -> int:
    """The largest c with P(W+ <= c) <= (1 - confidence)/2; -1 when even
    W+ = 0 is more likely than that (too few blocks to reject anything)."""
    half = (1 - confidence) / 2
    if k <= EXACT_RANKS:
        return int(np.searchsorted(_null_cdf(k), half + 1e-12, side="right")) - 1
    mean, sd = _normal_limit(k)
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
    on their log ratios d; the ratio is exp of the Hodges-Lehmann estimate,
    the median of the Walsh averages (d_i + d_j)/2, i <= j.

    W+ at theta is counted as the number of Walsh averages above
    log(theta), half of those at it: Wilcoxon's statistic where no |d|
    ties (Tukey's identity), so the p-value and the interval -- two order
    statistics of the Walsh averages -- come from one count and agree
    however the values tie.  Up to LISTED of them are listed and sorted;
    beyond, they are counted, never listed (a count costs k log k, an order
    statistic a bisection of counts), so a row of thousands of blocks
    costs milliseconds, not gigabytes."""

    BISECTIONS = 200  # an order statistic is found to the float's own resolution well within this
    LISTED = 50_000  # Walsh averages listed (about 316 blocks); more are counted

    def __init__(self, cand: Values, base: Values):
        c, b = as_pairs(cand, base)
        self.k = c.size
        if self.k < 2:
            raise ValueError("need at least two pairs")
        self.d: Array = np.sort(np.log(c) - np.log(b))
        self.m = self.k * (self.k + 1) // 2  # the Walsh averages
        self.walsh: Array | None = None
        if self.m <= self.LISTED:
            i, j = np.triu_indices(self.k)
            self.walsh = np.sort((self.d[i] + self.d[j]) / 2)

    def _count(self, t: float) -> tuple[int, int]:
        """(Walsh averages above t, those equal to it)."""
        if self.walsh is not None:
            below, most = np.searchsorted(self.walsh, t, side="left"), np.searchsorted(self.walsh, t, side="right")
            return self.m - int(most), int(most - below)
        d, i = self.d, np.arange(self.k)
        above = self.k - np.maximum(np.searchsorted(d, 2 * t - d, side="right"), i)
        at_least = self.k - np.maximum(np.searchsorted(d, 2 * t - d, side="left"), i)
        n_above = int(above.sum())
        return n_above, int(at_least.sum()) - n_above

    def _order(self, r: int) -> float:
        """The Walsh average of rank r (0: the smallest): the least t with
        more than r of them at or below it."""
        if self.walsh is not None:
            return float(self.walsh[r])
        lo, hi = float(self.d[0]), float(self.d[-1])
        for _ in range(self.BISECTIONS):
            mid = (lo + hi) / 2
            if mid in (lo, hi):
                break
            if self.m - self._count(mid)[0] >= r + 1:
                hi = mid
            else:
                lo = mid
        return hi if self.m - self._count(lo)[0] < r + 1 else lo

    @property
    def ratio(self) -> float:
        half = self.m // 2
        mid = self._order(half) if self.m % 2 else (self._order(half - 1) + self._order(half)) / 2
        return float(math.exp(mid))

    def p(self, theta: float = 1.0) -> float:
        """Two-sided p-value of "cand/base = theta"."""
        above, at = self._count(math.log(theta))
        w = above + at / 2
        return float(min(1.0, 2 * min(_lower_tail(w, self.k), _lower_tail(self.m - w, self.k))))

    def interval(self, confidence: float = CONFIDENCE) -> tuple[float, float]:
        """The ratios the test does not reject at 1 - confidence: exp of the
        (c+1)-th smallest and largest Walsh averages (c: critical()); (-inf,
        inf) when too few blocks can reject anything."""
        c = critical(self.k, confidence)
        if c < 0:
            return float("-inf"), float("inf")
        return float(math.exp(self._order(c))), float(math.exp(self._order(self.m - 1 - c)))


def compare_ranked(cand: Values, base: Values, confidence: float = CONFIDENCE) -> tuple[float, float, float, float]:
    """(the median block's ratio, CI low, CI high, p-value of "no
    difference") for values paired block by block: the signed-rank test
    and its inversion (compare_paired's counterpart for --median)."""
    t = RankTest(cand, base)
    lo, hi = t.interval(confidence)
    return t.ratio, lo, hi, t.p(1.0)
