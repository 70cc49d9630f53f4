"""The agent in a container: podman (with runc) on vmtax's own busybox
root directory -- no image registry needed -- or, where no container
engine works, Linux namespaces plus chroot (`unshare`).  The target records
which one was used.

Options: engine=podman|unshare|auto (default auto: podman if a container
actually starts, else unshare).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from dataclasses import replace
from functools import lru_cache

from .. import guest
from ..errors import TargetError, UserError
from .channel import ChannelTarget

# What this machine's podman needs (rootless limits are low inside a microVM).
PODMAN_RUN = ["podman", "run", "--rm", "-i", "--runtime", "runc", "--network", "none",
              "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024",
              "--tmpfs", "/tmp", "--log-driver", "none"]
SHELL = ["/bin/sh", "/vmtax-shell"]
# unshare gets no /dev of its own: make the few nodes a process expects.
UNSHARE_INIT = ("mount -t proc proc /proc && mount -t tmpfs tmp /tmp && mount -t tmpfs dev /dev && "
                "mknod -m 666 /dev/null c 1 3 && mknod -m 666 /dev/zero c 1 5 && "
                "mknod -m 666 /dev/urandom c 1 9 && ln -s /proc/self/fd /dev/fd && "
                "ln -s /proc/self/fd/2 /dev/stderr && ip link set lo up && "
                "VMTAX_STDERR=/dev/stderr exec /bin/sh /vmtax-shell")


@lru_cache(maxsize=1)
def podman_works() -> tuple[bool, str]:
    if not shutil.which("podman"):
        return False, "podman is not installed"
    try:
        root = guest.rootfs_dir()
        p = subprocess.run(PODMAN_RUN + ["--rootfs", str(root), "/bin/busybox", "true"],
                           capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
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
    summary = "the agent in a container (podman+runc, else unshare+chroot)"
    allowed_options = frozenset({"engine", "boot_timeout"})
    boot_timeout = 60.0

    def __init__(self, name: str, options: dict[str, str]):
        super().__init__(name, options)
        self.engine_wanted = options.get("engine", "auto")
        if self.engine_wanted not in ("auto", "podman", "unshare"):
            raise UserError(f"engine must be podman, unshare or auto, got '{self.engine_wanted}'")
        self.engine: str | None = None
        self.engine_note = ""
        self.container_name = f"vmtax-{uuid.uuid4().hex[:10]}"

    @classmethod
    def available(cls) -> tuple[bool, str]:
        ok, why = podman_works()
        if ok:
            return True, "podman with runc"
        ok2, why2 = unshare_works()
        return ok2, f"unshare+chroot ({why})" if ok2 else f"{why}; {why2}"

    def choose_engine(self) -> str:
        if self.engine_wanted != "auto":
            return self.engine_wanted
        ok, why = podman_works()
        if ok:
            return "podman"
        self.engine_note = f"podman unusable here, used unshare+chroot: {why}"
        return "unshare"

    def launch(self) -> subprocess.Popen:
        self.engine = self.choose_engine()
        root = str(guest.rootfs_dir())
        if self.engine == "podman":
            argv = PODMAN_RUN + ["--name", self.container_name, "--env", "VMTAX_STDERR=/dev/stderr",
                                 "--rootfs", root, *SHELL]
        else:
            argv = ["unshare", "--fork", "--pid", "--mount", "--uts", "--ipc", "--net",
                    "--kill-child", "chroot", root, "/bin/sh", "-c", UNSHARE_INIT]
        return self.spawn(argv)

    def stop(self) -> None:
        super().stop()
        if self.engine == "podman":  # conmon outlives the client: remove the container itself
            subprocess.run(["podman", "rm", "-f", "-t", "0", self.container_name],
                           capture_output=True, timeout=60, stdin=subprocess.DEVNULL)

    def own_facts(self) -> dict:
        return {"target_kind": self.kind, "engine": self.engine, "engine_note": self.engine_note}

    def info(self):
        return replace(super().info(), accel=self.engine)
