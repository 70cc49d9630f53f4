"""What a workload's tool run cost the host, per unit of its work (seed
003's figures of merit): the target's host CPU and context switches read
around the run, less its idle rate, and its peer's CPU (ToolCost)."""

from __future__ import annotations

import resource
import subprocess
import time

from ..hostprobe import switches, ticks
from ..hostproc import TICK
from ..metrics import WORK
from ..peers import start_peer
from ..proc import kill_group
from ..suite.workloads import Workload
from ..targets.base import Target


def host_cost(target: Target) -> dict[str, float] | None:
    """What the target has cost the host so far, read without a counter (a
    perf counter on QEMU's threads would tax the very run it measures): CPU
    seconds, user and system, of its host processes and the children they
    reaped (/proc ticks), and their threads' context switches; for the bare
    machine, of the tools it has run and reaped."""
    if target.mirror_host:
        r = resource.getrusage(resource.RUSAGE_CHILDREN)
        return {"user": r.ru_utime, "sys": r.ru_stime, "switches": float(r.ru_nvcsw + r.ru_nivcsw)}
    probe = target.host_probe
    if probe is None:
        return None
    probe.refresh()
    user, system = ticks(probe.pids)
    return {"user": user / TICK, "sys": system / TICK, "switches": float(switches(probe.pids))}


def per_unit(
    target: Target,
    work: str,
    values: dict[str, float],
    before: dict[str, float] | None,
    after: dict[str, float] | None,
    seconds: float,
    peer_s: float | None,
) -> dict[str, float]:
    """One tool run's host cost per unit of its work (metrics.WORK: per GB
    moved, per 1000 transactions), less the target's idle rate over it:
    seed 003's figures of merit.  {} when the tool counted no work."""
    w = WORK.get(work)
    if w is None:
        return {}
    done = values.get(w.key)
    if not done or done <= 0 or before is None or after is None:
        return {}
    units = done / w.size
    idle = target.host_probe.idle if target.host_probe is not None else {}
    du, ds = after["user"] - before["user"], after["sys"] - before["sys"]
    busy = max(0.0, du + ds - idle.get("host_cpu_ns", 0.0) / 1e9 * seconds)
    share = du / (du + ds) if du + ds > 0 else 0.0
    out = {
        "host_cpu_per_unit": busy * w.cpu_scale / units,
        "host_cpu_user_per_unit": busy * share * w.cpu_scale / units,
        "host_cpu_sys_per_unit": busy * (1 - share) * w.cpu_scale / units,
        "host_context_switches_per_unit": max(
            0.0, after["switches"] - before["switches"] - idle.get("host_context_switches", 0.0) * seconds
        )
        / units,
    }
    if peer_s is not None:
        out["peer_cpu_per_unit"] = peer_s * w.cpu_scale / units
    return out


class ToolCost:
    """Around one tool run (compare's): its peer on the host, where the
    workload has one, started first and killed on every exit (with); the
    target's host cost read just before the tool starts (begin) and as it
    ends (end); per_unit(values) then gives the run's cost per unit of work."""

    def __init__(self, target: Target, workload: Workload, port: int):
        self.target, self.workload, self.port = target, workload, port
        self.peer: subprocess.Popen[bytes] | None = None
        self.before: dict[str, float] | None = None
        self.after: dict[str, float] | None = None
        self.t0 = self.seconds = 0.0
        self.peer_s: float | None = None

    def __enter__(self) -> ToolCost:
        try:
            if self.workload.peer:
                self.peer = start_peer(self.workload, self.port, self.target.host_cpu, *self.target.peer_listen())
            self.before, self.t0 = host_cost(self.target), time.monotonic()
        except BaseException:
            self.__exit__()
            raise
        return self

    def end(self) -> None:
        self.after, self.seconds = host_cost(self.target), time.monotonic() - self.t0
        self.peer_s = sum(ticks([self.peer.pid])) / TICK if self.peer is not None else None

    def per_unit(self, values: dict[str, float]) -> dict[str, float]:
        w = self.workload.work
        return per_unit(self.target, w, values, self.before, self.after, seconds=self.seconds, peer_s=self.peer_s)

    def __exit__(self, *exc: object) -> None:
        if self.peer is not None:
            kill_group(self.peer)
            self.peer = None
