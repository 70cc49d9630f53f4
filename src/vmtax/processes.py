"""compare's processes on a row, as the runner's blocks ask for them
(Processes): the calibration that sizes them (one process per target, then
plan.sizes), each target's timed and counting agent processes, a
workload's tool runs after their warmup run, and a lockstep block's sides
(plan.step_sizes, step_rounds) -- each a Turn of its block, run by a block
executor (engine.blocks.InTurn, engine.lockstep.Lockstep) and read and
recorded by the engine (execute).  Each target's row as the run goes
(TargetState), and which targets a row's lockstep blocks hold (StepGroups)."""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from . import plan, schedule
from .engine.blocks import Turn
from .engine.budget import Deadline
from .engine.execute import Lines, Recorder, Where, agent_lines, calibrate, run_process, run_tool, tool_lines
from .engine.hostcost import ToolCost
from .engine.jobs import Job
from .engine.lockstep import STEP, STEP_TIMEOUT, Lockstep
from .engine.protocol import agent_argv
from .engine.stop import Side
from .hostprobe import syscall_tracepoint
from .model import BenchSpec, Sample
from .peers import free_port
from .plan import RunConfig
from .targets.base import Target


@dataclass
class TargetState:
    """One target's row as the run goes: its timed samples (the stop reads
    them with analysis.block_means, as `show` reads the stored ones) and how
    far it has got."""

    samples_taken: list[Sample] = field(default_factory=list)  # timed, in arrival order
    processes: int = 0  # the blocks it has a process in: the unit (--block-processes K holds K a block)
    last_block: int | None = None
    iters: int | None = None
    done: str | None = None  # "skipped" or "error" once finished early; "precision": a candidate
    #                                  whose ratio is precise while others go on (stop.judge)
    reason: str = ""
    warmed: bool = False  # a workload's warmup run is done on this target
    own_iters: int | None = None  # this target's own calibration: its counted batches use it
    samples: int | None = None  # timed samples per process at the shared count (None: --samples)
    warmup: int | None = None  # and warmup samples (None: --warmup)
    higher_is_better: bool = False  # the row's direction (which of two modes is the fast one)

    def take(self, s: Sample) -> None:
        if not s.warmup and not s.counting:
            self.samples_taken.append(s)

    @property
    def values(self) -> list[float]:
        return [s.value for s in self.samples_taken]

    def side(self) -> Side:
        """What the stop reads of it (stop.Side)."""
        return Side(tuple(self.samples_taken), self.processes, self.done is None, self.higher_is_better)

    def block_means(self) -> dict[int, float]:
        return self.side().means()

    def end(self, how: str, reason: str) -> None:
        self.done, self.reason = how, reason


States = dict[str, TargetState]
LOCKSTEP_GO = "lockstep_go_ms"  # a target's fact: a go's round trip in lockstep, beyond the sample (ms)
BOOTS = "boots"  # a target's fact under compare --reboot: how many boots its blocks ran on (rounds.py)
STEP_SAMPLES_KNOWN = 20  # lockstep: a target's sample time is its samples' median once it has this many,
STEP_SAMPLES_SEEN = 200  # over its last this many (else its calibration's)


def row_states(
    specs: list[BenchSpec], targets: list[Target], jobs: list[Job]
) -> tuple[dict[str, States], list[list[States]]]:
    """Each row's targets' states, by row and by job (a workload whose
    tool is missing: skipped everywhere, with why)."""
    by_spec = {
        spec.name: {t.name: TargetState(higher_is_better=spec.direction == "higher") for t in targets} for spec in specs
    }
    states = [[by_spec[s.name] for s in job.specs] for job in jobs]
    for job, sts in zip(jobs, states, strict=True):
        why = job.workload.missing() if job.workload else ""
        for st in (st for per in sts for st in per.values()) if why else ():
            st.end("skipped", why)
    return by_spec, states


class InTurnProcesses:
    """compare's processes on a row, as the runner's blocks ask for them:
    the calibration that sizes them (one process per target, then
    plan.sizes), each target's timed and counting agent processes, and a
    workload's tool runs after their warmup run -- each run and recorded by
    the engine (execute), as a Turn of its block."""

    def __init__(self, cfg: RunConfig, targets: list[Target], rec: Recorder, clock: Callable[[], float]):
        self.cfg, self.targets, self.rec, self.clock = cfg, targets, rec, clock
        self._deadline: Deadline | None = None  # the run's, once it begins
        self.warm_s: dict[str, float] = {}  # a workload's warmup runs (first block only), all told:
        # summed without a lock, as a workload's targets run one at a time (InTurn, together=False)
        # each agent row's calibrations: per target, its count and ns an iteration (lockstep: plan.step_sizes)
        self.found: dict[str, dict[str, tuple[int | None, float | None]]] = {}
        self.step_latency: dict[str, list[float]] = {}  # lockstep: each target's go-to-sample overheads, s

    @property
    def deadline(self) -> Deadline:
        assert self._deadline is not None, "the run has begun"
        return self._deadline

    @deadline.setter
    def deadline(self, deadline: Deadline) -> None:
        self._deadline = deadline

    def turns(self, job: Job, sts: list[States], block: int, order: list[Target], counting: bool = False) -> list[Turn]:
        """The block's processes (counting: its counting processes, slotted
        after the timed ones) on the targets still going."""
        out = []
        for slot, target in enumerate(order):
            mine = [s[target.name] for s in sts]
            if mine[0].done is not None or (counting and target.counters != "on"):
                continue
            at = Where(target.name, job.specs[0].name, block, slot + (len(order) if counting else 0))
            if job.workload is not None:
                out.append(Turn(slot, target, partial(self._tool_runs, target, job, mine, at)))
                continue
            argv = partial(self.agent_args, target, job.specs[0], mine[0], counting)
            out.append(
                Turn(
                    slot,
                    target,
                    partial(self._one_process, target, job.specs[0], mine[0], at, argv, counting=counting),
                    argv,
                )
            )
        return out

    def agent_args(self, target: Target, spec: BenchSpec, st: TargetState, counting: bool = False) -> list[str]:
        """A timed process's arguments; or a counting process's: a warmup,
        then one batch with counters on, no timed sample (counting costs
        time; see agent/main.c)."""
        c = self.cfg
        # the shared calibration: no need for the agent's own probe.  A counted
        # batch lasts this target's own --min-time-ms instead: its counts, not
        # its time, are kept, and the host probe needs a batch long against
        # the settle pause and the idle rate it subtracts
        iters = st.own_iters if counting and st.own_iters else st.iters
        if counting:
            # the bare machine's agent counts its own syscalls: the host's
            trace = syscall_tracepoint()[0] if target.mirror_host else None
            return agent_argv(
                target,
                spec,
                warmup=max(c.warmup, 1),
                min_time_ms=c.min_time_ms,
                iters=iters,
                count_settle_ms=target.count_settle_ms,
                parallel=c.parallel,
                tracepoint=trace,
            )
        return agent_argv(
            target,
            spec,
            samples=st.samples if st.samples is not None else c.samples_per_process,
            warmup=st.warmup if st.warmup is not None else c.warmup,
            min_time_ms=c.min_time_ms,
            iters=iters,
            parallel=c.parallel,
        )

    def calibrate(self, spec: BenchSpec, states: States) -> None:
        """One process on each target finds the iteration count that makes
        its sample last --min-time-ms (execute.calibrate); every target's
        timed processes then use one shared count (from the baseline's; else
        the first target's still going): the same work per sample
        everywhere, since what one operation costs can depend on how many
        run back to back (with counts of their own, A/A pairs differed:
        research/2026-11-23-own-calibration/validity-own-calibration.md).  Each target's own
        count is kept for its counted batches.  The shared count and each
        target's samples per process: plan.sizes."""
        found = {}
        for target in self.targets:
            st = states[target.name]
            if st.done is None and st.iters is None:
                got = calibrate(
                    target,
                    spec,
                    Where(target.name, spec.name),
                    self.rec,
                    min_time_ms=self.cfg.min_time_ms,
                    timeout=self.deadline.timeout(self.cfg.agent_timeout),
                    deadline=self.deadline,
                )
                if got.result.error:
                    st.end("error", got.result.error)
                elif got.result.read.skipped:
                    st.end("skipped", got.result.read.skipped)
                found[target.name] = (got.iters, got.ns_per_iter)
        for name, (n, _) in found.items():
            states[name].own_iters = n
        first = next((t.name for t in self.targets if found.get(t.name, (None, None))[0] is not None), None)
        if first is None:
            return
        shared, per = plan.sizes(first, found, self.cfg)
        self.found.setdefault(spec.name, {}).update(found)
        for name, (samples, warmup) in per.items():
            states[name].samples, states[name].warmup = samples, warmup
        for st in states.values():
            st.iters = shared

    def _one_process(
        self,
        target: Target,
        spec: BenchSpec,
        st: TargetState,
        at: Where,
        argv: Callable[[], list[str]],
        lines: Lines | None = None,
        *,
        counting: bool = False,
    ) -> None:
        """One agent process (execute.run_process): its lines opened here,
        or given (a block executor that started it)."""
        timeout = self.cfg.agent_timeout
        lines = lines or agent_lines(target, argv, lambda: self.deadline.timeout(timeout))
        got = run_process(
            target,
            spec,
            at,
            self.rec,
            lines,
            probe=target.host_probe if counting else None,
            on_sample=st.take,
            deadline=self.deadline,
        )
        if got.read.skipped:
            st.end("skipped", got.read.skipped)
        elif st.iters is None:
            st.iters = got.read.iters
        if got.error:
            st.end("error", got.error)
        if not counting and at.block != st.last_block:
            st.processes, st.last_block = st.processes + 1, at.block

    def _tool_runs(
        self, target: Target, job: Job, sts: list[TargetState], at: Where, _lines: Lines | None = None
    ) -> None:
        """One run of a workload's tool (after a warmup run, the first time
        on this target): a sample of each of its figures (execute.run_tool),
        its host cost per unit of work beside them (ToolCost).  A block
        gives it no lines (_lines): each run opens its own."""
        w, why = job.workload, job.unfit(target)
        assert w is not None, "a workload's job"
        if why:
            for st in sts:
                st.end("skipped", why)
            return
        peer_at = target.peer_address() if w.peer else None
        by_spec = {spec.name: st for spec, st in zip(job.specs, sts, strict=True)}
        for warmup in ([] if sts[0].warmed else [True]) + [False]:
            began, port = self.clock(), free_port()
            argv = w.argv(target.scratch_dir() or "/tmp", self.cfg.tool_seconds, port, peer_at or "127.0.0.1")
            lines = tool_lines(target, argv, partial(self.deadline.timeout, w.timeout))
            got = run_tool(
                target,
                job,
                at,
                self.rec,
                lines,
                warmup=warmup,
                cost=ToolCost(target, w, port),
                on_sample=lambda s: by_spec[s.benchmark].take(s),
                deadline=self.deadline,
            )
            if warmup:
                self.warm_s[job.name] = self.warm_s.get(job.name, 0.0) + self.clock() - began
            for st in sts:
                st.warmed = True
                if got.error:
                    st.end("error", got.error[:500])
                elif not warmup:
                    st.processes += 1
            if got.error:
                return


class Processes(InTurnProcesses):
    """compare's processes on a row, lockstep's sides among them (engine/lockstep.py)."""

    def stepped(self, job: Job, states: States) -> list[Target]:
        """The targets of this block that run in lockstep: with --pairing
        lockstep, an agent row's baseline and the candidates still going
        that can hold an agent sample by sample on this machine (an ssh
        host runs its processes in turn, after them); [] where fewer than
        two can."""
        base = self.targets[0]
        if (
            self.cfg.pairing != "lockstep"
            or job.workload is not None
            or self.cfg.parallel != 1
            or job.specs[0].name not in self.found
        ):
            return []
        can = [
            t for t in self.targets if states[t.name].done is None and STEP in t.capabilities and t.host_machine() == ""
        ]
        return can if base in can and len(can) >= 2 else []

    def step_groups(self, job: Job, states: States, stepped: list[Target]) -> list[list[Target]]:
        """The lockstep blocks a row takes turns with once each candidate
        has a ratio: the baseline and a group of the candidates (plan.
        step_groups, by their time an iteration: from their samples once
        known), the quickest first."""
        spec, base = job.specs[0], stepped[0]
        per = {t.name: self._sample_ms(spec, t, states[t.name], 10**6) for t in stepped[1:]}  # ns an iteration
        return [[base, *(t for t in stepped[1:] if t.name in group)] for group in plan.step_groups(per)]

    def lockstep(
        self, job: Job, states: States, block: int, targets: list[Target], rng: random.Random, part: int = 0
    ) -> tuple[Lockstep, list[Turn]]:
        """One block's (or with --block-processes, one of its parts': the
        part-th) processes of these targets in lockstep (targets[0] the
        baseline): its executor, sized (plan.step_sizes, step_rounds),
        and its turns, each target's agent process held with --step and
        its visits' samples a round, read and recorded as one of its own
        (execute.run_process) once the block has ended."""
        spec, found = job.specs[0], self.found[job.specs[0].name]
        size = plan.step_sizes(targets[0].name, {t.name: found[t.name] for t in targets}, self.cfg)
        size = plan.step_rounds(
            size,
            [self._sample_ms(spec, t, states[t.name], size.iters) for t in targets],
            [self._go_ms(t) for t in targets],
            self.cfg,
        )
        run = Lockstep(
            spec,
            size.rounds,
            rng,
            step_timeout=lambda: self.deadline.timeout(STEP_TIMEOUT),
            timeout=self.deadline.timeout(self.cfg.agent_timeout),
            visits=list(size.visits),
            latency=self.step_latency,
        )
        turns = []
        for slot, (target, visits) in enumerate(zip(targets, size.visits, strict=True)):
            argv = partial(self._step_args, target, spec, size, visits)
            at = Where(target.name, spec.name, block, part * len(targets) + slot)
            turns.append(
                Turn(
                    slot,
                    target,
                    partial(self._one_process, target, spec, states[target.name], at, argv, counting=False),
                    argv,
                )
            )
        return run, turns

    @staticmethod
    def _step_args(target: Target, spec: BenchSpec, size: plan.StepSizes, visits: int) -> list[str]:
        """A lockstep side's arguments: its visits' samples a round."""
        samples, warmup = (size.rounds - size.warmup) * visits, size.warmup * visits
        return agent_argv(target, spec, samples=samples, warmup=warmup, iters=size.iters) + ["--step"]

    def _sample_ms(self, spec: BenchSpec, target: Target, st: TargetState, iters: int) -> float:
        """How long this target's sample of `iters` iterations takes, in ms:
        the median of its last STEP_SAMPLES_SEEN timed samples once it has
        taken STEP_SAMPLES_KNOWN, else its calibration's.  One calibration
        can be far off (tlb_4k's fresh processes fall in two modes: an A/A
        twin calibrated twice as slow took one sample a turn beside its
        baseline's several, and read slower however warm its turns)."""
        seen = [s.value * s.ops / s.iters for s in st.samples_taken[-STEP_SAMPLES_SEEN:] if s.iters]
        if len(seen) >= STEP_SAMPLES_KNOWN:
            return statistics.median(seen) * iters / 1e6
        return iters * (self.found[spec.name].get(target.name, (None, None))[1] or 0.0) / 1e6

    def _go_ms(self, target: Target) -> float:
        """A go's round trip to this target so far (its last block's median), in ms."""
        took = self.step_latency.get(target.name)
        return statistics.median(took[-50:]) * 1e3 if took else plan.STEP_GO_MS


class StepGroups:
    """Which targets a row's lockstep block holds (Processes.stepped): all
    of them in its first plan.STEP_TOGETHER blocks (every candidate's ratio
    at once, as the budget's floors count), then the baseline and one
    group of candidates alike in speed (Processes.step_groups), the one
    schedule.next_group chooses: in turn until each has --min-processes, then
    the one nearest its precision in time, of those the row's share can
    finish (else in turn again); and how long each row's blocks
    of the same targets took, for the next one's estimate."""

    def __init__(self, procs: Processes):
        self.procs = procs
        self.took_s: dict[tuple[str, tuple[str, ...]], list[float]] = {}  # by row and targets
        self.widths: dict[str, dict[str, float]] = {}  # each row's candidates' intervals after its last block
        self.upcoming: dict[str, tuple[str, ...]] = {}  # each row's next block's targets

    def pick(self, job: Job, states: States, stepped: list[Target], block: int, left: float) -> list[Target]:
        """This block's lockstep targets, of those that can (stepped; []:
        none), with `left` seconds of the row's share to spend."""
        if not stepped or block < plan.STEP_TOGETHER:
            return stepped
        got = self.needs(job, states, stepped)
        cfg = self.procs.cfg
        return got[schedule.next_group([need for _, need in got], cfg.min_processes, cfg.precision, left)][0]

    def needs(self, job: Job, states: States, stepped: list[Target]) -> list[tuple[list[Target], schedule.GroupNeed]]:
        """The row's groups, each with what the choice of a block reads of it."""
        widths = self.widths.get(job.name, {})
        out = []
        for group in self.procs.step_groups(job, states, stepped):
            took = self.took_s.get((job.name, _names(group)), [])[-3:]
            need = schedule.GroupNeed(
                min(states[t.name].processes for t in group[1:]),
                sum(took) / len(took) if took else None,
                max(widths.get(t.name, math.inf) for t in group[1:]),
            )
            out.append((group, need))
        return out

    def time_to_goal(self, job: Job, states: States, blocks: int) -> float | None:
        """The least time more one of the row's groups should need to reach
        the precision (None: the row's blocks are not in groups: a target
        runs in turn beside them, or it has had fewer than STEP_TOGETHER)."""
        stepped = self.procs.stepped(job, states)
        going = [n for n, st in states.items() if st.done is None]
        if blocks < plan.STEP_TOGETHER or not stepped or len(stepped) != len(going):
            return None
        goal = self.procs.cfg.precision
        return min(need.time_to_goal(goal) for _, need in self.needs(job, states, stepped))

    def took(self, job: Job, group: list[Target], seconds: float) -> None:
        self.took_s.setdefault((job.name, _names(group)), []).append(seconds)

    def expect(self, job: Job, states: States, block: int, widths: dict[str, float], left: float) -> None:
        """After a block (its candidates' intervals): the targets the row's next one will hold."""
        self.widths[job.name] = widths
        self.upcoming[job.name] = _names(self.pick(job, states, self.procs.stepped(job, states), block, left))

    def times(self, job: Job) -> list[float]:
        """How long the row's blocks of its next block's targets took ([]: none yet)."""
        return self.took_s.get((job.name, self.upcoming.get(job.name, ())), [])


def _names(targets: list[Target]) -> tuple[str, ...]:
    return tuple(t.name for t in targets)
