"""A Xen guest, started by vmtax from dom0 through Xen's toolstack (`xl`):
a PV domU (paravirtualized: the guest kernel calls Xen for its page tables,
its traps bounce through Xen) or a PVH one (hardware assist: the guest's
kernel runs in a VT-x/AMD-V container, no device model).  It boots the same
initramfs as the QEMU guest (the agent, busybox, vmtax-shell); the channel
is the guest's PV console (hvc0), reached through the pty that xenconsoled
gives it in dom0.  Its host probe is xentrace on the guest's physical CPU:
hypercalls by type, PV bounces and emulations, HVM exits by reason, per
operation, in the counted batches only (xentrace.py).

Options: type=pv|pvh (default pv), mem=SIZE (default 256M), pcpu=N (the
physical CPU its one vCPU is pinned to; default the last: keep dom0 off it),
kernel=PATH (default the first under /boot), tsc_mode=native|default|
always_emulate|never_emulate... (default native: with xl's default, Xen
emulates RDTSC in a PV guest whose TSC it does not trust, nested ones
included), xl=PATH (the toolstack; default `xl` on PATH).

The domain is destroyed on every exit path: stop(); the relay between the
channel and the console's pty (xenrelay.py), which outlives a killed
controller, destroys it once the controller's end of the channel closes;
the next run destroys any `vmtax-PID-N` domain whose PID is gone (sweep).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

from .. import guest, proc
from ..errors import TargetError, UserError
from ..xentrace import XenTraceProbe
from .base import option_number
from .channel import ChannelTarget
from .qemu import find_kernel, kernels, parse_size_mb

TYPES = ("pv", "pvh")
TSC_MODES = ("native", "default", "always_emulate", "native_paravirt", "never_emulate")
TOOL_TIMEOUT = 60.0  # seconds for one xl or xenstore command that is not a domain build
NAME = re.compile(r"^vmtax-(\d+)-(\d+)$")


READY_LINE = "xenrelay: ready"


def relay_argv(binary: str, domain: str) -> list[str]:
    """The relay between the channel and the guest's console (xenrelay.py),
    on the standard library alone: it starts at once."""
    return [sys.executable, "-S", str(Path(__file__).with_name("xenrelay.py")), binary, domain]


def find_xl(explicit: str | None = None) -> str:
    path = shutil.which(explicit or "xl")
    if not path:
        raise TargetError(
            f"{explicit or 'xl'} not found: the xen target runs in dom0 of a Xen host, with Xen's toolstack "
            "(Debian: xen-utils)"
        )
    return path


def xl(binary: str, *args: str, timeout: float = TOOL_TIMEOUT) -> str:
    """One xl command's output; TargetError with its message where it fails."""
    try:
        p = subprocess.run([binary, *args], capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise TargetError(f"xl {args[0]}: no answer within {timeout:.0f} s") from None
    except OSError as e:
        raise TargetError(f"xl {args[0]}: {e.strerror or e}") from None
    if p.returncode != 0:
        why = (p.stderr.strip().splitlines() or [f"exit status {p.returncode}"])[-1]
        raise TargetError(f"xl {args[0]}: {why[:300]}")
    return p.stdout


def parse_info(text: str) -> dict[str, str]:
    """`xl info`'s `key : value` lines."""
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip():
            out[key.strip()] = value.strip()
    return out


def domain_config(*, name: str, type_: str, kernel: str, ramdisk: str, mem_mb: int, pcpu: int, tsc_mode: str) -> str:
    """The domain's xl configuration: one vCPU pinned to pcpu, no disk, no
    network, the guest's PV console its channel (its kernel's own console
    on a VT nobody reads: nothing but the channel on hvc0), destroyed when
    it powers off, reboots or crashes."""
    for value in (name, kernel, ramdisk):
        if '"' in value or "\n" in value or "\\" in value:
            raise UserError(f"{value!r}: a path for Xen's configuration cannot hold a quote, backslash or newline")
    extra = "console=tty0 quiet loglevel=0 panic=-1 vmtax.chan=/dev/hvc0"
    return "\n".join(
        [
            f'name = "{name}"',
            f'type = "{type_}"',
            f'kernel = "{kernel}"',
            f'ramdisk = "{ramdisk}"',
            f'extra = "{extra}"',
            f"memory = {mem_mb}",
            "vcpus = 1",
            f'cpus = "{pcpu}"',
            f'tsc_mode = "{tsc_mode}"',
            'on_poweroff = "destroy"',
            'on_reboot = "destroy"',
            'on_crash = "destroy"',
            "",
        ]
    )


def sweep(binary: str) -> list[str]:
    """Destroy the domains a killed vmtax left (`vmtax-PID-N`, PID gone)."""
    try:
        listing = xl(binary, "list")
    except TargetError:
        return []
    gone = []
    for line in listing.splitlines()[1:]:
        m = NAME.match(line.split()[0]) if line.split() else None
        if m and not os.path.exists(f"/proc/{m.group(1)}"):
            try:
                xl(binary, "destroy", m.group(0))
                gone.append(m.group(0))
            except TargetError:
                pass
    return gone


class Domain:
    """One Xen domain as vmtax builds it: the relay started first (it
    guards the domain from its build on), the domain created paused, its
    console opened through the relay, then unpaused."""

    def __init__(self, name: str, xl_path: str, domname: str, console_log: Path):
        self.name, self.xl, self.domname, self.console_log = name, xl_path, domname, console_log
        self.domid: int | None = None

    def build(self, cfg: Path, timeout: float) -> subprocess.Popen:
        """The domain built from cfg and running, its console relayed: the relay."""
        with open(self.console_log, "ab") as log:  # the relay first: it guards the domain from its build on
            relay = proc.spawn(
                relay_argv(self.xl, self.domname),
                die_with_vmtax=False,  # it outlives a killed controller, to destroy the domain
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
            )
        try:
            self.create(cfg, timeout)  # built, paused: the relay's pty raw and silent before the guest runs
            self.domid = int(xl(self.xl, "domid", self.domname).strip())
            assert relay.stdin is not None
            relay.stdin.write(self.console_key().encode() + b"\n")
            relay.stdin.flush()
        except BaseException:
            proc.kill_group(relay)
            raise
        self.wait_console(relay)
        xl(self.xl, "unpause", self.domname)
        return relay

    def wait_console(self, relay: subprocess.Popen) -> None:
        """Until the relay says the pty is raw and silent, before the guest says a word."""
        deadline = time.monotonic() + 60
        while READY_LINE not in proc.read_tail(self.console_log):
            if relay.poll() is not None or time.monotonic() > deadline:
                relay.kill()
                raise TargetError(f"{self.name}: cannot open the guest's console{self.tail()}")
            time.sleep(0.05)

    def create(self, cfg: Path, timeout: float) -> None:
        """xl create -p, a child that dies with vmtax (the relay destroys
        what it had built), bounded by the boot timeout."""
        with open(self.console_log, "ab") as log:
            p = proc.spawn([self.xl, "create", "-p", str(cfg)], stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        try:
            status = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill_group(p)
            raise TargetError(f"{self.name}: xl create did not finish within {timeout:.0f} s") from None
        finally:
            if p.poll() is None:
                proc.kill_group(p)
        if status != 0:
            raise TargetError(f"{self.name}: xl create failed (status {status}){self.tail()}")

    def tail(self) -> str:
        """The console log's last line, read from its end as a channel's is (proc.read_tail)."""
        lines = proc.read_tail(self.console_log).strip().splitlines()
        return f": {lines[-1][:200]}" if lines else ""

    def console_key(self) -> str:
        """Where xenstore says which pty xenconsoled made for the guest's
        console, once it has said it."""
        reader = shutil.which("xenstore-read")
        if reader is None:
            raise TargetError("xenstore-read not found (Debian: xenstore-utils)")
        deadline = time.monotonic() + 20
        key = f"/local/domain/{self.domid}/console/tty"
        while True:
            p = subprocess.run(
                [reader, key], capture_output=True, text=True, timeout=TOOL_TIMEOUT, stdin=subprocess.DEVNULL
            )
            if p.returncode == 0 and p.stdout.strip().startswith("/dev/"):
                return key
            if time.monotonic() > deadline:
                raise TargetError(f"{self.name}: no console pty for domain {self.domid} (is xenconsoled running?)")
            time.sleep(0.1)


class XenTarget(ChannelTarget):
    kind = "xen"
    summary = "a Xen guest (PV or PVH), started from dom0 with xl"
    allowed_options = frozenset({"type", "mem", "pcpu", "kernel", "tsc_mode", "xl", "boot_timeout"})
    boot_timeout = 300.0  # a domain build, then the guest's boot
    trace_marks = True
    _seq = 0

    def __init__(self, name: str, options: dict[str, str]):
        super().__init__(name, options)
        self.type = options.get("type", "pv")
        if self.type not in TYPES:
            raise UserError(f"target '{name}': type must be one of {', '.join(TYPES)}, got '{self.type}'")
        self.tsc_mode = options.get("tsc_mode", "native")
        if self.tsc_mode not in TSC_MODES:
            raise UserError(f"target '{name}': tsc_mode must be one of {', '.join(TSC_MODES)}")
        self.mem_mb = parse_size_mb(options.get("mem", "256M"))
        if self.mem_mb < 128:
            raise UserError(f"target '{name}': mem must be at least 128M (the guest's initramfs lives in it)")
        self.pcpu_option = option_number(name, options, "pcpu", None, lo=0, hi=4095, integer=True)
        self.kernel = str(find_kernel(options["kernel"])) if "kernel" in options else None
        self.xl_option = options.get("xl")
        self.xl = ""
        self.info_: dict[str, str] = {}
        self.domname = ""
        self.domid: int | None = None
        self.pcpu: int | None = None

    @classmethod
    def available(cls) -> tuple[bool, str]:
        try:
            binary = find_xl()
            xl(binary, "info", timeout=20)
        except TargetError as e:
            return False, f"not a Xen dom0 here: {e}"
        return True, ""

    def agent_cpu(self) -> int | None:
        return 0  # its one vCPU

    def memory_need_mb(self) -> float:
        return float(self.mem_mb)  # Xen's memory, not dom0's

    def launch(self) -> subprocess.Popen:
        self.xl = find_xl(self.xl_option)
        sweep(self.xl)
        self.info_ = parse_info(xl(self.xl, "info"))
        ncpu = int(self.info_.get("nr_cpus", "1") or 1)
        self.pcpu = self.pcpu_option if self.pcpu_option is not None else ncpu - 1
        if self.pcpu >= ncpu:
            raise UserError(f"target '{self.name}': pcpu={self.pcpu}, but Xen has {ncpu} physical CPUs")
        XenTarget._seq += 1
        self.domname = f"vmtax-{os.getpid()}-{XenTarget._seq}"
        self.kernel = self.kernel or str((kernels() or [find_kernel()])[0])
        domain = Domain(self.name, self.xl, self.domname, self.console_log)
        relay = domain.build(self._config(), self.boot_timeout)
        self.domid = domain.domid
        return relay

    def _config(self) -> Path:
        """The domain's xl configuration, written to the target's directory."""
        assert self.workdir is not None and self.kernel is not None and self.pcpu is not None, "begin_start made it"
        cfg = self.workdir / "domain.cfg"
        cfg.write_text(
            domain_config(
                name=self.domname,
                type_=self.type,
                kernel=self.kernel,
                ramdisk=str(guest.initramfs(self.files)),
                mem_mb=self.mem_mb,
                pcpu=self.pcpu,
                tsc_mode=self.tsc_mode,
            )
        )
        return cfg

    def after_boot(self) -> None:
        assert self.workdir is not None and self.pcpu is not None and self.domid is not None, "launched"
        vendor = "intel" if _cpu_vendor() == "GenuineIntel" else "amd"  # whose exit reasons an HVM guest's are
        self.host_probe = XenTraceProbe(  # type: ignore[assignment]  # the HostProbe interface, Xen's counts
            shutil.which("xentrace") or "xentrace", self.workdir, self.pcpu, self.domid, vendor
        )
        self.count_settle_ms = max(500, self.settle_for_the_host())

    def stop(self) -> None:
        try:
            super().stop()
        finally:
            if self.domname and self.xl:
                try:
                    xl(self.xl, "destroy", self.domname)
                except TargetError:
                    pass  # gone already (it powered off, or the relay destroyed it)
                self.domname = ""

    def own_facts(self) -> dict:
        i = self.info_
        version = f"{i.get('xen_major', '?')}.{i.get('xen_minor', '?')}{i.get('xen_extra', '')}"
        return {
            "target_kind": self.kind,
            "xen_version": version,
            "xen_type": self.type,
            "xen_scheduler": i.get("xen_scheduler", ""),
            "xen_virt_caps": i.get("virt_caps", ""),
            "xen_cmdline": i.get("xen_commandline", ""),
            "tsc_mode": self.tsc_mode,
            "mem_mb": self.mem_mb,
            "pcpu": self.pcpu,
            "domid": self.domid,
            "guest_kernel_file": self.kernel,
            "xl": self.xl,
            **self.probe_facts(),
        }

    def info(self):
        return replace(super().info(), accel=f"xen-{self.type}")


def _cpu_vendor() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return ""
    m = re.search(r"^vendor_id\s*:\s*(\S+)", text, re.M)
    return m.group(1) if m else ""
