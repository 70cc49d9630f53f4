"""The one Target interface.  A target starts, stops, runs the agent with
arguments and streams its output lines back, and reports facts about
itself.  Every concrete target cleans up its processes in stop(), which the
context manager calls on every exit path."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Iterator
from typing import TYPE_CHECKING, ClassVar

from ..errors import UserError
from ..model import TargetInfo
from ..safe import line_break, one_line

if TYPE_CHECKING:
    from ..hostprobe import HostProbe

# Every kind takes these: label=TEXT, so that `local local:label=b` is an A/A
# pair, and inject=PCT, which makes the agent add PCT percent of extra work to
# every operation: a known slowdown, to check that vmtax finds it; and
# counters=off, which runs no counting process on it (to measure what
# counting costs).
COMMON_OPTIONS = frozenset({"label", "inject", "counters"})
# The first line of a workload's tool held at the barrier (Target.run_gated):
# it waits for its go line (the agent says so with a "ready" line of its own).
GATE = "@@VMTAX-GATE"


class Held:
    """A process a target holds at its barrier (Target.hold): its lines,
    read by one thread, and go() (release it at the barrier), step() (one
    more sample of an agent run with --step, after an untimed one where
    warm) and release() (let it end before its last sample), each the
    target's own (a kind's channel may make them fast)."""

    def __init__(self, target: Target, lines: Iterator[str]):
        self.target, self.lines = target, lines

    def go(self) -> None:
        self.target.go()

    def step(self, warm: bool = False) -> None:
        self.target.step(warm=warm)

    def release(self) -> None:
        self.target.release()


class Target(ABC):
    kind: ClassVar[str]
    summary: ClassVar[str] = ""
    allowed_options: ClassVar[frozenset[str]] = frozenset()
    # The bare machine is its own host: its agent's counts are its host cost.
    mirror_host: ClassVar[bool] = False
    # ms the agent waits before a counted batch, for the host probe to start
    # counting after the agent's line crossed the channel (a channel target
    # sets its own once started: ChannelTarget.settle_for_the_host)
    count_settle_ms: int = 0
    # its host probe counts in windows the agent marks in the hypervisor's trace (--trace-marks: Xen)
    trace_marks: ClassVar[bool] = False
    # the option a bare first word of the target string sets (`ssh:HOST`)
    positional: ClassVar[str | None] = None
    # another machine: a candidate that cannot be reached is recorded as
    # failed and the run goes on with the others (runner.run_session)
    remote: ClassVar[bool] = False
    # what this kind can do, declared (callers ask here, never by a method's identity or isinstance):
    #   "barrier"         run_gated/go hold a process until released (vmtax scale can run it)
    #   "parallel_start"  begin_start() launches from the calling thread and end_start() may wait in
    #                     another: copies boot in parallel (vmtax scale)
    #   "step"            step()/release() hold an agent run with --step sample by sample (engine/lockstep.py)
    capabilities: frozenset[str] = frozenset()  # set on the kind's class (a fake target sets its own)

    def __init__(self, name: str, options: dict[str, str]):
        unknown = set(options) - self.allowed_options - COMMON_OPTIONS
        if unknown:
            known = sorted(self.allowed_options | COMMON_OPTIONS)
            raise UserError(
                f"target '{name}': unknown option(s) {', '.join(sorted(unknown))} (known: {', '.join(known)})"
            )
        for text in (name, *options.values()):
            if (c := line_break(text)) is not None:  # other control characters are shown inert
                raise UserError(
                    f"target '{one_line(name)}': a line break or tab ({c}) in a target or its label is refused "
                    "(each is shown on one line of a table or a log)"
                )
        self.name = name
        self.options = options
        self.boot_s: float | None = None
        self.host_cpu: int | None = None
        self._facts: dict | None = None
        self.inject = option_number(name, options, "inject", None, lo=0.0, hi=100.0, strip="%", open_lo=True)
        self.counters = options.get("counters", "on")
        if self.counters not in ("on", "off"):
            raise UserError(f"target '{name}': counters must be on or off, got '{self.counters}'")
        self.host_probe: HostProbe | None = None  # where the kind has one (after start)
        # measured at start, where the kind can: its host CPU while idle (%), and the host memory
        # its hypervisor takes beyond the guest's RAM (MiB); None where unknown
        self.idle_cpu: float | None = None
        self.mem_overhead: float | None = None
        self.files: tuple = ()  # what the target's root holds besides the agent (see provide)
        # time.monotonic() by which a start must be done or given up: the run's hard stop (its budget and
        # grace; TargetPool.add sets it), None: the kind's own timeout alone
        self.start_by: float | None = None

    @classmethod
    def available(cls) -> tuple[bool, str]:
        """Whether this kind works on this machine, and why not."""
        return True, ""

    def usable(self) -> tuple[bool, str]:
        """Whether this target, as its options ask, works on this machine,
        and why not (what --skip-unavailable asks): its kind's answer, where
        the options change nothing."""
        return self.available()

    def check(self) -> None:  # noqa: B027 - optional: most kinds settle everything when parsed
        """Called before anything starts where --skip-unavailable is not
        given: UserError for what usable() would have left out that is the
        user's to fix (a runtime not installed)."""

    def pin(self, cpu: int | None) -> None:
        """Run this target's benchmarks on host CPU cpu (None: anywhere).
        Called before start(): a guest pins its hypervisor's processes."""
        self.host_cpu = cpu

    def provide(self, files) -> None:
        """Called before start(): the files (path inside, host file) the
        target's root must hold besides the agent: the workloads' tools,
        their shared libraries and data (guest.closure)."""
        self.files = tuple(files)

    def run_tool(self, argv: list[str], timeout: float) -> Iterator[str]:
        """Run a provisioned tool (a workload's script) inside the target;
        yield its stdout lines.  ChildFailed on a non-zero exit."""
        from ..errors import TargetError

        raise TargetError(f"{self.name}: a {self.kind} target cannot run workloads")

    def run_gated(self, argv: list[str], timeout: float, tool: bool = False) -> Iterator[str]:
        """Run the agent (argv with --go) or a workload's tool (tool=True)
        held at a barrier, as run_agent/run_tool do: the agent prints its
        "ready" line once set up and calibrated, a tool's first line is
        GATE; either then waits until go() (vmtax scale's synchronized
        start: N targets released at once)."""
        from ..errors import TargetError

        raise TargetError(f"{self.name}: a {self.kind} target cannot hold a run at a barrier")

    def hold(self, argv: list[str], timeout: float, tool: bool = False) -> Held:
        """The process run_gated starts, as a handle: its lines, and the
        go, step and release that drive it (the engine's block executors
        alone call them: engine/lockstep.py, engine/barrier.py)."""
        return Held(self, self.run_gated(argv, timeout, tool=tool))

    def go(self) -> None:
        """Release the run that run_gated holds at the barrier."""
        from ..errors import TargetError

        raise TargetError(f"{self.name}: nothing is held at a barrier")

    def step(self, warm: bool = False) -> None:
        """One more go line to the agent run_gated holds with --step: it
        takes its next sample (lockstep pairs); warm: after an untimed
        one (the line "warm" first)."""
        from ..errors import TargetError

        raise TargetError(f"{self.name}: a {self.kind} target cannot hold an agent sample by sample")

    def release(self) -> None:  # noqa: B027 - optional: a kind that cannot hold its agent has none to release
        """End the agent run_gated holds with --step before its last
        sample: a line that is not "go" makes it stop (an error of its
        own), and, where the run has ended already, is ignored."""

    def settles_at_start(self) -> bool:
        """Whether start() settles something by trying it (qemu's
        accel=auto boots with KVM and falls back to TCG): vmtax scale then
        starts one copy alone before the others boot in parallel."""
        return False

    def vcpus(self) -> int:
        """The CPUs this target can keep busy at once: a guest's vCPUs, one
        for an agent process (the overcommit ratio counts them)."""
        return 1

    def memory_need_mb(self) -> float:
        """What one more of this target needs of the host's memory, in MiB
        (a guest's RAM and its hypervisor's own): vmtax scale refuses an
        instance count that would not fit before anything starts."""
        return 8.0

    def host_pids(self) -> list[int]:
        """The host processes this target is made of now (its hypervisor,
        its container's processes, a local agent): their memory is its cost."""
        return []

    def agent_cpu(self) -> int | None:
        """The --cpu the agent gets inside this target: the host CPU itself
        where the agent sees host CPUs (local, container)."""
        return self.host_cpu

    def host_machine(self) -> str:
        """Whose CPUs this target runs on: '' for this machine's (every
        kind that runs here).  The runner measures targets on different
        machines at the same time, and those on one machine one by one."""
        return ""

    def scratch_dir(self) -> str | None:
        """The directory the agent's file benchmarks work in (a tmpfs on
        every kind, so that they compare kernels, not filesystems)."""
        return None

    def on_disk(self) -> bool:
        """Whether the scratch directory is on a block device (direct I/O
        works there), not a tmpfs."""
        return False

    def peer_address(self) -> str | None:
        """The address at which a peer on the host is reached from inside
        this target (None: the target has no way out)."""
        return None

    def peer_listen(self) -> tuple[str, object]:
        """Where a host-side peer for this target listens: the one address
        it binds and the network namespace it runs in (a netns.NetNs that
        vmtax made; None: the host's own, where it binds loopback)."""
        return "127.0.0.1", None

    def agent_extra_args(self) -> list[str]:
        out = []
        scratch = self.scratch_dir()
        if scratch:
            out += ["--tmpdir", scratch]
        if self.inject is not None:
            out += ["--inject", f"{self.inject:g}"]
        return out

    @classmethod
    def prepare(cls, targets: list[Target]) -> str | None:
        """Called once per kind, before anything starts, with the targets
        of that kind to be measured together: what they must agree on is
        settled here (QEMU guests boot one kernel).  A line to tell the
        user, or None."""
        return None

    def start(self) -> None:  # noqa: B027 - optional: a target with nothing to boot starts at once
        """Bring the target up (boot a guest, open a connection)."""

    def begin_start(self) -> None:
        """The first half of start() (all of it, for a kind without
        "parallel_start")."""
        self.start()

    def end_start(self) -> None:  # noqa: B027 - optional: a start in one piece has no second half
        """The second half of start(): waits until the target is ready
        (nothing, for a kind without "parallel_start")."""

    def stop(self) -> None:  # noqa: B027 - optional: a target with nothing running stops at once
        """Tear everything down; must be safe to call twice."""

    @abstractmethod
    def run_agent(self, args: list[str], timeout: float) -> Iterator[str]:
        """Run the agent with args; yield its stdout lines as they arrive.
        Raises proc.ChildFailed (or TargetError) when it fails."""

    def facts(self) -> dict:
        """The agent's --env report from inside the target, plus the
        target's own facts (cached: the environment of a run is fixed)."""
        if self._facts is None:
            from ..agent import clean_facts, parse_line
            from ..errors import AgentError, TargetError
            from ..proc import ChildFailed

            scratch = self.scratch_dir()
            args = ["--env"] + (["--tmpdir", scratch] if scratch else [])
            try:
                lines = [line for line in self.run_agent(args, timeout=60) if line.strip()]
                facts = clean_facts(parse_line(lines[-1])) if lines else {}
            except (ChildFailed, AgentError) as e:
                raise TargetError(f"{self.name}: the agent could not report its environment: {e}") from None
            facts.pop("schema", None)
            facts.pop("type", None)
            facts.update(self.own_facts())
            if self.host_cpu is not None:
                facts["host_cpu"] = self.host_cpu
            if self.inject is not None:
                facts["inject_pct"] = self.inject
            if self.options.get("label"):
                facts["label"] = self.options["label"]  # what it is known as across runs (vmtax history)
            facts["options"] = dict(sorted(self.options.items()))  # as given: vmtax diff and history show changes
            self._facts = facts
        return self._facts

    def own_facts(self) -> dict:
        return {"target_kind": self.kind}

    def info(self) -> TargetInfo:
        return TargetInfo(
            name=self.name, kind=self.kind, facts=self.facts(), accel=self.options.get("accel"), boot_s=self.boot_s
        )

    def __enter__(self) -> Target:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def option_number(
    name: str,
    options: dict[str, str],
    key: str,
    default,
    lo: float,
    hi: float,
    integer: bool = False,
    strip: str = "",
    open_lo: bool = False,
):
    """A numeric target option, checked: one clear line for a bad one."""
    if key not in options:
        return default
    text = options[key].strip().removesuffix(strip) if strip else options[key].strip()
    try:
        v = int(text) if integer else float(text)
    except ValueError:
        v = None
    if v is None or not math.isfinite(v) or v > hi or v < lo or (open_lo and v == lo):
        what = "an integer" if integer else "a number"
        top = f"{int(hi)}" if integer else f"{hi:g}"
        raise UserError(
            f"target '{name}': {key} must be {what} {'>' if open_lo else '>='} {lo:g} "
            f"and <= {top}, got '{options[key]}'"
        )
    return v
