"""User-mode Linux (Debian's user-mode-linux): a paravirtualized kernel
running as host processes -- the nearest thing to seed 000's VMI that runs
anywhere.  It boots the same initramfs as the QEMU guest; the channel is
its first serial line (ssl0) on the UML process's stdin/stdout.

Options: mem=SIZE (default 512M), kernel=PATH (default linux.uml).
"""
from __future__ import annotations

import shutil
import subprocess
from dataclasses import replace

from .. import guest
from ..errors import TargetError
from .channel import ChannelTarget
from .hostproc import idle_cpu_pct
from .qemu import parse_size_mb

UML_BINARIES = ("linux.uml", "linux")


def find_uml(explicit: str | None = None) -> str:
    for name in ([explicit] if explicit else UML_BINARIES):
        path = shutil.which(name)
        if path:
            return path
    raise TargetError("User-mode Linux is missing: install user-mode-linux (make setup does)")


class UmlTarget(ChannelTarget):
    kind = "uml"
    summary = "User-mode Linux: a paravirtualized kernel in host processes"
    allowed_options = frozenset({"mem", "kernel"})
    boot_timeout = 60.0

    def __init__(self, name: str, options: dict[str, str]):
        super().__init__(name, options)
        self.mem_mb = parse_size_mb(options.get("mem", "512M"))
        self.idle_cpu: float | None = None

    @classmethod
    def available(cls) -> tuple[bool, str]:
        try:
            find_uml()
            guest.busybox_path()
        except TargetError as e:
            return False, str(e)
        return True, ""

    def launch(self) -> subprocess.Popen:
        argv = [find_uml(self.options.get("kernel")), f"mem={self.mem_mb}M",
                f"initrd={guest.initramfs()}", "con=null", "con0=null,fd:2", "ssl=null",
                "ssl0=fd:0,fd:1", "vmtax.chan=/dev/ttyS0", "quiet", "loglevel=3", "panic=-1"]
        # UML keeps guest memory in a file under TMPDIR: keep it in our workdir.
        return self.spawn(argv, env={"PATH": "/usr/bin:/bin", "TMPDIR": str(self.workdir)})

    def after_boot(self) -> None:
        self.idle_cpu = idle_cpu_pct(self.p.pid, window=2.0)

    def own_facts(self) -> dict:
        return {"target_kind": self.kind, "mem_mb": self.mem_mb,
                "uml_binary": find_uml(self.options.get("kernel"))}

    def info(self):
        return replace(super().info(), accel="uml", idle_cpu_pct=self.idle_cpu)
