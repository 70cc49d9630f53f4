"""The sign-flip test over blocks paired in random order, its inverted
interval, and the label-free precision the runner stops on.  Pure."""

from __future__ import annotations

import math
from collections.abc import Iterator
from functools import lru_cache

import numpy as np
from scipy import stats as sst

from .summary import CONFIDENCE, Array, Values, t_quantile

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

EXACT_PAIRS = 12  # up to 2**12 sign patterns are enumerated: an exact test
DRAWS = 4000  # beyond that, a fixed pseudo-random draw (p-value error ±0.004 at 0.05)
MIN_BLOCKS = 6  # fewer paired blocks and no 95% interval is finite: 2 of 2**5 sign patterns is over 5%
_ROWS = 1000  # patterns generated at a time (memory stays small for any k)


@lru_cache(maxsize=EXACT_PAIRS + 1)
def _exact_patterns(k: int) -> Array:
    bits = (np.arange(2**k)[:, None] >> np.arange(k)) & 1
    patterns: Array = (1 - 2 * bits).astype(np.float64)
    return patterns


def sign_chunks(k: int) -> Iterator[Array]:
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


def as_pairs(cand: Values, base: Values) -> tuple[Array, Array]:
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
        m1 = math.sqrt(2 / math.pi) * math.exp(-lam * lam / 2) + lam * (1 - 2 * float(sst.norm.cdf(-lam)))
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


def stop_halfwidth(cand: Values, base: Values) -> float:
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
    c, b = as_pairs(cand, base)
    k = c.size
    if k < 3:
        return float("inf")
    dist = np.abs(np.log(c) - np.log(b))
    m2 = float(np.mean(dist * dist))
    if m2 == 0:
        return 0.0
    m1 = float(np.mean(dist))
    lam = _folded_lambda(m1**2 / m2)
    fold = max(m2 - m1 * m1, 0.0) if math.isinf(lam) else m2 / (1 + lam * lam)
    var = max(fold, float(np.sum(np.diff(dist) ** 2)) / (2 * (k - 1)))
    return float(t_quantile(k - 1, CONFIDENCE) * math.sqrt(var / k))


# -- the test and the interval -------------------------------------------------------
class PairedTest:
    """The sign-flip test of "cand/base = theta" over k paired values.

    At theta, the block differences z = cand - theta * base have a
    distribution symmetric about 0 under the null (the coin decides which
    side got which process), so |sum z| is compared with |sum s*z| over
    every sign pattern s (or a fixed draw of them when k is large)."""

    EDGE_TOL = 1e-7  # an interval's ends are found to this share of the ratio

    def __init__(self, cand: Values, base: Values):
        self.c, self.b = as_pairs(cand, base)
        self.k = k = self.c.size
        if k < 2:
            raise ValueError("need at least two pairs")
        self.exact = k <= EXACT_PAIRS
        sc, sb = [], []
        for signs in sign_chunks(k):
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
        when too few pairs can reject anything (k < MIN_BLOCKS for 95%)."""
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


def compare_paired(cand: Values, base: Values, confidence: float = CONFIDENCE) -> tuple[float, float, float, float]:
    """(ratio of means, CI low, CI high, p-value of "no difference") for
    values paired block by block (cand[i] and base[i] measured side by side,
    in random order): the sign-flip test and its inversion."""
    t = PairedTest(cand, base)
    lo, hi = t.interval(confidence)
    return t.ratio, lo, hi, t.p(1.0)
