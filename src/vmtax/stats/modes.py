"""Two modes among process means (a host busy in stretches): a mixture of
two normals on the logs, called only where it clearly beats one.  Pure."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..model import Modes
from .summary import Array

MODES_MIN_UNITS = 16  # fewer process means than this: no call on modes
MODES_BIC_GAIN = 10.0  # two normals on the logs must beat one by this much BIC ("very strong")
MODES_SEPARATION = 2.0  # and be this far apart (Ashman's D: two humps, not a shoulder)
MODES_MIN_SHARE = 0.1  # and each hold this share of the units (and 3 of them)
MODES_MIN_GAP = 1.02  # and the slow mode's mean be at least this many times the fast one's
MODES_LOG_FLOOR = 1e-4  # a mode's SD on the logs is at least this (a coarse timer's ties are one mode)


def modes(values: Sequence[float], higher_is_better: bool = False) -> Modes | None:
    """Two modes among these units (agent process means), or None: a
    mixture of two normals fitted to their logs by EM must beat one normal
    by MODES_BIC_GAIN in BIC, its components be MODES_SEPARATION apart
    (Ashman's D), each hold MODES_MIN_SHARE of the units and their means
    differ by MODES_MIN_GAP.  On logs, so a right-skewed spread (a
    lognormal, an exponential tail) is not called two modes; tools/modes.py
    measures the false calls and the power."""
    x = np.asarray([v for v in values if v > 0 and math.isfinite(v)], dtype=float)
    n = x.size
    if n < MODES_MIN_UNITS:
        return None
    y = np.log(x)
    sd1 = float(y.std())
    if sd1 <= 0:
        return None
    fit = _em(y, *_start(y, max(1e-3 * sd1, MODES_LOG_FLOOR)))
    if fit is None:
        return None
    ll, w, mu, sd = fit
    one = float((-0.5 * ((y - y.mean()) / sd1) ** 2 - math.log(sd1 * math.sqrt(2 * math.pi))).sum())
    gain = 2 * (ll - one) - 3 * math.log(n)  # two normals: 3 more parameters
    d = math.sqrt(2) * abs(mu[1] - mu[0]) / math.sqrt(sd[0] ** 2 + sd[1] ** 2)
    a, b = int(np.argmin(mu)), int(np.argmax(mu))
    cut = _crossing(w[[a, b]], mu[[a, b]], sd[[a, b]])
    low, high = x[y <= cut], x[y > cut]
    if (
        gain <= MODES_BIC_GAIN
        or d <= MODES_SEPARATION
        or abs(mu[1] - mu[0]) < math.log(MODES_MIN_GAP)
        or min(low.size, high.size) < max(3, MODES_MIN_SHARE * n)
    ):
        return None
    fast, slow = (high, low) if higher_is_better else (low, high)
    return Modes(
        fast=float(fast.mean()),
        slow=float(slow.mean()),
        slow_share=slow.size / n,
        units=int(n),
        cut=math.exp(cut),
        bic_gain=float(gain),
        separation=float(d),
        higher_is_better=higher_is_better,
    )


def _start(y: Array, floor: float) -> tuple[Array, Array, Array, float]:
    """EM's start: the best split of the sorted logs in two groups (least
    within-group squares), as weights, means and SDs; and the SDs' floor."""
    n = y.size
    s = np.sort(y)
    c1, c2 = np.cumsum(s), np.cumsum(s * s)
    i = np.arange(2, n - 1)
    within = (c2[i - 1] - c1[i - 1] ** 2 / i) + ((c2[-1] - c2[i - 1]) - (c1[-1] - c1[i - 1]) ** 2 / (n - i))
    k = int(i[np.argmin(within)])
    mu = np.array([s[:k].mean(), s[k:].mean()])
    sd = np.maximum([s[:k].std(), s[k:].std()], floor)
    return np.array([k / n, 1 - k / n]), mu, sd, floor


def _em(y: Array, w: Array, mu: Array, sd: Array, floor: float) -> tuple[float, Array, Array, Array] | None:
    """A mixture of two normals fitted to y by EM from (w, mu, sd): its log
    likelihood, weights, means and SDs; None where a component empties."""
    n = y.size
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
    return ll, w, mu, sd


def _crossing(w: Array, mu: Array, sd: Array) -> float:
    """Where between the two means (logs, low first) the weighted densities
    of the two normals meet (compared as log densities: in a wide gap both
    round to 0): a unit below is likelier in the low mode."""

    def diff(t: float) -> float:
        return float(
            (math.log(w[0] / sd[0]) - 0.5 * ((t - mu[0]) / sd[0]) ** 2)
            - (math.log(w[1] / sd[1]) - 0.5 * ((t - mu[1]) / sd[1]) ** 2)
        )

    lo, hi = float(mu[0]), float(mu[1])
    if not diff(lo) > 0 > diff(hi):
        return (lo + hi) / 2
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if diff(mid) > 0 else (lo, mid)
    return (lo + hi) / 2
