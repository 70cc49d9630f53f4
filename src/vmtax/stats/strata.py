"""The sign-flip test over blocks in strata (StratifiedTest: the fast and
the slow mode, each weighed by its precision) and within the host's
modes (ModeTest: the blocks both sides ran in one mode, found from both
sides pooled at each ratio tried).  Pure."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..model import Modes
from .modes import MODES_LOG_FLOOR, modes
from .signflip import EXACT_PAIRS, PairedTest, as_pairs, sign_chunks, stop_halfwidth
from .summary import CONFIDENCE, Array, Values

STRATUM_MIN = 3  # pairs a stratum needs (a spread to weigh it by)


def _strata(strata: Sequence[int], k: int) -> list[Array]:
    """The indices of the first k pairs in each stratum, strata in label order."""
    labels = np.asarray([int(x) for x in strata[:k]])
    return [np.flatnonzero(labels == g) for g in sorted(set(labels.tolist()))]


def _strata_ratio(C: Sequence[float], B: Sequence[float], w: Sequence[float]) -> float:
    """Where StratifiedTest's statistic, sum of w (C - theta B) / (C + theta B)
    over the strata, crosses 0 (each term falls from + to - across its own
    ratio C/B: one crossing, between them)."""
    ratios = [cs / bs for cs, bs in zip(C, B, strict=True)]
    lo, hi = min(ratios), max(ratios)
    if hi <= lo * (1 + 1e-12):
        return lo
    for _ in range(80):
        mid = math.sqrt(lo * hi)
        stat = sum(wi * (cs - mid * bs) / (cs + mid * bs) for wi, cs, bs in zip(w, C, B, strict=True))
        lo, hi = (mid, hi) if stat > 0 else (lo, mid)
    return math.sqrt(lo * hi)


def _stratum_weights(c: Array, b: Array, groups: list[Array]) -> list[float]:
    """Each stratum's pairs over the variance of log(cand) + log(base) over
    them (the blocks' level, floored at MODES_LOG_FLOOR^2): swapping a pair's
    cand/theta and base leaves a level as it was at every theta, and theta
    shifts every level alike, so the weight is label-free and the same at
    every theta."""
    return [
        idx.size / max(float(np.var(np.log(c[idx]) + np.log(b[idx]), ddof=1)), MODES_LOG_FLOOR**2) for idx in groups
    ]


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

    def __init__(self, cand: Values, base: Values, strata: Sequence[int]):
        self.c, self.b = as_pairs(cand, base)
        self.k = k = self.c.size
        if len(strata) < k:
            raise ValueError("every pair needs its stratum")
        self.exact = k <= EXACT_PAIRS
        self.groups = _strata(strata, k)
        if min(idx.size for idx in self.groups) < STRATUM_MIN:
            raise ValueError(f"every stratum needs {STRATUM_MIN} pairs")
        self.w = _stratum_weights(self.c, self.b, self.groups)
        sc: list[list[Array]] = [[] for _ in self.groups]
        sb: list[list[Array]] = [[] for _ in self.groups]
        for signs in sign_chunks(k):
            for g, idx in enumerate(self.groups):
                sc[g].append(signs[:, idx] @ self.c[idx])
                sb[g].append(signs[:, idx] @ self.b[idx])
        self.sc_by = [np.concatenate(x) for x in sc]  # PairedTest's sc and sb, per stratum
        self.sb_by = [np.concatenate(x) for x in sb]
        self.Cs = [float(self.c[idx].sum()) for idx in self.groups]  # PairedTest's C and B, per stratum
        self.Bs = [float(self.b[idx].sum()) for idx in self.groups]
        self._ratio = self._root()

    def _weights(self, theta: float) -> list[float]:
        """Per stratum, what multiplies its sum(cand - theta*base): n / v / sum(cand + theta*base)."""
        return [w / (cs + theta * bs) for w, cs, bs in zip(self.w, self.Cs, self.Bs, strict=True)]

    def _root(self) -> float:
        return _strata_ratio(self.Cs, self.Bs, self.w)

    @property
    def ratio(self) -> float:
        return self._ratio

    def p(self, theta: float = 1.0) -> float:
        """Two-sided p-value of "cand/base = theta" in every stratum."""
        u = self._weights(theta)
        t = abs(sum(w * (cs - theta * bs) for w, cs, bs in zip(u, self.Cs, self.Bs, strict=True)))
        perm = sum(w * (sc - theta * sb) for w, sc, sb in zip(u, self.sc_by, self.sb_by, strict=True))
        scale = sum(w * (cs + theta * bs) for w, cs, bs in zip(u, self.Cs, self.Bs, strict=True))
        hits = int(np.count_nonzero(np.abs(perm) >= t - 1e-9 * scale))
        size = int(np.size(perm))
        return hits / size if self.exact else (hits + 1) / (size + 1)


def compare_strata(
    cand: Values, base: Values, strata: Sequence[int], confidence: float = CONFIDENCE
) -> tuple[float, float, float, float]:
    """compare_paired over pairs in strata (StratifiedTest)."""
    t = StratifiedTest(cand, base, strata)
    lo, hi = t.interval(confidence)
    return t.ratio, lo, hi, t.p(1.0)


def stop_halfwidth_strata(cand: Values, base: Values, strata: Sequence[int]) -> float:
    """stop_halfwidth for StratifiedTest's ratio: each stratum's, combined
    with the test's weights (the half-width of a weighted mean of the
    strata's log ratios); inf where a stratum has fewer than STRATUM_MIN
    pairs or one's own is unbounded.  Label-free as stop_halfwidth is."""
    c, b = as_pairs(cand, base)
    groups = _strata(strata, c.size)
    if not groups or min(idx.size for idx in groups) < STRATUM_MIN:
        return float("inf")
    w = _stratum_weights(c, b, groups)
    h = [stop_halfwidth(c[idx], b[idx]) for idx in groups]
    if not all(math.isfinite(x) for x in h):
        return float("inf")
    return math.sqrt(sum((wi * hi) ** 2 for wi, hi in zip(w, h, strict=True))) / sum(w)


# -- the test within the host's modes ------------------------------------------------
FAST, SLOW, SAME = "fast", "slow", "same"  # ModeTest's strata: both sides fast, both slow, either
MODE_MIN_PAIRS = 6  # a kept set smaller than this cannot reject at 5% (2/2^6): the test at that theta uses every pair
MODE_MARGIN = 0.2  # the middle 2 x this of the distance between the modes' means (logs) counts in neither
MODE_AGREE = 0.8  # at the ratio, the pooled modes must put this share of each side's processes where its own fit does


def mode_sides(m: Modes, values: Values) -> tuple[Array, Array]:
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
    and its ratio leans that way (research/2026-11-26-mode-cut/modecut.py on the hog's
    validity runs, tools/modes.py by simulation).  At a theta where the pooled
    values show no two modes, or fewer than MODE_MIN_PAIRS blocks are kept,
    the test uses every block (the kept set is still the same either way
    round).  The ratio is where the test's own statistic crosses 0 with the
    blocks kept at that ratio: theta = the kept blocks' ratio (_estimate).
    Exact given the call of two modes on each side that lets a row have a
    stratum at all (analysis.mode_test), which is each side's own."""

    EDGE_TOL = 1e-5  # each theta tried costs a fit of the modes: ends to 0.001% of the ratio

    def __init__(
        self, cand: Values, base: Values, which: str, higher_is_better: bool = False, starts: Sequence[float] = ()
    ):
        if which not in (FAST, SLOW, SAME):
            raise ValueError(f"no stratum {which!r}")
        self.c, self.b = as_pairs(cand, base)
        self.k = self.c.size
        if self.k < 2:
            raise ValueError("need at least two pairs")
        self.which, self.higher_is_better = which, higher_is_better
        self._every: PairedTest | None = None
        self._kept: dict[float, tuple[Array, Array]] = {}
        self._fits: dict[float, Modes | None] = {}
        self._tests: dict[tuple[tuple[int, ...], tuple[int, ...]], PairedTest | None] = {}
        self._ratio = self._estimate(starts)

    def split(self, theta: float) -> tuple[Array, Array]:
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
        fast, slow = ([int(i) for i in x] for x in self.split(theta))
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
                self._tests[key] = StratifiedTest(
                    self.c[fast + slow], self.b[fast + slow], [0] * len(fast) + [1] * len(slow)
                )
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
        return _agrees(m, self.c / theta, self.c, cand_modes), _agrees(m, self.b, self.b, base_modes)

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


def _agrees(m: Modes, scaled: Array, values: Array, own: Modes) -> float:
    """Of one side's processes the pooled modes m count in a mode (its
    values scaled as the pooled fit saw them), the share its own modes put
    in that mode; nan where m counts none."""
    fast, slow = mode_sides(m, scaled)
    own_slow = np.array([own.is_slow(float(v)) for v in values], dtype=bool)
    counted = fast | slow
    return float(((slow & own_slow) | (fast & ~own_slow))[counted].mean()) if counted.any() else math.nan
