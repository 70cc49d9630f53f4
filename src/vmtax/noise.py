"""The scale of the host's noise in time: how far apart two samples of one
operation can be before they no longer share the host's state.

One agent process takes short samples back to back (series); for each
distance, the spread of the log difference of two samples that far apart
(by_distance).  On a shared host it grows from a few percent between
samples a millisecond apart to the full between-sample spread at a second:
what a pair of samples shares, and so what pairing them cancels, depends on
how close they are.  `vmtax doctor` prints it beside the distance at which
vmtax pairs a baseline's sample with a candidate's (lockstep: about one
sample; blocks: about one process).  The analysis is pure; series() runs
the process."""

from __future__ import annotations

import bisect
import itertools
import math
import random
import statistics
import time
from dataclasses import dataclass

from scipy import stats as sps

from .engine.execute import Recorder, Where, agent_lines, calibrate, run_process
from .engine.protocol import agent_argv
from .errors import AgentError, TargetError
from .model import BenchSpec
from .proc import ChildFailed

DISTANCES_MS = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0)
TOLERANCE = 0.25  # a pair counts for a distance d when it lies within d / (1 + this) .. d * (1 + this)
MIN_PAIRS = 20  # fewer, and no SD is given for that distance
SAMPLE_MS = 0.5  # the series' samples: shorter than the shortest distance


@dataclass(frozen=True)
class AtDistance:
    ms: float  # how far apart the two samples' middles are
    sd_pct: float  # the SD of log(later / earlier), in percent (x 100)
    pairs: int  # how many pairs it is over


def by_distance(
    times: list[float], values: list[float], distances: tuple[float, ...] = DISTANCES_MS
) -> list[AtDistance]:
    """For each distance (ms) that the series spans with MIN_PAIRS pairs,
    the SD of the log ratio of two of its samples that far apart (times in
    seconds, of each sample's middle, increasing): each sample with the one
    nearest to `d` after it, where that lies within TOLERANCE."""
    logs = [math.log(v) for v in values]
    out = []
    for d in distances:
        diffs = []
        for i, t in enumerate(times):
            want = t + d / 1e3
            j = bisect.bisect_left(times, want, lo=i + 1)
            best = min((k for k in (j - 1, j) if i < k < len(times)), key=lambda k: abs(times[k] - want), default=None)
            if best is not None and d / (1 + TOLERANCE) <= (times[best] - t) * 1e3 <= d * (1 + TOLERANCE):
                diffs.append(logs[best] - logs[i])
        if len(diffs) >= MIN_PAIRS:
            out.append(AtDistance(d, statistics.stdev(diffs) * 100, len(diffs)))
    return out


def unpaired_sd_pct(values: list[float], seed: int = 0) -> float:
    """The SD of the log ratio of two samples drawn at random from the
    series (no pairing at all), in percent; nan below 3 samples."""
    if len(values) < 3:
        return math.nan
    logs = [math.log(v) for v in values]
    other = logs[:]
    random.Random(seed).shuffle(other)
    return statistics.stdev(a - b for a, b in zip(logs, other, strict=True)) * 100


def at(curve: list[AtDistance], ms: float) -> float | None:
    """The SD (percent) at a distance, interpolated on log-distance between
    the curve's points (the nearest end outside them); None for no curve."""
    if not curve:
        return None
    if ms <= curve[0].ms:
        return curve[0].sd_pct
    for a, b in itertools.pairwise(curve):
        if ms <= b.ms:
            w = math.log(ms / a.ms) / math.log(b.ms / a.ms)
            return a.sd_pct + w * (b.sd_pct - a.sd_pct)
    return curve[-1].sd_pct


def lockstep_halfwidth(pair_sd_pct: float, pairs: int, blocks: int) -> float:
    """The 95% CI half-width (a fraction) of a ratio over `blocks` lockstep
    blocks of `pairs` pairs each whose log ratio has an SD of pair_sd_pct
    percent, the pairs as good as independent (a Student interval over the
    blocks): what the host's noise alone leaves."""
    return float(sps.t.ppf(0.975, blocks - 1)) * pair_sd_pct / 100 / math.sqrt(pairs * blocks)


def series(target, spec: BenchSpec, seconds: float, timeout: float = 120.0) -> tuple[list[float], list[float]]:
    """(each sample's middle in seconds from the first's start, its value)
    of one agent process on `target` taking samples of about SAMPLE_MS back
    to back for `seconds`: the positions are the samples' own times laid
    end to end, each line's printing spread evenly over them (the time
    between the first and the last line's arrival)."""
    rec, at = Recorder(None, ""), Where(target.name, spec.name)  # recorded nowhere
    cal = calibrate(target, spec, at, rec, 1, timeout)
    _raise(target, cal.result.failure)
    if cal.result.read.skipped or cal.iters is None:
        raise AgentError(cal.result.read.skipped or f"{target.name}: the agent calibrated nothing")
    iters = max(1, round(cal.iters * SAMPLE_MS))
    count = max(2 * MIN_PAIRS, int(seconds * 1e3 / SAMPLE_MS))
    args = agent_argv(target, spec, samples=count, warmup=5, iters=iters) + ["--ref-steps", "0"]
    got: list[tuple[float, float]] = []  # (the sample's own time in s, its value)
    arrived: list[float] = []

    def take(s) -> None:
        if not s.warmup and not s.counting:
            got.append((s.value * s.ops / 1e9, s.value))
            arrived.append(time.monotonic())

    read = run_process(
        target,
        spec,
        at,
        rec,
        agent_lines(target, lambda: args, lambda: timeout + seconds * 4),
        on_sample=take,
        check=None,
    )
    _raise(target, read.failure)
    if len(got) < 2:
        raise AgentError(f"{target.name}: the agent gave too few samples of {spec.name}")
    gap = max(0.0, (arrived[-1] - arrived[0]) - sum(s for s, _ in got[1:])) / (len(got) - 1)
    times, at_s = [], 0.0
    for s, _ in got:
        times.append(at_s + s / 2)
        at_s += s + gap
    return times, [v for _, v in got]


def _raise(target, failure: Exception | None) -> None:
    """A process's failure as series() says it: the agent's exit as the target's error."""
    if isinstance(failure, ChildFailed):
        raise TargetError(f"{target.name}: agent {failure}") from None
    if failure is not None:
        raise failure
