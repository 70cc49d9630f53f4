import itertools
import math

import numpy as np
import pytest
from hypothesis import given
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
def test_interval_rests_on_the_group_means(pairs):
    """Whatever the grouping, the interval is Student's over the group
    means (computed here independently), and n counts every value."""
    values = [v for v, _ in pairs]
    groups = [g for _, g in pairs]
    by: dict[int, list[float]] = {}
    for v, g in pairs:
        by.setdefault(g, []).append(v)
    means = [sum(v) / len(v) for v in by.values()]
    s = stats.summarize(values, groups=groups)
    assert s.n == len(values) and s.units == len(means)
    assert s.mean == pytest.approx(np.mean(means))
    if len(means) > 1 and np.std(means) > 0:
        lo, hi = sst.t.interval(0.95, len(means) - 1, loc=np.mean(means), scale=sst.sem(means))
        assert s.ci_low == pytest.approx(lo, rel=1e-9, abs=1e-9) and s.ci_high == pytest.approx(hi, rel=1e-9, abs=1e-9)
    elif len(means) == 1:
        assert s.ci_high == math.inf
    # one value per group: the same as no groups at all
    b = stats.summarize(values, groups=list(range(len(values))))
    assert b.ci_high == pytest.approx(stats.summarize(values).ci_high, rel=1e-9)


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


pairs = st.integers(min_value=2, max_value=40).flatmap(
    lambda k: st.tuples(st.lists(finite, min_size=k, max_size=k), st.lists(finite, min_size=k, max_size=k))
)


@given(pairs, st.floats(min_value=0.01, max_value=100))
def test_paired_comparison_invariant_to_common_scale(ab, k):
    a, b = ab
    r1 = stats.compare_paired(a, b)
    r2 = stats.compare_paired([x * k for x in a], [x * k for x in b])
    for u, v in zip(r1, r2, strict=True):
        if math.isfinite(u):
            assert v == pytest.approx(u, rel=1e-6)


@given(pairs)
def test_interval_contains_the_ratio_and_the_test_is_symmetric(ab):
    a, b = ab
    r, lo, hi, p = stats.compare_paired(a, b)
    assert lo <= r * (1 + 1e-9) and r <= hi * (1 + 1e-9)
    assert stats.compare_paired(b, a)[3] == pytest.approx(p)  # swapping the sides changes nothing


def test_exact_p_is_the_share_of_sign_patterns():
    """Against a brute force of its definition, over every pattern."""
    rng = np.random.default_rng(4)
    for k in (2, 5, 9):
        c, b = rng.lognormal(0, 0.1, k) * 1.05, rng.lognormal(0, 0.1, k)
        z = c - b
        t = abs(z.sum())
        share = np.mean([abs(np.dot(s, z)) >= t - 1e-12 for s in itertools.product((1, -1), repeat=k)])
        assert stats.PairedTest(c, b).p(1.0) == pytest.approx(share)
        # at theta, the same on cand - theta * base
        th = 1.1
        zt = c - th * b
        share = np.mean([abs(np.dot(s, zt)) >= abs(zt.sum()) - 1e-12 for s in itertools.product((1, -1), repeat=k)])
        assert stats.PairedTest(c, b).p(th) == pytest.approx(share)


def test_random_draw_agrees_with_enumeration():
    """Beyond EXACT_PAIRS the p-value comes from a fixed draw of patterns:
    it agrees with the t-test on the differences where that is exact-ish."""
    rng = np.random.default_rng(8)
    k = 60
    b = rng.lognormal(0, 0.05, k)
    c = b * rng.lognormal(0.012, 0.03, k)
    p = stats.PairedTest(c, b).p(1.0)
    assert p == pytest.approx(sst.ttest_1samp(c - b, 0).pvalue, abs=0.02)
    assert stats.PairedTest(c, b).p(1.0) == p  # the same draw every time: reports repeat


def test_interval_is_the_set_the_test_accepts():
    rng = np.random.default_rng(6)
    for k in (8, 30):
        b = rng.lognormal(0, 0.05, k)
        c = 1.2 * b * rng.lognormal(0, 0.03, k)
        t = stats.PairedTest(c, b)
        lo, hi = t.interval()
        assert t.p(lo * (1 + 1e-4)) > 0.05 and t.p(hi * (1 - 1e-4)) > 0.05
        assert t.p(lo * (1 - 1e-3)) <= 0.05 and t.p(hi * (1 + 1e-3)) <= 0.05


def test_too_few_pairs_give_an_unbounded_interval_and_no_flag():
    """With 5 pairs no pattern is rarer than 2/32 > 5%: nothing can be
    rejected, whatever the data say."""
    _r, lo, hi, p = stats.compare_paired([10, 11, 12, 10, 11], [1, 1.1, 1.2, 1, 1.1])
    assert (lo, hi) == (-math.inf, math.inf) and p == pytest.approx(2 / 32)
    _r, lo, hi, p = stats.compare_paired([10, 11, 12, 10, 11, 12], [1, 1.1, 1.2, 1, 1.1, 1.2])
    assert math.isfinite(lo) and p == pytest.approx(2 / 64)
    assert stats.MIN_BLOCKS == 6  # the fewest that can give an interval, as the reports say


def test_paired_test_ignores_drift_but_sees_a_shift():
    rng = np.random.default_rng(9)
    drift = 100 * np.exp(0.3 * rng.standard_normal(30).cumsum() / 10)
    base = drift * rng.normal(1, 0.01, 30)
    same = drift * rng.normal(1, 0.01, 30)
    assert stats.compare_paired(same, base)[3] > 0.01
    _r, lo, hi, p = stats.compare_paired(same * 1.02, base)
    assert p < 0.001 and lo < 1.02 < hi and hi - lo < 0.02


def _simulate(design, k, rng, effect=1.0, rho=0.8, sd=0.02, proc=0.01):
    """Two targets measured block by block on a host whose speed follows a
    log-AR(1) process, one step per agent process: noise correlated in time,
    as on a shared machine.  design: 'abba' (the old fixed rotation) or
    'random' (a coin per block).  Returns per-block (candidate, baseline)."""
    h, level = np.zeros(2 * k), 0.0
    for i in range(2 * k):
        level = rho * level + rng.normal(0, sd)
        h[i] = level
    y = 100 * np.exp(h + rng.normal(0, proc, 2 * k))
    cand, base = [], []
    for blk in range(k):
        first_is_base = blk % 2 == 0 if design == "abba" else rng.random() < 0.5
        u, w = y[2 * blk], y[2 * blk + 1]
        base.append(u if first_is_base else w)
        cand.append((w if first_is_base else u) * effect)
    return np.array(cand), np.array(base)


def test_error_rate_holds_when_the_host_noise_is_correlated_in_time():
    """Random order plus the sign-flip test: under A/A the labels in a block
    are a coin, so the error rate is 5% whatever the host's noise does."""
    rng = np.random.default_rng(12)
    n, k = 600, 30
    new = sum(
        stats.compare_paired(c, b)[3] < 0.05
        for c, b in (_simulate("random", k, rng, rho=0.95, sd=0.03) for _ in range(n))
    )
    assert new <= n * 0.05 + 3 * math.sqrt(n * 0.05 * 0.95)  # 5% plus three binomial SEs


def _fieller_halfwidth(c, b):
    """The old stopping rule: Fieller's paired interval (centred variances)."""
    k, a, bb = len(c), np.asarray(c), np.asarray(b)
    ma, mb = a.mean(), bb.mean()
    va, vb, cov = a.var(ddof=1) / k, bb.var(ddof=1) / k, np.cov(a, bb)[0, 1] / k
    t2 = sst.t.ppf(0.975, k - 1) ** 2
    qa, qb, qc = mb * mb - t2 * vb, ma * mb - t2 * cov, ma * ma - t2 * va
    disc = qb * qb - qa * qc
    return math.inf if qa <= 0 or disc < 0 else math.sqrt(disc) / qa / (ma / mb)


def test_the_old_stopping_rule_inflated_the_a_a_rate():
    """The diagnosis of the A/A false positives (7 of 31 rows twice): the old
    runner stopped a row as soon as 3+ processes gave a narrow interval, and
    a centred spread looks narrow exactly when the difference happens to
    look large -- a t-test then flags far more than 5%.  The new rule
    (stop_halfwidth, 10 processes first) with the sign-flip test does not."""
    rng = np.random.default_rng(16)
    n, bound = 800, 800 * 0.05 + 3 * math.sqrt(800 * 0.05 * 0.95)
    old = new = 0
    for _ in range(n):
        cs, bs = [], []
        for blk in range(60):
            cs.append(100 * math.exp(rng.normal(0, 0.01)))
            bs.append(100 * math.exp(rng.normal(0, 0.01)))
            if blk >= 2 and _fieller_halfwidth(cs, bs) <= 0.01:
                break
        old += sst.ttest_1samp(np.log(cs) - np.log(bs), 0).pvalue < 0.05
        _r, *_, p = _stop_run(rng, 1.0)
        new += p < 0.05
    assert old > bound and new <= bound


def test_interval_covers_a_known_slowdown_at_the_nominal_rate():
    rng = np.random.default_rng(13)
    n, hits, flagged = 400, 0, 0
    for _ in range(n):
        c, b = _simulate("random", 30, rng, effect=1.03)
        _r, lo, hi, p = stats.compare_paired(c, b)
        hits += lo <= 1.03 <= hi
        flagged += p < 0.05
    assert hits >= n * 0.95 - 3 * math.sqrt(n * 0.05 * 0.95)
    assert flagged >= 0.8 * n  # a 3% difference against ~1.5% noise per block is seen


def _stop_run(rng, effect, goal=0.01, first=10, kmax=60):
    """The runner's rule: after each block (from the first-th on), stop
    when stop_halfwidth reaches the goal."""
    cs, bs = [], []
    for blk in range(kmax):
        c, b = _simulate("random", 1, rng, effect=effect, rho=0.0, sd=0.0, proc=0.012)
        cs.append(c[0])
        bs.append(b[0])
        if blk + 1 >= first and stats.stop_halfwidth(cs, bs) <= goal:
            break
    return stats.compare_paired(cs, bs)


def test_stopping_on_precision_does_not_bias_the_test():
    """The stopping rule sees only how far apart each block's pair is, not
    which side is ahead: stopping on it leaves the A/A rate at 5%, and the
    interval it stops on is about the one reported."""
    rng = np.random.default_rng(14)
    n = 500
    runs = [_stop_run(rng, 1.0) for _ in range(n)]
    flagged = sum(p < 0.05 for *_, p in runs)
    assert flagged <= n * 0.05 + 3 * math.sqrt(n * 0.05 * 0.95)
    widths = [(hi - lo) / 2 / r for r, lo, hi, _ in runs]
    assert 0.007 < float(np.median(widths)) < 0.013


def test_stop_halfwidth_is_blind_to_which_side_is_ahead():
    rng = np.random.default_rng(15)
    c, b = rng.lognormal(0, 0.05, 20) * 1.3, rng.lognormal(0, 0.05, 20)
    w = stats.stop_halfwidth(c, b)
    swapped = [(y, x) if i % 3 == 0 else (x, y) for i, (x, y) in enumerate(zip(c, b, strict=True))]
    assert stats.stop_halfwidth([x for x, _ in swapped], [y for _, y in swapped]) == pytest.approx(w)
    # ... yet it follows the spread both with and without a difference
    for effect in (1.0, 1.5, 3.0, 12.0, 98.0, 1 / 700):  # ... and far past 40 SDs (a UML getppid, a TCG cpuid)
        cc = b * effect * rng.lognormal(0, 0.02, 20)
        est = stats.stop_halfwidth(cc, b)
        assert 0.4 < est / (sst.t.ppf(0.975, 19) * 0.02 / math.sqrt(20)) < 2.0, effect


def test_geomean():
    assert stats.geomean([1.0, 4.0]) == pytest.approx(2.0)
    assert math.isnan(stats.geomean([]))


# -- two modes among process means (stats.modes) --------------------------------------
def _draw(seed, n, f):
    rng = np.random.default_rng(seed)
    return [float(f(rng)) for _ in range(n)]


def test_two_modes_are_found_with_their_means_share_and_cut():
    vals = _draw(1, 60, lambda r: r.normal(196, 4) if r.random() < 0.6 else r.normal(280, 15))
    m = stats.modes(vals)
    assert m is not None and m.units == 60
    assert m.fast == pytest.approx(196, rel=0.03) and m.slow == pytest.approx(280, rel=0.05)
    assert 0.25 < m.slow_share < 0.55 and m.bic_gain > stats.MODES_BIC_GAIN and m.separation > 2
    assert 210 < m.cut < 260 and m.is_slow(270) and not m.is_slow(200)
    assert m.slow_share == sum(m.is_slow(v) for v in vals) / 60


@pytest.mark.parametrize(
    "name,f",
    [
        ("normal", lambda r: r.normal(100, 3)),
        ("lognormal", lambda r: math.exp(r.normal(0, 0.5))),  # a right-skewed spread is one mode
        (
            "normal with a few outlying processes",
            lambda r: r.normal(100, 3) if r.random() < 0.97 else 100 + abs(r.normal(0, 30)),
        ),
    ],
)
def test_one_mode_or_a_skew_is_not_called_two(name, f):
    called = sum(stats.modes(_draw(seed, 60, f)) is not None for seed in range(40))
    assert called <= 2, (name, called)  # tools/modes.py measures the rates over more draws


def test_modes_need_units_and_a_share_each_and_skip_broken_values():
    two = lambda r: r.normal(100, 2) if r.random() < 0.5 else r.normal(140, 2)
    assert stats.modes(_draw(2, stats.MODES_MIN_UNITS - 1, two)) is None
    assert stats.modes(_draw(2, 40, two) + [math.nan, math.inf, 0.0, -5.0]).units == 40
    assert stats.modes([100.0] * 39 + [140.0]) is None  # one odd process is no mode
    assert stats.modes([100.0] * 40) is None  # no spread at all


def test_for_a_throughput_the_fast_mode_is_the_higher_one():
    vals = _draw(3, 50, lambda r: r.normal(1000, 10) if r.random() < 0.7 else r.normal(700, 10))
    m = stats.modes(vals, higher_is_better=True)
    assert m.fast == pytest.approx(1000, rel=0.02) and m.slow == pytest.approx(700, rel=0.02)
    assert m.is_slow(710) and not m.is_slow(990) and 0.15 < m.slow_share < 0.45


# -- the same-mode ratio: pairs in strata ------------------------------------------------
def test_one_stratum_is_the_paired_test_itself():
    rng = np.random.default_rng(3)
    b = rng.normal(100, 3, 30)
    c = b * 1.02 + rng.normal(0, 2, 30)
    assert stats.compare_strata(c, b, [0] * 30) == pytest.approx(stats.compare_paired(c, b))
    assert stats.stop_halfwidth_strata(c, b, [1] * 30) == pytest.approx(stats.stop_halfwidth(c, b))


def test_strata_weigh_each_mode_by_its_precision():
    """A fast stratum of 20 pairs at 0.5% noise and a slow one of 20 pairs
    1.4x as long at 1% (each process its own noise), the same 3% tax in
    both: the ratio is nearer the fast one's, and the interval narrower
    than the fast stratum's alone."""
    rng = np.random.default_rng(5)
    fb, fc = 100 * rng.normal(1, 0.005, 20), 103 * rng.normal(1, 0.005, 20)
    sb, sc = 140 * rng.normal(1, 0.01, 20), 144.2 * rng.normal(1, 0.01, 20)
    r, lo, hi, p = stats.compare_strata(np.r_[fc, sc], np.r_[fb, sb], [0] * 20 + [1] * 20)
    rf, lof, hif, _ = stats.compare_paired(fc, fb)
    rs = sc.sum() / sb.sum()
    assert min(rf, rs) < r < max(rf, rs) and abs(r - rf) < abs(r - rs) and p < 0.001
    assert lo < r < hi and abs(r - 1.03) < 0.005 and hi - lo < hif - lof
    w = stats.stop_halfwidth_strata(np.r_[fc, sc], np.r_[fb, sb], [0] * 20 + [1] * 20)
    assert w < stats.stop_halfwidth(fc, fb)


def test_where_the_modes_taxes_differ_the_ratio_lies_between_and_the_interval_is_what_the_test_accepts():
    """Fast pairs at 1.00, slow ones at 1.03: one crossing between the two,
    the interval every theta the test accepts (no gap past its edges), and
    the p-value at 1 agrees with whether the interval holds 1."""
    for seed in range(6):
        rng = np.random.default_rng(seed)
        fb, fc = 100 * rng.normal(1, 0.005, 15), 100 * rng.normal(1, 0.005, 15)
        sb, sc = 140 * rng.normal(1, 0.005, 8), 144.2 * rng.normal(1, 0.005, 8)
        t = stats.StratifiedTest(np.r_[fc, sc], np.r_[fb, sb], [0] * 15 + [1] * 8)
        lo, hi = t.interval()
        assert fc.sum() / fb.sum() < t.ratio < sc.sum() / sb.sum()
        accepted = [g for g in np.linspace(0.98, 1.05, 281) if t.p(g) > 0.05]
        assert lo - 0.0005 <= min(accepted) and max(accepted) <= hi + 0.0005
        assert (t.p(1.0) < 0.05) == (not lo <= 1.0 <= hi)


def test_a_stratum_needs_three_pairs_and_one_without_spread_does_not_break_it():
    with pytest.raises(ValueError):
        stats.StratifiedTest([1.0, 1.1, 1.2, 1.3], [1.0, 1.0, 1.0, 1.0], [0, 0, 1, 1])
    assert stats.stop_halfwidth_strata([1.0, 1.1, 1.2, 1.3], [1.0, 1.0, 1.0, 1.0], [0, 0, 1, 1]) == math.inf
    rng = np.random.default_rng(2)
    b = np.r_[rng.normal(100, 1, 10), [140.0] * 4]
    c = np.r_[b[:10] * 1.02 * rng.normal(1, 0.005, 10), [142.8] * 4]  # the slow stratum exactly 1.02, no spread
    r, lo, hi, _p = stats.compare_strata(c, b, [0] * 10 + [1] * 4)
    assert math.isfinite(r) and lo <= r <= hi and abs(r - 1.02) < 0.01


def test_the_strata_test_is_unchanged_by_swapping_a_pair_and_holds_its_error_rate():
    """Its weights are label-free: swapping a pair's values leaves the
    weights, the sign-flip distribution and the stop's spread as they were
    (only the observed statistic moves).  A/A pairs in a tight and a noisy
    stratum: 5% flagged."""
    rng = np.random.default_rng(11)
    b, c = rng.normal(100, 2, 12), rng.normal(100, 2, 12)
    strata = [0] * 8 + [1] * 4
    swapped_c, swapped_b = c.copy(), b.copy()
    for k in (3, 10):
        swapped_c[k], swapped_b[k] = b[k], c[k]
    one, two = stats.StratifiedTest(c, b, strata), stats.StratifiedTest(swapped_c, swapped_b, strata)
    assert one._weights(1.0) == pytest.approx(two._weights(1.0))
    spread = [
        np.sort(np.abs(sum(w * (sc - sb) for w, sc, sb in zip(t._weights(1.0), t.sc_by, t.sb_by, strict=True))))
        for t in (one, two)
    ]
    assert spread[0] == pytest.approx(spread[1])
    assert stats.stop_halfwidth_strata(c, b, strata) == pytest.approx(
        stats.stop_halfwidth_strata(swapped_c, swapped_b, strata)
    )
    n, flagged = 400, 0
    for _ in range(n):
        fast = rng.normal(100, 1, (2, 14))
        slow = rng.normal(140, 12, (2, 8))
        flagged += stats.StratifiedTest(np.r_[fast[0], slow[0]], np.r_[fast[1], slow[1]], [0] * 14 + [1] * 8).p() < 0.05
    assert n * 0.05 - 3 * math.sqrt(n * 0.05 * 0.95) <= flagged <= n * 0.05 + 3 * math.sqrt(n * 0.05 * 0.95)


# -- the test within the host's modes: one cut, from both sides pooled ---------------------
def _two_state(rng, n: int, tax: float = 1.0, slow: float = 1.5, share: float = 0.4, between: float = 0.15):
    """n blocks of a host with a fast and a slow state (1.5x), a process
    sometimes straddling a flip (a level between): (cand, base)."""

    def one() -> float:
        u = rng.random()
        level = 1.0 if u > share + between else slow if u > between else rng.uniform(1.0, slow)
        return 100 * level * rng.normal(1, 0.01)

    b = np.array([one() for _ in range(n)])
    return np.array([one() * tax for _ in range(n)]), b


def test_the_blocks_kept_do_not_depend_on_which_side_got_which_process():
    """What makes the test exact: at any theta, swapping a block's
    cand/theta and base leaves the cut and the kept blocks as they were."""
    rng = np.random.default_rng(21)
    c, b = _two_state(rng, 50, tax=1.3)
    for theta in (1.25, 1.3, 1.36):
        flip = rng.random(50) < 0.5
        c2, b2 = np.where(flip, b * theta, c), np.where(flip, c / theta, b)
        for which in (stats.FAST, stats.SLOW, stats.SAME):
            one, two = stats.ModeTest(c, b, which), stats.ModeTest(c2, b2, which)
            assert one.kept(theta) == two.kept(theta) and one.kept(theta) != ([], [])


def test_the_mode_ratio_is_where_its_own_blocks_agree_and_swapping_the_sides_inverts_it():
    rng = np.random.default_rng(4)
    c, b = _two_state(rng, 60, tax=1.03)
    for which in (stats.FAST, stats.SLOW, stats.SAME):
        t = stats.ModeTest(c, b, which)
        fast, slow = t.kept()
        keep = fast + slow
        assert (which == stats.SLOW) == (not fast) and (which == stats.FAST) == (not slow)
        if which == stats.SAME:
            strata = [0] * len(fast) + [1] * len(slow)
            assert t.ratio == pytest.approx(stats.StratifiedTest(c[keep], b[keep], strata).ratio)
        else:
            assert t.ratio == pytest.approx(c[keep].sum() / b[keep].sum())
        lo, hi = t.interval()
        assert lo < t.ratio < hi and abs(t.ratio - 1.03) < 0.02
        back = stats.ModeTest(b, c, which)
        assert back.kept() == (fast, slow) and back.ratio == pytest.approx(1 / t.ratio)
        assert back.interval() == pytest.approx((1 / hi, 1 / lo), rel=1e-5)


def test_a_large_tax_is_tested_at_every_theta_even_where_the_sides_fall_apart():
    """A 6x tax (a TCG guest): at theta = 1 the pooled values are the two
    sides, not the host's modes, so the test there takes every block and
    rejects; the ratio is the fast mode's.  A throughput's fast mode is its
    higher one."""
    rng = np.random.default_rng(8)
    c, b = _two_state(rng, 80, tax=6.0)
    t = stats.ModeTest(c, b, stats.FAST)
    assert t.p(1.0) < 0.001 and abs(t.ratio - 6.0) < 0.15 and len(t.kept()[0]) >= 10
    hc, hb = 1e4 / c, 1e4 / b
    h = stats.ModeTest(hc, hb, stats.FAST, higher_is_better=True)
    assert h.kept() == t.kept() and h.ratio == pytest.approx(1 / 6.0, rel=0.03)


def test_without_two_modes_in_the_pooled_values_there_is_no_mode_ratio():
    rng = np.random.default_rng(9)
    b = 100 * rng.normal(1, 0.01, 30)
    c = b * 1.02 * rng.normal(1, 0.01, 30)
    t = stats.ModeTest(c, b, stats.SAME)
    assert math.isnan(t.ratio) and t.kept() == ([], []) and t.interval() == (-math.inf, math.inf)
    assert t.p(1.0) == pytest.approx(stats.PairedTest(c, b).p(1.0))


def test_the_mode_test_holds_its_error_rate_where_processes_straddle_the_flips():
    """A/A blocks of a host in two states, 15% of processes straddling a
    flip: the fast-mode and same-mode tests flag about 5%, their p-values
    spread evenly (each side's own cut leaned the ratio towards the side
    whose cut fell higher: its intervals missed in 12-17% of such trials,
    results/modes.md)."""
    rng = np.random.default_rng(17)
    n, ps = 150, {stats.FAST: [], stats.SAME: []}
    for _ in range(n):
        c, b = _two_state(rng, 100)
        for which, got in ps.items():
            got.append(stats.ModeTest(c, b, which).p(1.0))
    for which, p in ps.items():
        assert sum(x < 0.05 for x in p) <= n * 0.05 + 3 * math.sqrt(n * 0.05 * 0.95), which
        assert sst.kstest(p, "uniform").pvalue > 0.001, which


def test_a_process_between_the_modes_counts_in_neither():
    """One that ran across a flip (between the modes, near the cut) leaves
    its block out of both strata; one near its own mode's mean counts."""
    rng = np.random.default_rng(6)
    b = np.r_[100 * rng.normal(1, 0.01, 20), 150 * rng.normal(1, 0.01, 20)]
    c = b * rng.normal(1, 0.01, 40)
    c[0], c[20], c[1] = 122.0, 123.0, 103.0  # two between the modes; one fast, a little slower
    fast, slow = stats.ModeTest(c, b, stats.SAME).kept(1.0)
    assert 0 not in fast + slow and 20 not in fast + slow and 1 in fast
    assert len(fast) == 19 and len(slow) == 19


def test_the_interval_is_around_a_ratio_its_test_accepts_and_holds_1_wherever_the_test_does():
    """Where the blocks kept cycle instead of settling (a 22-block draw
    where they did), the ratio is still one the test accepts and the
    interval is not a point; on many draws, an interval always holds its
    ratio strictly inside and holds 1 wherever the test accepts 1."""
    c = np.array(
        [
            143.0999872664795,
            179.4054483022916,
            122.32477246615719,
            176.53174478312977,
            179.83161145515007,
            176.19693257347822,
            178.56292835631882,
            119.32673248584078,
            121.9339552582828,
            172.14507495410209,
            183.30493978509904,
            182.9951259290351,
            152.15570520993225,
            177.92214257399283,
            147.92337653389666,
            179.55909987688716,
            181.78366522472018,
            180.49227734618833,
            180.5707096617696,
            120.82843970045192,
            119.34311371050468,
            179.67808270537918,
        ]
    )
    b = np.array(
        [
            130.1828742877766,
            150.20819205900963,
            103.81263616662982,
            133.43499459407897,
            148.92352807606807,
            112.21813091517201,
            102.95598716428809,
            100.75090125330995,
            99.70461510303743,
            99.75864216279706,
            100.69904933908819,
            150.22902630063473,
            98.42715888565033,
            147.11486855428353,
            101.07392922079647,
            149.3310423302077,
            100.711754512513,
            99.77401378268969,
            151.07006335968757,
            145.99599942529036,
            150.8561351287783,
            151.63256973334197,
        ]
    )
    rng = np.random.default_rng(23)
    for cand, base in [(c, b)] + [_two_state(rng, 30, tax=1.2, between=0.3) for _ in range(30)]:
        for which in (stats.FAST, stats.SLOW, stats.SAME):
            t = stats.ModeTest(cand, base, which)
            lo, hi = t.interval()
            if math.isfinite(lo) and math.isfinite(hi):
                assert lo < t.ratio < hi and t.p(t.ratio) > 0.05
            if math.isfinite(t.ratio) and t.p(1.0) > 0.05:
                assert lo <= 1.0 <= hi


def test_where_the_sides_fall_slow_at_different_rates_there_is_still_a_fast_mode_ratio():
    """A guest in the slow mode 75% of the time, the bare machine 30%, no
    tax: the ratio over all blocks lies between the modes and keeps no
    block there; the fast-mode ratio is still found (from each side's own
    modes lined up) and holds 1."""
    from vmtax import analysis

    for seed in range(10):
        rng = np.random.default_rng(seed)
        base = {k: 100 * (1.3 if rng.random() < 0.3 else 1.0) * rng.normal(1, 0.01) for k in range(60)}
        cand = {k: 100 * (1.3 if rng.random() < 0.75 else 1.0) * rng.normal(1, 0.01) for k in range(60)}
        f = analysis.fast_mode(base, cand, stats.modes(list(base.values())), stats.modes(list(cand.values())))
        assert f.blocks >= 6 and abs(f.ratio - 1) < 0.01 and f.ci_low < f.ratio < f.ci_high


def test_the_pooled_modes_agree_with_each_sides_own_only_where_they_are_one_state_of_the_host():
    """agreement(): with both sides 1.5x slower in one state, every process
    the pooled fit counts in a mode is in its own fit's; with the
    candidate's own 3x tail beside the state (a TCG guest's cpuid under the
    hog), the pooled fit takes the tail for the slow mode and puts the
    baseline's processes in one mode, whatever its own fit says (started as
    analysis.mode_test starts it: each side's modes lined up)."""
    for seed in range(30, 40):
        rng = np.random.default_rng(seed)
        state = np.where(rng.random(92) < 0.46, 1.5, 1.0)
        b = 4000 * state * rng.normal(1, 0.01, 92)
        for c, tail in (
            (2 * 4000 * state * rng.normal(1, 0.01, 92), False),
            (5.1 * state * np.where(rng.random(92) < 0.26, 3.0, 1.0) * rng.normal(1, 0.01, 92), True),
        ):
            own_b, own_c = stats.modes(b), stats.modes(c)
            assert own_b is not None and own_c is not None
            for which in (stats.FAST, stats.SAME):
                t = stats.ModeTest(c, b, which, starts=(own_c.fast / own_b.fast, own_c.slow / own_b.slow))
                ac, ab = t.agreement(own_c, own_b)
                if tail:  # no fast-mode ratio at all in some draws; where there is one, not the host's modes
                    assert (which == stats.FAST and math.isnan(t.ratio)) or (ac > 0.95 and ab < 0.6), (seed, which)
                else:
                    assert ac > 0.95 and ab > 0.95 and t.ratio == pytest.approx(2, rel=0.01)
    t = stats.ModeTest(b[:7], b[:7], stats.SAME)  # 14 units pooled, too few for modes: no ratio, nothing to say
    assert math.isnan(t.ratio) and all(math.isnan(x) for x in t.agreement(own_b, own_b))


# -- whether a candidate's tax moves with the host's state (stats.host_state) ---------
def _state_blocks(rng, blocks, grow, samples=6, noise=0.02, offset=0.0, run=5):
    """Blocks in the order they ran, the host quick or slow in runs of `run`
    blocks (each run's state drawn at random): the baseline 30% slower in a
    slow block, the candidate 3x the baseline and `grow` times more again
    there; each process its own offset (log SD `offset`) on every sample."""
    base, cand = {}, {}
    slow = False
    for k in range(blocks):
        if k % run == 0:
            slow = rng.random() < 0.5
        level = 100.0 * (1.3 if slow else 1.0)
        tax = 3.0 * (grow if slow else 1.0)
        base[k] = list(level * np.exp(rng.normal(0, offset) + rng.normal(0, noise, samples)))
        cand[k] = list(level * tax * np.exp(rng.normal(0, offset) + rng.normal(0, noise, samples)))
    return base, cand


def test_host_state_finds_a_tax_that_grows_with_the_hosts_slow_state():
    rng = np.random.default_rng(1)
    base, cand = _state_blocks(rng, 60, grow=1.2)
    h = stats.host_state(base, cand)
    assert h is not None and h.moved and h.z > 3
    # understated, never made up: halves cut at the median, not at the state, and a block at the edge of
    # a run of the other state misread by its neighbours, hold a few of the other state's blocks
    assert 1.08 < h.change < 1.21 and h.change_high < 1.21
    assert 2.95 < h.quick < 3.25 and 3.3 < h.slow < 3.65


@pytest.mark.parametrize("offset, noise", [(0.02, 0.002), (0.0, 0.05)])
def test_host_state_moves_by_chance_alone_where_the_tax_does_not_grow(offset, noise):
    """A tax the state leaves alone, with processes of their own offsets (a
    block's own baseline process would read as the host's state) or noisy
    samples: a row's 95% interval leaves 1 out in about 5% of rows."""
    rng = np.random.default_rng(2)
    moved = 0
    for _ in range(400):
        base, cand = _state_blocks(rng, 30, grow=1.0, noise=noise, offset=offset)
        h = stats.host_state(base, cand)
        assert h is not None
        moved += h.moved
    assert 6 <= moved <= 36  # 1.5-9% of 400


def test_host_state_reads_a_throughput_row_the_other_way_and_needs_its_blocks():
    rng = np.random.default_rng(3)
    base, cand = _state_blocks(rng, 60, grow=1.2)
    # as throughputs (operations per second): the slow host gives lower values, the candidate's tax the same
    inv_b = {k: [1e6 / v for v in xs] for k, xs in base.items()}
    inv_c = {k: [1e6 / v for v in xs] for k, xs in cand.items()}
    h = stats.host_state(inv_b, inv_c, higher_is_better=True)
    assert h is not None and h.change_high < 1 and h.change < 0.92  # the slow half's ratio is the lower one
    assert stats.tax_change(h, True) == pytest.approx(1 / h.change)
    assert stats.host_state(dict(list(base.items())[:7]), cand) is None  # fewer than 8 blocks
    assert stats.host_state({k: [0.0] for k in base}, cand) is None  # no baseline level to read
    assert stats.host_state(base, {k: [math.inf] for k in cand}) is None


def test_tax_moves_adds_the_rows_as_taxes():
    from vmtax.model import HostState, Interval

    up = HostState(10, 3.0, 3.3, Interval(1.1, 1.0, 1.2), z=2.0)
    down = HostState(10, 3.0, 2.7, Interval(0.9, 0.8, 1.0), z=-2.0)
    assert stats.tax_moves([(up, False)] * 4) == pytest.approx(2 * sst.norm.sf(4.0))
    assert stats.tax_moves([(up, False), (down, True)]) == pytest.approx(2 * sst.norm.sf(4 / math.sqrt(2)))
    assert stats.tax_moves([(up, False), (down, False)]) == pytest.approx(1.0)
    assert stats.tax_moves([]) == 1.0


def test_ratio_over_replicates_is_students_t_over_the_logs():
    from scipy import stats as sst

    ratios = [1.031, 0.994, 1.012, 1.047, 1.003, 1.021, 0.989]
    ci, p = stats.ratio_over_replicates(ratios)
    logs = np.log(ratios)
    t = sst.ttest_1samp(logs, 0.0)
    lo, hi = sst.t.interval(0.95, len(logs) - 1, loc=logs.mean(), scale=sst.sem(logs))
    assert p == pytest.approx(t.pvalue) and ci.point == pytest.approx(math.exp(logs.mean()))
    assert (ci.low, ci.high) == pytest.approx((math.exp(lo), math.exp(hi)))
    with pytest.raises(ValueError):
        stats.ratio_over_replicates([1.02])


# -- the median block (stats/ranks.py) ---------------------------------------------------
@pytest.mark.parametrize("k", [6, 9, 20, 45])
def test_the_signed_rank_p_value_is_scipys_exact_one(k):
    rng = np.random.default_rng(k)
    b = np.exp(rng.normal(0, 0.1, k))
    c = b * np.exp(rng.standard_t(3, k) * 0.05 + 0.01)
    ours = stats.RankTest(c, b).p(1.0)
    theirs = sst.wilcoxon(np.log(c) - np.log(b), method="exact").pvalue
    assert ours == pytest.approx(theirs, rel=1e-9)


@pytest.mark.parametrize("k", [7, 30, 400])
def test_the_median_blocks_interval_is_the_signed_rank_test_inverted(k):
    """Just inside either end the test does not reject, just outside it does
    (at 400 blocks: the normal limit); the ratio is inside."""
    rng = np.random.default_rng(k)
    b = np.exp(rng.normal(0, 0.2, k))
    c = b * np.exp(rng.normal(0.02, 0.05, k))
    t = stats.RankTest(c, b)
    lo, hi = t.interval()
    assert lo < t.ratio < hi
    for edge, inward in ((lo, 1 + 1e-6), (hi, 1 - 1e-6)):
        assert t.p(edge * inward) > 0.05 >= t.p(edge / inward)


def test_too_few_blocks_for_the_median_block_give_no_interval():
    _, lo, hi, p = stats.compare_ranked([1.0, 2.0, 3.0, 4.0, 5.0], [1.1, 2.1, 2.9, 4.2, 5.1])
    assert (lo, hi) == (-math.inf, math.inf) and p >= 0.0625


def test_one_outlying_block_moves_the_median_block_little_and_the_mean_much():
    """A block whose candidate process ran 28% slower in a state of its own
    (as a TCG guest's did): the ratio of means and its interval move with
    it, the median block's hardly."""
    rng = np.random.default_rng(3)
    b = 30.0 * np.exp(rng.normal(0, 0.1, 20))
    c = b * np.exp(rng.normal(0, 0.015, 20))
    c_out = c.copy()
    c_out[11] = b[11] * 1.28
    mean_ok, mean_out = stats.compare_paired(c, b), stats.compare_paired(c_out, b)
    rank_ok, rank_out = stats.compare_ranked(c, b), stats.compare_ranked(c_out, b)
    width = lambda r: r[2] / r[1] - 1
    assert width(mean_out) > 1.5 * width(mean_ok)
    assert width(rank_out) < 1.2 * width(rank_ok)
    assert abs(rank_out[0] / rank_ok[0] - 1) < 0.005 < abs(mean_out[0] / mean_ok[0] - 1)


def test_the_median_block_keeps_its_false_alarms_at_alpha_with_heavy_tails():
    """A/A: each block's log ratio symmetric about 0 (a coin decides which
    side is which), heavy-tailed; the interval misses 1 in at most 5% of
    2000 runs of 20 blocks (the exact test: 4.3%)."""
    rng = np.random.default_rng(11)
    misses = 0
    for _ in range(2000):
        d = rng.standard_t(2, 20) * 0.05
        _, lo, hi, _ = stats.compare_ranked(np.exp(d), np.ones(20))
        misses += not lo <= 1 <= hi
    assert misses / 2000 <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / 2000)


@pytest.mark.parametrize("tests", [1, 8, 16, 42])
def test_blocks_to_call_are_the_fewest_whose_rank_test_passes_holm(tests):
    """With its two smallest blocks against it, a row of blocks_to_call
    blocks reaches p <= alpha / tests (Holm's first step), one block fewer
    does not."""

    def p(k):
        d = np.arange(1, k + 1) * 0.01
        d[:2] *= -1
        return stats.RankTest(np.exp(d), np.ones(k)).p(1.0)

    k = stats.blocks_to_call(tests)
    assert p(k) <= 0.05 / tests < p(k - 1)


def test_the_median_blocks_p_value_and_interval_agree_when_values_tie():
    """Coarse figures tie and sit exactly at 1: the p-value says 'rejected at
    5%' exactly where the interval leaves 1 out (one count of Walsh
    averages serves both), in 2000 draws of 6-24 blocks."""
    rng = np.random.default_rng(5)
    for _ in range(2000):
        k = int(rng.integers(6, 25))
        t = stats.RankTest(np.exp(rng.integers(-3, 6, k) * 0.01), np.ones(k))
        lo, hi = t.interval()
        if 1.0 not in (lo, hi):
            assert (t.p(1.0) <= 0.05) == (not lo <= 1 <= hi), (t.d, t.p(1.0), lo, hi)


def test_a_row_of_thousands_of_blocks_is_counted_not_listed():
    """5000 blocks (12.5 million Walsh averages): the ratio, interval and p
    without listing them, each end within 1e-12 of the Walsh average a
    sort of a sample of them brackets."""
    rng = np.random.default_rng(8)
    k = 5000
    t = stats.RankTest(np.exp(rng.normal(0.01, 0.05, k)), np.ones(k))
    lo, hi = t.interval()
    assert lo < t.ratio < hi and t.p(1.0) < 1e-6
    assert t.m - t._count(math.log(lo))[0] >= stats.ranks.critical(k) + 1 > t.m - t._count(math.log(lo) - 1e-12)[0]


def test_counted_walsh_averages_give_what_listed_ones_do():
    """400 blocks (80,200 Walsh averages, past RankTest.LISTED): the counted
    ratio, interval ends and p-value are the listed ones'."""
    rng = np.random.default_rng(9)
    c, b = np.exp(rng.normal(0.01, 0.05, 400)), np.ones(400)
    counted, listed = stats.RankTest(c, b), stats.RankTest(c, b)
    assert counted.walsh is None
    i, j = np.triu_indices(400)
    listed.walsh = np.sort((listed.d[i] + listed.d[j]) / 2)
    assert counted.ratio == pytest.approx(listed.ratio, rel=1e-12)
    assert counted.interval() == pytest.approx(listed.interval(), rel=1e-12)
    assert counted.p(1.01) == listed.p(1.01)
