"""Pure statistics: no I/O, no clocks.  Checked against scipy and by
property tests (tests/test_stats.py)."""
from __future__ import annotations

import math
from functools import lru_cache
from typing import Iterator, Sequence

import numpy as np
from scipy import stats as sst

from .model import Modes, Summary

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


# -- comparing two targets measured side by side ----------------------------------
#
# The runner measures a candidate and the baseline in blocks: one fresh agent
# process of each target per block, in an order drawn at random for every
# block.  Under "the candidate is the baseline" (an A/A pair) the labels of the
# two processes of a block are then a fair coin, independent from block to
# block, whatever the host's drift and however long its noise bursts last.
# The sign-flip randomization test uses exactly that and nothing more, so its
# error rate holds on a host whose noise is correlated in time -- the case
# where a t-test over blocks, which assumes independent pairs, flags far too
# many A/A rows.  The ratio's interval is the set of ratios the test does not
# reject (the test inverted).
#
# The runner also stops a benchmark once its ratio looks precise enough.  A
# stopping rule that looks at which side was slower biases any test that
# ignores it (stopping when the spread happens to look small is stopping when
# a difference happens to look large).  So the rule looks only at what a swap
# of the two labels in a block leaves alone -- how far apart the pair is, not
# which side is ahead -- and the test stays exact however the run stopped.

EXACT_PAIRS = 12   # up to 2**12 sign patterns are enumerated: an exact test
DRAWS = 4000       # beyond that, a fixed pseudo-random draw (p-value error ±0.004 at 0.05)
_ROWS = 1000       # patterns generated at a time (memory stays small for any k)


@lru_cache(maxsize=EXACT_PAIRS + 1)
def _exact_patterns(k: int) -> np.ndarray:
    bits = (np.arange(2 ** k)[:, None] >> np.arange(k)) & 1
    return (1 - 2 * bits).astype(np.float64)


def _sign_chunks(k: int) -> Iterator[np.ndarray]:
    """Every sign pattern of k pairs (the first is all +1) when k is small,
    else DRAWS patterns from a generator seeded by k alone, so any later
    analysis of the same data (`vmtax show` a year on) gives the same figures."""
    if k <= EXACT_PAIRS:
        yield _exact_patterns(k)
        return
    rng = np.random.default_rng([0x766D7478, k])
    for i in range(0, DRAWS, _ROWS):
        rows = min(_ROWS, DRAWS - i)
        raw = np.frombuffer(rng.bytes(rows * ((k + 7) // 8)), dtype=np.uint8).reshape(rows, -1)
        yield np.unpackbits(raw, axis=1, count=k).astype(np.float64) * 2 - 1


def paired(a: dict[int, float], b: dict[int, float]) -> tuple[list[float], list[float]]:
    """The values of the blocks both sides were measured in, block by block."""
    common = sorted(a.keys() & b.keys())
    return [a[k] for k in common], [b[k] for k in common]


def _pairs(cand: Sequence[float], base: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    k = min(len(cand), len(base))
    c, b = np.asarray(cand[:k], dtype=float), np.asarray(base[:k], dtype=float)
    if not (np.isfinite(c).all() and np.isfinite(b).all()) or (c <= 0).any() or (b <= 0).any():
        raise ValueError("values must be finite and positive")
    return c, b


# -- the runner's stopping rule ------------------------------------------------------
def _folded_lambda(r: float) -> float:
    """delta/sigma of a normal N(delta, sigma) from r = E|d|^2 / E d^2 of its
    absolute values (the folded normal: r runs from 2/pi at delta = 0 to 1);
    inf beyond 40, where nothing folds (the caller takes the plain variance)."""
    def g(lam: float) -> float:
        m1 = math.sqrt(2 / math.pi) * math.exp(-lam * lam / 2) + lam * (1 - 2 * sst.norm.cdf(-lam))
        return m1 * m1 / (1 + lam * lam)
    if r <= 2 / math.pi:
        return 0.0
    lo, hi = 0.0, 40.0
    if r >= g(hi):
        return math.inf
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if g(mid) < r else (lo, mid)
    return lo


def stop_halfwidth(cand: Sequence[float], base: Sequence[float]) -> float:
    """The precision the runner stops on, for block-paired values: about
    the relative 95% half-width of the ratio, estimated from the distance
    between the two sides of each block, |log(cand/base)|, alone.  Swapping
    the labels of a block leaves it unchanged, so stopping on it never biases
    the sign-flip test.  The spread is a folded-normal moment fit (right
    whether or not the targets differ; where they differ by more than 40 of
    its SDs nothing folds, and it is the distances' plain variance), floored
    by the successive-difference spread of the distances (right when they
    differ a lot).  inf with fewer than 3 pairs.  (Until 2026-11-26 the fit
    stopped at 40 SDs and took that for the difference: a UML getppid 98x
    the bare machine's, reported +-0.67%, was judged +-3.7%, and every row
    with such a tax ran to its budget, pass 2 funding it as far from its
    goal.)"""
    c, b = _pairs(cand, base)
    k = c.size
    if k < 3:
        return float("inf")
    dist = np.abs(np.log(c) - np.log(b))
    m2 = float(np.mean(dist * dist))
    if m2 == 0:
        return 0.0
    m1 = float(np.mean(dist))
    lam = _folded_lambda(m1 ** 2 / m2)
    fold = max(m2 - m1 * m1, 0.0) if math.isinf(lam) else m2 / (1 + lam * lam)
    var = max(fold, float(np.sum(np.diff(dist) ** 2)) / (2 * (k - 1)))
    return float(_t(k - 1, CONFIDENCE) * math.sqrt(var / k))


# -- the test and the interval -------------------------------------------------------
class PairedTest:
    """The sign-flip test of "cand/base = theta" over k paired values.

    At theta, the block differences z = cand - theta * base have a
    distribution symmetric about 0 under the null (the coin decides which
    side got which process), so |sum z| is compared with |sum s*z| over
    every sign pattern s (or a fixed draw of them when k is large)."""

    EDGE_TOL = 1e-7  # an interval's ends are found to this share of the ratio

    def __init__(self, cand: Sequence[float], base: Sequence[float]):
        self.c, self.b = _pairs(cand, base)
        self.k = k = self.c.size
        if k < 2:
            raise ValueError("need at least two pairs")
        self.exact = k <= EXACT_PAIRS
        sc, sb = [], []
        for signs in _sign_chunks(k):
            sc.append(signs @ self.c)
            sb.append(signs @ self.b)
        self.sc, self.sb = np.concatenate(sc), np.concatenate(sb)
        self.C, self.B = float(self.c.sum()), float(self.b.sum())
        self.scale = float(self.c.sum() + self.b.sum())

    @property
    def ratio(self) -> float:
        return self.C / self.B

    def p(self, theta: float = 1.0) -> float:
        """Two-sided p-value of "cand/base = theta" (no stopping rule)."""
        t = abs(self.C - theta * self.B)
        tol = 1e-9 * self.scale * max(1.0, abs(theta))
        hits = int(np.count_nonzero(np.abs(self.sc - theta * self.sb) >= t - tol))
        return hits / self.sc.size if self.exact else (hits + 1) / (self.sc.size + 1)

    def interval(self, confidence: float = CONFIDENCE) -> tuple[float, float]:
        """Every theta the test does not reject at 1 - confidence; (-inf, inf)
        when too few pairs can reject anything (k < 6 for 95%)."""
        alpha = 1 - confidence
        if self.p(0.0) > alpha:
            return float("-inf"), float("inf")
        r = self.ratio
        return self._edge(r, -1, alpha), self._edge(r, +1, alpha)

    def _edge(self, r: float, side: int, alpha: float) -> float:
        """The boundary of the acceptance region on one side of r: step
        outwards (doubling) until a theta is rejected, then bisect.  Below
        r, 0 is known to be rejected (interval() checked it)."""
        inside, step = r, 1e-3 * r
        while True:
            theta = r + side * step
            if theta <= 0:
                outside = 0.0
                break
            if step > 1e6 * r:
                return float("inf")
            if self.p(theta) > alpha:
                inside, step = theta, step * 2
            else:
                outside = theta
                break
        for _ in range(60):
            if abs(outside - inside) <= self.EDGE_TOL * r:
                break
            mid = (inside + outside) / 2
            if self.p(mid) > alpha:
                inside = mid
            else:
                outside = mid
        return inside


STRATUM_MIN = 3  # pairs a stratum needs (a spread to weigh it by)


def _strata(strata: Sequence[int], k: int) -> list[np.ndarray]:
    """The indices of the first k pairs in each stratum, strata in label order."""
    labels = np.asarray([int(x) for x in strata[:k]])
    return [np.flatnonzero(labels == g) for g in sorted(set(labels.tolist()))]


def _strata_ratio(C: Sequence[float], B: Sequence[float], w: Sequence[float]) -> float:
    """Where StratifiedTest's statistic, sum of w (C - theta B) / (C + theta B)
    over the strata, crosses 0 (each term falls from + to - across its own
    ratio C/B: one crossing, between them)."""
    ratios = [cs / bs for cs, bs in zip(C, B)]
    lo, hi = min(ratios), max(ratios)
    if hi <= lo * (1 + 1e-12):
        return lo
    for _ in range(80):
        mid = math.sqrt(lo * hi)
        stat = sum(wi * (cs - mid * bs) / (cs + mid * bs) for wi, cs, bs in zip(w, C, B))
        lo, hi = (mid, hi) if stat > 0 else (lo, mid)
    return math.sqrt(lo * hi)


def _stratum_weights(c: np.ndarray, b: np.ndarray, groups: list[np.ndarray]) -> list[float]:
    """Each stratum's pairs over the variance of log(cand) + log(base) over
    them (the blocks' level, floored at MODES_LOG_FLOOR^2): swapping a pair's
    cand/theta and base leaves a level as it was at every theta, and theta
    shifts every level alike, so the weight is label-free and the same at
    every theta."""
    return [idx.size / max(float(np.var(np.log(c[idx]) + np.log(b[idx]), ddof=1)), MODES_LOG_FLOOR ** 2)
            for idx in groups]


class StratifiedTest(PairedTest):
    """The sign-flip test of "cand/base = theta" over pairs in strata (the
    blocks both sides ran in their fast mode, those both ran in their slow
    mode): each stratum's relative difference Z = sum(cand - theta*base) /
    sum(cand + theta*base) (about half its log ratio less log theta) counted
    with a weight n / v, v the variance of its pairs' levels (_stratum_weights:
    label-free and the same at every theta, so the test stays exact, and
    each stratum's term falls as theta rises, so the statistic crosses 0
    once).  The ratio is where it does: the ratio of means with one stratum,
    between the strata's ratios with two, nearer the more precise one.  The
    weights are right where a block's level spreads as its difference does
    (each process's own noise); a state shared by a block's two processes
    weighs its stratum down, which costs precision, never the error rate."""

    def __init__(self, cand: Sequence[float], base: Sequence[float], strata: Sequence[int]):
        self.c, self.b = _pairs(cand, base)
        self.k = k = self.c.size
        if len(strata) < k:
            raise ValueError("every pair needs its stratum")
        self.exact = k <= EXACT_PAIRS
        self.groups = _strata(strata, k)
        if min(idx.size for idx in self.groups) < STRATUM_MIN:
            raise ValueError(f"every stratum needs {STRATUM_MIN} pairs")
        self.w = _stratum_weights(self.c, self.b, self.groups)
        sc: list[list[np.ndarray]] = [[] for _ in self.groups]
        sb: list[list[np.ndarray]] = [[] for _ in self.groups]
        for signs in _sign_chunks(k):
            for g, idx in enumerate(self.groups):
                sc[g].append(signs[:, idx] @ self.c[idx])
                sb[g].append(signs[:, idx] @ self.b[idx])
        self.sc = [np.concatenate(x) for x in sc]
        self.sb = [np.concatenate(x) for x in sb]
        self.C = [float(self.c[idx].sum()) for idx in self.groups]
        self.B = [float(self.b[idx].sum()) for idx in self.groups]
        self._ratio = self._root()

    def _weights(self, theta: float) -> list[float]:
        """Per stratum, what multiplies its sum(cand - theta*base): n / v / sum(cand + theta*base)."""
        return [w / (cs + theta * bs) for w, cs, bs in zip(self.w, self.C, self.B)]

    def _root(self) -> float:
        return _strata_ratio(self.C, self.B, self.w)

    @property
    def ratio(self) -> float:
        return self._ratio

    def p(self, theta: float = 1.0) -> float:
        """Two-sided p-value of "cand/base = theta" in every stratum."""
        u = self._weights(theta)
        t = abs(sum(w * (cs - theta * bs) for w, cs, bs in zip(u, self.C, self.B)))
        perm = sum(w * (sc - theta * sb) for w, sc, sb in zip(u, self.sc, self.sb))
        scale = sum(w * (cs + theta * bs) for w, cs, bs in zip(u, self.C, self.B))
        hits = int(np.count_nonzero(np.abs(perm) >= t - 1e-9 * scale))
        return hits / perm.size if self.exact else (hits + 1) / (perm.size + 1)


def compare_strata(cand: Sequence[float], base: Sequence[float], strata: Sequence[int],
                   confidence: float = CONFIDENCE) -> tuple[float, float, float, float]:
    """compare_paired over pairs in strata (StratifiedTest)."""
    t = StratifiedTest(cand, base, strata)
    lo, hi = t.interval(confidence)
    return t.ratio, lo, hi, t.p(1.0)


def stop_halfwidth_strata(cand: Sequence[float], base: Sequence[float], strata: Sequence[int]) -> float:
    """stop_halfwidth for StratifiedTest's ratio: each stratum's, combined
    with the test's weights (the half-width of a weighted mean of the
    strata's log ratios); inf where a stratum has fewer than STRATUM_MIN
    pairs or one's own is unbounded.  Label-free as stop_halfwidth is."""
    c, b = _pairs(cand, base)
    groups = _strata(strata, c.size)
    if not groups or min(idx.size for idx in groups) < STRATUM_MIN:
        return float("inf")
    w = _stratum_weights(c, b, groups)
    h = [stop_halfwidth(c[idx], b[idx]) for idx in groups]
    if not all(math.isfinite(x) for x in h):
        return float("inf")
    return math.sqrt(sum((wi * hi) ** 2 for wi, hi in zip(w, h))) / sum(w)


def compare_paired(cand: Sequence[float], base: Sequence[float],
                   confidence: float = CONFIDENCE) -> tuple[float, float, float, float]:
    """(ratio of means, CI low, CI high, p-value of "no difference") for
    values paired block by block (cand[i] and base[i] measured side by side,
    in random order): the sign-flip test and its inversion."""
    t = PairedTest(cand, base)
    lo, hi = t.interval(confidence)
    return t.ratio, lo, hi, t.p(1.0)


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


# -- many instances at once (vmtax scale) -----------------------------------------
def jain(values: Sequence[float]) -> float:
    """Jain's fairness index (sum x)^2 / (n * sum x^2): 1 when every
    instance got the same, 1/n when one got everything."""
    x = np.asarray(values, dtype=float)
    if x.size == 0 or not np.all(np.isfinite(x)) or np.any(x < 0):
        raise ValueError("Jain's index needs finite values >= 0")
    sq = float((x * x).sum())
    return float(x.sum() ** 2 / (x.size * sq)) if sq > 0 else 1.0


def ratio_unpaired(a: Sequence[float], b: Sequence[float],
                   confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """(mean(a) / mean(b), CI low, CI high) for independent samples (rounds
    at one instance count against rounds at another): the delta method on
    the log of the ratio (so the interval stays positive), its standard
    error from the two means' relative standard errors, with Welch's
    degrees of freedom.  Unbounded when either side has fewer than two."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    ma, mb = float(a.mean()), float(b.mean())
    r = ma / mb
    if a.size < 2 or b.size < 2:
        return r, float("-inf"), float("inf")
    ra = float(a.var(ddof=1)) / a.size / ma ** 2  # squared relative standard errors
    rb = float(b.var(ddof=1)) / b.size / mb ** 2
    if ra + rb == 0:
        return r, r, r
    df = (ra + rb) ** 2 / ((ra ** 2 / (a.size - 1) if ra else 0.0) + (rb ** 2 / (b.size - 1) if rb else 0.0))
    half = _t(df, confidence) * math.sqrt(ra + rb)
    return r, r * math.exp(-half), r * math.exp(half)


# -- two modes among process means -------------------------------------------------
MODES_MIN_UNITS = 16    # fewer process means than this: no call on modes
MODES_BIC_GAIN = 10.0   # two normals on the logs must beat one by this much BIC ("very strong")
MODES_SEPARATION = 2.0  # and be this far apart (Ashman's D: two humps, not a shoulder)
MODES_MIN_SHARE = 0.1   # and each hold this share of the units (and 3 of them)
MODES_MIN_GAP = 1.02    # and the slow mode's mean be at least this many times the fast one's
MODES_LOG_FLOOR = 1e-4  # a mode's SD on the logs is at least this (a coarse timer's ties are one mode)


def modes(values: Sequence[float], higher_is_better: bool = False) -> Modes | None:
    """Two modes among these units (agent process means), or None: a
    mixture of two normals fitted to their logs by EM must beat one normal
    by MODES_BIC_GAIN in BIC, its components be MODES_SEPARATION apart
    (Ashman's D), each hold MODES_MIN_SHARE of the units and their means
    differ by MODES_MIN_GAP.  On logs, so a right-skewed spread (a
    lognormal, an exponential tail) is not called two modes; bench/modes.py
    measures the false calls and the power."""
    x = np.asarray([v for v in values if v > 0 and math.isfinite(v)], dtype=float)
    n = x.size
    if n < MODES_MIN_UNITS:
        return None
    y = np.log(x)
    sd1 = float(y.std())
    if sd1 <= 0:
        return None
    floor = max(1e-3 * sd1, MODES_LOG_FLOOR)
    # start from the best split of the sorted logs in two groups (least within-group squares)
    s = np.sort(y)
    c1, c2 = np.cumsum(s), np.cumsum(s * s)
    i = np.arange(2, n - 1)
    within = (c2[i - 1] - c1[i - 1] ** 2 / i) + ((c2[-1] - c2[i - 1]) - (c1[-1] - c1[i - 1]) ** 2 / (n - i))
    k = int(i[np.argmin(within)])
    mu = np.array([s[:k].mean(), s[k:].mean()])
    sd = np.maximum([s[:k].std(), s[k:].std()], floor)
    w = np.array([k / n, 1 - k / n])
    ll = -math.inf
    for _ in range(200):
        dens = w * np.exp(-0.5 * ((y[:, None] - mu) / sd) ** 2) / (sd * math.sqrt(2 * math.pi))
        tot = dens.sum(axis=1)
        if not np.all(tot > 0):
            return None
        new = float(np.log(tot).sum())
        r = dens / tot[:, None]
        nk = r.sum(axis=0)
        if np.any(nk < 1):
            return None  # a component emptied: one mode
        w, mu = nk / n, (r * y[:, None]).sum(axis=0) / nk
        sd = np.maximum(np.sqrt((r * (y[:, None] - mu) ** 2).sum(axis=0) / nk), floor)
        if new - ll < 1e-6 * n:  # converged (EM never lowers the likelihood)
            break
        ll = new
    one = float((-0.5 * ((y - y.mean()) / sd1) ** 2 - math.log(sd1 * math.sqrt(2 * math.pi))).sum())
    gain = 2 * (ll - one) - 3 * math.log(n)  # two normals: 3 more parameters
    d = math.sqrt(2) * abs(mu[1] - mu[0]) / math.sqrt(sd[0] ** 2 + sd[1] ** 2)
    a, b = int(np.argmin(mu)), int(np.argmax(mu))
    cut = _crossing(w[[a, b]], mu[[a, b]], sd[[a, b]])
    low, high = x[y <= cut], x[y > cut]
    if (gain <= MODES_BIC_GAIN or d <= MODES_SEPARATION or abs(mu[1] - mu[0]) < math.log(MODES_MIN_GAP)
            or min(low.size, high.size) < max(3, MODES_MIN_SHARE * n)):
        return None
    fast, slow = (high, low) if higher_is_better else (low, high)
    return Modes(float(fast.mean()), float(slow.mean()), slow.size / n, int(n), math.exp(cut), float(gain),
                 float(d), higher_is_better)


def _crossing(w, mu, sd) -> float:
    """Where between the two means (logs, low first) the weighted densities
    of the two normals meet (compared as log densities: in a wide gap both
    round to 0): a unit below is likelier in the low mode."""
    def diff(t: float) -> float:
        return float((math.log(w[0] / sd[0]) - 0.5 * ((t - mu[0]) / sd[0]) ** 2)
                     - (math.log(w[1] / sd[1]) - 0.5 * ((t - mu[1]) / sd[1]) ** 2))
    lo, hi = float(mu[0]), float(mu[1])
    if not diff(lo) > 0 > diff(hi):
        return (lo + hi) / 2
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if diff(mid) > 0 else (lo, mid)
    return (lo + hi) / 2


# -- the test within the host's modes ------------------------------------------------
FAST, SLOW, SAME = "fast", "slow", "same"  # ModeTest's strata: both sides fast, both slow, either
MODE_MIN_PAIRS = 6  # a kept set smaller than this cannot reject at 5% (2/2^6): the test at that theta uses every pair
MODE_MARGIN = 0.2   # the middle 2 x this of the distance between the modes' means (logs) counts in neither
MODE_AGREE = 0.8    # at the ratio, the pooled modes must put this share of each side's processes where its own fit does


def mode_sides(m: Modes, values: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """(in the fast mode, in the slow mode) for each value, as ModeTest counts
    a process: on the fast or slow side of the middle 2 x MODE_MARGIN of the
    distance between the two modes' means (on logs); one in that middle,
    where a process that ran across a flip of the host's state lies, counts
    in neither.  (Not the fit's cut: where the two normals' densities cross
    moves with the few processes between the modes, the means hardly.)"""
    x = (np.log(np.asarray(values, dtype=float)) - math.log(m.fast)) / math.log(m.slow / m.fast)  # 0 fast, 1 slow
    return x < 0.5 - MODE_MARGIN, x > 0.5 + MODE_MARGIN


class ModeTest(PairedTest):
    """The sign-flip test of "cand/base = theta" over the blocks both sides
    ran in one mode of the host (FAST, SLOW, or SAME: both fast or both slow,
    by StratifiedTest), the modes found at each theta from both sides'
    values pooled: cand/theta beside base, one fit (modes), one rule for
    which mode a process ran in (mode_sides: the side of the middle between
    the modes' means it lies on; the middle itself counts in neither).

    Under the null at theta a block's cand/theta and base are exchangeable;
    the pooled values, and so the fit and which blocks are kept, are the same
    whichever side got which process, so the test over the kept blocks stays
    exact.  A cut fitted to each side on its own is not: in an A/A pair a
    side whose cut fell higher by chance keeps more of its slower processes,
    and its ratio leans that way (bench/modecut.py on the hog's validity
    runs, bench/modes.py by simulation).  At a theta where the pooled
    values show no two modes, or fewer than MODE_MIN_PAIRS blocks are kept,
    the test uses every block (the kept set is still the same either way
    round).  The ratio is where the test's own statistic crosses 0 with the
    blocks kept at that ratio: theta = the kept blocks' ratio (_estimate).
    Exact given the call of two modes on each side that lets a row have a
    stratum at all (analysis.mode_test), which is each side's own."""

    EDGE_TOL = 1e-5  # each theta tried costs a fit of the modes: ends to 0.001% of the ratio

    def __init__(self, cand: Sequence[float], base: Sequence[float], which: str,
                 higher_is_better: bool = False, starts: Sequence[float] = ()):
        if which not in (FAST, SLOW, SAME):
            raise ValueError(f"no stratum {which!r}")
        self.c, self.b = _pairs(cand, base)
        self.k = self.c.size
        if self.k < 2:
            raise ValueError("need at least two pairs")
        self.which, self.higher_is_better = which, higher_is_better
        self._every: PairedTest | None = None
        self._kept: dict[float, tuple[np.ndarray, np.ndarray]] = {}
        self._fits: dict[float, Modes | None] = {}
        self._tests: dict[tuple, PairedTest | None] = {}
        self._ratio = self._estimate(starts)

    def split(self, theta: float) -> tuple[np.ndarray, np.ndarray]:
        """(the blocks both sides ran in the fast mode, those both ran in the
        slow mode) at theta, as indices (a process in a mode as mode_sides
        counts it); both empty where the pooled values show no two modes."""
        if theta not in self._kept:
            m = modes(np.r_[self.c / theta, self.b], self.higher_is_better) if 0 < theta < math.inf else None
            self._fits[theta] = m
            if m is None:
                got = (np.array([], dtype=int), np.array([], dtype=int))
            else:
                (fc, sc), (fb, sb) = mode_sides(m, self.c / theta), mode_sides(m, self.b)
                got = (np.flatnonzero(fc & fb), np.flatnonzero(sc & sb))
            self._kept[theta] = got
        return self._kept[theta]

    def kept(self, theta: float | None = None) -> tuple[list[int], list[int]]:
        """(fast, slow) blocks the stratum keeps at theta (default: at its
        ratio, or where there is none, at the ratio over all blocks): FAST
        leaves slow empty, SLOW fast; SAME leaves out a mode with fewer than
        STRATUM_MIN blocks."""
        theta = (self._ratio if math.isfinite(self._ratio) else self._tried) if theta is None else theta
        fast, slow = (x.tolist() for x in self.split(theta))
        if self.which == FAST:
            return fast, []
        if self.which == SLOW:
            return [], slow
        return (fast if len(fast) >= STRATUM_MIN else []), (slow if len(slow) >= STRATUM_MIN else [])

    def _test(self, theta: float) -> PairedTest | None:
        """The test over the blocks kept at theta; None where fewer than
        MODE_MIN_PAIRS are (then the test at theta takes every block)."""
        fast, slow = self.kept(theta)
        key = (tuple(fast), tuple(slow))
        if key not in self._tests:
            if len(fast) + len(slow) < MODE_MIN_PAIRS:
                self._tests[key] = None
            elif not (fast and slow):
                idx = fast or slow
                self._tests[key] = PairedTest(self.c[idx], self.b[idx])
            else:
                self._tests[key] = StratifiedTest(self.c[fast + slow], self.b[fast + slow],
                                                  [0] * len(fast) + [1] * len(slow))
        return self._tests[key]

    def _ratio_of(self, fast: list[int], slow: list[int]) -> float:
        """The ratio over these kept blocks (StratifiedTest's with both
        modes), without building a test."""
        groups = [np.asarray(g) for g in (fast, slow) if g]
        C = [float(self.c[g].sum()) for g in groups]
        B = [float(self.b[g].sum()) for g in groups]
        return C[0] / B[0] if len(groups) == 1 else _strata_ratio(C, B, _stratum_weights(self.c, self.b, groups))

    def _estimate(self, starts: Sequence[float]) -> float:
        """A theta that the ratio over the blocks kept at theta gives back
        (a fixed point), iterated from the ratio over all blocks and from each
        of `starts` (where the sides fell in the slow mode at different rates,
        the ratio over all blocks lies between the modes and keeps nothing);
        of several, the one keeping the most blocks.  Where no start reaches
        one (the kept blocks cycle), the theta visited whose test accepts it
        best.  nan where no theta keeps MODE_MIN_PAIRS blocks."""
        found: dict[float, int] = {}
        visited: list[float] = []
        self._tried = float(self.c.sum() / self.b.sum())
        for start in [self._tried, *starts]:
            theta, seen = start, []
            for _ in range(20) if 0 < theta < math.inf else ():
                key = self.kept(theta)
                if len(key[0]) + len(key[1]) < MODE_MIN_PAIRS or key in seen:
                    break
                seen.append(key)
                theta = self._ratio_of(*key)
                if self.kept(theta) == key:
                    found[theta] = len(key[0]) + len(key[1])
                    break
                visited.append(theta)
        if found:
            return max(found, key=lambda t: found[t])  # the first of the most-kept, in the order found
        usable = [t for t in visited if self._test(t) is not None]
        return max(usable, key=self.p) if usable else float("nan")

    @property
    def ratio(self) -> float:
        return self._ratio

    def agreement(self, cand_modes: Modes, base_modes: Modes) -> tuple[float, float]:
        """(cand's, base's) share, of that side's processes the modes fitted
        to both sides pooled at the ratio count in a mode (mode_sides), of
        those in the mode the side's own fit puts them (its cut); nan where
        there is no ratio or no pooled modes there.  Near 1 where the two
        sides' modes are one state of the host seen on both; far below it
        where the pooled fit took something else for the modes (one side's
        own tail, say, with the other side's processes all in one pooled
        mode): then the kept blocks are not a state of the host."""
        theta = self._ratio
        if not math.isfinite(theta) or theta <= 0:
            return math.nan, math.nan
        self.split(theta)
        m = self._fits.get(theta)
        if m is None:
            return math.nan, math.nan
        out = []
        for values, scaled, own in ((self.c, self.c / theta, cand_modes), (self.b, self.b, base_modes)):
            fast, slow = mode_sides(m, scaled)
            own_slow = np.array([own.is_slow(float(v)) for v in values], dtype=bool)
            counted = fast | slow
            out.append(float(((slow & own_slow) | (fast & ~own_slow))[counted].mean()) if counted.any() else math.nan)
        return out[0], out[1]

    def p(self, theta: float = 1.0) -> float:
        """Two-sided p-value of "cand/base = theta" over the blocks kept at theta."""
        t = self._test(theta) if theta > 0 else None
        if t is None:
            if self._every is None:
                self._every = PairedTest(self.c, self.b)
            return self._every.p(theta)
        return t.p(theta)

    def interval(self, confidence: float = CONFIDENCE) -> tuple[float, float]:
        """The thetas the test does not reject, from the ratio out to the
        first rejection each way, and out to 1 where the test accepts 1 (the
        blocks kept change with theta, so what it accepts need not be one
        stretch: the interval and the test of "no difference" then still
        agree); (-inf, inf) where there is no ratio, or the test rejects it
        (no start reached a fixed point)."""
        r, alpha = self._ratio, 1 - confidence
        if not math.isfinite(r) or self._test(r) is None or self.p(r) <= alpha:
            return float("-inf"), float("inf")
        lo, hi = self._edge(r, -1, alpha), self._edge(r, +1, alpha)
        if not lo <= 1.0 <= hi and self.p(1.0) > alpha:
            lo, hi = min(lo, 1.0), max(hi, 1.0)
        return lo, hi
