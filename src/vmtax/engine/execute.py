"""Running one process and recording it: the one place where what an
agent or a tool printed becomes samples, a process row and the process's
outcome, for every process vmtax runs -- compare's timed, counting and
calibration processes, lockstep's sides and tool runs (processes.py),
scale's copies in a round and its calibration (scale.py), and doctor's
processes (doctor.py, which records nothing).

A process's lines come from a Lines: opened where the process's own errors
are caught (a live agent: agent_lines), or read before by a block
executor that drove the process itself (lockstep's sides, scale's copies
behind their barrier: Lines.read_before); when() says when each arrived.
A Recorder numbers the run's processes and writes what they give through
a StoreWriter; exactly one place calls add_process (Recorder.process).
A Batch holds a round's writes until every copy has delivered."""

from __future__ import annotations

import itertools
import statistics
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..agent import agent_hash
from ..errors import AgentError, TargetError
from ..model import BenchSpec, ProcessRecord, Sample, TargetInfo
from ..proc import ChildFailed
from ..suite.workloads import ParseError
from ..targets.base import Target
from .budget import BudgetSpent, Deadline
from .hostcost import ToolCost
from .jobs import Job
from .protocol import AgentRead, calibration_args, read_agent, tool_samples
from .writer import StoreWriter

if TYPE_CHECKING:
    from ..hostprobe import HostProbe


# -- where a process's lines come from ---------------------------------------------------
@dataclass
class Lines:
    """One process's output lines: open() gives them (called where the
    process's errors are caught, so a target that cannot run it is the
    process's error), when() the time the next line that is not blank
    arrived.  Lines read before (scale's round) say when the process
    started and ended.  sampled(s), where set, is called after each sample
    is taken: the hook of a block executor that paces its processes."""

    open: Callable[[], Iterable[str]]
    when: Callable[[], float] = time.time
    started: float | None = None
    ended: float | None = None
    sampled: Callable[[Sample], None] | None = None
    judged: bool = False  # the executor that read them judged how the process ended (its error raised
    #                       after them): no check() of the reader's (a lockstep side let go early is none)

    @classmethod
    def read_before(
        cls, got: list[tuple[float, str]], started: float, error: BaseException | None = None, judged: bool = False
    ) -> Lines:
        """Lines already read, each with its arrival time, after a start at
        `started` (a block executor read them: a barrier's round, a
        lockstep block); error: how the process ended, raised after them
        (judged: the executor's judgement, no check of the reader's)."""
        arrived = iter(t for t, line in got if line.strip())

        def lines() -> Iterator[str]:
            for _, line in got:
                yield line
            if error is not None:
                raise error

        return cls(lines, lambda: next(arrived), started, got[-1][0] if got else None, judged=judged)


def agent_lines(target: Target, argv: Callable[[], list[str]], timeout: Callable[[], float]) -> Lines:
    """An agent process's lines on `target`, opened where its errors are
    caught (run_process): argv() and timeout() read then."""
    return Lines(lambda: target.run_agent(argv(), timeout=timeout()))


def tool_lines(target: Target, argv: list[str], timeout: Callable[[], float]) -> Lines:
    """A workload's tool run's lines on `target`, opened as agent_lines'."""
    return Lines(lambda: target.run_tool(argv, timeout=timeout()))


class Hung(TargetError):
    """A process that stopped answering (a lockstep side silent after its
    go): its own failure, recorded as one even at the hard stop, where
    another failure is the budget's (BudgetSpent)."""


@dataclass(frozen=True)
class Where:
    """Where a process is recorded: the target name it is stored under (a
    scale stage's, 'T xN'), the row (a workload's first figure), its block
    (-1: outside any, a calibration), its slot in the block, and the copy
    its samples came from (scale; None: as the agent says)."""

    target: str
    benchmark: str
    block: int = -1
    slot: int = 0
    instance: int | None = None


@dataclass
class ProcessResult:
    """What one process gave: its number, its samples (every one it
    printed, warmups and counted batches included), what the agent said,
    when it ran, and its error ('' when none; failure: the exception)."""

    process: int
    where: Where
    started: float
    read: AgentRead = field(default_factory=AgentRead)
    samples: list[Sample] = field(default_factory=list)
    ended: float = 0.0
    error: str = ""
    failure: Exception | None = None

    def fail(self, e: Exception, what: str = "agent") -> None:
        self.failure = e
        self.error = f"{what} {e}" if isinstance(e, ChildFailed) else str(e)

    def outcome(self, ok: str = "ok") -> str:
        return "error" if self.error else "skipped" if self.read.skipped else ok


# -- what a run records ----------------------------------------------------------------------
class Recorder:
    """A run's writes: its processes numbered in the order they begin, each
    sample and process row written through the writer (None: nothing is
    written, as for doctor), outcomes, targets and rows."""

    def __init__(self, writer: StoreWriter | None, run_id: str, ids: Iterator[int] | None = None):
        self.writer, self.run_id = writer, run_id
        self._ids = ids if ids is not None else itertools.count()

    def new_process(self) -> int:
        return next(self._ids)

    def sample(self, s: Sample) -> None:
        if self.writer is not None:
            self.writer.add_sample(self.run_id, s)

    def process(self, r: ProcessResult, outcome: str) -> None:
        """The process's row: the one call of add_process."""
        if self.writer is not None:
            w = r.where
            self.writer.add_process(
                self.run_id,
                ProcessRecord(
                    process=r.process,
                    target=w.target,
                    benchmark=w.benchmark,
                    block=w.block,
                    slot=w.slot,
                    started=r.started,
                    first_line=r.read.first,
                    ended=r.ended,
                    outcome=outcome,
                ),
            )

    def outcome(self, target: str, bench: str, how: str, reason: str = "") -> None:
        if self.writer is not None:
            self.writer.set_outcome(self.run_id, target, bench, how, reason)

    def target(self, position: int, info: TargetInfo) -> None:
        if self.writer is not None:
            self.writer.add_target(self.run_id, position, info, agent_hash())

    def benchmarks(self, specs: list[BenchSpec]) -> None:
        if self.writer is not None:
            self.writer.add_benchmarks(self.run_id, specs)

    def batch(self) -> Batch:
        return Batch(self)


class Batch(Recorder):
    """Samples and process rows held until commit(), numbered by the
    recorder it was made from: a scale round keeps its copies' samples only
    when every copy delivered."""

    def __init__(self, parent: Recorder):
        super().__init__(None, parent.run_id, parent._ids)
        self._parent = parent
        self._held: list[tuple[Sample, None] | tuple[ProcessResult, str]] = []  # samples, and processes' outcomes

    def sample(self, s: Sample) -> None:
        self._held.append((s, None))

    def process(self, r: ProcessResult, outcome: str) -> None:
        self._held.append((r, outcome))

    def commit(self, samples: bool = True) -> None:
        """Write what is held, in the order it came (samples: or the process rows alone)."""
        for held in self._held:
            if held[1] is not None:
                self._parent.process(*held)
            elif samples:
                self._parent.sample(held[0])
        self._held = []


# -- one agent process ---------------------------------------------------------------------
def finished(read: AgentRead) -> str:
    """A timed process's check: it said 'done' (or skipped the benchmark)."""
    return "" if read.finished or read.skipped else "the agent stopped without finishing"


def run_process(
    target: Target,
    spec: BenchSpec,
    where: Where,
    rec: Recorder,
    lines: Lines,
    *,
    probe: HostProbe | None = None,
    on_sample: Callable[[Sample], None] | None = None,
    check: Callable[[AgentRead], str] | None = finished,
    keep: bool = True,
    ok: str = "ok",
    deadline: Deadline | None = None,
) -> ProcessResult:
    """One agent process measuring `spec` on `target`, read and recorded:
    each sample written as it arrives (keep; a calibration's are not), then
    on_sample(s); the process's row once it has ended, its outcome ok (or
    `ok`), skipped or error.  A process that fails (a malformed line, a
    crash, a timeout, or what check() says of it) is an error, not an
    exception, unless the deadline's hard stop has come: BudgetSpent, and
    no row (the run ends there)."""
    res = ProcessResult(rec.new_process(), where, lines.started if lines.started is not None else time.time())

    def take(f: dict[str, Any], t: float) -> None:
        if where.instance is not None:
            f = {**f, "instance": where.instance}
        s = Sample(benchmark=spec.name, target=where.target, process=res.process, block=where.block, t=t, **f)
        res.samples.append(s)
        if keep:
            rec.sample(s)
        for hook in (on_sample, lines.sampled):
            if hook is not None:
                hook(s)

    try:
        read_agent(target, lines.open(), spec, take, probe, when=lines.when, into=res.read)
        why = check(res.read) if check is not None and not lines.judged else ""
        if why:
            raise AgentError(why)
    except (AgentError, TargetError, ChildFailed) as e:
        res.fail(e)
    return _ended(res, rec, lines, deadline, ok)


def _ended(res: ProcessResult, rec: Recorder, lines: Lines, deadline: Deadline | None, ok: str) -> ProcessResult:
    res.ended = lines.ended if lines.ended is not None else time.time()
    if res.failure is not None and not isinstance(res.failure, Hung) and deadline is not None and deadline.spent():
        raise BudgetSpent from None
    rec.process(res, res.outcome(ok))
    return res


# -- calibration -----------------------------------------------------------------------------
@dataclass
class Calibration:
    iters: int | None  # the count the agent calibrated (None: skipped or failed)
    ns_per_iter: float | None  # what one iteration took: the median of the timed samples (None: unknown)
    result: ProcessResult  # the process (its error, its skip)


def calibrated(read: AgentRead) -> str:
    return "" if read.skipped or read.iters is not None else "the agent calibrated nothing"


def calibrate(
    target: Target,
    spec: BenchSpec,
    where: Where,
    rec: Recorder,
    min_time_ms: int,
    timeout: float,
    deadline: Deadline | None = None,
) -> Calibration:
    """One process on `target` finds the iteration count that makes a
    sample of `spec` last min_time_ms, and what one iteration takes (the
    median of its timed samples, for an agent row): one implementation for
    compare and scale.  Its samples are not kept (they ran outside any
    block); its row's outcome is 'calibration', skipped or error."""
    lines = Lines(lambda: target.run_agent(calibration_args(target, spec, min_time_ms), timeout=timeout))
    res = run_process(
        target, spec, where, rec, lines, check=calibrated, keep=False, ok="calibration", deadline=deadline
    )
    if res.error or res.read.skipped:
        return Calibration(None, None, res)
    per_iter = [s.value * s.ops / s.iters for s in res.samples if not s.warmup] if spec.agent_row else []
    return Calibration(res.read.iters, statistics.median(per_iter) if per_iter else None, res)


# -- one tool run ----------------------------------------------------------------------------
def _read_all(lines: Lines, read: AgentRead) -> list[str]:
    """A tool's lines, all of them, noting when the first that is not blank arrived."""
    out = []
    for line in lines.open():
        if line.strip():
            t = lines.when()
            read.first = read.first or t
        out.append(line)
    return out


def run_tool(
    target: Target,
    job: Job,
    where: Where,
    rec: Recorder,
    lines: Lines,
    *,
    warmup: bool = False,
    cost: ToolCost | None = None,
    on_sample: Callable[[Sample], None] | None = None,
    deadline: Deadline | None = None,
) -> ProcessResult:
    """One run of a workload's tool on `target`, read and recorded: its
    output parsed into a sample of each of the job's figures (with the
    host's cost per unit of work, where `cost` reads it around the run),
    written only when the whole run parsed; its row, ok or error; on the
    hard stop, BudgetSpent as for an agent process."""
    w = job.workload
    assert w is not None, "a workload's job"
    res = ProcessResult(rec.new_process(), where, lines.started if lines.started is not None else time.time())
    try:
        with cost if cost is not None else nullcontext():
            out = _read_all(lines, res.read)
            if cost is not None:
                cost.end()
            values = w.parse("\n".join(out))
            res.samples = tool_samples(
                job,
                values,
                target=where.target,
                process=res.process,
                block=where.block,
                t=lines.ended if lines.ended is not None else time.time(),
                cpu=target.host_cpu,
                warmup=warmup,
                instance=where.instance or 0,
            )
            extra = cost.per_unit(values) if cost is not None else {}
            for s in res.samples:
                s.metrics.update(extra)
    except ParseError as e:
        res.failure, res.error = e, f"{w.name}: {e}"
    except (AgentError, TargetError, ChildFailed) as e:
        res.fail(e, w.name)
    if not res.error:
        for s in res.samples:
            rec.sample(s)
            if on_sample is not None:
                on_sample(s)
    return _ended(res, rec, lines, deadline, "ok")
