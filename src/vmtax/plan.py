"""The runner's planner: how a run spends its budget and sizes its
processes, as pure functions of figures (no clock, no process, no store),
so that each rule is tested as it is written.  The runner (runner.py) calls
them with what it has measured; its live judgement of precision reads the
samples with the analysis functions `show` uses (analysis.block_means).

- a run's configuration (RunConfig) and the floors of what a budget must
  buy (first_block_floor, two_blocks_floor, budget_shortfall);
- the passes: pass 1 gives every row an equal share of FIRST_PASS of the
  budget; pass 2 brings rows short of --min-processes up to it within
  CATCH_UP of it, then funds the rest cheapest first (time_to_goal,
  pass2_share);
- sizing after calibration (sizes): one shared iteration count, halved for
  a very slow target, and samples per process so that every target's
  process costs about the baseline's (alike, per_process)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from . import stats
from .duration import fmt_duration
from .engine.jobs import Job, jobs_of
from .engine.protocol import CALIBRATION_SAMPLES
from .model import BenchSpec
from .suite import workloads


@dataclass(frozen=True)
class RunConfig:
    precision: float = 0.01  # CI half-width as a fraction of the estimate
    max_time: float = 360.0  # seconds for the whole run
    samples_per_process: int = 3  # per fresh process (pyperf: 3); the process is the unit
    warmup: int = 1  # samples discarded at the start of each process
    min_time_ms: int = 10  # calibration goal for one sample
    min_processes: int = 10  # before stopping on precision (a steadier spread estimate)
    cpu: int | None = None  # run every target on this host CPU (None: unpinned)
    parallel: int = 1  # concurrent instances (seed 000 ran 16)
    agent_timeout: float = 300.0
    seed: int = 0  # the random block order (recorded, so a run can be replayed)
    tool_seconds: int = workloads.SECONDS  # how long one run of a time-based workload tool lasts
    fast_mode: bool = False  # a row with two modes: stop on, and report, its ratio in the fast mode
    same_mode: bool = False  # or over the blocks both sides ran in the same mode (analysis.same_mode)
    pairing: str = "lockstep"  # a block's processes: "lockstep" (held together, samples alternated,
    #                                  engine/lockstep.py) or "blocks" (one after another)
    step_ms: float = 0.25  # lockstep: the baseline's sample, in ms
    median: bool = False  # a block's process is taken at its median sample, not its mean (analysis.block_means)
    median_blocks: bool = False  # a ratio is its median block's, signed-rank interval (stats/ranks.py; --median)
    reboot: bool = False  # the guests booted afresh for every round of blocks (rounds.py)
    shared_boot: bool = False  # and with reboot: one boot a round, its state in every QEMU guest (targets/migration.py)
    block_processes: int = 1  # lockstep: a block's pairs of fresh processes, one after another (step_rounds)


# --shared-boot's samples per process unless --samples says: a round's boot and migrations cost seconds,
# which blocks of 3-sample processes would leave mostly idle (results/gate-guests.md)
SHARED_BOOT_SAMPLES = 30
FIRST_PASS = 0.6  # share of the budget for the first pass over every benchmark
CATCH_UP = 0.8  # pass 2 brings slow rows to --min-processes within this share of the budget
PASS2_MARGIN = 1.3  # a row's estimated need is noisy: give it this much more
SLOWEST_SAMPLE = 4  # the slowest target's sample, at most this many --min-time-ms ...
FASTEST_SHARE = 8  # ... unless the baseline's would be shorter than --min-time-ms / this
MAX_SAMPLES = 8  # a target of short samples takes at most this many times --samples
SCALE_BEYOND = 2  # targets within this factor of one another (chained) run alike
PRECISION = 0.01  # the goal when the user names none ...
GATE_SHARE = 3  # ... or, for a gated run, its threshold over this


def precision_for(gate: float | None) -> float:
    """The precision a run stops at when the user names none: 1%, or for a
    run gated at T (compare --gate T) at most T/3, so that an unchanged row's
    interval (its point off by up to two half-widths, ~4 standard errors)
    still ends inside the threshold and the row can pass; at ±1% a row
    gated at 1% could only ever be inconclusive."""
    return PRECISION if not gate else min(PRECISION, gate / GATE_SHARE)


# -- what a budget must buy ------------------------------------------------------------
def first_block_floor(job: Job, targets: int, cfg: RunConfig) -> float:
    """Seconds a job's first block takes at the least: on every target, an
    agent row's calibration process and one timed process (their samples'
    --min-time-ms alone), a workload's warmup run and one run (a tool run
    for --tool-seconds when its script takes the duration)."""
    if job.workload is not None:
        per_run = cfg.tool_seconds if "$2" in job.workload.script else 0.1
        return targets * 2 * per_run
    batches = (1 + CALIBRATION_SAMPLES) + (cfg.warmup + cfg.samples_per_process)
    return targets * batches * cfg.min_time_ms / 1000


def two_blocks(job: Job, targets: int, cfg: RunConfig) -> float:
    """Seconds a row's first two blocks take at the least (the first with
    its calibration or warmup runs): the fewest with a ratio and a spread."""
    first = first_block_floor(job, targets, cfg)
    return first + (
        first / 2
        if job.workload is not None
        else targets * (cfg.warmup + cfg.samples_per_process) * cfg.min_time_ms / 1000
    )


def two_blocks_floor(jobs: list[Job], targets: int, cfg: RunConfig) -> float:
    """Seconds two blocks of every row take at the least: what a budget
    must buy for every row to have a ratio at all."""
    return sum(two_blocks(job, targets, cfg) for job in jobs)


def floor_kind(job: Job) -> str:
    """Rows whose floors (two_blocks) stand alike to what they take: an
    agent row's counts its samples only, a time-based tool's its runs'
    --tool-seconds, another tool's next to nothing.  The runner learns
    each kind's time over its floor from the rows it has measured."""
    if job.workload is None:
        return "agent"
    return "timed tool" if "$2" in job.workload.script else "tool"


def budget_to_add(max_time: float, need: float, left: float) -> float:
    """The --max-time (whole minutes) that would have left `need` seconds
    where `left` were."""
    return math.ceil(max(max_time, max_time + need - max(0.0, left)) / 60) * 60


def budget_shortfall(specs: list[BenchSpec], targets: int, cfg: RunConfig) -> str:
    """One line when --max-time cannot buy two blocks of every row (the
    fewest with a ratio and a spread), with the budget that would; ''."""
    jobs = [j for j in jobs_of(specs) if not (j.workload and j.workload.missing())]
    need = two_blocks_floor(jobs, targets, cfg)
    if need <= cfg.max_time * FIRST_PASS:
        return ""
    enough = math.ceil(need / FIRST_PASS / 60) * 60
    return (
        f"a budget of {fmt_duration(cfg.max_time)} cannot buy two blocks of every row: on {targets} "
        f"target{'s' if targets > 1 else ''} they need at least {fmt_duration(need)} (slow targets take "
        f"longer), more than the first pass's {FIRST_PASS:.0%} of the budget; the run measures the rows "
        f"it can finish, two blocks of each at least, in the order given, and names the rows it leaves out "
        f"with the budget that would add them -- --max-time {fmt_duration(enough)} for every row, or fewer rows"
    )


# -- pass 2 ----------------------------------------------------------------------------
def time_to_goal(spent: float, worst: float, goal: float) -> float:
    """Seconds more a row would need to reach the precision `goal`, having
    spent `spent` seconds to reach `worst`, at the rate it has narrowed so
    far (the interval shrinks as 1/sqrt(time)); inf while unknown."""
    if not math.isfinite(worst):
        return float("inf")
    return spent * max(0.0, (worst / goal) ** 2 - 1)


def pass2_share(need: float, left: float, rows_left: int, block: float = 0.0, even: bool = True) -> float:
    """Pass 2 funds rows cheapest first, each with what it should need
    to reach the precision, and at least its next block (block, in
    seconds: a row nearly there needs less than one, and no block is
    begun that would end past the share), so the budget buys as many
    precise rows as it can; what a row does not use goes to the next.
    A row that would need more than is left, or whose need is unknown,
    gets an even share of what is left: the rows after it need as much
    or more, so none can reach the goal, and an even split narrows them
    all (on a noisy host, funding the first row with everything left
    every other row at its pass-1 width).  even=False: 0 instead (pass 2's
    first sweep funds only the rows whose need fits)."""
    if math.isfinite(need) and max(need * PASS2_MARGIN, block) <= left:
        return max(need * PASS2_MARGIN, block)
    return left / rows_left if even else 0.0


def eta(durations: list[float], rows_after: int, row_left: float, max_time: float, elapsed: float) -> float:
    """A run's time left, as its progress line says it: this row's time
    left (row_left), plus the mean time a row took so far (durations) for
    each of the rows_after still to come, never past the budget."""
    per = sum(durations) / len(durations) if durations else elapsed + 1
    return max(0.0, min(max_time - elapsed, max(0.0, row_left) + per * rows_after))


# -- sizing after calibration -------------------------------------------------------------
def alike(per_iter: dict[str, float]) -> list[list[str]]:
    """Targets grouped by time per iteration: sorted, a target within
    SCALE_BEYOND times the one before it joins its group, so that twins (an
    A/A pair, two guests alike) run alike though one calibrated 1.4 times
    slower than the other on a noisy host.  (tlb_4k's calibrations were
    seen 2 times apart: then they fall apart, until lockstep knows each
    side's sample time from its samples: Processes._sample_ms.)"""
    groups: list[list[str]] = []
    last = None
    for name in sorted(per_iter, key=per_iter.__getitem__):
        if last is None or per_iter[name] >= SCALE_BEYOND * last:
            groups.append([])
        groups[-1].append(name)
        last = per_iter[name]
    return groups


def per_process(r: float, cfg: RunConfig) -> tuple[int, int]:
    """(timed samples, warmup samples) per process for samples r times
    as long as the baseline's at its own count."""
    r = min(max(r, 1e-9), 1e9) if math.isfinite(r) else 1.0  # both counts saturate long before
    return (
        min(cfg.samples_per_process * MAX_SAMPLES, max(1, int(cfg.samples_per_process / r + 0.5))),
        cfg.warmup * min(MAX_SAMPLES, max(1, int(1 / r + 0.5))),
    )


def sizes(
    first: str, found: dict[str, tuple[int | None, float | None]], cfg: RunConfig
) -> tuple[int, dict[str, tuple[int, int]]]:
    """From each target's calibration (found: name -> (its count, ns one
    iteration took), None where unknown) and the target whose count is
    shared (first: the baseline's where it calibrated), the shared count
    and each target's (timed samples, warmup samples) per process; {} for
    the latter where a time per iteration is unknown (then every target
    runs --samples and --warmup).

    At the baseline's count a target 78 times slower (UML's getppid) would
    run samples of nearly a second, and a process of four of them would
    cost more than a whole block of the others.  So the shared count is
    halved while the slowest target's sample would last more than
    SLOWEST_SAMPLE x --min-time-ms, as long as the baseline's stays above
    1/FASTEST_SHARE of it (tenfold shorter samples widened the baseline's
    interval tenfold: too few per process).  Then each target's timed
    samples per process are set so that they last about what --samples
    samples of the baseline's own count do (at least one, at most
    MAX_SAMPLES x --samples), its warmup samples likewise: a slow target
    runs one long sample, the baseline many short ones, and every process
    costs about the same.  Targets whose operations take about the same
    time (alike) run alike: the baseline's twins exactly as the baseline,
    other groups by their mean time."""
    shared = found[first][0]
    assert shared is not None, "first: a target that calibrated"
    per_iter = {name: ns for name, (n, ns) in found.items() if n is not None}  # every target calibrated
    times = {name: ns for name, ns in per_iter.items() if ns}  # those whose time per iteration is known
    goal_ns = cfg.min_time_ms * 1e6
    out: dict[str, tuple[int, int]] = {}
    if goal_ns > 0 and len(times) == len(per_iter):  # scaled only where every time per iteration is known
        base_ns = times[first]
        nominal = shared * base_ns  # the baseline's sample at its own count, in ns
        while (
            shared % 2 == 0
            and shared * max(times.values()) > SLOWEST_SAMPLE * goal_ns
            and shared // 2 * base_ns >= goal_ns / FASTEST_SHARE
        ):
            shared //= 2
        for group in alike(times):
            # one (samples, warmup) per group of alike targets: the baseline's, or their mean's
            ns = base_ns if first in group else stats.geomean([times[n] for n in group])
            for name in group:
                out[name] = per_process(shared * ns / nominal, cfg)
    return shared, out


# -- lockstep pairs ----------------------------------------------------------------------
STEP_WARMUP_ROUNDS = 1  # lockstep: rounds discarded at the start of each block, per --warmup sample
#                        (each timed sample follows an untimed one too: a fresh process's first
#                        timed samples then read as its later ones, their medians within 4%)
MAX_ITERS = 1 << 40  # the agent's --iters at most
MIN_STEP_ROUNDS = 10  # lockstep: timed rounds a block takes at the least, however slow a round
STEP_TOGETHER = 2  # lockstep: a row's first blocks hold every target (each candidate's ratio at once),
#                    the later ones the baseline and one group of candidates in turn (step_groups)
STEP_GO_MS = 1.0  # a go's round trip assumed for a target before its first lockstep block


@dataclass(frozen=True)
class StepSizes:
    iters: int  # the shared count of one sample
    rounds: int  # rounds per block, warmups included
    warmup: int  # of them discarded
    visits: tuple[int, ...] = ()  # each side's samples a round, in the sides' order (step_visits; () = one each)


def step_sizes(first: str, found: dict[str, tuple[int | None, float | None]], cfg: RunConfig) -> StepSizes:
    """A lockstep block's sizes from the targets' calibrations (found, as
    for sizes(): each one's count for --min-time-ms and ns per iteration):
    the count that makes the baseline's sample last --step-ms, halved while
    the slowest target's would last more than SLOWEST_SAMPLE times that, as
    long as the baseline's stays above 1/FASTEST_SHARE of it (as sizes()
    does for --min-time-ms), and raised until the quickest target's lasts
    that long too, and as many rounds as make the baseline's timed
    samples last what --samples samples of --min-time-ms do; the first
    STEP_WARMUP_ROUNDS per --warmup are discarded."""
    goal_ns = cfg.step_ms * 1e6
    count, base_ns = found[first]
    per_iter = [ns for n, ns in found.values() if n is not None]
    times = [ns for ns in per_iter if ns]  # those known
    if base_ns and len(times) == len(per_iter):
        shared = max(1, round(goal_ns / base_ns))
        while (
            shared > 1
            and shared * max(times) > SLOWEST_SAMPLE * goal_ns
            and shared // 2 * base_ns >= goal_ns / FASTEST_SHARE
        ):
            shared //= 2
        # and raised where a candidate far quicker than the baseline (the bare machine's cpuid beside a
        # guest's, which exits) would take too short a sample for its clock to time
        shared = max(shared, math.ceil(min(goal_ns / FASTEST_SHARE / min(times), MAX_ITERS)))
    else:  # a time per iteration unknown: the baseline's count, scaled
        shared = max(1, round((count or 1) * cfg.step_ms / max(cfg.min_time_ms, 1)))
    timed = max(2, round(cfg.samples_per_process * cfg.min_time_ms / cfg.step_ms))
    warmup = STEP_WARMUP_ROUNDS * cfg.warmup
    return StepSizes(shared, timed + warmup, warmup)


def step_groups(per_iter: dict[str, float]) -> list[list[str]]:
    """The candidates of a lockstep row (each one's ns an iteration) in
    the groups that share a block with the baseline, the quickest first:
    those alike in speed (alike: an A/A pair, two guests) together, the
    others apart; one group where a time is unknown.

    In a block of every target, a round lasts as long as all their turns:
    a TCG guest's and UML's (5-20 ms a sample, a go of 4 ms) beside a
    container's of eight samples of 0.3 ms.  The container's and the bare
    machine's turns were then a round apart, and their log ratio over a
    turn scattered 10-14% (the demo's stored samples, whether their turns
    were adjacent or not): fast noise of a few ms, which only more rounds
    average out -- and a block of all four took ten rounds in 0.4 s, so
    the container's interval narrowed no quicker than the slowest
    target's.  Alone with the baseline, a quick candidate's round takes
    about 2 ms; a slow one's turn always adjacent to the baseline's (UML:
    9% against 12% when a round apart)."""
    if not per_iter or min(per_iter.values()) <= 0:
        return [list(per_iter)]
    return alike(per_iter)


def step_visits(sample_ms: list[float], go_ms: list[float]) -> list[int]:
    """Each side's samples a round (sides[0] the baseline; each one's
    sample and a go's round trip, in ms), so that every side spends about
    as long a round as the slowest side's turn does: one long sample of
    UML's getppid (20 ms), eight short ones of the bare machine and of a
    container between them (MAX_SAMPLES at most), as blocks in turn scale
    samples per process (sizes()).  A round of one sample each spent most
    of its time on the slow side, and left the quick ones ten samples of
    0.25 ms a block, whose means one preempted sample moved.  Sides whose
    samples take about as long (alike: an A/A pair, a container beside the
    bare machine) get the same visits, the baseline's group the
    baseline's, so that they stay exchangeable; [1, ...] where a sample's
    time is unknown."""
    if not sample_ms or min(sample_ms) <= 0:
        return [1] * len(sample_ms)
    # a visit: its untimed sample (lockstep's warm line), its timed one and the go's round trip
    each = [2 * s + g for s, g in zip(sample_ms, go_ms, strict=True)]
    groups = [[int(i) for i in group] for group in alike({str(i): ms for i, ms in enumerate(sample_ms)})]
    # the baseline's group the baseline's, another its geomean
    visit = [each[0] if 0 in group else stats.geomean([each[i] for i in group]) for group in groups]
    longest = max(visit)
    out = [1] * len(each)
    for group, v in zip(groups, visit, strict=True):
        for i in group:
            out[i] = min(MAX_SAMPLES, max(1, round(longest / v)))
    return out


def step_rounds(size: StepSizes, sample_ms: list[float], go_ms: list[float], cfg: RunConfig) -> StepSizes:
    """A lockstep block's rounds and each side's visits for the targets
    taking part (each one's sample and a go's round trip, in ms; a round
    takes step_visits samples of each): as step_sizes says where a round is
    quick, fewer where a round is slow (a candidate whose samples last tens
    of ms, a guest whose go takes ms), so that a block's timed rounds last
    about what a block of the same targets in turn does (--warmup and
    --samples samples of --min-time-ms each), never fewer than
    MIN_STEP_ROUNDS; with --block-processes K, one of a block's K
    processes' share of them, never fewer than MIN_STEP_ROUNDS either (a
    slow row's block then lasts longer: its samples are few)."""
    visits = step_visits(sample_ms, go_ms)
    round_ms = sum(v * (2 * s + g) for v, s, g in zip(visits, sample_ms, go_ms, strict=True))  # 2 s: the warm
    goal_ms = (cfg.samples_per_process + cfg.warmup) * cfg.min_time_ms * len(sample_ms)
    most = size.rounds - size.warmup
    timed = most if round_ms <= 0 else max(min(MIN_STEP_ROUNDS, most), min(most, round(goal_ms / round_ms)))
    if cfg.block_processes > 1:  # the block's rounds shared among its pairs of processes, each its own warmup
        timed = max(min(MIN_STEP_ROUNDS, timed), -(-timed // cfg.block_processes))
    return StepSizes(size.iters, timed + size.warmup, size.warmup, tuple(visits))
