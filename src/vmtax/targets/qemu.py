"""QEMU guests that vmtax boots itself: the host's kernel (from /boot, or
kernel=PATH) with an initramfs of busybox-static and the agent.

Options: accel=kvm|tcg|auto (auto: KVM only if a guest actually boots with
it -- /dev/kvm can exist and still not run a standard kernel, as on nested
or PVM hosts; the probe waits 15 s, or boot_timeout= where given), smp=N,
mem=SIZE (512M, 1G), cpu=MODEL, machine=pc|microvm,
kernel=PATH, boot_timeout=SECONDS (default 120).  The channel, on QEMU's
stdio: chan=virtio (a virtio-serial port: a line in one buffer), serial (the
second serial port, ttyS1, a byte at a time at 115200 baud) or auto (the
default: virtio where the guest kernel has virtio_console and the machine a
PCI bus, else serial).  The console (ttyS0) goes to a log file.

A scratch disk (devices.py): disk=virtio|scsi|nvme|ahci|ide|none (default
none: the scratch directory is a tmpfs), image=raw|qcow2, cache=none|writeback
(the host page cache: none is O_DIRECT), backing=file|block (a loop device over
the image, as an LVM volume would be), disk_size=SIZE (default 1G).  The guest
mounts it at /mnt/disk, and workloads and the agent's file rows work there.
A NIC: nic=virtio|e1000|rtl8139|none (default none), net=user (QEMU's
user-mode network: the host's loopback is 10.0.2.2 from the guest).

In pieces: the options are parsed and checked once into a frozen QemuConfig
(which also gives the facts they fix); qemu_argv() builds the command line
from it and a Plumbing (the paths and descriptors one boot is given) and
creates nothing; acquire() makes what a boot needs -- the guest's disk
image, the loop device over it, the tap -- at launch, each released by the
target's one exit stack on every path; the accelerator (accel_without_probe,
guest_cpu, vhost_net; the KVM probe in QemuTarget.start) and the placement of
QEMU's threads (place_threads) are units of their own.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import tempfile
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

from .. import guest
from ..errors import TargetError, UserError
from ..hostprobe import Qmp
from ..hostproc import boot_id, mem_and_swap_mb, rss_beyond_mapping, tasks
from ..proc import other_cpus
from . import devices, migration
from .base import Target, option_number
from .channel import ChannelTarget

QEMU = "qemu-system-x86_64"
KVM_PROBE_TIMEOUT = 15.0  # a KVM guest is ready in ~1 s; a TCG one in ~3 s here


# -- the guest kernel ---------------------------------------------------------------------
def find_kernel(explicit: str | None = None) -> Path:
    if explicit:
        p = Path(explicit)
        if not p.is_file():
            raise UserError(f"kernel '{explicit}' does not exist")
        return p
    cands = kernels()
    if not cands:
        raise TargetError(
            "no kernel under /boot: install linux-image-cloud-amd64 (make setup does) or give kernel=PATH"
        )
    return cands[0]


def kernels() -> list[Path]:
    """The kernels under /boot, the default first: the last by version (the
    cloud kernel sorts after the generic one of its release: it boots
    faster), then the others from the last down."""
    return [Path(k) for k in sorted(glob.glob("/boot/vmlinuz-*"), key=_version_key, reverse=True)]


def choose_kernel(explicit: str | None, needs: list[tuple[tuple[tuple[str, str], ...], str]]) -> tuple[Path, list[str]]:
    """The guest kernel and its modules (load order) for these driver needs
    ((drivers, what) pairs): kernel=PATH when given, else the default kernel
    if it has every driver, else the first under /boot that has them all
    (Debian's generic kernel has e1000, rtl8139 and ahci; the cloud kernel
    does not).  UserError naming a missing driver of the default kernel."""
    cands = [find_kernel(explicit)] if explicit else kernels() or [find_kernel()]
    first: UserError | None = None
    for kernel in cands:
        try:
            return kernel, _modules(kernel, needs)
        except UserError as e:
            first = first or e
    assert first is not None, "cands holds a kernel at least"
    raise first


def _modules(kernel: Path, needs) -> list[str]:
    out: list[str] = []
    for drivers, what in needs:
        for m in devices.modules_for(kernel, drivers, what):
            if m not in out:  # a disk and a NIC both need virtio_pci: once
                out.append(m)
    return out


def agree_kernels(targets: list) -> str | None:
    """QEMU targets compared with each other boot one kernel, or the kernel
    would be measured with the device: those without kernel=PATH move to the
    first kernel every one of them can use (their configs replaced).  A line
    saying what was done or why not; None when they already agree."""
    free = [t for t in targets if isinstance(t, QemuTarget) and not t.config.kernel_path]
    default = next(iter(kernels()), None)
    if len({t.config.kernel or default for t in free}) <= 1:
        return None
    for kernel in kernels():
        try:
            mods = [_modules(kernel, t.config.needs) for t in free]
        except UserError:
            continue
        for t, m in zip(free, mods, strict=True):
            t.config = replace(t.config, kernel=kernel, modules=tuple(m))
        return f"every qemu target boots {kernel.name}: one of them needs a driver only it has"
    booted = {t.name: t.config.kernel or default for t in free}
    return "the qemu targets boot different kernels (no kernel under /boot has every driver they need): " + ", ".join(
        f"{name}: {k.name if k else 'none under /boot'}" for name, k in booted.items()
    )


# -- the host --------------------------------------------------------------------------
def _version_key(path: str) -> list:
    return [int(x) if x.isdigit() else x for x in re.split(r"(\d+)", path)]


def host_tsc_khz() -> int | None:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("cpu MHz"):
                    return int(float(line.split(":")[1]) * 1000)
    except OSError:
        pass
    return None


def parse_size_mb(text: str) -> int:
    m = re.fullmatch(r"(\d+)([MG]?)", text.strip().upper())
    if not m:
        raise UserError(f"malformed memory size '{text}' (try 512M or 1G)")
    return int(m.group(1)) * (1024 if m.group(2) == "G" else 1)


def qemu_binary(path: str, name: str) -> str:
    """A QEMU executable given by binary=PATH (what an A/B of two QEMU
    builds names), checked: UserError unless it says it is QEMU."""
    real = shutil.which(path)
    if not real:
        raise UserError(f"target '{name}': binary={path}: no such executable")
    if not _qemu_version(real).startswith("QEMU emulator version"):
        raise UserError(
            f"target '{name}': binary={path} is not a QEMU (its --version does not say 'QEMU emulator version')"
        )
    return real


# -- the accelerator ---------------------------------------------------------------------
def kvm_usable(binary: str = QEMU) -> tuple[bool, str]:
    if not os.path.exists("/dev/kvm"):
        return False, "no /dev/kvm"
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return False, "/dev/kvm is not accessible to this user"
    failed = guest.probe_memory("kvm").get(_probe_key(binary))
    if failed:
        return False, f"/dev/kvm is there but a KVM guest did not boot ({failed})"
    return True, ""


def _probe_key(binary: str = QEMU) -> str:
    """A failed KVM probe holds until the host reboots or QEMU or the
    guest kernel change."""
    try:
        kernel = str(find_kernel())
    except (TargetError, UserError):
        kernel = "?"
    return f"{boot_id()}|{_qemu_version(binary)}|{kernel}"


def accel_without_probe(wanted: str, binary: str = QEMU) -> tuple[str, str]:
    """The accelerator a guest boots with where none is probed by booting
    (vmtax scale's parallel boots, a memory estimate), and why: as asked;
    for auto, KVM where it is not known to fail (a failed probe is
    remembered: kvm_usable), else TCG."""
    if wanted != "auto":
        return wanted, ""
    ok, why = kvm_usable(binary)
    return ("kvm", "") if ok else ("tcg", f"TCG: {why}")


def guest_cpu(model: str | None, accel: str) -> str:
    """The guest's -cpu: the model asked (cpu=MODEL); else the host's own
    under KVM, the most TCG emulates under TCG."""
    return model or ("host" if accel == "kvm" else "max")


def vhost_net(accel: str, available: bool) -> bool:
    """Whether a tap NIC uses vhost-net (the virtio rings in the host
    kernel: what a KVM user runs); it needs KVM's ioeventfds, so not under
    TCG, and /dev/vhost-net (available)."""
    return accel == "kvm" and available


# -- the configuration -------------------------------------------------------------------
Needs = tuple[tuple[tuple[tuple[str, str], ...], str], ...]  # (drivers, what needs them), for the guest kernel


@dataclass(frozen=True)
class QemuConfig:
    """A QEMU target's options, parsed and checked once (UserError: one
    line, exit 2, before anything starts); the kernel chosen for its
    devices' drivers (agree_kernels may choose another: a new config)."""

    binary: str = QEMU
    accel: str = "auto"  # kvm | tcg | auto (KVM where a guest boots with it)
    machine: str = "pc"  # pc | q35 | microvm
    mem_mb: int = 1024
    smp: int = 1
    cpu: str | None = None  # cpu=MODEL (None: guest_cpu's choice)
    emulator: str = "apart"  # apart | together: QEMU's own threads beside the vCPUs or not
    nic: str = "none"
    net: str = "user"
    disk: str = "none"
    image: str = "raw"
    cache: str = "none"
    backing: str = "file"
    disk_mb: int = 1024
    kernel_path: str | None = None  # kernel=PATH as given
    kernel: Path | None = None  # the kernel its devices' drivers chose (None: the default, found at launch)
    modules: tuple[str, ...] = ()  # the module files the guest loads, in order
    needs: Needs = ()
    chan: str = "serial"  # virtio | serial: the channel's device (chan=auto resolved)
    machine_type: str | None = None  # a versioned type for `machine` (pc-i440fx-7.2): --shared-boot's (migration.py)

    @classmethod
    def parse(cls, name: str, options: dict[str, str]) -> QemuConfig:
        where = tempfile.gettempdir()
        if "," in where:  # -qmp unix:PATH,server=on and -serial file:PATH read a comma as a separator
            raise UserError(
                f"target '{name}': the temporary directory {where} holds a comma, which QEMU's "
                f"option syntax cannot take in a path: give a TMPDIR without one"
            )
        binary = qemu_binary(options["binary"], name) if "binary" in options else QEMU
        accel = options.get("accel", "auto")
        if accel not in ("auto", "kvm", "tcg"):
            raise UserError(f"accel must be kvm, tcg or auto, got '{accel}'")
        machine = options.get("machine", "pc")
        if machine not in ("pc", "q35", "microvm"):
            raise UserError(f"machine must be pc, q35 or microvm, got '{machine}'")
        mem_mb = parse_size_mb(options.get("mem", "1G"))
        if mem_mb < 128:
            raise UserError(f"target '{name}': mem must be at least 128M for the guest kernel, got '{options['mem']}'")
        most = mem_and_swap_mb()
        if most is not None and mem_mb > most:  # QEMU could not map it: refused before it starts
            raise UserError(
                f"target '{name}': mem={options['mem']} is more memory than this host has "
                f"({most / 1024:.1f} GiB of RAM and swap)"
            )
        smp = option_number(name, options, "smp", 1, lo=1, hi=256, integer=True)
        emulator = options.get("emulator", "apart")
        if emulator not in ("apart", "together"):
            raise UserError(f"target '{name}': emulator must be apart or together, got '{emulator}'")
        nic, net, needs = _nic_options(name, options, machine)
        disk, disk_needs = _disk_options(name, options, machine)
        needs += disk_needs
        chan, needs, (kernel, modules) = _channel(name, options, machine, needs)
        return cls(
            binary=binary,
            accel=accel,
            machine=machine,
            mem_mb=mem_mb,
            smp=smp,
            cpu=options.get("cpu"),
            emulator=emulator,
            nic=nic,
            net=net,
            **disk,
            kernel_path=options.get("kernel"),
            kernel=kernel,
            modules=tuple(modules),
            needs=needs,
            chan=chan,
        )

    def facts(self) -> dict:
        """What its options fix about the guest, as the run's facts say it."""
        return {
            "machine": self.machine,
            **({"machine_type": self.machine_type} if self.machine_type else {}),
            "smp": self.smp,
            "mem_mb": self.mem_mb,
            "nic": self.nic,
            **({"net": self.net, "nic_device": devices.NICS[self.nic].note} if self.nic != "none" else {}),
            "disk": self.disk,
            **(
                {
                    "image": self.image,
                    "cache": self.cache,
                    "backing": self.backing,
                    "disk_mb": self.disk_mb,
                    "disk_device": devices.DISKS[self.disk].note,
                }
                if self.disk != "none"
                else {}
            ),
            "qemu": _qemu_version(self.binary),
            "qemu_binary": shutil.which(self.binary) or self.binary,
            "channel": CHANNELS[self.chan],
        }


def _choice(name: str, options: dict[str, str], key: str, allowed, default: str) -> str:
    v = options.get(key, default)
    if v not in allowed:
        raise UserError(f"target '{name}': {key} must be one of {', '.join(allowed)}, got '{v}'")
    return v


def _nic_options(name: str, options: dict[str, str], machine: str) -> tuple[str, str, Needs]:
    """The NIC options, checked: (nic, net, the drivers it needs)."""
    nic = _choice(name, options, "nic", (*devices.NICS, "none"), "none")
    net = _choice(name, options, "net", devices.NETS, "user")
    needs: Needs = ()
    if nic != "none":
        if machine == "microvm":
            raise UserError(f"target '{name}': nic={nic} needs machine=pc or q35 (microvm has no PCI bus)")
        needs = ((devices.NICS[nic].drivers, f"target '{name}': nic={nic}"),)
    elif "net" in options:
        raise UserError(f"target '{name}': net= without a NIC: add nic=virtio (or e1000, rtl8139)")
    if net == "tap" and devices.tap_allowed():
        raise UserError(f"target '{name}': net=tap: {devices.tap_allowed()}")
    return nic, net, needs


def _disk_options(name: str, options: dict[str, str], machine: str) -> tuple[dict, Needs]:
    """The disk options, checked: (QemuConfig's disk fields, the drivers it needs)."""
    got: dict[str, Any] = {
        "disk": _choice(name, options, "disk", (*devices.DISKS, "none"), "none"),
        "image": _choice(name, options, "image", devices.IMAGES, "raw"),
        "cache": _choice(name, options, "cache", devices.CACHES, "none"),
        "backing": _choice(name, options, "backing", devices.BACKINGS, "file"),
    }
    try:
        got["disk_mb"] = parse_size_mb(options.get("disk_size", "1G"))
    except UserError:
        raise UserError(f"target '{name}': malformed disk_size '{options['disk_size']}' (try 1G or 512M)") from None
    disk = got["disk"]
    if disk == "none":
        extra = [k for k in ("image", "cache", "backing", "disk_size") if k in options]
        if extra:
            raise UserError(
                f"target '{name}': {', '.join(extra)} without a disk: add disk=virtio (or scsi, nvme, ahci, ide)"
            )
        return got, ()
    model = devices.DISKS[disk]
    if machine not in model.machines:
        raise UserError(
            f"target '{name}': disk={disk} needs machine={' or '.join(model.machines)}"
            f"{' (microvm has no PCI bus)' if machine == 'microvm' else ''}, not {machine}"
        )
    if got["disk_mb"] < 64:
        raise UserError(f"target '{name}': disk_size must be at least 64M, got '{options['disk_size']}'")
    if got["backing"] == "block" and got["image"] != "raw":
        raise UserError(
            f"target '{name}': backing=block is a loop device over a raw image: image=qcow2 cannot go with it"
        )
    if got["backing"] == "block" and not os.access("/dev/loop-control", os.R_OK | os.W_OK):
        raise UserError(
            f"target '{name}': backing=block needs loop devices (/dev/loop-control), "
            f"which this user cannot use: run as root"
        )
    return got, ((model.drivers + devices.EXT4, f"target '{name}': disk={disk}"),)


CHANNELS = {"virtio": "virtio-serial port", "serial": "serial port ttyS1 (115200 baud)"}
_CHANNEL_DRIVERS = (devices.VIRTIO_PCI, ("virtio_console", "VIRTIO_CONSOLE"))


def _channel(name: str, options: dict[str, str], machine: str, needs: Needs):
    """The channel's device (chan=auto resolved), the needs with its
    drivers, and the kernel and modules chosen for them all.  auto falls
    back to the serial port where no kernel has virtio_console (or the
    machine, microvm, no PCI bus); chan=virtio there is a UserError."""
    chan = _choice(name, options, "chan", ("auto", *CHANNELS), "auto")
    if chan != "serial" and machine != "microvm":
        with_chan = (*needs, (_CHANNEL_DRIVERS, f"target '{name}': chan=virtio"))
        try:
            return "virtio", with_chan, choose_kernel(options.get("kernel"), list(with_chan))
        except (UserError, TargetError):  # no kernel under /boot at all: launch says so, as before
            if chan == "virtio":
                raise
    elif chan == "virtio":
        raise UserError(f"target '{name}': chan=virtio needs machine=pc or q35 (microvm has no PCI bus)")
    return "serial", needs, choose_kernel(options.get("kernel"), list(needs)) if needs else (None, [])


# -- the command line ----------------------------------------------------------------------
@dataclass(frozen=True)
class TapEnds:
    """What the command line needs of a tap: QEMU's descriptor of it, the guest's address and the host's."""

    fd: int
    guest: str
    host: str


@dataclass(frozen=True)
class Plumbing:
    """What one boot of a guest is given (made by acquire(), or by hand in
    a test): the kernel and initramfs, the console log and QMP socket, the
    disk (the image file, or the loop device over it), the tap, the host's
    TSC rate (microvm) and whether /dev/vhost-net is there."""

    kernel: Path
    initrd: Path
    console: Path
    qmp: Path
    disk: str | None = None
    tap: TapEnds | None = None
    tsc_khz: int | None = None
    vhost_net: bool = False


def qemu_argv(cfg: QemuConfig, accel: str, p: Plumbing) -> list[str]:
    """The QEMU command line of a guest booted with `accel`: a pure
    function of its config and its plumbing, which creates nothing."""
    chan = "virtio:vmtax" if cfg.chan == "virtio" else "/dev/ttyS1"  # init finds a virtio port by its name
    append = ["console=ttyS0", "quiet", "loglevel=3", "panic=-1", f"vmtax.chan={chan}"]
    if cfg.disk != "none":
        append.append(f"vmtax.disk={devices.DISKS[cfg.disk].node}")
    nic, net = _nic_args(cfg, accel, p)
    append += net
    if cfg.modules:
        append.append("vmtax.modules=" + ",".join(cfg.modules))
    machine = cfg.machine_type or cfg.machine
    if machine == "microvm":
        if p.tsc_khz:
            append.append(f"tsc_early_khz={p.tsc_khz}")  # without it some microvm boots hang
        machine = "microvm,isa-serial=on,rtc=on"
    channel = _channel_args(cfg)
    # debug-threads=on names the vCPU threads "CPU n/TCG" (or /KVM): the pinning and the exit probe find them by it
    return [
        cfg.binary,
        "-name",
        "vmtax,debug-threads=on",
        "-nodefaults",
        "-no-user-config",
        "-display",
        "none",
        "-accel",
        accel,
        "-M",
        machine,
        "-cpu",
        guest_cpu(cfg.cpu, accel),
        "-smp",
        str(cfg.smp),
        "-m",
        f"{cfg.mem_mb}M",
        "-kernel",
        str(p.kernel),
        "-initrd",
        str(p.initrd),
        "-append",
        " ".join(append),
        "-serial",
        f"file:{p.console}",
        *channel,
        *_disk_args(cfg, p),
        *nic,
        "-qmp",
        f"unix:{p.qmp},server=on,wait=off",
        "-no-reboot",
    ]


def _channel_args(cfg: QemuConfig) -> list[str]:
    """The channel on QEMU's stdio (ttyS0, the console, goes to a log
    file): a virtio-serial port named vmtax, or the second serial port
    (microvm wires only one -serial, so its second is named explicitly)."""
    if cfg.chan == "virtio":
        return [
            "-device",
            "virtio-serial-pci,id=vmtaxser",
            "-chardev",
            "stdio,id=vmtaxchan",
            "-device",
            "virtserialport,bus=vmtaxser.0,chardev=vmtaxchan,name=vmtax",
        ]
    if cfg.machine == "microvm":
        return ["-chardev", "stdio,id=vmtaxchan", "-device", "isa-serial,chardev=vmtaxchan,iobase=0x2f8,irq=3"]
    return ["-serial", "stdio"]


def _disk_args(cfg: QemuConfig, p: Plumbing) -> list[str]:
    if cfg.disk == "none":
        return []
    out = ["-drive", f"file={p.disk},if=none,id=d0,format={cfg.image},cache={cfg.cache},aio=threads,discard=ignore"]
    for dev in devices.DISKS[cfg.disk].devices:
        out += ["-device", dev.format(drive="d0")]
    return out


def _nic_args(cfg: QemuConfig, accel: str, p: Plumbing) -> tuple[list[str], list[str]]:
    """The NIC's arguments and what the guest's command line tells its init."""
    if cfg.nic == "none":
        return [], []
    if cfg.net == "tap":
        assert p.tap is not None, "acquire() made the tap"
        vhost = "on" if vhost_net(accel, p.vhost_net) else "off"
        netdev, told = f"tap,id=n0,fd={p.tap.fd},vhost={vhost}", f"{p.tap.guest},{p.tap.host}"
    else:
        netdev, told = "user,id=n0", f"{devices.GUEST_ADDR},{devices.HOST_FROM_GUEST}"
    return ["-netdev", netdev, "-device", f"{devices.NICS[cfg.nic].device},netdev=n0"], [f"vmtax.net={told}"]


# -- what a boot is given -----------------------------------------------------------------
@dataclass
class Acquired:
    plumbing: Plumbing
    tap: devices.Tap | None
    loop: devices.LoopDevice | None


def acquire(cfg: QemuConfig, workdir: Path, files: tuple, held: ExitStack) -> Acquired:
    """Make what one boot needs: the guest's disk image in a private
    directory (a loop device over it, backing=block), its tap, its
    initramfs; each is released by `held` (the image's directory removed,
    the loop device and the tap let go), whatever fails after it."""
    kernel = cfg.kernel or find_kernel(cfg.kernel_path)
    disk, loop, tap = None, None, None
    if cfg.disk != "none":
        where = devices.image_dir()
        held.callback(shutil.rmtree, where, ignore_errors=True)
        image = devices.make_image(where, cfg.disk_mb, cfg.image)
        disk = str(image)
        if cfg.backing == "block":
            loop = devices.LoopDevice(image)
            held.callback(loop.release)  # nobody holds it then: it detaches
            disk = loop.path
    ends = None
    if cfg.nic != "none" and cfg.net == "tap":
        tap = devices.Tap()
        held.callback(tap.close)  # QEMU is gone: the tap goes with this last descriptor
        assert tap.fd is not None, "open until closed"
        ends = TapEnds(tap.fd, tap.guest, tap.host)
    initrd = guest.initramfs(files + devices.module_files(kernel, list(cfg.modules)))
    return Acquired(
        Plumbing(
            kernel=kernel,
            initrd=initrd,
            console=workdir / "console.log",
            qmp=workdir / "qmp.sock",
            disk=disk,
            tap=ends,
            tsc_khz=host_tsc_khz() if cfg.machine == "microvm" else None,
            vhost_net=os.path.exists("/dev/vhost-net"),
        ),
        tap,
        loop,
    )


# -- QEMU's threads -----------------------------------------------------------------------
def vcpu_threads(pid: int) -> list[int]:
    """QEMU's vCPU threads (named "CPU n/KVM" or "CPU n/TCG": -name ...,debug-threads=on)."""
    out = []
    for tid in tasks([pid]):
        try:  # a worker thread may end between the listing and the read
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                if f.read().startswith("CPU "):
                    out.append(tid)
        except OSError:
            continue
    return out


def pin_emulator_apart(pid: int, cpu: int | None) -> list[int]:
    """Pinned, the vCPU threads keep the host CPU the guest was given and
    QEMU's other threads (the main loop, RCU, I/O) move to the other CPUs,
    as libvirt's emulatorpin does: they no longer preempt the vCPU.  Returns
    the CPUs the emulator threads got (empty: left with the vCPUs, as where
    no thread is named as a vCPU: moving every thread would take the guest
    off the CPU the run says it is on)."""
    others = other_cpus(cpu)
    if cpu is None or not others:  # unpinned, or no other CPU
        return []
    vcpus = set(vcpu_threads(pid))
    if not vcpus:
        return []
    for tid in tasks([pid]):
        try:
            os.sched_setaffinity(tid, {cpu} if tid in vcpus else set(others))
        except OSError:
            continue
    return others


def threads_cpus(pid: int, tids: list[int]) -> list[int]:
    """The host CPUs these threads may run on, as the kernel has them (the
    facts say where the guest ran, not where it was meant to)."""
    out: set[int] = set()
    for tid in tids:
        try:
            out |= os.sched_getaffinity(tid)
        except OSError:
            continue
    return sorted(out)


def place_threads(pid: int, cpu: int | None, emulator: str) -> tuple[list[int], list[int], list[int]]:
    """QEMU's threads placed (emulator=apart: pin_emulator_apart) and read
    back from the kernel: (its vCPU threads, the CPUs they may run on, the
    CPUs its other threads may)."""
    if emulator == "apart":
        pin_emulator_apart(pid, cpu)
    vcpus = vcpu_threads(pid)
    return vcpus, threads_cpus(pid, vcpus), threads_cpus(pid, [t for t in tasks([pid]) if t not in vcpus])


def qemu_available() -> tuple[bool, str]:
    """Whether QEMU guests boot here (QEMU, a kernel, busybox), and whether with KVM."""
    if not shutil.which(QEMU):
        return False, f"{QEMU} is missing (apt install qemu-system-x86)"
    try:
        find_kernel()
        guest.busybox_path()
    except (TargetError, UserError) as e:
        return False, str(e)
    ok, why = kvm_usable()
    return True, "KVM may work (probed at boot)" if ok else f"TCG only: {why}"


class HeldDevices:
    """What a boot of the guest holds on the host (acquire): its tap
    (net=tap), its loop device (backing=block) and its image, released
    together once QEMU is gone."""

    def __init__(self) -> None:
        self.tap: devices.Tap | None = None  # while booted with net=tap
        self.loop: devices.LoopDevice | None = None  # while booted with backing=block
        self.tap_link = ""
        self._stack = ExitStack()

    def acquire(self, cfg: QemuConfig, workdir: Path, files: tuple, accel: str) -> Plumbing:
        """A boot's devices, made; the paths and descriptors QEMU is given."""
        self._stack = ExitStack()
        got = acquire(cfg, workdir, files, self._stack)
        self.tap, self.loop = got.tap, got.loop
        if self.tap is not None:
            vhost = "on" if vhost_net(accel, got.plumbing.vhost_net) else "off"
            self.tap_link = f"{self.tap.describe()}, vhost-net {vhost}"
        return got.plumbing

    def release(self) -> None:
        self._stack.close()
        self.tap = self.loop = None

    def peer_address(self, c: QemuConfig) -> str | None:
        if c.nic == "none":
            return None
        return self.tap.host if c.net == "tap" and self.tap else devices.HOST_FROM_GUEST

    def listen(self, c: QemuConfig) -> tuple[str, object] | None:
        """net=tap: the tap's host end, in its namespace (None: the host's loopback)."""
        return (self.tap.host, self.tap.ns) if c.net == "tap" and self.tap else None

    def facts(self, c: QemuConfig) -> dict:
        return {
            **({"tap": self.tap_link} if c.nic != "none" and c.net == "tap" else {}),
            **({"loop_direct_io": self.loop.direct_io if self.loop else None} if c.disk != "none" else {}),
        }


# -- the target ------------------------------------------------------------------------------
class QemuTarget(ChannelTarget):
    kind = "qemu"
    summary = "a QEMU guest booted by vmtax (KVM where it boots, else TCG)"
    allowed_options = frozenset(
        {
            "accel",
            "smp",
            "mem",
            "cpu",
            "machine",
            "kernel",
            "boot_timeout",
            "chan",
            "disk",
            "image",
            "cache",
            "backing",
            "disk_size",
            "nic",
            "net",
            "binary",
            "emulator",
        }
    )
    # what QEMU takes beyond the guest's RAM (MiB): its own heap and, under
    # TCG, the translated code (a 256M TCG guest here: ~220 MiB resident)
    OVERHEAD_MB: ClassVar[dict[str, float]] = {"kvm": 64.0, "tcg": 160.0}

    @classmethod
    def prepare(cls, targets: list[Target]) -> str | None:
        return agree_kernels(targets)

    def __init__(self, name: str, options: dict[str, str]):
        super().__init__(name, options)
        self.config = QemuConfig.parse(name, options)
        self.accel: str | None = None
        self.accel_note = ""
        self.emulator_cpus: list[int] = []
        self.vcpu_cpus: list[int] = []
        self.held = HeldDevices()  # what launch() made, released by stop()
        self.plumbing: Plumbing | None = None  # what the running QEMU was given

    @property
    def binary(self) -> str:
        return self.config.binary

    @property
    def kernel(self) -> Path | None:
        return self.config.kernel

    @property
    def modules(self) -> tuple[str, ...]:
        return self.config.modules

    @classmethod
    def available(cls) -> tuple[bool, str]:
        return qemu_available()

    def scratch_dir(self) -> str | None:
        return devices.MOUNT if self.config.disk != "none" else super().scratch_dir()

    def on_disk(self) -> bool:
        return self.config.disk != "none"

    def peer_address(self) -> str | None:
        """Where the guest reaches the host's peers (asked once started)."""
        return self.held.peer_address(self.config)

    def peer_listen(self) -> tuple[str, object]:
        """net=tap: the tap's host end, in its namespace; net=user: the
        host's loopback, which slirp's 10.0.2.2 leads to."""
        return self.held.listen(self.config) or super().peer_listen()

    def agent_cpu(self) -> int | None:
        """Pinned, the whole guest runs on one host CPU and its agent on vCPU 0."""
        return 0 if self.host_cpu is not None else None

    def memory_need_mb(self) -> float:
        return self.config.mem_mb + self.OVERHEAD_MB[self.accel or self._accel_without_probe()]

    def vcpus(self) -> int:
        return self.config.smp

    # -- the accelerator: chosen without a probe, or probed by a boot with KVM ----------------
    def settles_at_start(self) -> bool:
        return self.config.accel == "auto" and kvm_usable(self.binary)[0]  # KVM not known to fail: start() probes it

    def _accel_without_probe(self) -> str:
        accel, note = accel_without_probe(self.config.accel, self.binary)
        self.accel_note = note or self.accel_note
        return accel

    def begin_start(self) -> None:
        """Started in two halves (vmtax scale), accel=auto takes KVM if it
        is usable, without start()'s fallback: where that is not known yet,
        scale starts its first guest with start(), which settles it (a
        failed KVM probe is remembered; kvm_usable() then says no)."""
        if self.accel is None:
            self.accel = self._accel_without_probe()
        super().begin_start()

    def start(self) -> None:
        """accel=auto: boot with KVM where it is usable, within
        KVM_PROBE_TIMEOUT, else (or where that boot fails: remembered) TCG."""
        want = self.config.accel
        if want == "auto":
            ok, why = kvm_usable(self.binary)
            if ok and self._boots_with_kvm():
                return
            if not ok:
                self.accel_note = f"TCG: {why}"
            want = "tcg"
        self.accel = want
        super().start()

    def _boots_with_kvm(self) -> bool:
        self.accel = "kvm"
        # the probe gives up early, unless boot_timeout= says how long a boot may take
        # here (a working KVM nested under TCG boots a guest in ~20 s)
        wanted_timeout = self.boot_timeout
        if "boot_timeout" not in self.options:
            self.boot_timeout = KVM_PROBE_TIMEOUT
        try:
            super().start()
            return True
        except TargetError as e:
            self.accel_note = f"KVM probe failed, fell back to TCG: {e}"
            guest.remember_probe("kvm", _probe_key(self.binary), str(e))
            self.stop()
            self.boot_timeout = wanted_timeout
            return False

    # -- a boot ------------------------------------------------------------------------------
    def launch(self) -> subprocess.Popen:
        assert self.workdir is not None and self.accel is not None, "begin_start made it, start() chose it"
        plumbing = self.plumbing = self.held.acquire(self.config, self.workdir, self.files, self.accel)
        tap = self.held.tap
        return self.spawn(qemu_argv(self.config, self.accel, plumbing), pass_fds=(tap.fd,) if tap else ())

    def take_state(self, source: Target | None = None) -> dict:
        """Run on in a new QEMU holding source's guest state (migration.take_state)."""
        return migration.take_state(self, source, qemu_argv)

    def stop(self) -> None:
        super().stop()
        self.held.release()  # QEMU is gone: its tap, loop device and image go too

    def after_boot(self) -> None:
        if self.held.loop is not None:
            self.held.loop.release()  # QEMU holds it: it detaches when QEMU goes
        if self.config.disk != "none":
            devices.check_mounted(self, devices.DISKS[self.config.disk].node)
        assert self.p is not None and self.plumbing is not None, "started"
        vcpus, self.vcpu_cpus, self.emulator_cpus = place_threads(self.p.pid, self.host_cpu, self.config.emulator)
        qmp = None
        if self.accel == "kvm":  # TCG has no VM exits to count
            try:
                qmp = Qmp(str(self.plumbing.qmp))  # the running QEMU's (a moved one's is in its move dir)
            except (OSError, ValueError) as e:
                self.probe_note = f"no QMP for exit counts: {e}"
        self.start_probe(self.root_pids, qmp=qmp, vcpu_tids=vcpus if self.accel == "kvm" else None)
        self.mem_overhead = rss_beyond_mapping(self.p.pid, self.config.mem_mb)

    def own_facts(self) -> dict:
        c = self.config
        return {
            "target_kind": self.kind,
            "accel": self.accel,
            "accel_note": self.accel_note,
            "guest_kernel_image": str(c.kernel or find_kernel(c.kernel_path)),
            **c.facts(),
            **self.held.facts(c),
            "emulator": c.emulator if self.host_cpu is not None else None,
            "emulator_threads_on": self.emulator_cpus or None,
            "vcpu_threads_on": self.vcpu_cpus or None,
            **self.probe_facts(),
        }

    def info(self):
        return replace(super().info(), accel=self.accel, idle_cpu_pct=self.idle_cpu, mem_overhead_mb=self.mem_overhead)


def _qemu_version(binary: str = QEMU) -> str:
    try:
        out = subprocess.run(
            [binary, "--version"], capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL
        ).stdout
        return out.splitlines()[0] if out else "?"
    except (OSError, subprocess.SubprocessError):
        return "?"
