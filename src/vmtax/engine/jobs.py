"""What one process measures (Job): one micro benchmark of the agent's
table, or every figure of one workload's tool run."""

from __future__ import annotations

from dataclasses import dataclass

from ..model import BenchSpec
from ..suite import workloads
from ..suite.workloads import Workload
from ..targets.base import Target


@dataclass(frozen=True)
class Job:
    """What one process measures: one micro benchmark, or every figure of
    one workload."""

    specs: tuple[BenchSpec, ...]
    workload: Workload | None = None

    @property
    def name(self) -> str:
        return self.workload.name if self.workload else self.specs[0].name

    def unfit(self, target: Target) -> str:
        """Why this job's workload cannot run on `target` as it is (direct
        I/O on a tmpfs, no network to a peer on the host); '' when it can."""
        w = self.workload
        if w is None:
            return ""
        if w.needs_disk and not target.on_disk():
            return (
                f"{w.name} needs direct I/O and {target.name}'s scratch directory is a tmpfs: "
                "give it a disk (qemu:disk=virtio; local:dir=/var/tmp)"
            )
        if w.peer and target.peer_address() is None:
            return (
                f"{w.name} needs a peer on the host and {target.name} has no network to it: "
                "give it a NIC (qemu:nic=virtio)"
            )
        return ""


def jobs_of(specs: list[BenchSpec]) -> list[Job]:
    """Specs grouped into jobs, in the order given (a workload where its
    first figure is)."""
    jobs: list[Job] = []
    grouped: dict[str, list[BenchSpec]] = {}
    for spec in specs:
        w = workloads.of_spec(spec.name) if spec.kind == "workload" else None
        if w is None:
            jobs.append(Job((spec,)))
        elif w.name in grouped:
            grouped[w.name].append(spec)
        else:
            grouped[w.name] = [spec]
            jobs.append(Job((), w))
    return [Job(tuple(grouped[j.workload.name]), j.workload) if j.workload else j for j in jobs]
