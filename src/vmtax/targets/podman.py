"""A podman container seen from the host: its processes (its init, or
gVisor's Sentry and Gofer below its conmon), its id, and its removal,
conmon included; and the sweep of what a vmtax controller that is gone
left behind."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path

from .. import proc
from ..hostproc import children, pid_alive, process_name

NAME = re.compile(r"^vmtax-(\d+)-[0-9a-f]+$")


_swept = False


def sweep_containers() -> None:
    """Remove the containers of vmtax controllers that are gone (once per run)."""
    global _swept
    if _swept:
        return
    _swept = True
    try:
        out = subprocess.run(
            ["podman", "ps", "-a", "--format", "{{.Names}}", "--filter", "name=^vmtax-"],
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return
    for pid in conmon_pids(_stale):  # a runtime hung on create: in no list of podman's
        proc.kill_tree(pid)
    stale = [n for n in out.split() if _stale(n)]
    if stale:
        subprocess.run(
            ["podman", "rm", "-f", "-t", "0", *stale], capture_output=True, timeout=120, stdin=subprocess.DEVNULL
        )


def end_conmon(name: str) -> None:
    """Kill the conmon of container `name` (it leaves podman's process
    group and session), with the runtime and whatever it started below it:
    a runtime that hangs on create keeps them running after podman's client
    is gone, and the container is in no list of podman's."""
    for pid in conmon_pids(lambda n: n == name):
        proc.kill_tree(pid)


def conmon_pids(named: Callable[[str], bool]) -> list[int]:
    """The conmon processes of the containers whose name `named` takes (`conmon ... -n NAME ...`)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().decode("utf-8", "replace").split("\0")
        except OSError:
            continue
        if os.path.basename(argv[0]) == "conmon" and any(a == "-n" and named(b) for a, b in pairwise(argv)):
            out.append(int(entry))
    return out


def _stale(name: str) -> bool:
    """A container of a vmtax controller that is gone (its pid in the name)."""
    m = NAME.match(name)
    return m is not None and int(m.group(1)) != os.getpid() and not pid_alive(int(m.group(1)))


class PodmanContainer:
    """One container of podman's, by its name (cidfile: where podman
    writes its id, once launched)."""

    def __init__(self, name: str):
        self.name = name
        self.cidfile: Path | None = None

    def root_pids(self, gvisor: bool) -> list[int]:
        """Its own processes on the host: its init (conmon's child), under
        gVisor every child of its conmon (the Sentry, the Gofer; the
        sandboxed program's host processes below the Sentry)."""
        pid, conmon = self.inspect("{{.State.Pid}} {{.State.ConmonPid}}")
        if gvisor and conmon:
            return [p for pids in self.gvisor_parts(conmon).values() for p in pids]
        return [pid] if pid else []

    def inspect(self, fmt: str) -> list[int]:
        out = subprocess.run(
            ["podman", "inspect", "--format", fmt, self.name],
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        ).stdout.split()
        got = [int(x) if x.isdigit() else 0 for x in out]
        return got + [0] * (fmt.count("{{") - len(got))

    def gvisor_parts(self, conmon: int | None = None) -> dict[str, list[int]]:
        """gVisor's host processes by what they are: conmon's children
        runsc-sandbox (the Sentry) and runsc-gofer (the Gofer)."""
        conmon = conmon or self.inspect("{{.State.ConmonPid}}")[0]
        parts: dict[str, list[int]] = {"sentry": [], "gofer": []}
        for pid in children(conmon) if conmon else []:
            prog = process_name(pid)
            for part in parts:
                if prog == ("runsc-sandbox" if part == "sentry" else "runsc-gofer"):
                    parts[part].append(pid)
        return parts

    def cid(self) -> str:
        try:
            return self.cidfile.read_text().strip() if self.cidfile else ""
        except OSError:
            return ""

    def remove(self, ready: bool) -> None:
        """conmon outlives podman's client: the container removed itself."""
        if not ready:  # a runtime hung on create: podman rm would wait on it too
            end_conmon(self.name)
        proc.run_bounded(["podman", "rm", "-f", "-t", "0", self.name], 60)
        end_conmon(self.name)
