"""The agent in a container: podman (with runc) on vmtax's own busybox
root directory -- no image registry needed -- or, where no container
engine works, Linux namespaces plus chroot (`unshare`).  The target records
which one was used.

Options: engine=podman|unshare|auto (default auto: podman if a container
actually starts, else unshare); net=none|host|bridge|slirp4netns (default
none: loopback only).  host shares the host's network stack (the peers of
the net suite on the host's loopback); bridge is the shape of podman's
default network -- a veth from the container to a Linux bridge, the host's
side at the bridge's address, the container's default route -- with that
host side in a network namespace vmtax makes for the run (netns.py), its
peers beside it: the host's own interfaces and routes are never touched;
slirp4netns is the rootless user-mode stack (the host's loopback at
10.0.2.2).  unshare offers none and host.  runtime=runsc is gVisor
(gvisor.py): net none or host, platform=ptrace|systrap|kvm, pinned from the
host (the sandbox's processes on the run's CPU by the container's cpuset;
the agent inside, which sees the Sentry's CPUs, not the host's, pins
nothing).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import uuid
from dataclasses import replace
from functools import lru_cache

from .. import guest, proc
from ..errors import TargetError, UserError
from . import gvisor
from .channel import ChannelTarget
from .containernet import ContainerNet
from .podman import PodmanContainer, sweep_containers

# What this machine's podman needs (rootless limits are low inside a microVM).
# The root is vmtax's cached directory, mounted read-only: a container cannot
# change the agent that later runs record the hash of.
PODMAN_RUN = [
    "podman",
    "run",
    "--rm",
    "-i",
    "--runtime",
    "runc",
    "--ulimit",
    "nofile=1024:1024",
    "--ulimit",
    "nproc=1024:1024",
    "--read-only",
    "--tmpfs",
    "/tmp",
    "--log-driver",
    "none",
]
SHELL = ["/bin/sh", "/vmtax-shell"]
# unshare gets no /dev of its own: make the few nodes a process expects.
UNSHARE_INIT = (
    "mount -t proc proc /proc && mount -t tmpfs tmp /tmp && mount -t tmpfs dev /dev && "
    "mknod -m 666 /dev/null c 1 3 && mknod -m 666 /dev/zero c 1 5 && "
    "mknod -m 666 /dev/urandom c 1 9 && ln -s /proc/self/fd /dev/fd && "
    "ln -s /proc/self/fd/2 /dev/stderr && ip link set lo up && "
    "VMTAX_STDERR=/dev/stderr exec /bin/sh /vmtax-shell"
)
# unshare: the root directory bind-mounted read-only inside the new mount
# namespace, then chroot; paths travel as arguments, never inside the script.
UNSHARE_ROOT = 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && exec chroot "$1" /bin/sh -c "$2"'


def podman_run(runtime: str = "runc") -> list[str]:
    """podman run's fixed arguments, with the OCI runtime given."""
    return [
        ("--runtime" if a == "--runtime" else runtime if prev == "--runtime" else a)
        for prev, a in zip([None, *PODMAN_RUN], PODMAN_RUN, strict=False)
    ]  # each with the one before it


VERSION_TIMEOUT = 10.0  # seconds `RUNTIME --version` may take


def oci_runtime(text: str, name: str) -> str:
    """runtime=runc|crun|PATH -> the executable podman runs containers
    with (what an A/B of two runtimes names); UserError where there is none."""
    path = shutil.which(text)
    if not path:
        hint = " (apt install crun)" if text == "crun" else ""
        raise UserError(f"target '{name}': runtime={text}: no such executable OCI runtime{hint}")
    first, timed_out = _ask_version(path)
    if timed_out:
        raise UserError(
            f"target '{name}': runtime={text}: its --version timed out ({VERSION_TIMEOUT:.0f} s): not an OCI runtime"
        )
    if not first:
        raise UserError(f"target '{name}': runtime={text} is not an OCI runtime (its --version names none)")
    return path


def runtime_version(path: str) -> str:
    """The first line of `RUNTIME --version` ('runc version 1.1.5'); '' if it says no such thing."""
    return _ask_version(path)[0]


@lru_cache(maxsize=8)
def _ask_version(path: str) -> tuple[str, bool]:
    """(the version line, '' if none; whether it timed out, then killed with all it started)."""
    try:
        status, out = proc.run_bounded([path, "--version"], VERSION_TIMEOUT)
    except OSError:
        return "", False
    first = out.strip().splitlines()[0] if out.strip() else ""
    return (first if re.match(r"^\S+ version \S+", first) else ""), status is None


@lru_cache(maxsize=1)
def podman_works() -> tuple[bool, str]:
    if not shutil.which("podman"):
        return False, "podman is not installed"
    try:
        root = guest.rootfs_dir()
        p = subprocess.run(
            PODMAN_RUN + ["--network", "none", "--rootfs", str(root), "/bin/busybox", "true"],
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError, TargetError, UserError) as e:
        return False, f"podman failed: {e}"
    if p.returncode != 0:
        last = (p.stderr.strip().splitlines() or ["?"])[-1]
        return False, f"podman failed: {last[:160]}"
    return True, ""


def unshare_works() -> tuple[bool, str]:
    if not shutil.which("unshare") or not shutil.which("chroot"):
        return False, "unshare/chroot missing (util-linux, coreutils)"
    if os.geteuid() != 0:
        return False, "unshare+chroot needs root"
    return True, ""


class ContainerTarget(ChannelTarget):
    kind = "container"
    summary = "the agent in a container (podman+runc, else unshare+chroot; runtime=runsc: gVisor)"
    allowed_options = frozenset({"engine", "boot_timeout", "net", "runtime", "platform"})
    boot_timeout = 60.0

    def __init__(self, name: str, options: dict[str, str]):
        super().__init__(name, options)
        self.engine_wanted = options.get("engine", "auto")
        if self.engine_wanted not in ("auto", "podman", "unshare"):
            raise UserError(f"engine must be podman, unshare or auto, got '{self.engine_wanted}'")
        self.network = ContainerNet(name, options.get("net", "none"), self.engine_wanted)
        self.net = self.network.net
        if "runtime" in options and self.engine_wanted == "unshare":
            raise UserError(f"target '{name}': runtime= is podman's OCI runtime: engine=unshare has none")
        # unusable: why it cannot run here: --skip-unavailable leaves it out, else one line at the start
        self.runtime, self.platform, self.unusable = runtime_option(name, options, self.net)
        self.engine: str | None = None
        self.engine_note = ""
        self.relay_cpus: list[int] = []  # podman: where its client and conmon run (the container on host_cpu)
        # the controller's pid in the name: a later run removes what a killed one left
        self.container_name = f"vmtax-{os.getpid()}-{uuid.uuid4().hex[:10]}"
        self.podman = PodmanContainer(self.container_name)

    @classmethod
    def available(cls) -> tuple[bool, str]:
        ok, why = engine_available()
        return ok, why + gvisor_note() if ok and why == "podman with runc" else why

    def usable(self) -> tuple[bool, str]:
        if self.unusable:
            return False, self.unusable
        if self.platform is None:
            return engine_available()  # gVisor's platforms are not probed for a runc container
        ok, why = podman_works()  # gVisor's sandbox needs podman: no unshare stands in for it
        if not ok:
            return False, why
        found = gvisor.probe(gvisor.runsc(self.runtime), self.platform, podman_run(self.runtime))
        return (False, f"gVisor: {found}") if found else (True, f"gVisor on platform {self.platform}")

    def check(self) -> None:
        if self.unusable:
            raise UserError(f"target '{self.name}': {self.unusable}")

    def agent_cpu(self) -> int | None:
        """gVisor's agent sees the Sentry's CPUs, not the host's: the
        sandbox is pinned from the host (its cpuset), the agent not at all."""
        return None if self.platform else super().agent_cpu()

    def choose_engine(self) -> str:
        if self.engine_wanted != "auto":
            return self.engine_wanted
        ok, why = podman_works()
        if ok:
            return "podman"
        if self.net in ("bridge", "slirp4netns") or self.platform:
            what = "gVisor" if self.platform else f"net={self.net}"
            raise TargetError(f"{self.name}: {what} needs podman, which does not work here: {why}")
        self.engine_note = f"podman unusable here, used unshare+chroot: {why}"
        return "unshare"

    def launch(self) -> subprocess.Popen:
        self.engine = self.choose_engine()
        failed = gvisor.known_failure(gvisor.runsc(self.runtime), self.platform) if self.platform else ""
        if failed:  # a platform that hangs here would hold the run for its boot_timeout
            raise TargetError(f"{self.name}: gVisor: {failed} (vmtax targets probed it on this host boot)")
        root = str(guest.rootfs_dir(self.files))
        if self.engine == "podman":
            sweep_containers()
            net = self.network.podman_network()
            self.relay_cpus = proc.other_cpus(self.host_cpu)
            self.podman.cidfile = self.console_log.with_name("cid")
            pin_inside = bool(self.relay_cpus or self.platform)  # gVisor's sandbox: pinned by its cpuset alone
            argv = podman_run(self.runtime) + [
                *(gvisor.runtime_flags(self.platform, self.net) if self.platform else []),
                "--cidfile",
                str(self.podman.cidfile),
                *(["--cpuset-cpus", str(self.host_cpu)] if self.host_cpu is not None and pin_inside else []),
                "--network",
                net,
                "--name",
                self.container_name,
                "--env",
                "VMTAX_STDERR=/dev/stderr",
                "--rootfs",
                root,
                *SHELL,
            ]
            # podman's client and conmon relay the channel, every go line and sample line: on the
            # measured CPU beside the agent they would take time from its samples (docs/method.md,
            # lockstep pairs), so they run on the other CPUs
            return self.spawn(argv, cpus=self.relay_cpus)
        return self.spawn(unshare_argv(root, self.net))

    def stop(self) -> None:
        cid = self.podman.cid()
        ready = self.boot_s is not None
        super().stop()
        if self.engine == "podman":  # conmon outlives the client: remove the container itself
            self.podman.remove(ready)
        if self.platform and cid:  # a sandbox whose start hung outlives podman rm
            gvisor.kill_leftovers(cid)
        self.network.close()

    def after_boot(self) -> None:
        self.network.find_host(self.run_tool)
        if self.platform:  # the Sentry's and the Gofer's own threads counted apart as well
            self.start_probe(self._root_pids, parts=self._gvisor_parts())
        else:
            self.start_probe(self._root_pids)

    def peer_address(self) -> str | None:
        return self.network.host_seen_at

    def peer_listen(self) -> tuple[str, object]:
        return self.network.listen() or super().peer_listen()

    def memory_need_mb(self) -> float:
        return 64.0  # podman's client and conmon, busybox sh and the agent: ~35 MiB here

    def _root_pids(self) -> list[int]:
        """The container's own processes on the host (PodmanContainer.root_pids);
        under unshare what vmtax started."""
        return self.podman.root_pids(bool(self.platform)) if self.engine == "podman" else self.root_pids()

    def _gvisor_parts(self) -> dict[str, list[int]]:
        return self.podman.gvisor_parts()

    def own_facts(self) -> dict:
        return {
            "target_kind": self.kind,
            "engine": self.engine,
            "engine_note": self.engine_note,
            "net": self.net,
            "relay_on": self.relay_cpus or None,
            **(
                {"runtime": self.runtime, "runtime_version": runtime_version(self.runtime)}
                if self.engine == "podman"
                else {}
            ),
            **(self._gvisor_facts() if self.platform else {}),
            **self.network.facts(),
            **self.probe_facts(),
        }

    def _gvisor_facts(self) -> dict:
        info = gvisor.runsc(self.runtime)
        return {
            "gvisor_version": info.version,
            "gvisor_platform": self.platform,
            "gvisor_platforms": ", ".join(info.platforms),
            "gvisor_network": gvisor.NETWORK[self.net],
            "gvisor_pinned": f"from the host: the sandbox's cpuset {self.host_cpu}; the agent inside pins nothing"
            if self.host_cpu is not None
            else "unpinned",
        }

    def facts(self) -> dict:
        facts = super().facts()
        if self.platform and "gvisor_counters" not in facts:
            facts["gvisor_counters"] = gvisor.counters_inside(facts.get("counters"))
        return facts

    def info(self):
        return replace(super().info(), accel=self.engine, idle_cpu_pct=self.idle_cpu)


def runtime_option(name: str, options: dict[str, str], net: str) -> tuple[str, str | None, str]:
    """podman's OCI runtime and, for gVisor, its platform (gvisor.check_options),
    and why the target cannot run here ('': it can): runtime=runsc where runsc
    is not installed is left for usable() to say."""
    text = options.get("runtime", "runc")
    if text == "runsc" and not shutil.which("runsc"):
        platform = options.get("platform", "ptrace")
        if platform not in gvisor.PLATFORMS or net not in gvisor.NETWORK:
            raise UserError(
                f"target '{name}': platform must be one of {', '.join(gvisor.PLATFORMS)} and net one of "
                f"{', '.join(gvisor.NETWORK)} with gVisor"
            )
        return "runsc", platform, "gVisor's runsc is not installed (apt install runsc; make setup does)"
    path = oci_runtime(text, name)
    return path, gvisor.check_options(name, options, runtime_version(path), text, net), ""


def unshare_argv(root: str, net: str) -> list[str]:
    """unshare's argv: new namespaces (the network's too, but for net=host), the root read-only, its shell."""
    init = UNSHARE_INIT.replace("ip link set lo up && ", "") if net == "host" else UNSHARE_INIT
    return [
        "unshare",
        "--fork",
        "--pid",
        "--mount",
        "--uts",
        "--ipc",
        *([] if net == "host" else ["--net"]),
        "--kill-child",
        "/bin/sh",
        "-c",
        UNSHARE_ROOT,
        "sh",
        root,
        init,
    ]


def engine_available() -> tuple[bool, str]:
    ok, why = podman_works()
    if ok:
        return True, "podman with runc"
    ok2, why2 = unshare_works()
    return ok2, f"unshare+chroot ({why})" if ok2 else f"{why}; {why2}"


def gvisor_note() -> str:
    """vmtax targets' word on gVisor: runsc's version and which platforms
    boot here (each probed once per host boot), or why none can."""
    path = shutil.which("runsc")
    if not path:
        return "; gVisor (runtime=runsc): not installed (apt install runsc)"
    try:
        info = gvisor.runsc(path)
    except UserError as e:
        return f"; gVisor: {e}"
    found = {p: gvisor.probe(info, p, podman_run(path)) for p in info.platforms}
    works = [p for p, why in found.items() if not why]
    fails = "; ".join(f"{p}: {why}" for p, why in found.items() if why)
    return (
        f"; gVisor (runtime=runsc) {info.version}: "
        + (f"platform {', '.join(works)} works" if works else "no platform works")
        + (f" ({fails})" if fails else "")
    )
