"""The agent's protocol on the controller's side, for every process of
compare, scale and doctor: an agent process's arguments (agent_argv), what
its lines give (read_agent: the samples, with the target's host cost on a
counted batch), a calibration process's arguments, and a tool run's
samples (tool_samples).  The agent's lines have one reader, AgentReader
(over agent.events), which every process's lines go through: read_agent's,
lockstep's sides' and a barrier's ready line (ready)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..agent import Event as Event
from ..agent import events
from ..errors import AgentError
from ..model import BenchSpec, Sample
from ..suite import workloads
from ..targets.base import GATE, Target
from .jobs import Job

if TYPE_CHECKING:
    from ..hostprobe import HostProbe

_Mark = tuple[dict[str, float], float]  # a host probe's reading, and when it was taken (time.monotonic)

CALIBRATION_SAMPLES = 3


def agent_argv(
    target: Target,
    spec: BenchSpec,
    *,
    warmup: int,
    samples: int | None = None,
    min_time_ms: int | None = None,
    iters: int | None = None,
    duration_ms: int | None = None,
    count_settle_ms: int | None = None,
    parallel: int = 1,
    tracepoint: int | None = None,
    go: bool = False,
) -> list[str]:
    """One agent process's arguments on `target`, for every process of
    compare, scale and doctor: `samples` timed samples after `warmup` (a
    counting process, count_settle_ms given: no timed sample, one batch
    with counters on),
    batches of --min-time-ms at the agent's own count or of `iters` given
    (then no sample is cut short), tiled for duration_ms (scale's rounds),
    on the target's agent CPU, `parallel` instances, held at the barrier
    until released (go)."""
    args = ["run", spec.name]
    if count_settle_ms is not None:
        args += ["--samples", "0", "--count", "1", "--count-settle-ms", str(count_settle_ms)]
        args += ["--trace-marks"] if target.trace_marks else []
    elif samples is not None:
        args += ["--samples", str(samples)]
    args += ["--warmup", str(warmup)]
    if min_time_ms is not None:
        args += ["--min-time-ms", str(min_time_ms)]
    if iters:
        args += ["--iters", str(iters), "--max-sample-ms", "0"]
    if duration_ms is not None:
        args += ["--duration-ms", str(duration_ms)]
    if target.agent_cpu() is not None:
        args += ["--cpu", str(target.agent_cpu())]
    if parallel > 1:
        args += ["--parallel", str(parallel)]
    if tracepoint is not None:
        args += ["--tracepoint-id", str(tracepoint)]
    return [*args, *target.agent_extra_args(), *(["--go"] if go else [])]


def calibration_args(target: Target, spec: BenchSpec, min_time_ms: int) -> list[str]:
    """A calibration process's arguments: CALIBRATION_SAMPLES samples after
    one warmup (a fresh process's first batches are cold: tlb_4k's read
    162, 132, 100, 77 ns here, so a count found on the first batch alone is
    too small)."""
    return agent_argv(target, spec, samples=CALIBRATION_SAMPLES, warmup=1, min_time_ms=min_time_ms)


@dataclass
class AgentRead:
    """What one agent process said, its samples aside (they go to the caller's take())."""

    iters: int | None = None  # the count it calibrated (instance 0's)
    skipped: str = ""  # its reason, where it skipped the benchmark
    finished: bool = False  # it said 'done'
    first: float | None = None  # when its first line arrived
    timed: int = 0  # its timed samples


class AgentReader:
    """The one reader of an agent process's lines, line by line (pyperf's
    one reader of its workers): feed() checks a line (agent.events) and
    keeps what the process said so far in `read` (its calibrated count,
    its skip, its done), and gives the line's Event (None: a blank line).
    AgentError for anything a real agent would not say.  read_agent reads
    a whole process with it; lockstep reads its sides with it as they are
    stepped; a barrier finds a process's ready line with it (ready)."""

    def __init__(self, spec: BenchSpec, into: AgentRead | None = None):
        self.spec = spec
        self.read = into if into is not None else AgentRead()

    def feed(self, line: str) -> Event | None:
        ev = next(iter(events([line], self.spec)), None)
        if ev is None:
            return None
        got = self.read
        if ev.kind == "calibration" and got.iters is None and ev.instance == 0:
            got.iters = ev.iters
        elif ev.kind == "skip":
            got.skipped = ev.reason
        elif ev.kind == "done":
            got.finished = True
        elif ev.kind == "sample" and not ev.fields["warmup"] and not ev.fields["counting"]:
            got.timed += 1
        return ev


def ready(line: str, spec: BenchSpec, tool: bool) -> bool:
    """Whether this line says a held process reached its barrier: a
    tool's GATE, an agent's "ready" line (a line that is no valid agent
    line is not: the process's reader says what it is)."""
    if tool:
        return line.strip() == GATE
    if '"ready"' not in line:
        return False
    try:
        ev = AgentReader(spec).feed(line)
    except AgentError:
        return False
    return ev is not None and ev.kind == "ready"


def read_agent(
    target: Target,
    lines: Iterable[str],
    spec: BenchSpec,
    take: Callable[[dict[str, Any], float], None],
    probe: HostProbe | None = None,
    when: Callable[[], float] = time.time,
    into: AgentRead | None = None,
) -> AgentRead:
    """Every line of one agent process on `target` (AgentReader checks
    them): take(fields, t) for each sample as it comes, t when it arrived
    (when()).  A counted batch's sample carries what it cost the host per
    operation beside the agent's own counts: the bare machine's are its
    agent's own, mirrored under the host's names (mirror_host); another
    target's are read by its host probe (given: enabled when the agent says
    it is counting, read at each counted sample).  AgentError for anything
    a real agent would not say (what was read before it is in `into`,
    where given); the caller decides what a process that did not finish
    means."""
    reader = AgentReader(spec, into)
    got = reader.read
    mark = None  # the probe's reading when the counted batch began
    try:
        for line in lines:
            ev = reader.feed(line)
            if ev is None:
                continue
            t = when()
            got.first = got.first or t
            if ev.kind == "counting" and probe is not None:
                probe.enable()
                mark = (probe.read(), time.monotonic())
            elif ev.kind == "sample":
                f = dict(ev.fields)
                if f["counting"]:
                    f["metrics"], mark = _host_cost(target, probe, mark, f)
                take(f, t)
    finally:
        if probe is not None:
            probe.disable()
    return got


def _host_cost(
    target: Target, probe: HostProbe | None, mark: _Mark | None, f: dict[str, Any]
) -> tuple[dict[str, float], _Mark | None]:
    """A counted sample's metrics with its host cost per operation beside
    them, and the probe's reading it ends at (the next counted sample's
    start)."""
    host = {}
    if target.mirror_host:
        host = mirror(f["metrics"])
    elif probe is not None and mark is not None:
        now = (probe.read(), time.monotonic())
        host = probe.per_op(mark[0], now[0], now[1] - mark[1], f["ops"])
        mark = now
    return {**f["metrics"], **host}, mark


def mirror(m: dict[str, float]) -> dict[str, float]:
    """The bare machine's host cost is its agent's own: the same counts,
    under the host's names, so that it sits beside a guest's in `explain`."""
    out = {}
    if "task_clock_ns" in m or "cpu_user_ns" in m:
        out["host_cpu_ns"] = m.get("task_clock_ns", m.get("cpu_user_ns", 0.0) + m.get("cpu_sys_ns", 0.0))
    for own, host in (
        ("cpu_user_ns", "host_cpu_user_ns"),
        ("cpu_sys_ns", "host_cpu_sys_ns"),
        ("context_switches", "host_context_switches"),
        ("syscalls", "host_syscalls"),
    ):
        if own in m:
            out[host] = m[own]
    return out


def tool_samples(
    job: Job,
    values: dict[str, float],
    target: str,
    process: int,
    block: int,
    t: float,
    cpu: int | None,
    warmup: bool = False,
    instance: int = 0,
) -> list[Sample]:
    """One run of a workload's tool, its figures parsed (values): a sample
    of each of the job's rows.  AgentError naming the figure that is not a
    positive number."""
    out = []
    for spec in job.specs:
        try:
            v = workloads.figure(spec, values)
        except workloads.ParseError as e:
            raise AgentError(str(e)) from None
        out.append(
            Sample(
                benchmark=spec.name,
                target=target,
                value=v,
                unit=spec.unit,
                process=process,
                seq=0,
                instance=instance,
                warmup=warmup,
                iters=1,
                ops=1.0,
                block=block,
                t=t,
                cpu=cpu if cpu is not None else -1,
            )
        )
    return out
