"""A started target's host probe (hostprobe.py), for the kinds that run a
process here (guests, containers): made once the target is up, its idle
cost measured, the pause the agent takes before a counted batch settled
by a round trip over the channel, its facts, and the host processes the
target is made of.  HostProbing gives these to ChannelTarget."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from typing import Protocol

from ..hostprobe import HostProbe
from ..hostproc import descendants, idle_cpu_pct


class Commands(Protocol):
    """What the probe asks of a target's channel: a command's answer."""

    def command(self, line: str, timeout: float) -> Iterator[str]: ...


class HostProbing:
    """The host probe of a target launched here (p), reached over a channel."""

    count_settle_ms: int
    host_probe: HostProbe | None
    idle_cpu: float | None
    probe_note: str
    p: subprocess.Popen | None
    channel: Commands | None

    IDLE_WINDOW = 2.0  # seconds the idle guest is watched after boot
    idle_rates: dict[str, float] | None = None  # the host probe's idle rates at the first boot (start_probe)

    def start_probe(self, roots, qmp=None, vcpu_tids=None, parts=None) -> None:
        """The host probe of this target, and its idle cost over IDLE_WINDOW
        (the idle CPU reported with the run comes from it).  Booted again
        (compare --reboot), the target keeps its first boot's idle rates:
        the same guest idles alike, and the window would cost every round."""
        assert self.p is not None, "started"
        try:
            self.host_probe = HostProbe(roots, qmp=qmp, vcpu_tids=vcpu_tids, parts=parts)
        except OSError as e:
            self.probe_note = f"no host probe: {e}"
            if self.idle_cpu is None:
                self.idle_cpu = idle_cpu_pct(self.p.pid, window=self.IDLE_WINDOW)
            return
        if self.idle_rates is not None:
            self.host_probe.idle = dict(self.idle_rates)
            self.count_settle_ms = self.settle_for_the_host()
            return
        self.host_probe.measure_idle(self.IDLE_WINDOW)
        self.idle_rates = dict(self.host_probe.idle)
        rate = self.host_probe.idle.get("host_cpu_ns")
        self.idle_cpu = rate / 1e7 if rate is not None else idle_cpu_pct(self.p.pid, window=self.IDLE_WINDOW)
        self.count_settle_ms = self.settle_for_the_host()

    def close_probe(self) -> None:
        """Let go of the host probe (its counters, a KVM guest's monitor)."""
        if self.host_probe is not None:
            self.host_probe.close()
            self.host_probe = None

    PINGS = 3
    MAX_SETTLE_MS = 2000

    def settle_for_the_host(self) -> int:
        """The agent's pause between its "counting" line and its counted
        batch must outlast that line's way to the host and the host's first
        reading of its probe, or the batch's first operations go uncounted:
        the class's pause, or twice a PING's round trip and a reading where
        that is longer (a slow controller: vmtax inside a TCG guest, driving
        a guest nested in it, is ~20 ms late), MAX_SETTLE_MS at most.  The
        round trip is the median of PINGS."""
        assert self.channel is not None and self.host_probe is not None, "started, its probe made"
        took = []
        for _ in range(self.PINGS):  # their median: one slow answer on a busy host sets no pause
            t0 = time.monotonic()
            list(self.channel.command("PING", 30))
            took.append(time.monotonic() - t0)
        rtt = sorted(took)[len(took) // 2]
        t0 = time.monotonic()
        self.host_probe.enable()
        try:
            self.host_probe.read()
        finally:
            self.host_probe.disable()
        need = 2000 * (rtt + time.monotonic() - t0)
        return int(min(self.MAX_SETTLE_MS, max(type(self).count_settle_ms, need)))

    def probe_facts(self) -> dict:
        if self.host_probe is not None:
            return {**self.host_probe.facts(), "count_settle_ms": self.count_settle_ms}
        return {"host_probe": "nothing", "host_probe_missing": self.probe_note} if self.probe_note else {}

    def host_pids(self) -> list[int]:
        if self.p is None:
            return []
        if self.host_probe is not None:
            self.host_probe.refresh()
            return list(self.host_probe.pids)
        return descendants(self.p.pid)
