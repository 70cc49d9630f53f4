"""A fake target for testing vmtax itself (the runner, the CLI, the store):
it speaks the agent's protocol with values drawn from a seeded normal
distribution, so tests need no timing.  Never for measuring anything.

Options: scale (multiplies every mean), noise (relative sd of a sample),
process_noise (relative sd of a per-process offset: samples of one process
share it, as real processes share their memory layout and CPU), seed,
delay (seconds per sample; a process is stopped at its timeout, as a real
agent is), skip=NAME, crash=NAME (dies mid-benchmark, in a timed process),
garbage=NAME (prints a malformed line mid-benchmark; a workload: output its
parser refuses), hostile=KIND (every timed process prints one well-formed
JSON sample line no real agent could, after a timed sample: see HOSTILE), host_noise and
host_rho (a slowdown shared by every fake target, as a busy host's is: a
log-AR(1) process with innovation sd host_noise and coefficient host_rho,
one step per agent process -- noise correlated in time across targets; the
samples' reference readings, ref_ns, follow it as a real agent's do),
slow_share and slow_by (each process, with probability slow_share, runs
slow_by times slower: process means in two modes, as tlb_4k's fell on a
cloud host; the reference does not see it), boot_sd (it is a guest that
boots: every start draws each benchmark an offset of its own, log-normal
with this sd, that its processes share until it is started again, as a
guest's boot does; compare --reboot boots it afresh), boot_fail=N (its N-th
start fails, as a guest that does not boot again); a guest with boot_sd
takes another's boot offsets with take_state (as --shared-boot's live
migration gives a QEMU guest another's state: Rounds and TargetPool tests).
"""

from __future__ import annotations

import functools
import json
import math
import random
import threading
import time
import zlib
from collections.abc import Callable, Iterator

from ..agent import parse_line
from ..errors import TargetError, UserError
from ..proc import ChildFailed
from .base import GATE, Target, option_number
from .local import LocalTarget


class FakeTarget(Target):
    capabilities = frozenset({"barrier"})
    kind = "fake"
    summary = "synthetic values, for testing vmtax itself"
    allowed_options = frozenset(
        {
            "scale",
            "noise",
            "process_noise",
            "seed",
            "delay",
            "skip",
            "crash",
            "garbage",
            "hostile",
            "host_noise",
            "host_rho",
            "slow_share",
            "slow_by",
            "step",
            "boot_sd",
            "boot_fail",
        }
    )

    def __init__(self, name: str, options: dict[str, str]):
        super().__init__(name, options)
        self.agent = FakeAgent(name, options)
        # step=on: it can be held sample by sample (lockstep pairs), and its host state, with
        # host_noise, moves from one sample to the next (a real host's moves within milliseconds)
        if options.get("step", "off") not in ("on", "off"):
            raise UserError(f"{name}: step must be on or off, got {options['step'][:40]!r}")
        if options.get("step") == "on":
            self.capabilities = FakeTarget.capabilities | {"step"}
        self._steps = threading.Semaphore(0)
        self._released = False
        self.warm_steps = 0  # steps that asked for a warm batch first (the fake has no caches to warm)
        self.starts = 0  # how many times it was started (a boot, with boot_sd)
        self.moves = 0  # take_state()s since its last start

    def boots(self) -> bool:
        return "boot_sd" in self.options

    def start(self) -> None:
        self.starts += 1
        if self.starts == option_number(self.name, self.options, "boot_fail", 0, lo=0, hi=1e9, integer=True):
            raise TargetError(f"{self.name}: boot {self.starts} failed (boot_fail)")
        self.agent.boot, self.agent.state_of = self.starts, f"{self.options.get('seed', '')}|{self.name}"
        self.moves = 0

    def take_state(self, source: Target | None = None) -> dict:
        """compare --shared-boot: run on in the state of source's boot (its
        boot offsets), as a live migration gives a guest."""
        if not self.boots():
            return super().take_state(source)
        if source is not None:
            assert isinstance(source, FakeTarget), "fakes share with fakes"
            self.agent.boot, self.agent.state_of = source.agent.boot, source.agent.state_of
        self.moves += 1
        return {"status": "completed"}

    def run_agent(self, args: list[str], timeout: float) -> Iterator[str]:
        if args and args[0] == "run":
            return self.agent.run(args[1], args[2:], timeout, self._await_step)
        if args == ["--env"]:
            return iter(
                [
                    json.dumps(
                        {"schema": 1, "type": "env", "kernel": "fake", "cpu_model": "fake cpu", "hostname": self.name}
                    )
                ]
            )
        # --list and anything else: the real table, so names are real
        return LocalTarget("local", {}).run_agent(args, timeout)

    def run_gated(self, argv: list[str], timeout: float, tool: bool = False) -> Iterator[str]:
        """The agent's lines (a "ready" line after calibration) or a tool's
        (GATE first), held until go(); with --step, every sample held until step()."""
        if "--step" in argv and not tool:
            self._steps, self._released = threading.Semaphore(0), False
            return self.run_agent(argv, timeout)
        self._go = threading.Event()
        return self._gated(argv, timeout, tool, self._go)

    def _gated(self, argv: list[str], timeout: float, tool: bool, go: threading.Event) -> Iterator[str]:
        if tool:
            yield GATE
            if not go.wait(timeout):
                raise ChildFailed(125, "fake: no go line")
            yield from self.run_tool(argv, timeout)
            return
        for line in self.run_agent(argv, timeout):
            yield line
            if '"calibration"' in line:
                yield _line(type="ready", bench=argv[1])
                if not go.wait(timeout):
                    raise ChildFailed(3, "fake agent: --go: stdin closed before the go line")

    def go(self) -> None:
        self._go.set()

    def step(self, warm: bool = False) -> None:
        self.warm_steps += warm
        self._steps.release()

    def release(self) -> None:
        self._released = True
        self._steps.release()

    def run_tool(self, argv: list[str], timeout: float) -> Iterator[str]:
        return self.agent.tool(argv)

    def _await_step(self, end: float) -> None:
        """Held before a sample (--step) until step(); a release() ends it
        as the agent ends on a line that is not go."""
        if not self._steps.acquire(timeout=max(0.0, end - time.monotonic())):
            raise ChildFailed(-9, "", timed_out=True)
        if self._released:
            self._released = False
            raise ChildFailed(3, "fake agent: --step: expected the line 'go', got 'stop'")


class FakeAgent:
    """What the fake's agent and tools print: its options' model of a
    benchmark's samples (seeded, one generator for every draw), and the
    mishaps they ask for."""

    def __init__(self, name: str, options: dict[str, str]):
        self.options, self.name = options, name
        num = functools.partial(option_number, name, options)
        self.scale = num("scale", 1.0, lo=0.0, hi=1e6, open_lo=True)
        self.noise = num("noise", 0.01, lo=0.0, hi=10.0)
        self.process_noise = num("process_noise", 0.0, lo=0.0, hi=10.0)
        self.delay = num("delay", 0.0, lo=0.0, hi=60.0)
        self.host_noise = num("host_noise", 0.0, lo=0.0, hi=10.0)
        self.host_rho = num("host_rho", 0.0, lo=0.0, hi=0.999)
        self.slow_share = num("slow_share", 0.0, lo=0.0, hi=1.0)
        self.slow_by = num("slow_by", 1.0, lo=1.0, hi=100.0)
        self.boot_sd = num("boot_sd", 0.0, lo=0.0, hi=10.0)
        self.boot = 0  # the boot it runs on (FakeTarget.start)
        self.state_of = f"{options.get('seed', '')}|{name}"  # whose boot: another's once it took that state
        self.ran: list[tuple[str, int, bool]] = []  # each process: its benchmark, its boot, whether timed
        # independent draws per target unless a seed is given: two fakes with one
        # seed would produce perfectly correlated "noise" and a zero-width ratio
        seed = num("seed", None, lo=0, hi=2**63, integer=True)
        self.rng = random.Random(seed if seed is not None else zlib.crc32(name.encode()))
        self.hostile = options.get("hostile")
        if self.hostile is not None and self.hostile not in HOSTILE:
            raise UserError(f"{name}: hostile={self.hostile[:40]!r}: one of {', '.join(HOSTILE)}")

    def tool(self, argv: list[str]) -> Iterator[str]:
        """A workload's run: the output of its tool as the parsers read it
        (sysbench's format for every workload), with a seeded value.  The
        workload's name is the script's $0 (argv[3], "vmtax-NAME")."""
        name = argv[3].removeprefix("vmtax-")
        if self.options.get("crash") == name:
            raise ChildFailed(1, f"fake {name}: cannot run here")
        if self.options.get("garbage") == name:
            return iter(["this is not what the tool prints"])
        base = 1000.0 + zlib.crc32(name.encode()) % 9000
        v = base / self.scale * math.exp(self.rng.gauss(0, self.noise))
        secs = 3 * math.exp(self.rng.gauss(0, self.noise))  # a time-based run
        return iter(
            [
                "sysbench 1.0.20 (fake)",
                f"    events per second: {v:.2f}",
                f"    total time:  {secs:.4f}s",
                f"    total number of events: {round(v * secs)}",
                f"{v * secs:.2f} MiB transferred ({v:.2f} MiB/sec)",
                f"    read, MiB/s:  {v / 10:.2f}",
                f"    written, MiB/s:  {v / 20:.2f}",
            ]
        )

    def _metrics(self, value: float) -> dict[str, float]:
        """Counts per operation that scale with the fake's speed: its CPU
        time is its time, a page fault per op, a context switch per 100."""
        return {
            "page_faults": 1.0 * self.scale,
            "context_switches": 0.01 * self.scale,
            "cpu_user_ns": value * 0.25,
            "cpu_sys_ns": value * 0.75,
        }

    def _process_mean(self, bench: str) -> float:
        """A fresh process's mean time: stable per benchmark, its own noise, now and then a slow one."""
        base = 100.0 + zlib.crc32(bench.encode()) % 900
        mean = base * self.scale * math.exp(self.rng.gauss(0, self.process_noise))  # times are positive
        if self.boot_sd:  # this boot's own offset for this benchmark, the same for each of its processes
            key = f"{self.state_of}|{self.boot}|{bench}"
            mean *= math.exp(random.Random(zlib.crc32(key.encode())).gauss(0, self.boot_sd))
        if self.slow_share and self.rng.random() < self.slow_share:
            mean *= self.slow_by
        return mean

    def run(self, bench: str, rest: list[str], timeout: float, await_step: Callable[[float], None]) -> Iterator[str]:
        end = time.monotonic() + timeout  # a real agent is killed there (proc.stream_lines)
        stepping = "--step" in rest
        rest = [a for a in rest if a != "--step"]
        opts = dict(zip(rest[::2], rest[1::2], strict=False))  # a last option without its value: dropped
        samples, warmup, count = self._sizes(bench, opts)
        mean, ref = self._state(bench, stepping)
        if self.options.get("skip") == bench:
            yield _line(type="skip", bench=bench, reason="fake target skips it")
            yield _line(type="done", bench=bench)
            return
        yield _line(type="calibration", bench=bench, instance=0, iters=1000, ops_per_iter=1, overhead=0.01, unit="ns")
        if stepping:
            yield _line(type="ready", bench=bench)
        for s in range(warmup + samples + count):
            if stepping and s < warmup + samples:
                await_step(end)
            yield from self._mishaps(bench, s, end, timed="--iters" in opts, mean=mean, first=warmup + 1)
            counting = s >= warmup + samples
            if counting and s == warmup + samples:
                yield _line(type="counting", bench=bench, instance=0)
            v = mean * math.exp(self.rng.gauss(0, self.noise))
            if stepping and self.host_noise:  # the host's state of this moment, shared with the other side's sample
                v *= HOST.step(self.host_noise, self.host_rho)
            extra = {"counting": True, "metrics": self._metrics(v)} if counting else {}
            yield _line(
                type="sample",
                bench=bench,
                unit="ns",
                instance=0,
                seq=s,
                warmup=s < warmup,
                iters=1000,
                ops=1000,
                value=v,
                overhead=0.01,
                tsc_per_op=v * 2,
                cpu=int(opts.get("--cpu", -1)),
                **extra,
                **ref,
            )
        yield _line(type="done", bench=bench)

    def _sizes(self, bench: str, opts: dict[str, str]) -> tuple[int, ...]:
        """A process's samples, warmup and counted batches; which boot it ran on joins `ran`."""
        samples, warmup, count = (int(opts.get(k, d)) for k, d in (("--samples", 5), ("--warmup", 1), ("--count", 0)))
        self.ran.append((bench, self.boot, "--iters" in opts and not count))
        return samples, warmup, count

    def _state(self, bench: str, stepping: bool) -> tuple[float, dict[str, list[float]]]:
        """A fresh process's mean and, with host_noise (not stepped: a
        stepped sample takes the host's state of its own moment), the host's
        state it starts in, which its reference readings see too (and
        nothing of scale or the process)."""
        mean = self._process_mean(bench)
        if not (self.host_noise and not stepping):
            return mean, {}
        state = HOST.step(self.host_noise, self.host_rho)
        ref = [REF_NS * state * math.exp(self.rng.gauss(0, self.noise / 4)) for _ in range(2)]
        return mean * state, {"ref_ns": ref}

    def _mishaps(self, bench: str, s: int, end: float, *, timed: bool, mean: float, first: int) -> Iterator[str]:
        """What the options make of sample s before it: a delay (killed at
        the timeout, as a real agent is), a malformed line, a crash in a
        timed process, a hostile line after the first timed sample."""
        if self.delay:
            if time.monotonic() + self.delay > end:
                time.sleep(max(0.0, end - time.monotonic()))
                raise ChildFailed(-9, "", timed_out=True)
            time.sleep(self.delay)
        if self.options.get("garbage") == bench and s == 2:
            yield "this is not json"
        if self.options.get("crash") == bench and s == 2 and timed:  # a timed process
            raise ChildFailed(-11, "fake agent: Segmentation fault")
        if self.hostile and s == first and timed:
            yield json.dumps(
                {
                    "schema": 1,
                    "type": "sample",
                    "bench": bench,
                    "unit": "ns",
                    "instance": 0,
                    "seq": s,
                    "warmup": False,
                    "iters": 1000,
                    "ops": 1000,
                    "value": mean,
                    "overhead": 0.01,
                    "tsc_per_op": mean,
                    "cpu": -1,
                    **HOSTILE[self.hostile],
                }
            )


REF_NS = 50.0  # the fake reference loop's step, ns (with host_noise: it follows the host's state)

# what a compromised guest, container or ssh host can print in a sample line
HOSTILE: dict[str, dict[str, float]] = {
    "huge_value": {"value": 1e308},
    "huge_int": {"ops": 10**400},
    "huge_seq": {"seq": 2**70},
    "huge_instance": {"instance": 2**63},
    "bool_iters": {"iters": True},
}


class _Host:
    """The shared state of a simulated busy host (one per controller)."""

    def __init__(self) -> None:
        self.reset()

    def reset(self, seed: int = 0) -> None:
        self.rng, self.level = random.Random(seed), 0.0

    def step(self, sd: float, rho: float) -> float:
        self.level = rho * self.level + self.rng.gauss(0, sd)
        return math.exp(self.level)


HOST = _Host()


def _line(**kw) -> str:
    line = json.dumps({"schema": 1, **kw})
    parse_line(line)  # the fake never says what the real agent could not
    return line
