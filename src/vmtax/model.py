"""Frozen records that flow through vmtax, in one direction:

agent JSON line -> Sample -> Measurement (one benchmark on one target, with
its Summary) -> Comparison (candidate/baseline ratio) -> report.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class BenchSpec:
    name: str
    suite: str
    unit: str
    direction: str  # "lower" or "higher" is better
    description: str
    requires: str = ""
    kind: str = "micro"  # "micro" (a row of the agent's table) or "workload" (suite/workloads.py)

    @property
    def agent_row(self) -> bool:
        """A row of the agent's table (its value: time per operation), not a workload's figure."""
        return self.kind == "micro"


@dataclass(frozen=True)
class ProcessRecord:
    """One process's row: which process of the run, where it ran (its
    target, row, block and slot in the block), when (its start, its first
    line where one came, its end) and how it ended (ok, calibration,
    skipped, error)."""

    process: int
    target: str
    benchmark: str
    block: int
    slot: int
    started: float
    first_line: float | None
    ended: float
    outcome: str


@dataclass(frozen=True)
class Sample:
    benchmark: str
    target: str
    value: float
    unit: str
    process: int  # index of the agent process that produced it
    seq: int
    instance: int = 0
    warmup: bool = False
    iters: int = 0
    ops: float = 0.0
    overhead: float = 0.0  # the harness's own loop+timer cost, per op
    tsc_per_op: float = 0.0
    cpu: int = -1  # pinned CPU, -1 when not pinned
    t: float = 0.0  # wall-clock time it arrived
    block: int = -1  # the runner's block it was measured in (-1: unknown, an old run)
    counting: bool = False  # a batch with counters on: its metrics count, its time does not
    # further figures per operation, by name (counters, host cost, ...)
    metrics: dict[str, float] = field(default_factory=dict, compare=False)
    # the agent's reference loop right before and after this sample, ns per step: the host's
    # state it was taken in (agent/harness.h); None where not taken (workloads, old runs)
    ref_before: float | None = None
    ref_after: float | None = None


@dataclass(frozen=True)
class Interval:
    """An estimate and its confidence interval: every figure vmtax reports
    with its uncertainty (a mean, a ratio, a change) is one.  An end that is
    infinite is unbounded; a point or end that is nan is none."""

    point: float
    low: float
    high: float
    level: float = 0.95

    @property
    def bounded(self) -> bool:
        return math.isfinite(self.low) and math.isfinite(self.high)

    @property
    def halfwidth(self) -> float:
        return (self.high - self.low) / 2

    @property
    def rel_halfwidth(self) -> float:
        """The half-width as a fraction of the point (inf where unbounded or the point is 0)."""
        if not self.bounded or self.point == 0:
            return float("inf")
        return self.halfwidth / abs(self.point)

    def excludes(self, value: float) -> bool:
        """The interval leaves `value` out (a ratio's 1: a difference at its level)."""
        return self.low > value or self.high < value


class Bounded:
    """A record whose figure is its `ci`: that interval's ends by the names
    they had before it held one."""

    ci: Interval

    @property
    def ci_low(self) -> float:
        return self.ci.low

    @property
    def ci_high(self) -> float:
        return self.ci.high


@dataclass(frozen=True)
class Summary(Bounded):
    n: int
    ci: Interval  # the mean over units and its interval
    median: float
    stdev: float
    min: float
    max: float
    best3of5: float | None = None
    best18of30: float | None = None
    units: int = 0  # independent units the interval rests on (agent processes)

    @property
    def mean(self) -> float:
        return self.ci.point

    @property
    def ci_halfwidth(self) -> float:
        return self.ci.halfwidth

    @property
    def ci_rel(self) -> float:
        """CI half-width as a fraction of the mean (inf when undefined)."""
        return float("inf") if self.n < 2 else self.ci.rel_halfwidth

    @property
    def cv(self) -> float:
        return self.stdev / self.mean if self.mean else float("inf")


@dataclass(frozen=True)
class Modes:
    """Process means that fell in two modes: each mode's mean (in the
    values' unit), the share of units in the slow one, and where a value
    counts as slow.  `fast` is the better mode (lower for a time, higher for
    a throughput)."""

    fast: float
    slow: float
    slow_share: float
    units: int
    cut: float  # values beyond this (above for a time, below for a throughput) are slow
    bic_gain: float  # BIC of one normal less that of two, on the logs
    separation: float  # Ashman's D of the two fitted normals
    higher_is_better: bool = False

    def is_slow(self, value: float) -> bool:
        return value < self.cut if self.higher_is_better else value > self.cut


FAST_MODE, SAME_MODE, ALL_BLOCKS = "fast mode", "same mode", "all blocks"  # Comparison.estimand: a JSON contract


def headline_of(config: dict[str, Any]) -> str | None:
    """Which stratum a run's rows with two modes report (its --fast-mode or --same-mode), or None."""
    return SAME_MODE if config.get("same_mode") else FAST_MODE if config.get("fast_mode") else None


STOPPED = ("precision", "budget", "error", "skipped", "interrupted")


@dataclass(frozen=True)
class Measurement:
    benchmark: BenchSpec
    target: str
    stopped_by: str  # one of STOPPED
    summary: Summary | None = None
    reason: str = ""
    processes: int = 0
    overhead: float | None = None  # mean harness overhead per op
    cpu: int = -1
    # per operation, from the counted batches (metrics.py): name -> summary over processes
    metrics: dict[str, Summary] = field(default_factory=dict, compare=False)
    modes: Modes | None = field(default=None, compare=False)  # its process means fell in two modes


@dataclass(frozen=True)
class Stratum(Bounded):
    """A ratio over some of a row's paired blocks: those in which both
    sides' processes ran in their fast mode, where both sides' process
    means fell in two modes -- the uncontended stratum; those in which
    both ran in the same mode, fast or slow (analysis.same_mode: each mode
    weighted by its blocks over their levels' spread); or, beside such a
    headline, all of them."""

    ci: Interval  # the ratio and its interval
    blocks: int  # the blocks in the stratum
    of_blocks: int  # the blocks paired
    p_value: float = math.nan
    slow_blocks: int = 0  # of `blocks`, those both sides ran in their slow mode (the same-mode stratum)

    @property
    def ratio(self) -> float:
        return self.ci.point


@dataclass(frozen=True)
class HostState:
    """Whether a candidate's ratio moves with the host's state
    (stats.host_state): its ratio over the blocks in which the host ran
    quick and over those in which it ran slow (the state read from the
    baseline's processes in the neighbouring blocks), and the slow half's
    ratio over the quick half's with its 95% CI."""

    blocks: int  # the blocks in the two halves
    quick: float  # the ratio in the host's quick half
    slow: float  # in its slow half
    ci: Interval  # the change, slow / quick, and its interval
    z: float = 0.0  # the log change over its standard error, as a normal z (stats.tax_moves adds a candidate's)

    @property
    def change(self) -> float:
        return self.ci.point

    @property
    def change_low(self) -> float:
        return self.ci.low

    @property
    def change_high(self) -> float:
        return self.ci.high

    @property
    def moved(self) -> bool:
        """The change's 95% CI leaves out 1: the ratio differs between the halves at the 5% level."""
        return self.ci.excludes(1)


@dataclass(frozen=True)
class Comparison:
    benchmark: BenchSpec
    baseline: str
    candidate: str
    ci: Interval  # the ratio, candidate / baseline, and its interval
    p_value: float
    significant: bool
    stopped_by: str
    # name -> the ratio of a metric's means and its interval, where both sides counted it
    metrics: dict[str, Interval] = field(default_factory=dict, compare=False)
    fast_mode: Stratum | None = field(default=None, compare=False)
    same_mode: Stratum | None = field(default=None, compare=False)
    slow_mode: Stratum | None = field(default=None, compare=False)  # the blocks both ran in their slow mode
    # with --fast-mode (--same-mode), on a row with two modes, the ratio above is fast_mode's (same_mode's)
    # and this the all-blocks one
    all_modes: Stratum | None = field(default=None, compare=False)
    headline: str = field(default=ALL_BLOCKS, compare=False)  # which: FAST_MODE or SAME_MODE, set with all_modes
    # a candidate that stopped before the baseline (engine.stop.judge) was judged by the baseline's modes
    # over the blocks the two share: those modes (None: one mode there) and that block count; 0 where the
    # baseline's blocks are all shared and its modes its row's
    base_modes: Modes | None = field(default=None, compare=False)
    base_shared: int = field(default=0, compare=False)
    host_state: HostState | None = field(default=None, compare=False)  # None: too few blocks to split

    @property
    def ratio(self) -> float:
        return self.ci.point

    @property
    def ratio_ci_low(self) -> float:
        return self.ci.low

    @property
    def ratio_ci_high(self) -> float:
        return self.ci.high

    @property
    def estimand(self) -> str:
        """Which blocks the ratio above is over, as the reports name it."""
        return self.headline if self.all_modes is not None else ALL_BLOCKS


# the kinds whose instance is a boot of a guest kernel: two boots alike differ by an offset of their own
BOOTED_KINDS = frozenset({"qemu", "uml", "xen"})


@dataclass(frozen=True)
class TargetInfo:
    name: str
    kind: str
    facts: dict[str, Any] = field(default_factory=dict)
    accel: str | None = None
    boot_s: float | None = None
    idle_cpu_pct: float | None = None
    mem_overhead_mb: float | None = None


@dataclass
class RunData:
    """Everything stored about one run, as read back."""

    id: str
    kind: str
    started: float
    finished: float | None
    status: str
    command: str
    vmtax_version: str
    config: dict[str, Any]
    targets: list[TargetInfo] = field(default_factory=list)
    agent_hashes: dict[str, str] = field(default_factory=dict)
    benchmarks: list[BenchSpec] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)
    outcomes: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)
    host: str | None = None  # where its controller ran (None: stored before vmtax recorded it)
    user: str | None = None


@dataclass(frozen=True)
class Estimate(Bounded):
    """A figure with its unit and 95% interval (infinite: unbounded)."""

    ci: Interval
    unit: str

    @property
    def value(self) -> float:
        return self.ci.point


@dataclass(frozen=True)
class ScalePoint:
    """One benchmark at one instance count of a scale run (vmtax scale):
    N copies of a target measured at once, over `rounds` rounds."""

    n: int
    rounds: int
    aggregate: Estimate  # throughput of all N together, per round
    per_instance: tuple[Estimate, ...]  # each instance's throughput over the rounds
    jain: Estimate  # Jain's fairness index, per round
    slowdown: Estimate | None  # one alone / one of N (None: no N=1 measured)
    host_cpu_pct: Estimate | None  # all host CPUs, over each round
    host_mem_mb: tuple[float, ...]  # each instance's host processes (proportional set size)
    vcpus: int  # of the N instances together
    host_cpus: int
    stopped_by: str
    reason: str = ""
    round_s: tuple[float, ...] = ()  # each round on the host's clock, from the go to the last end

    @property
    def overcommit(self) -> float:
        return self.vcpus / self.host_cpus if self.host_cpus else float("inf")
