"""How noisy is this host, right now?  vmtax doctor runs one short benchmark
in many fresh agent processes on a target (the bare machine by default),
one after another, and says what the runner will meet: the spread between
processes, whether their means fall in two modes (a vCPU whose host
sibling is busy, say) and for how long a mode lasts, and what precision a
budget can buy at that spread -- before anyone spends ten minutes.  And
whether the agent's reference loop (agent/harness.h), timed around every
sample, sees the state: how it moves with the benchmark across processes,
and whether its own means split where the benchmark's modes do.

The analysis is pure (noise, buyable); measure() runs the processes."""

from __future__ import annotations

import itertools
import math
import statistics
import time
from dataclasses import dataclass

from scipy import stats as sps

from . import stats
from .engine.execute import Recorder, Where, agent_lines, run_process
from .engine.protocol import agent_argv
from .errors import AgentError, TargetError
from .model import BenchSpec, Modes
from .proc import ChildFailed

REF_GAP = 2.0  # the reference separates the modes: its means in them this many within-mode SDs apart


@dataclass(frozen=True)
class Noise:
    processes: int
    mean: float
    cv: float  # between-process SD over the mean
    bimodality: float  # Sarle's coefficient (a uniform distribution: 5/9): a shape figure only
    bimodal: bool  # two modes, as the run's reports call them (stats.modes)
    fast: float | None  # the two modes' means, where bimodal
    slow: float | None
    slow_share: float | None  # the share of processes in the slow mode
    run_s: float | None  # how long a mode lasts: the mean length of a run of one mode, in seconds
    cut: float | None = None  # a process mean above this is in the slow mode (where bimodal)
    modes: Modes | None = None


def noise(means: list[float], starts: list[float]) -> Noise:
    """The spread of process means taken in this order at these times; two
    modes as a run's report calls them (stats.modes: a mixture of two
    normals on the logs, clearly better than one)."""
    n = len(means)
    mu = statistics.fmean(means)
    sd = statistics.stdev(means) if n > 1 else 0.0
    two = stats.modes(means)
    fast = slow = share = run_s = slow_above = None
    if two is not None:
        fast, slow, share, slow_above = two.fast, two.slow, two.slow_share, two.cut
        modes = [two.is_slow(m) for m in means]
        runs = 1 + sum(a != b for a, b in itertools.pairwise(modes))
        run_s = (starts[-1] - starts[0]) / runs if n > 1 else None
    return Noise(
        processes=n,
        mean=mu,
        cv=sd / mu if mu else math.inf,
        bimodality=_bimodality(means),
        bimodal=two is not None,
        fast=fast,
        slow=slow,
        slow_share=share,
        run_s=run_s,
        cut=slow_above,
        modes=two,
    )


@dataclass(frozen=True)
class StateSeen:
    """What the reference loop saw across the same processes."""

    ref_mean: float  # ns per step
    ref_cv: float  # its between-process SD over its mean
    corr: float | None  # Pearson's r of log(benchmark) and log(reference) across processes
    ref_fast: float | None  # its mean over the processes of each of the benchmark's modes
    ref_slow: float | None
    separates: bool | None  # its means in the two modes REF_GAP within-mode SDs apart, slow slower


def state_seen(means: list[float], refs: list[float], n: Noise) -> StateSeen | None:
    """How the reference (each process's mean ns per step) follows the
    benchmark's process means; None without references."""
    if not refs or len(refs) != len(means):
        return None
    mu = statistics.fmean(refs)
    sd = statistics.stdev(refs) if len(refs) > 1 else 0.0
    corr = None
    lm, lr = [math.log(m) for m in means], [math.log(r) for r in refs]
    if len(refs) > 2 and statistics.pstdev(lm) > 0 and statistics.pstdev(lr) > 0:
        corr = statistics.correlation(lm, lr)
    fast = slow = sep = None
    cut = n.cut  # there where n is bimodal
    if cut is not None:
        a = [
            r for m, r in zip(means, refs, strict=True) if m <= cut
        ]  # the processes of each mode, as noise() split them
        b = [r for m, r in zip(means, refs, strict=True) if m > cut]
        if a and b:
            fast, slow = statistics.fmean(a), statistics.fmean(b)
            within = math.sqrt((_var(a) + _var(b)) / 2)
            sep = slow > fast and (within == 0 or (slow - fast) / within > REF_GAP)
    return StateSeen(mu, sd / mu if mu else math.inf, corr, fast, slow, sep)


def _var(xs: list[float]) -> float:
    return statistics.variance(xs) if len(xs) > 1 else 0.0


def _bimodality(xs: list[float]) -> float:
    """Sarle's bimodality coefficient, with the sample's skewness and excess
    kurtosis (bias-corrected); 0 where fewer than 4 values or no spread."""
    n = len(xs)
    if n < 4 or statistics.pstdev(xs) == 0:
        return 0.0
    g = sps.skew(xs, bias=False)
    k = sps.kurtosis(xs, bias=False)
    return float((g * g + 1) / (k + 3 * (n - 1) ** 2 / ((n - 2) * (n - 3))))


def slot_lags(targets: int) -> dict[int, float]:
    """How far apart a block's baseline and candidate processes run: a
    block runs one process per target back to back in a random order, so
    two given targets sit k slots apart with chance 2(T-k)/(T(T-1))."""
    t = max(2, targets)
    return {k: 2 * (t - k) / (t * (t - 1)) for k in range(1, t)}


def _kept_pairs(means: list[float], targets: int, keep) -> list[tuple[float, int, list[tuple[float, float]]]]:
    """Per lag of slot_lags: (its weight, how many process pairs it has,
    those of them `keep` holds), the pairs being processes as far apart as a
    block's two sides (none at a lag past the processes)."""
    out = []
    for k, w in slot_lags(targets).items():
        pairs = [(a, b) for a, b in zip(means, means[k:], strict=False) if a > 0 and b > 0]
        out.append((w, len(pairs), [(a, b) for a, b in pairs if keep(a, b)]))
    return out


def _lagged(means: list[float], targets: int, keep=lambda a, b: True) -> tuple[float, float]:
    """(the share of process pairs k apart that `keep` holds, the RMS of
    their log ratios), each lag weighted as a block's pairs fall
    (slot_lags); (0, inf) where none is kept or a lag has no pair (fewer
    processes than targets)."""
    share = msq = 0.0
    lags = _kept_pairs(means, targets, keep)
    if any(n == 0 for _, n, _ in lags):
        return 0.0, math.inf
    for w, n, kept in lags:
        share += w * len(kept) / n
        msq += w * len(kept) / n * (statistics.fmean(math.log(b / a) ** 2 for a, b in kept) if kept else 0.0)
    return (share, math.sqrt(msq / share)) if share > 0 else (0.0, math.inf)


def buyable(means: list[float], process_s: float, budget_s: float, rows: int, targets: int) -> tuple[int, float]:
    """(blocks a row gets, the 95% CI half-width of a ratio then) for a
    compare of rows x targets in budget_s, each process costing process_s:
    a Student interval over the blocks at the spread of log(later/earlier)
    between these processes as far apart as a block's two sides run
    (slot_lags).  Processes run back to back share whatever state lasts
    longer than one, and that cancels in a block's ratio as it does in the
    run; with no such state the spread is sqrt(2) times the between-process
    one.  That assumes the run's processes as quick as these: a slower
    target's (a guest's) sit further apart in seconds and share less of a
    state.  Unbounded below stats.MIN_BLOCKS blocks, as the run's interval is."""
    blocks = int(budget_s / (rows * targets * process_s)) if process_s > 0 else 0
    if blocks < stats.MIN_BLOCKS:
        return blocks, math.inf
    _, rms = _lagged(means, targets)
    return blocks, float(sps.t.ppf(0.975, blocks - 1)) * rms / math.sqrt(blocks)


def _both_in(m, side: int):
    """Whether a pair of process means both fell in one mode (side 0 the
    fast, 1 the slow), as the run counts a process (stats.mode_sides)."""
    return lambda a, b: bool(stats.mode_sides(m, (a, b))[side].all())


def buyable_fast(means: list[float], n: Noise, blocks: int, targets: int) -> tuple[int, float]:
    """With compare --fast-mode, where the means fell in two modes: (the
    blocks of `blocks` whose two processes both ran in the fast mode (as
    the run counts a process: stats.mode_sides), by
    the share of these processes, as far apart as a block's two sides, that
    both did -- a state that lasts shares a block -- the 95% CI half-width
    of the fast-mode ratio then, at those pairs' spread)."""
    if n.modes is None:
        return blocks, math.inf
    share, rms = _lagged(means, targets, _both_in(n.modes, 0))
    both = int(blocks * share)
    if both < stats.MIN_BLOCKS or not math.isfinite(rms):
        return both, math.inf
    return both, float(sps.t.ppf(0.975, both - 1)) * rms / math.sqrt(both)


def _level_variance(means: list[float], targets: int, keep) -> float:
    """The variance of log(a) + log(b) over the process pairs as far apart
    as a block's two sides that `keep` holds, each lag weighted as in
    _lagged: what the run weighs a mode by (stats.StratifiedTest); nan with
    fewer than 2 such pairs."""
    levels, weights = [], []
    for w, _, kept in _kept_pairs(means, targets, keep):
        got = [math.log(a) + math.log(b) for a, b in kept]
        levels += got
        weights += [w / len(got)] * len(got) if got else []
    if len(levels) < 2:
        return math.nan
    mean = sum(w * x for w, x in zip(weights, levels, strict=True)) / sum(weights)
    var = (
        sum(w * (x - mean) ** 2 for w, x in zip(weights, levels, strict=True))
        / sum(weights)
        * len(levels)
        / (len(levels) - 1)
    )
    return max(var, stats.MODES_LOG_FLOOR**2)


def buyable_same(means: list[float], n: Noise, blocks: int, targets: int) -> tuple[int, int, float]:
    """With compare --same-mode: (the blocks of `blocks` whose two processes
    ran in the same mode, of them those both slow, the 95% CI half-width of
    the same-mode ratio): each mode's pairs counted as buyable_fast counts
    the fast ones, its half-width from their spread, and the two combined as
    the run combines them (stats.stop_halfwidth_strata: weights of blocks
    over the variance of their levels); a mode counts from analysis.SAME_MIN
    blocks."""
    from .analysis import SAME_MIN

    if n.modes is None:
        return blocks, 0, math.inf
    counts, parts = [], []
    for side in (0, 1):  # both fast, both slow
        keep = _both_in(n.modes, side)
        share, rms = _lagged(means, targets, keep)
        k = int(blocks * share)
        k = k if k >= SAME_MIN else 0
        counts.append(k)
        v = _level_variance(means, targets, keep)
        if k >= 2 and math.isfinite(rms) and rms > 0 and math.isfinite(v):
            parts.append((k / v, float(sps.t.ppf(0.975, k - 1)) * rms / math.sqrt(k)))
    both = sum(counts)
    if both < stats.MIN_BLOCKS or not parts:
        return both, counts[1], math.inf
    return both, counts[1], math.sqrt(sum((w * h) ** 2 for w, h in parts)) / sum(w for w, _ in parts)


def measure(
    target, spec: BenchSpec, processes: int, cpu: int | None, progress=None
) -> tuple[list[float], list[float], float, list[float]]:
    """(each process's mean time per operation, when each began, the mean
    wall time of one process, each process's mean reference time per step
    -- empty where the agent took none) over `processes` fresh agent
    processes, each run by the engine (execute.run_process) and recorded
    nowhere."""
    args = agent_argv(target, spec, samples=3, warmup=1, min_time_ms=10)
    rec = Recorder(None, "")
    means, starts, took, refs = [], [], [], []
    for i in range(processes):
        began = time.monotonic()
        got = run_process(
            target,
            spec,
            Where(target.name, spec.name),
            rec,
            agent_lines(target, lambda: args, lambda: 120),
            check=None,
        )
        if isinstance(got.failure, ChildFailed):
            raise TargetError(f"{target.name}: {got.error}")
        if got.failure is not None:
            raise got.failure
        if got.read.skipped:
            raise AgentError(got.read.skipped)
        timed = [s for s in got.samples if not s.warmup and not s.counting]
        if not timed:
            raise AgentError(f"{target.name}: the agent gave no sample of {spec.name}")
        starts.append(began)
        took.append(time.monotonic() - began)
        means.append(statistics.fmean(s.value for s in timed))
        ref = [(s.ref_before + s.ref_after) / 2 for s in timed if s.ref_before is not None and s.ref_after is not None]
        if ref:
            refs.append(statistics.fmean(ref))
        if progress:
            progress(i + 1, processes)
    return means, starts, statistics.fmean(took), refs if len(refs) == len(means) else []
