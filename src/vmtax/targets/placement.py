"""Where a target runs and what it asks of its host: the host CPU it is
pinned to and the one its agent is given, the CPUs and memory it takes, the
host processes it is made of, and whose machine it runs on; and where its
agent works inside it (its scratch directory, the address a host-side peer
is reached at).  Placement gives a Target these answers, each kind
overriding what differs for it."""

from __future__ import annotations


class Placement:
    """A target's place on its host, as one agent process here has it."""

    host_cpu: int | None
    inject: float | None

    def pin(self, cpu: int | None) -> None:
        """Run this target's benchmarks on host CPU cpu (None: anywhere).
        Called before start(): a guest pins its hypervisor's processes."""
        self.host_cpu = cpu

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
