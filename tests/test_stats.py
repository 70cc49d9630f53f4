import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy import stats as sst

from vmtax import stats

finite = st.floats(min_value=1.0, max_value=1e6, allow_nan=False, allow_infinity=False)
samples = st.lists(finite, min_size=2, max_size=60)


def test_summary_matches_scipy():
    rng = np.random.default_rng(7)
    x = rng.normal(100, 5, size=40)
    s = stats.summarize(x)
    lo, hi = sst.t.interval(0.95, len(x) - 1, loc=x.mean(), scale=sst.sem(x))
    assert s.ci_low == pytest.approx(lo) and s.ci_high == pytest.approx(hi)
    assert s.median == pytest.approx(np.median(x))
    assert s.stdev == pytest.approx(x.std(ddof=1))
    assert s.n == 40


def test_interval_over_process_means():
    """Samples of one process are one unit: the interval is the t-interval
    of the process means, while descriptive figures use every sample."""
    values = [10, 11, 12, 20, 21, 22, 30, 31, 32]
    groups = [0, 0, 0, 1, 1, 1, 2, 2, 2]
    s = stats.summarize(values, groups=groups)
    lo, hi = sst.t.interval(0.95, 2, loc=21, scale=sst.sem([11, 21, 31]))
    assert s.units == 3 and s.n == 9 and s.mean == pytest.approx(21)
    assert s.ci_low == pytest.approx(lo) and s.ci_high == pytest.approx(hi)
    assert s.min == 10 and s.median == 21
    assert stats.cluster_means([1, 3, 5], [7, 7, 9]) == [2, 5]


@given(st.lists(st.tuples(finite, st.integers(0, 5)), min_size=2, max_size=40))
def test_process_interval_is_never_narrower_than_needed(pairs):
    """With one sample per process the two methods agree."""
    values = [v for v, _ in pairs]
    a = stats.summarize(values, groups=list(range(len(values))))
    b = stats.summarize(values)
    assert a.ci_high == pytest.approx(b.ci_high, rel=1e-9)


def test_best_k_of_n_follows_direction():
    v = [5, 1, 4, 2, 3, 9]
    assert stats.best_k_of_n(v, 3, 5, lower_is_better=True) == pytest.approx(2.0)
    assert stats.best_k_of_n(v, 3, 5, lower_is_better=False) == pytest.approx(4.0)
    assert stats.best_k_of_n(v[:4], 3, 5) is None


@given(samples)
def test_interval_contains_estimate(xs):
    s = stats.summarize(xs)
    assert s.ci_low <= s.mean + 1e-9 * abs(s.mean) and s.mean <= s.ci_high + 1e-9 * abs(s.mean)


@given(samples, st.floats(min_value=0.01, max_value=100))
def test_scaling_scales_interval(xs, k):
    a, b = stats.summarize(xs), stats.summarize([x * k for x in xs])
    assert b.mean == pytest.approx(a.mean * k, rel=1e-9)
    assert b.ci_halfwidth == pytest.approx(a.ci_halfwidth * k, rel=1e-6, abs=1e-12 * b.mean)


@given(samples, st.randoms())
def test_order_does_not_matter(xs, rnd):
    ys = list(xs)
    rnd.shuffle(ys)
    a, b = stats.summarize(xs), stats.summarize(ys)
    assert a.mean == pytest.approx(b.mean) and a.ci_high == pytest.approx(b.ci_high)


@given(samples, samples, st.floats(min_value=0.01, max_value=100))
def test_ratio_invariant_to_common_scale(a, b, k):
    assume(np.var(b) > 0 or np.var(a) > 0)
    r1 = stats.ratio_ci(a, b)
    r2 = stats.ratio_ci([x * k for x in a], [x * k for x in b])
    for u, v in zip(r1, r2):
        if math.isfinite(u):
            assert v == pytest.approx(u, rel=1e-6)


@given(samples, samples)
def test_ratio_interval_contains_ratio(a, b):
    r, lo, hi = stats.ratio_ci(a, b)
    assert lo <= r * (1 + 1e-9) and r <= hi * (1 + 1e-9)


def test_fieller_agrees_with_bootstrap():
    rng = np.random.default_rng(3)
    a, b = rng.normal(120, 6, 50), rng.normal(100, 5, 50)
    r, lo, hi = stats.ratio_ci(a, b)
    boots = [rng.choice(a, 50).mean() / rng.choice(b, 50).mean() for _ in range(4000)]
    blo, bhi = np.percentile(boots, [2.5, 97.5])
    assert r == pytest.approx(1.2, rel=0.05)
    assert lo == pytest.approx(blo, rel=0.01) and hi == pytest.approx(bhi, rel=0.01)


def test_paired_fieller_cancels_common_drift():
    """Both sides drift together (the interleaved design): the paired
    interval is narrow and contains the true ratio; the unpaired one is
    wide.  Against a brute-force check of Fieller's inequality."""
    rng = np.random.default_rng(5)
    drift = 100 * (1 + 0.2 * np.sin(np.linspace(0, 6, 40)))  # a host that speeds up and slows
    base = drift * rng.normal(1, 0.01, 40)
    cand = 1.5 * drift * rng.normal(1, 0.01, 40)
    r, lo, hi = stats.ratio_ci_paired(cand, base)
    _, ulo, uhi = stats.ratio_ci(cand, base)
    assert lo < 1.5 < hi and (hi - lo) < (uhi - ulo) / 5
    # every theta inside satisfies the inequality, just outside does not
    k, t2 = 40, sst.t.ppf(0.975, 39) ** 2
    va, vb = cand.var(ddof=1) / k, base.var(ddof=1) / k
    cov = np.cov(cand, base)[0, 1] / k

    def inside(th):
        return (cand.mean() - th * base.mean()) ** 2 <= t2 * (va - 2 * th * cov + th * th * vb)
    assert inside(r) and inside(lo + 1e-9) and inside(hi - 1e-9)
    assert not inside(lo - 1e-6) and not inside(hi + 1e-6)


def test_paired_test_ignores_drift_but_sees_a_shift():
    rng = np.random.default_rng(9)
    drift = 100 * (1 + 0.3 * rng.standard_normal(30).cumsum() / 10)
    base = drift * rng.normal(1, 0.01, 30)
    same = drift * rng.normal(1, 0.01, 30)
    assert stats.paired_p(same, base) > 0.01
    assert stats.paired_p(same * 1.02, base) < 0.001
    assert stats.paired_p(base, base) == 1.0
    assert 0 <= stats.paired_p([-1.0, 2.0, 0.5], [1.0, 1.5, 0.0]) <= 1  # no log of <= 0


@given(samples, st.floats(min_value=0.01, max_value=100))
def test_paired_ratio_invariant_to_common_scale(xs, k):
    ys = [x * 1.1 + 1 for x in xs]
    r1, r2 = stats.ratio_ci_paired(ys, xs), stats.ratio_ci_paired([y * k for y in ys], [x * k for x in xs])
    for u, v in zip(r1, r2):
        if math.isfinite(u):
            assert v == pytest.approx(u, rel=1e-6)


def test_fieller_unbounded_when_baseline_is_noise():
    r, lo, hi = stats.ratio_ci([1.0, 2.0, 3.0], [-1.0, 0.5, 1.0])
    assert lo == -math.inf and hi == math.inf


@given(samples)
def test_identical_samples_are_not_significant(xs):
    assert stats.paired_p(xs, list(xs)) > 0.05


def test_geomean():
    assert stats.geomean([1.0, 4.0]) == pytest.approx(2.0)
    assert math.isnan(stats.geomean([]))
