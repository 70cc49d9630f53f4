"""User-mode Linux (Debian's user-mode-linux): a paravirtualized kernel
running as host processes -- the nearest thing to seed 000's VMI that runs
anywhere.  It boots the same initramfs as the QEMU guest; the channel is
its first serial line (ssl0) on the UML process's stdin/stdout.

Options: mem=SIZE (default 512M), binary=PATH (a linux.uml build: what an A/B
of two UML builds names; kernel=PATH is its older name; default the system's
linux.uml; its release, from --version, is in the facts).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import replace
from functools import lru_cache
from pathlib import Path

from .. import guest, proc
from ..errors import TargetError, UserError
from ..hostproc import boot_id
from . import devices
from .channel import ChannelTarget
from .qemu import parse_size_mb

UML_BINARIES = ("linux.uml", "linux")


def host_xsave_bytes() -> int | None:
    """Size of the host's XSAVE area for the enabled features (CPUID 0xD,
    as the agent reports it)."""
    from .local import LocalTarget

    try:
        return LocalTarget("local", {}).facts().get("xsave_bytes")
    except Exception:  # a diagnosis must never hide the error it explains
        return None


def diagnose(console: Path) -> str | None:
    """Name the known ways UML fails to boot on a host, from its console."""
    try:
        text = proc.read_tail(console, 1 << 20)  # a boot's console whole, a console that grew: its end
    except OSError:
        return None
    if "ptrace set fp regs failed" in text:
        size = host_xsave_bytes()
        return (
            "User-mode Linux cannot run on this host: its kernel's fixed-size FPU buffer is "
            "smaller than the host's XSAVE area"
            + (f" ({size} bytes, CPUID leaf 0xD)" if size else "")
            + ", so PTRACE_SETREGSET fails with EFAULT and init dies; newer UML kernels size "
            "it from the host"
        )
    panic = [line for line in text.splitlines() if "Kernel panic" in line or "segfault" in line]
    return f"User-mode Linux did not boot: {panic[0].strip()}" if panic else None


@lru_cache(maxsize=1)
def pid_namespace() -> tuple[str, ...]:
    """UML runs its guest's processes as host processes of its own; killing
    UML does not kill them.  In a PID namespace of its own, with UML as its
    init, the kernel kills them all when UML dies -- and UML dies with
    vmtax (unshare gets PR_SET_PDEATHSIG, --kill-child passes it on).
    Root can make one; others may through a user namespace; else nothing."""
    for prefix in (
        ("unshare", "--pid", "--fork", "--kill-child"),
        ("unshare", "--user", "--map-root-user", "--pid", "--fork", "--kill-child"),
    ):
        if prefix[1] == "--pid" and os.geteuid() != 0:
            continue
        try:
            ok = (
                subprocess.run([*prefix, "true"], capture_output=True, timeout=10, stdin=subprocess.DEVNULL).returncode
                == 0
            )
        except (OSError, subprocess.SubprocessError):
            ok = False
        if ok:
            return prefix
    return ()


def find_uml(explicit: str | None = None) -> str:
    for name in [explicit] if explicit else UML_BINARIES:
        path = shutil.which(name)
        if path:
            return path
    raise TargetError("User-mode Linux is missing: install user-mode-linux (make setup does)")


def uml_version(path: str, name: str) -> str:
    """The release a UML kernel says it is (`linux.uml --version`: 6.1.176);
    UserError where path is not one."""
    real = shutil.which(path) if os.sep not in path else path
    if not real or not os.path.isfile(real):
        raise UserError(f"target '{name}': {path}: no such UML kernel file")
    try:
        with open(real, "rb") as f:
            elf = f.read(4) == b"\x7fELF"
        out = (
            subprocess.run([real, "--version"], capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL)
            if elf and os.access(real, os.X_OK)
            else None
        )
    except (OSError, subprocess.SubprocessError):
        out = None
    version = out.stdout.strip() if out is not None and out.returncode == 0 else ""
    if not re.fullmatch(r"\d+\.\d+[\w.+~-]*", version):
        raise UserError(
            f"target '{name}': {path} is not a UML kernel (an executable linux.uml build that "
            f"answers --version with its release)"
        )
    return version


class UmlTarget(ChannelTarget):
    kind = "uml"
    summary = "User-mode Linux: a paravirtualized kernel in host processes"
    allowed_options = frozenset({"mem", "kernel", "binary", "boot_timeout", "disk", "disk_size"})
    boot_timeout = 60.0

    def __init__(self, name: str, options: dict[str, str]):
        super().__init__(name, options)
        if "kernel" in options and "binary" in options:
            raise UserError(f"target '{name}': binary= and kernel= name the same thing (a linux.uml build): give one")
        self.binary = options.get("binary") or options.get("kernel")  # None: the system's linux.uml
        self.version = uml_version(self.binary, name) if self.binary else None
        self.mem_mb = parse_size_mb(options.get("mem", "512M"))
        # disk=ubd: UML's block driver over an image file on the host (through
        # the host's page cache: ubd has no O_DIRECT), mounted at /mnt/disk
        self.disk = options.get("disk", "none")
        if self.disk not in ("ubd", "none"):
            raise UserError(f"target '{name}': disk must be ubd or none, got '{self.disk}'")
        if "disk_size" in options and self.disk == "none":
            raise UserError(f"target '{name}': disk_size without a disk: add disk=ubd")
        try:
            self.disk_mb = parse_size_mb(options.get("disk_size", "1G"))
        except UserError:
            raise UserError(f"target '{name}': malformed disk_size '{options['disk_size']}' (try 1G or 512M)") from None
        if self.disk_mb < 64:
            raise UserError(f"target '{name}': disk_size must be at least 64M, got '{options['disk_size']}'")
        self.image_dir: Path | None = None

    def scratch_dir(self) -> str | None:
        return devices.MOUNT if self.disk != "none" else super().scratch_dir()

    def on_disk(self) -> bool:
        return self.disk != "none"

    @classmethod
    def available(cls) -> tuple[bool, str]:
        """Boots UML once (about a second; the answer is cached until the
        host reboots or UML changes): installed is not the same as works."""
        try:
            binary = find_uml()
            guest.busybox_path()
        except TargetError as e:
            return False, str(e)
        key = f"{boot_id()}|{binary}|{os.stat(binary).st_mtime}"
        finding = guest.probe_memory("uml").get(key)
        if finding is None:  # what it finds, not what the file says after: another vmtax may write it too
            try:
                with cls("uml", {}):
                    finding = guest.remember_probe("uml", key, "")
            except TargetError as e:
                finding = guest.remember_probe("uml", key, str(e))
        return (True, "") if not finding else (False, finding)

    def agent_cpu(self) -> int | None:
        """Pinned, every UML host process runs on one host CPU; UML has one vCPU."""
        return 0 if self.host_cpu is not None else None

    def launch(self) -> subprocess.Popen:
        argv = [
            *pid_namespace(),
            find_uml(self.binary),
            f"mem={self.mem_mb}M",
            f"initrd={guest.initramfs(self.files)}",
            "con=null",
            "con0=null,fd:2",
            "ssl=null",
            "ssl0=fd:0,fd:1",
            "vmtax.chan=/dev/ttyS0",
            "quiet",
            "panic=-1",
        ]
        if self.disk == "ubd":
            self.image_dir = devices.image_dir("uml")  # before anything that can fail: stop() removes it
            img = devices.make_image(self.image_dir, self.disk_mb, "raw")
            argv += [f"ubd0={img}", "vmtax.disk=/dev/ubda"]
        # UML keeps guest memory in a file under TMPDIR: keep it in our workdir.
        return self.spawn(argv, env={**os.environ, "TMPDIR": str(self.workdir)})

    def memory_need_mb(self) -> float:
        return self.mem_mb + 48.0  # its RAM is a file in the work directory; plus its host processes

    def end_start(self) -> None:
        try:
            super().end_start()
        except TargetError as e:
            why = diagnose(self.console_log)
            if why is None and self.p is not None:
                try:
                    self.p.wait(timeout=5)  # let a dying UML finish its console output
                except subprocess.TimeoutExpired:
                    pass
                why = diagnose(self.console_log)
            raise TargetError(why or str(e)) from None

    def boot_failed(self) -> str | None:
        """A UML whose init died hangs instead of exiting (panic=-1 does not
        end it): its console says so at once."""
        return diagnose(self.console_log)

    def after_boot(self) -> None:
        if self.disk != "none":
            devices.check_mounted(self, "/dev/ubda")
        self.start_probe(self.root_pids)

    def stop(self) -> None:
        super().stop()
        if self.image_dir is not None:
            shutil.rmtree(self.image_dir, ignore_errors=True)
            self.image_dir = None

    def own_facts(self) -> dict:
        return {
            "target_kind": self.kind,
            "mem_mb": self.mem_mb,
            "disk": self.disk,
            **(
                {"disk_mb": self.disk_mb, "disk_device": "ubd: UML's block driver over a host file"}
                if self.disk != "none"
                else {}
            ),
            "uml_binary": find_uml(self.binary),
            "uml_version": self.version or uml_version(find_uml(None), self.name),
            "pid_namespace": " ".join(pid_namespace()) or "none (UML's helpers may outlive a killed vmtax)",
            **self.probe_facts(),
        }

    def info(self):
        return replace(super().info(), accel="uml", idle_cpu_pct=self.idle_cpu)
