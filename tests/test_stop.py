"""When a row stops (engine/stop.py): a pure function of what the row has
stored, tested without a runner, a clock or a process."""

import random

import pytest

from helpers import run_fake
from vmtax import stats
from vmtax.engine.stop import Side, StopRule, judge, widths, worst
from vmtax.model import BenchSpec, Sample

A = BenchSpec("getppid", "kernel", "ns", "lower", "d")


def side(
    means: list[float],
    first_block: int = 0,
    seqs: int = 3,
    active: bool = True,
    processes=None,
    name: str = "t",
    jitter=None,
) -> Side:
    """A target's stored timed samples: one process per block, `seqs` samples of its mean each."""
    samples = []
    for k, m in enumerate(means):
        blk = first_block + k
        for seq in range(seqs):
            v = m * (1 + jitter.gauss(0, 0.01)) if jitter else m
            samples.append(Sample("getppid", name, v, "ns", process=blk, seq=seq, t=1.0 + blk, block=blk))
    return Side(tuple(samples), len(means) if processes is None else processes, active)


def test_a_stop_on_a_mode_stratum_waits_for_one_the_report_will_have():
    """--same-mode and --fast-mode judge a row over the blocks each side's
    own cut puts in a mode (analysis.stop_blocks); where the report will
    have no such ratio (the pooled modes are not each side's own: a TCG
    guest's cpuid tail beside the host's state, analysis.modes_agree), the
    stop must not end the row on that stratum's width: it judges every
    block, as the report will."""
    rng = random.Random(11)
    base, cand = [], []
    for _ in range(92):
        state = 1.5 if rng.random() < 0.46 else 1.0  # the host's, on both sides
        base.append(4000.0 * state)
        tail = 3.0 if rng.random() < 0.26 else 1.0  # the candidate's own
        cand.append(5.1 * state * tail)
    noise = random.Random(1)
    sides = {"fake": side(base, jitter=noise), "fake:label=b": side(cand, jitter=noise)}
    for flag in ("same_mode", "fast_mode"):
        (width,) = widths(StopRule(0.01, **{flag: True}), list(sides), sides).values()
        assert width > 0.05, (flag, width)  # over every block: the tail's spread, not the stratum's +-0.1%
    rng = random.Random(12)
    states = [1.5 if rng.random() < 0.46 else 1.0 for _ in range(40)]  # the same host state, no tail
    quiet = {
        "fake": side([4000.0 * s for s in states], jitter=rng),
        "fake:label=b": side([5.1 * s for s in states], jitter=rng),
    }
    (width,) = widths(StopRule(0.01, same_mode=True), list(quiet), quiet).values()
    assert width < 0.01, width  # the stratum is kept, and narrow


def test_a_row_stops_only_once_the_interval_the_report_will_give_is_as_narrow():
    """The stop's estimate (stats.stop_halfwidth) can call a row precise
    at a block where the sign-flip interval the report then gives is
    still wider than the goal (a quiet AMD demo: 6 of 27 rows stopped on
    precision reported +-1.01-1.05%); the width is the wider of the two
    once the estimate reaches the goal, so the row goes on."""
    rng = random.Random(25)
    base = [4000.0 * (1 + rng.gauss(0, 0.012)) for _ in range(10)]
    cand = [5.1 * (1 + rng.gauss(0, 0.012)) for _ in range(10)]
    assert stats.stop_halfwidth(cand, base) <= 0.01  # the estimate alone would stop here
    reported = stats.ratio_ci_rel(*stats.compare_paired(cand, base)[:3])
    assert 0.0101 < reported < 0.011
    sides = {"fake": side(base), "fake:label=b": side(cand)}
    (width,) = widths(StopRule(0.01), list(sides), sides).values()
    assert width == pytest.approx(reported)
    (width,) = widths(StopRule(0.005), list(sides), sides).values()  # estimate short of the goal: it alone
    assert width == pytest.approx(stats.stop_halfwidth(cand, base))


def test_each_candidate_stops_on_its_own_ratio_and_the_baseline_goes_on():
    """Three targets: the quiet candidate, precise with --min-processes
    blocks, stops; the noisy one and the baseline go on, and the widest
    width still deciding is the noisy one's.  With one candidate nothing
    stops on its own (the row's stop is the runner's), and below
    --min-processes no candidate stops."""
    rng = random.Random(3)
    base = [100.0 * (1 + rng.gauss(0, 0.002)) for _ in range(12)]
    quiet = [b * 1.2 * (1 + rng.gauss(0, 0.002)) for b in base]
    noisy = [b * (1 + rng.gauss(0, 0.3)) for b in base]
    sides = {"b": side(base), "q": side(quiet), "n": side(noisy)}
    names = ["b", "q", "n"]
    rule = StopRule(0.01, min_processes=10)
    by = widths(rule, names, sides)
    assert set(by) == {"q", "n"} and by["q"] <= 0.01 < by["n"]
    got = judge(rule, names, [sides])
    assert got.precise == {"q"} and got.worst == by["n"]
    assert judge(StopRule(0.01, min_processes=13), names, [sides]).precise == frozenset()
    assert judge(rule, ["b", "q"], [{"b": sides["b"], "q": sides["q"]}]).precise == frozenset()
    # every figure of a job must be precise: a second figure where q is noisy keeps it going
    other = {"b": side(base), "q": side(noisy), "n": side(noisy)}
    assert judge(rule, names, [sides, other]).precise == frozenset()
    # a candidate already stopped no longer decides
    done = {**sides, "n": Side(sides["n"].samples, 12, active=False)}
    assert worst(rule, names, done) == by["q"]


def test_a_lone_target_or_a_stopped_baseline_is_judged_on_its_own_mean():
    rng = random.Random(4)
    one = side([100.0 * (1 + rng.gauss(0, 0.01)) for _ in range(8)], jitter=rng)
    (w,) = widths(StopRule(0.01), ["t"], {"t": one}).values()
    values = [s.value for s in one.samples]
    assert w == stats.summarize(values, groups=[s.process for s in one.samples]).ci_rel
    short = Side(one.samples[:1], 1)
    assert widths(StopRule(0.01), ["t"], {"t": short}) == {"t": float("inf")}
    gone = {"b": Side(one.samples, 8, active=False), "c": one}
    assert set(widths(StopRule(0.01), ["b", "c"], gone)) == {"c"}  # the baseline failed: no ratio to judge


def test_the_stop_read_from_the_store_ends_a_row_at_the_block_the_run_ended_it(db):
    """The rule is a function of the stored state: the samples a run
    stored give the stop it took -- precise with enough processes at the
    row's last block, not at the one before."""
    status, data = run_fake(
        db, ["fake:noise=0.01", "fake:scale=1.2,noise=0.01"], [A], precision=0.02, max_time=1e6, min_processes=4, seed=3
    )
    assert status == "complete" and data.outcomes[("fake:noise=0.01", "getppid")][0] == "precision"
    names = [t.name for t in data.targets]
    timed = [s for s in data.samples if not s.warmup and not s.counting]
    blocks = sorted({s.block for s in timed})
    rule = StopRule(0.02, min_processes=4)

    def stops_after(last: int) -> bool:
        sides = {
            n: Side(
                tuple(s for s in timed if s.target == n and s.block <= last),
                len({s.block for s in timed if s.target == n and s.block <= last}),
            )
            for n in names
        }
        enough = all(sd.processes >= rule.min_processes for sd in sides.values())
        return enough and worst(rule, names, sides) <= rule.precision

    assert stops_after(blocks[-1]) and not stops_after(blocks[-2])


def _cut_side(name: str, level: float, rng: random.Random) -> Side:
    """A side of 40 blocks of 9 samples about `level` (1% scatter), one of
    each block's samples cut into by another job (three to eight times as long)."""
    samples = []
    for blk in range(40):
        cut = rng.randrange(9)
        for seq in range(9):
            v = level * (1 + rng.gauss(0, 0.01)) * (rng.uniform(3, 8) if seq == cut else 1)
            samples.append(Sample("getppid", name, v, "ns", process=blk, seq=seq, t=1.0 + blk, block=blk))
    return Side(tuple(samples), 40, True)


def test_median_judges_the_blocks_as_the_report_takes_them():
    """compare --median: the stop reads each block's process at its median
    sample, as analyse reports it, so a sample cut into by another job
    widens neither; with the mean both widen several times."""
    rng = random.Random(5)
    sides = {"b": _cut_side("b", 100.0, rng), "c": _cut_side("c", 102.0, rng)}
    (by_mean,) = widths(StopRule(0.01), ["b", "c"], sides).values()
    (by_median,) = widths(StopRule(0.01, median=True), ["b", "c"], sides).values()
    assert by_median < 0.005 < by_mean and by_mean > 4 * by_median
    assert sides["c"].means(median=True)[0] == pytest.approx(102.0, rel=0.03)
