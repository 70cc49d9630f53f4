"""The one Target interface.  A target starts, stops, runs the agent with
arguments and streams its output lines back, and reports facts about
itself; what it can hold (held.py), its place on its host (placement.py)
and its options (options.py) are its collaborators'.  Every concrete
target cleans up its processes in stop(), which the context manager calls
on every exit path."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from typing import TYPE_CHECKING, ClassVar

from ..errors import TargetError
from ..model import BOOTED_KINDS, TargetInfo
from .held import GATE, Held, Holding
from .options import COMMON_OPTIONS, check_options, counters_option, option_number
from .placement import Placement

if TYPE_CHECKING:
    from ..hostprobe import HostProbe

__all__ = ["COMMON_OPTIONS", "GATE", "Held", "Target", "environment", "option_number"]


class Target(Holding, Placement, ABC):
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
        check_options(name, options, self.allowed_options)
        self.name = name
        self.options = options
        self.boot_s: float | None = None
        self.host_cpu: int | None = None
        self._facts: dict | None = None
        self.inject = option_number(name, options, "inject", None, lo=0.0, hi=100.0, strip="%", open_lo=True)
        self.counters = counters_option(name, options)
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

    def check(self) -> None:  # optional: most kinds settle everything when parsed
        """Called before anything starts where --skip-unavailable is not
        given: UserError for what usable() would have left out that is the
        user's to fix (a runtime not installed)."""

    def provide(self, files) -> None:
        """Called before start(): the files (path inside, host file) the
        target's root must hold besides the agent: the workloads' tools,
        their shared libraries and data (guest.closure)."""
        self.files = tuple(files)

    def run_tool(self, argv: list[str], timeout: float) -> Iterator[str]:
        """Run a provisioned tool (a workload's script) inside the target;
        yield its stdout lines.  ChildFailed on a non-zero exit."""
        raise TargetError(f"{self.name}: a {self.kind} target cannot run workloads")

    @classmethod
    def prepare(cls, targets: list[Target]) -> str | None:
        """Called once per kind, before anything starts, with the targets
        of that kind to be measured together: what they must agree on is
        settled here (QEMU guests boot one kernel).  A line to tell the
        user, or None."""
        return None

    def start(self) -> None:  # optional: a target with nothing to boot starts at once
        """Bring the target up (boot a guest, open a connection)."""

    def begin_start(self) -> None:
        """The first half of start() (all of it, for a kind without
        "parallel_start")."""
        self.start()

    def end_start(self) -> None:  # optional: a start in one piece has no second half
        """The second half of start(): waits until the target is ready
        (nothing, for a kind without "parallel_start")."""

    def stop(self) -> None:  # optional: a target with nothing running stops at once
        """Tear everything down; must be safe to call twice."""

    def boots(self) -> bool:
        """Whether it is a guest that boots a kernel of its own (compare
        --reboot boots it afresh between rounds: rounds.py)."""
        return self.kind in BOOTED_KINDS

    def take_state(self, source: Target | None = None) -> dict:
        """Run on in a new process holding the state of `source`'s guest
        (None: its own): compare --shared-boot (targets/migration.py).  The
        kinds that can say so; TargetError here."""
        raise TargetError(f"{self.name}: a {self.kind} target cannot take another guest's state")

    @abstractmethod
    def run_agent(self, args: list[str], timeout: float) -> Iterator[str]:
        """Run the agent with args; yield its stdout lines as they arrive.
        Raises proc.ChildFailed (or TargetError) when it fails."""

    def facts(self) -> dict:
        """The agent's --env report from inside the target, plus the
        target's own facts (cached: the environment of a run is fixed)."""
        if self._facts is None:
            self._facts = environment(self)
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


def environment(target: Target) -> dict:
    """What a target's facts() says: the agent's --env report from inside
    it, its own facts, and the options it was given."""
    from ..agent import clean_facts, parse_line
    from ..errors import AgentError
    from ..proc import ChildFailed

    scratch = target.scratch_dir()
    args = ["--env"] + (["--tmpdir", scratch] if scratch else [])
    try:
        lines = [line for line in target.run_agent(args, timeout=60) if line.strip()]
        facts = clean_facts(parse_line(lines[-1])) if lines else {}
    except (ChildFailed, AgentError) as e:
        raise TargetError(f"{target.name}: the agent could not report its environment: {e}") from None
    facts.pop("schema", None)
    facts.pop("type", None)
    facts.update(target.own_facts())
    if target.host_cpu is not None:
        facts["host_cpu"] = target.host_cpu
    if target.inject is not None:
        facts["inject_pct"] = target.inject
    if target.options.get("label"):
        facts["label"] = target.options["label"]  # what it is known as across runs (vmtax history)
    facts["options"] = dict(sorted(target.options.items()))  # as given: vmtax diff and history show changes
    return facts
