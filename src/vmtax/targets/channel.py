"""The framed line channel to vmtax-shell inside a guest or container, and
the base class of every target that runs one.

Host -> guest: one command per line (`RUN <agent args>`, `EXEC <argv>` for a
workload's provisioned tools, `PING`, `POWEROFF`).
Guest -> host: the agent's stdout lines, then `@@VMTAX-END <status>`.
A line is never lost or split: the transport is a pipe or a serial port
whose QEMU backend is a pipe, and both ends read whole lines.
"""

from __future__ import annotations

import os
import queue
import shlex
import shutil
import subprocess
import threading
import time
from abc import abstractmethod
from collections.abc import Callable, Iterator
from pathlib import Path

from .. import proc
from ..errors import TargetError
from ..proc import ChildFailed
from .base import Target, option_number
from .probing import HostProbing

READY = "@@VMTAX-READY"
STOP = "STOP"  # the line that ends an agent held with --step; vmtax-shell answers nothing to it
END = "@@VMTAX-END "


class Channel:
    def __init__(self, p: subprocess.Popen, name: str, log: Path | None = None):
        assert p.stdin is not None and p.stdout is not None, "a channel's process has its pipes"
        self.p, self.name, self.log = p, name, log
        self.stdin, self.stdout = p.stdin, p.stdout
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.broken: str | None = None
        self._refused: str | None = None  # why the pump stopped reading
        self._lock = threading.Lock()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        try:
            for raw in proc.read_lines(self.stdout):
                self.lines.put(raw.decode("utf-8", "replace").rstrip("\r\n"))
        except TargetError as e:
            self._refused = str(e)
        self.lines.put(None)

    def _next(self, deadline: float) -> str:
        left = deadline - time.monotonic()
        if left <= 0:  # lines still coming past it (a flood) do not hold the command
            raise TimeoutError
        try:
            line = self.lines.get(timeout=left)
        except queue.Empty:
            raise TimeoutError from None
        if line is None:
            self.broken = (
                f"{self.name}: {self._refused}"
                if self._refused
                else f"{self.name} went away (exit status {self.p.poll()}){self.console_tail()}"
            )
            raise TargetError(self.broken)
        return line

    def console_tail(self, n: int = 3) -> str:
        """The console log's last n lines that are not blank (read from its last 64 KiB)."""
        try:
            text = proc.read_tail(self.log) if self.log else ""
        except OSError:
            return ""
        lines = [line for line in text.splitlines() if line.strip()]
        return ("; console: " + " | ".join(lines[-n:])) if lines else ""

    def wait_ready(self, timeout: float, failed: Callable[[], str | None] | None = None, why: str = "") -> None:
        """Wait for the guest's ready line.  failed(), asked every half
        second, names a boot that has failed without ending (a guest whose
        init died and that hangs instead of exiting): TargetError with it
        at once, not at the timeout.  why: what set the timeout, said with it."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                if self._next(min(deadline, time.monotonic() + 0.5)) == READY:
                    return
                continue
            except TimeoutError:
                pass
            failure = failed() if failed else None
            if failure:
                raise TargetError(failure)
            if time.monotonic() >= deadline:
                raise TargetError(f"{self.name} did not become ready within {timeout:.0f} s{why}{self.console_tail()}")

    def command(self, line: str, timeout: float) -> Iterator[str]:
        """Send one command; yield the answer's lines; ChildFailed on a
        non-zero status.  An answer left half-read is drained, so the next
        command starts in step."""
        if self.broken:
            raise TargetError(self.broken)
        with self._lock:
            deadline = time.monotonic() + timeout
            self._write(line)
            done = False
            try:
                while True:
                    try:
                        out = self._next(deadline)
                    except TimeoutError:
                        self.broken = f"{self.name}: no answer within {timeout:.0f} s"
                        raise TargetError(self.broken) from None
                    if out.startswith(END):
                        done = True
                        self._ended(out)
                        return
                    yield out
            finally:
                if not done and not self.broken:
                    self._drain(deadline)

    def _write(self, line: str) -> None:
        try:
            self.stdin.write(line.encode() + b"\n")
            self.stdin.flush()
        except (OSError, ValueError) as e:  # ValueError: written to after it was closed
            self.broken = f"{self.name}: cannot write to the channel ({e})"
            raise TargetError(self.broken) from None

    def _ended(self, out: str) -> None:
        """An answer's end line: ChildFailed on a non-zero status, TargetError on a malformed one."""
        status = _status(out)
        if status is None:
            self.broken = f"{self.name}: malformed end-of-answer line {out[:60]!r}"
            raise TargetError(self.broken)
        if status != 0:
            raise ChildFailed(status, self.console_tail().removeprefix("; console: "))

    def send(self, line: str) -> None:
        """One line to what reads the channel now, outside any command: the
        go line of a run held at the barrier (its command is being read in
        another thread)."""
        if self.broken:
            raise TargetError(self.broken)
        self._write(line)

    def _drain(self, deadline: float) -> None:
        try:
            while not self._next(min(deadline, time.monotonic() + 30)).startswith(END):
                pass
        except (TimeoutError, TargetError):
            self.broken = self.broken or f"{self.name}: channel out of step"


def _status(frame: str) -> int | None:
    """The exit status in an end-of-answer line; None if it is not one."""
    text = frame[len(END) :].strip()
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 3 else None


class ChannelTarget(HostProbing, Target):
    """A target reached through vmtax-shell over a Channel: QEMU, UML,
    containers.  Subclasses say how to launch; this class boots, measures
    boot time, and tears down on every path."""

    capabilities = frozenset({"barrier", "parallel_start", "step"})

    boot_timeout = 120.0  # seconds; the boot_timeout= option overrides it
    count_settle_ms = 20  # the agent's line crosses the channel before the host counts

    def __init__(self, name: str, options: dict[str, str]):
        super().__init__(name, options)
        self.boot_timeout = option_number(
            name, options, "boot_timeout", self.boot_timeout, lo=0.0, hi=3600.0, open_lo=True
        )
        self.p: subprocess.Popen | None = None
        self.channel: Channel | None = None
        self.workdir: Path | None = None
        self.probe_note = ""

    @abstractmethod
    def launch(self) -> subprocess.Popen:
        """Start the guest/container with the channel on stdin/stdout."""

    def spawn(self, argv: list[str], env: dict | None = None, cpus: list[int] | None = None, **kw) -> subprocess.Popen:
        """The guest's or container's processes, pinned to the target's CPU
        (cpus: to these instead: what relays its channel, kept apart)."""
        with open(self.console_log, "ab") as log:
            return proc.spawn(
                argv,
                cpu=cpus or self.host_cpu,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                env=env,
                cwd=self.workdir,
                **kw,
            )

    @property
    def console_log(self) -> Path:
        assert self.workdir is not None, "begin_start made it"
        return self.workdir / "console.log"

    def scratch_dir(self) -> str | None:
        return "/tmp"  # a tmpfs in vmtax's guests and containers

    def root_pids(self) -> list[int]:
        """The host process launched (what a host probe watches, with its descendants)."""
        assert self.p is not None, "started"
        return [self.p.pid]

    def start(self) -> None:
        self.begin_start()
        self.end_start()

    def begin_start(self) -> None:
        """The first half of start(): launch.  In the thread that outlives
        the target: its processes die with the thread that spawned them
        (PR_SET_PDEATHSIG), so N guests are launched from one thread and
        boot in parallel (vmtax scale), each finished by end_start()."""
        proc.sweep()
        self.workdir = proc.private_dir(self.kind)
        self._launched = time.monotonic()
        self.p = self.launch()
        self.channel = Channel(self.p, self.name, self.console_log)

    def end_start(self) -> None:
        """The second half of start(), in any thread: wait until the guest
        is ready, then after_boot()."""
        assert self.channel is not None, "begin_start opened it"
        timeout, why = self.boot_timeout, ""
        if self.start_by is not None and self.start_by - time.monotonic() < timeout:
            timeout = max(0.1, self.start_by - time.monotonic())
            why = " (the run's hard stop: --max-time and its grace)"
        self.channel.wait_ready(timeout, self.boot_failed, why)
        self.boot_s = time.monotonic() - self._launched
        self.after_boot()

    def boot_failed(self) -> str | None:
        """Why the boot has failed while the guest has not ended, where the
        kind can tell from its console; None."""
        return None

    def after_boot(self) -> None:
        """Hook: measure idle CPU, memory overhead..."""

    def run_agent(self, args: list[str], timeout: float) -> Iterator[str]:
        if not self.channel:
            raise TargetError(f"{self.name} is not started")
        return self.channel.command("RUN " + shlex.join(args), timeout)

    def run_tool(self, argv: list[str], timeout: float) -> Iterator[str]:
        if not self.channel:
            raise TargetError(f"{self.name} is not started")
        if any("\n" in a or "\r" in a for a in argv):
            raise TargetError("a command for the channel must fit on one line")
        return self.channel.command("EXEC " + shlex.join(argv), timeout)

    def run_gated(self, argv: list[str], timeout: float, tool: bool = False) -> Iterator[str]:
        """GO: the agent reads its go line from the channel; WAIT: the
        shell holds a tool until the go line (guest/vmtax-shell)."""
        if not self.channel:
            raise TargetError(f"{self.name} is not started")
        if any("\n" in a or "\r" in a for a in argv):
            raise TargetError("a command for the channel must fit on one line")
        return self.channel.command(("WAIT " if tool else "GO ") + shlex.join(argv), timeout)

    def go(self) -> None:
        if not self.channel:
            raise TargetError(f"{self.name} is not started")
        self.channel.send("go")

    def step(self, warm: bool = False) -> None:
        if not self.channel:
            raise TargetError(f"{self.name} is not started")
        self.channel.send("warm\ngo" if warm else "go")  # one write: one wake-up of the agent

    def release(self) -> None:
        if self.channel and not self.channel.broken:
            self.channel.send(STOP)  # the agent stops on it; vmtax-shell ignores it (guest/vmtax-shell)

    def stop(self) -> None:
        self.close_probe()
        if self.p is not None:
            proc.kill_group(self.p, grace=0.5)
            self.p = None
        self.channel = None
        if self.workdir and not os.environ.get("VMTAX_KEEP_WORKDIR"):
            shutil.rmtree(self.workdir, ignore_errors=True)
