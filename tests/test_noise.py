"""The noise by distance (noise.py): the spread of the log ratio of two
samples grows with the time between them where the host's state drifts."""

import itertools
import math
import random

import pytest

from vmtax import noise


def _drifting(n=4000, sample_ms=0.5, drift=0.02, jitter=0.01, seed=1):
    """A host whose state is a random walk (each sample's step `drift`)
    plus each sample's own jitter: two samples k apart differ by
    sqrt(2 jitter^2 + k drift^2) on the logs."""
    rng = random.Random(seed)
    level, times, values = 0.0, [], []
    for i in range(n):
        level += rng.gauss(0, drift)
        times.append((i + 0.5) * sample_ms / 1e3)
        values.append(100 * math.exp(level + rng.gauss(0, jitter)))
    return times, values


def test_the_spread_grows_with_the_distance_as_a_drifting_state_says():
    times, values = _drifting()
    curve = noise.by_distance(times, values)
    assert [c.ms for c in curve] == list(noise.DISTANCES_MS)
    for c in curve[:6]:  # 1..32 ms: 2..64 samples apart
        k = c.ms / 0.5
        assert c.sd_pct == pytest.approx(100 * math.sqrt(2 * 0.01**2 + k * 0.02**2), rel=0.12)
    assert all(a.sd_pct < b.sd_pct for a, b in itertools.pairwise(curve[:6]))


def test_a_steady_host_has_one_spread_at_every_distance_and_at_random():
    times, values = _drifting(drift=0.0, jitter=0.03)
    curve = noise.by_distance(times, values)
    assert all(c.sd_pct == pytest.approx(100 * 0.03 * math.sqrt(2), rel=0.12) for c in curve)
    assert noise.unpaired_sd_pct(values) == pytest.approx(100 * 0.03 * math.sqrt(2), rel=0.12)


def test_a_distance_the_series_does_not_span_is_left_out_and_at_interpolates():
    times, values = _drifting(n=200)  # 100 ms of samples
    curve = noise.by_distance(times, values)
    assert curve and curve[-1].ms <= 64 and all(c.pairs >= noise.MIN_PAIRS for c in curve)
    mid = noise.at(curve, math.sqrt(curve[0].ms * curve[1].ms))
    assert curve[0].sd_pct < mid < curve[1].sd_pct
    assert noise.at(curve, 0.1) == curve[0].sd_pct and noise.at(curve, 1e6) == curve[-1].sd_pct
    assert noise.at([], 1.0) is None and math.isnan(noise.unpaired_sd_pct([1.0, 2.0]))


def test_what_lockstep_blocks_buy_from_the_pairs_spread():
    # 4.48% a pair, 30 pairs a block: 0.82% a block (results/lockstep-cloud.md measured 0.78%)
    assert noise.lockstep_halfwidth(4.48, 30, 2) == pytest.approx(12.706 * 0.0448 / math.sqrt(60), rel=1e-3)
    assert noise.lockstep_halfwidth(4.48, 30, 40) < noise.lockstep_halfwidth(4.48, 30, 10) / 2
