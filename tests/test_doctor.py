"""vmtax doctor: the noise analysis as pure functions, and one real run."""

import json
import math
import random
import subprocess
import sys

import pytest

from vmtax import doctor


def test_two_modes_in_stretches_are_found_with_their_share_and_length():
    rng = random.Random(1)
    # 40 processes, one a second: 10 fast, 10 slow, 10 fast, 10 slow (each +-1%)
    means = [(196 if (i // 10) % 2 == 0 else 280) * (1 + rng.gauss(0, 0.01)) for i in range(40)]
    n = doctor.noise(means, [float(i) for i in range(40)])
    assert n.bimodal and n.slow_share == 0.5
    assert n.fast == pytest.approx(196, rel=0.01) and n.slow == pytest.approx(280, rel=0.01)
    assert n.run_s == pytest.approx(39 / 4)
    assert n.cv == pytest.approx(0.18, abs=0.02)


def test_a_reference_that_follows_the_modes_separates_them_and_one_that_does_not_does_not():
    rng = random.Random(3)
    slow = [(i // 10) % 2 == 1 for i in range(40)]
    means = [(280 if s else 196) * (1 + rng.gauss(0, 0.01)) for s in slow]
    n = doctor.noise(means, [float(i) for i in range(40)])
    follows = [(1.3 if s else 1.0) * (1 + rng.gauss(0, 0.01)) for s in slow]
    seen = doctor.state_seen(means, follows, n)
    assert seen.separates and seen.corr > 0.9
    assert seen.ref_fast == pytest.approx(1.0, rel=0.02) and seen.ref_slow == pytest.approx(1.3, rel=0.02)
    blind = [1.0 * (1 + rng.gauss(0, 0.01)) for _ in slow]
    seen = doctor.state_seen(means, blind, n)
    assert seen.separates is False and abs(seen.corr) < 0.5 and seen.ref_cv == pytest.approx(0.01, abs=0.005)
    assert doctor.state_seen(means, [], n) is None


def test_one_mode_is_not_called_two():
    rng = random.Random(2)
    means = [200 * (1 + rng.gauss(0, 0.05)) for _ in range(60)]
    n = doctor.noise(means, [float(i) for i in range(60)])
    assert not n.bimodal and n.fast is None and n.cv == pytest.approx(0.05, abs=0.015)


def test_what_a_budget_buys():
    rng = random.Random(7)
    means = [200 * math.exp(rng.gauss(0, 0.10)) for _ in range(4000)]  # independent processes, 10% apart
    blocks, half = doctor.buyable(means, 0.5, 420, 14, 4)
    assert blocks == 15
    assert half == pytest.approx(2.1447866879169273 * math.sqrt(2) * 0.10 / math.sqrt(15), rel=0.05)
    assert doctor.buyable(means, 100, 60, 14, 4) == (0, math.inf)


def test_a_block_pairs_targets_as_far_apart_as_their_slots_fall():
    assert doctor.slot_lags(2) == {1: 1.0}
    assert doctor.slot_lags(3) == pytest.approx({1: 2 / 3, 2: 1 / 3})
    assert sum(doctor.slot_lags(4).values()) == pytest.approx(1.0)


def test_the_spread_is_of_log_ratios_at_a_blocks_lags_and_counts_drift():
    """A steady 1% drift a process: every pair k apart differs by exactly k
    percent (in logs), so the RMS over a 3-target block's lags (2/3 at 1,
    1/3 at 2) is sqrt(2/3 + 4/3) = sqrt(2) of one step -- a spread the run
    meets too (its random order gives the drift a random sign)."""
    means = [100 * 1.01**i for i in range(60)]
    t9 = 2.2621571627409915  # Student's 97.5% point, 9 degrees of freedom
    assert doctor.buyable(means, 0.125, 52.5, 14, 3) == pytest.approx(
        (10, t9 * math.sqrt(2) * math.log(1.01) / math.sqrt(10))
    )
    assert doctor.buyable(means, 0.125, 35, 14, 2) == pytest.approx(  # two targets: always side by side
        (10, t9 * math.log(1.01) / math.sqrt(10))
    )


def test_too_few_processes_blocks_or_a_zero_mean_give_no_false_figure():
    assert doctor.buyable([100.0, 101.0], 0.125, 420, 14, 4) == (60, math.inf)  # no pair 3 slots apart
    assert doctor.buyable([100.0] * 40, 0.1, 5 * 0.1 * 14 * 4, 14, 4)[1] == math.inf  # 5 blocks: no interval
    means = [100.0, 0.0] + [100 * (1 + 0.01 * (i % 2)) for i in range(38)]
    assert math.isfinite(doctor.buyable(means, 0.1, 420, 14, 3)[1])  # the zero is left out, not a crash


def test_a_state_that_lasts_is_shared_by_a_block_and_buys_precision():
    """Modes in stretches of 20 processes: a block's two sides mostly share
    one, so its ratio is far steadier than two independent draws would
    make it (the old doctor's figure), and most blocks fall both fast."""
    rng = random.Random(8)
    means = [(280 if (i // 20) % 2 else 196) * (1 + rng.gauss(0, 0.01)) for i in range(200)]
    n = doctor.noise(means, [float(i) for i in range(200)])
    blocks, half = doctor.buyable(means, 0.1, 420, 14, 3)
    independent = 1.98 * math.sqrt(2) * n.cv / math.sqrt(blocks)
    assert half < independent / 2
    both, fast_half = doctor.buyable_fast(means, n, blocks, 3)
    assert both > blocks * 0.4  # half the processes slow, in stretches: ~45% of blocks both fast, not 25%
    assert fast_half < 0.01
    shuffled = means[:]
    rng.shuffle(shuffled)  # the same spread with no lasting state: nothing shared
    _, mixed = doctor.buyable(shuffled, 0.1, 420, 14, 3)
    assert mixed == pytest.approx(independent, rel=0.25)


@pytest.mark.e2e
def test_doctor_on_this_machine_says_its_spread(tmp_path):
    out = tmp_path / "d.json"
    p = subprocess.run(
        [sys.executable, "-m", "vmtax.cli", "doctor", "--processes", "10", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr
    doc = json.loads(out.read_text())
    assert doc["processes"] == 10 and doc["mean"] > 0 and doc["cv"] >= 0 and doc["budget"]["blocks"] > 0
    assert "between-process SD" in p.stdout and "buys about" in p.stdout
    ref = doc["reference"]  # the agent's reference loop, seen in every process
    assert ref["mean_ns_per_step"] > 0 and ref["cv"] >= 0 and "reference loop" in p.stdout
    curve = doc["noise_by_distance"]  # a contract: [{"ms": 1.0, "sd_pct": 3.4}, ...]
    assert [c["ms"] for c in curve][:3] == [1.0, 2.0, 4.0] and all(c["sd_pct"] >= 0 for c in curve)
    from vmtax.plan import RunConfig

    step = doc["pairing"]["lockstep_ms"]  # compare's own default, said as it is
    assert step == RunConfig.step_ms and doc["pairing"]["blocks_ms"] > step
    assert (
        "noise by distance" in p.stdout
        and f"a compare pairs a baseline's sample with a candidate's about {step:g} ms" in p.stdout
    )
    # a length shorter than the curve's first distance is said as such, not as the curve's figure
    assert ("or less (the curve starts at 1 ms)" in p.stdout) == (step < 1.0)


def test_doctor_refuses_a_workload_and_bad_counts(capsys):
    from vmtax.cli import main

    assert main(["doctor", "--bench", "redis"]) == 2
    assert main(["doctor", "--processes", "3"]) == 2
    assert main(["doctor", "--processes", "10", "--targets", "6"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and "not the workload" in err[0] and "--processes must be between 8" in err[1]
    assert "--processes must be at least twice --targets (12)" in err[2]


def test_a_skewed_spread_is_one_mode_and_doctor_calls_modes_as_the_reports_do():
    rng = random.Random(5)
    means = [200 * math.exp(rng.gauss(0, 0.3)) for _ in range(60)]  # a long right tail
    n = doctor.noise(means, [float(i) for i in range(60)])
    assert not n.bimodal and n.modes is None
    two = [(196 if i % 3 else 280) * (1 + rng.gauss(0, 0.01)) for i in range(40)]
    n = doctor.noise(two, [float(i) for i in range(40)])
    assert n.bimodal and n.modes is not None and (n.fast, n.slow) == (n.modes.fast, n.modes.slow)


def test_doctor_on_a_fake_with_two_modes_says_them(tmp_path):
    out = tmp_path / "d.json"
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "vmtax.cli",
            "doctor",
            "--target",
            "fake:slow_share=0.4,slow_by=1.4",
            "--processes",
            "40",
            "--cpu",
            "none",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr
    doc = json.loads(out.read_text())
    assert doc["bimodal"] and doc["modes"]["slow"] / doc["modes"]["fast"] == pytest.approx(1.4, rel=0.05)
    assert doc["modes"]["bic_gain"] > 10 and "two modes:" in p.stdout
    assert "with compare --fast-mode" in p.stdout and doc["budget"]["fast_mode"]["ratio_ci_halfwidth"] > 0
    same = doc["budget"]["same_mode"]
    assert "with compare --same-mode" in p.stdout and same["blocks"] > doc["budget"]["fast_mode"]["blocks"]
    assert 0 < same["ratio_ci_halfwidth"] < doc["budget"]["fast_mode"]["ratio_ci_halfwidth"] and same["slow_blocks"] > 0
    p = subprocess.run(
        [sys.executable, "-m", "vmtax.cli", "doctor", "--target", "fake", "--processes", "40", "--cpu", "none"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0 and "one mode (two modes need" in p.stdout


def test_what_the_fast_mode_buys_where_there_are_two():
    rng = random.Random(4)
    means = [(280 if i % 2 else 196) * (1 + rng.gauss(0, 0.01)) for i in range(40)]
    n = doctor.noise(means, [float(i) for i in range(40)])
    both, half = doctor.buyable_fast(means, n, 100, 2)
    assert both == 0  # alternating fast and slow: no two processes in a row both fast
    both, half = doctor.buyable_fast(means, n, 100, 3)
    assert both == 16  # a third of a three-target block's pairs are two slots apart, half of those both fast
    assert half == pytest.approx(0.01 * math.sqrt(2) * 2.131 / 4, rel=0.3)  # the fast mode's 1% spread
    one = doctor.noise([200 * (1 + rng.gauss(0, 0.01)) for _ in range(40)], [float(i) for i in range(40)])
    assert doctor.buyable_fast(means, one, 100, 3) == (100, math.inf)


def test_what_the_same_mode_buys_where_there_are_two():
    """Modes in stretches: a block's two processes mostly share one, fast or
    slow, so the same mode keeps most blocks, and its interval is the fast
    mode's and the slow mode's combined, narrower than either."""
    rng = random.Random(8)
    means = [(280 if (i // 20) % 2 else 196) * (1 + rng.gauss(0, 0.01)) for i in range(200)]
    n = doctor.noise(means, [float(i) for i in range(200)])
    fast, fast_half = doctor.buyable_fast(means, n, 100, 3)
    same, slow, same_half = doctor.buyable_same(means, n, 100, 3)
    assert same == fast + slow and slow == pytest.approx(fast, abs=5) and same > 85
    assert same_half == pytest.approx(fast_half / math.sqrt(2), rel=0.25)  # two alike modes: twice the blocks
    alternating = [(280 if i % 2 else 196) * (1 + rng.gauss(0, 0.01)) for i in range(40)]
    mixed = doctor.noise(alternating, [float(i) for i in range(40)])
    assert doctor.buyable_same(alternating, mixed, 100, 2)[:2] == (0, 0)
    one = doctor.noise([200 * (1 + rng.gauss(0, 0.01)) for _ in range(40)], [float(i) for i in range(40)])
    assert doctor.buyable_same(means, one, 100, 3) == (100, 0, math.inf)
