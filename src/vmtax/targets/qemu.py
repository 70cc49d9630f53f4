"""QEMU guests that vmtax boots itself: the host's kernel (from /boot, or
kernel=PATH) with an initramfs of busybox-static and the agent.

Options: accel=kvm|tcg|auto (auto: KVM only if a guest actually boots with
it -- /dev/kvm can exist and still not run a standard kernel, as on nested
or PVM hosts; the probe waits 15 s, or boot_timeout= where given), smp=N,
mem=SIZE (512M, 1G), cpu=MODEL, machine=pc|microvm,
kernel=PATH, boot_timeout=SECONDS (default 120).  The channel is the guest's second serial port (ttyS1) on
QEMU's stdio; the first (the console) goes to a log file.

A scratch disk (devices.py): disk=virtio|scsi|nvme|ahci|ide|none (default
none: the scratch directory is a tmpfs), image=raw|qcow2, cache=none|writeback
(the host page cache: none is O_DIRECT), backing=file|block (a loop device over
the image, as an LVM volume would be), disk_size=SIZE (default 1G).  The guest
mounts it at /mnt/disk, and workloads and the agent's file rows work there.
A NIC: nic=virtio|e1000|rtl8139|none (default none), net=user (QEMU's
user-mode network: the host's loopback is 10.0.2.2 from the guest).
"""
from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import replace
from pathlib import Path

from .. import guest
from ..errors import TargetError, UserError
from . import devices
from .base import option_number
from .channel import ChannelTarget
from ..hostproc import boot_id, mem_and_swap_mb, rss_beyond_mapping, tasks
from ..hostprobe import Qmp
from ..proc import other_cpus

QEMU = "qemu-system-x86_64"
KVM_PROBE_TIMEOUT = 15.0  # a KVM guest is ready in ~1 s; a TCG one in ~3 s here


def find_kernel(explicit: str | None = None) -> Path:
    if explicit:
        p = Path(explicit)
        if not p.is_file():
            raise UserError(f"kernel '{explicit}' does not exist")
        return p
    cands = kernels()
    if not cands:
        raise TargetError("no kernel under /boot: install linux-image-cloud-amd64 "
                          "(make setup does) or give kernel=PATH")
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
    first kernel every one of them can use.  A line saying what was done or
    why not; None when they already agree."""
    free = [t for t in targets if isinstance(t, QemuTarget) and not t.options.get("kernel")]
    default = (kernels() or [None])[0]
    if len({t.kernel or default for t in free}) <= 1:
        return None
    for kernel in kernels():
        try:
            mods = [_modules(kernel, t.needs) for t in free]
        except UserError:
            continue
        for t, m in zip(free, mods):
            t.kernel, t.modules = kernel, m
        return f"every qemu target boots {kernel.name}: one of them needs a driver only it has"
    return ("the qemu targets boot different kernels (no kernel under /boot has every driver they need): "
            + ", ".join(f"{t.name}: {t.kernel.name}" for t in free))


def _version_key(path: str) -> list:
    return [int(x) if x.isdigit() else x for x in re.split(r"(\d+)", path)]


def host_tsc_khz() -> int | None:
    try:
        for line in open("/proc/cpuinfo"):
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


def qemu_binary(path: str, name: str) -> str:
    """A QEMU executable given by binary=PATH (what an A/B of two QEMU
    builds names), checked: UserError unless it says it is QEMU."""
    real = shutil.which(path)
    if not real:
        raise UserError(f"target '{name}': binary={path}: no such executable")
    if not _qemu_version(real).startswith("QEMU emulator version"):
        raise UserError(f"target '{name}': binary={path} is not a QEMU (its --version does not say "
                        f"'QEMU emulator version')")
    return real


class QemuTarget(ChannelTarget):
    kind = "qemu"
    summary = "a QEMU guest booted by vmtax (KVM where it boots, else TCG)"
    allowed_options = frozenset({"accel", "smp", "mem", "cpu", "machine", "kernel", "boot_timeout",
                                 "disk", "image", "cache", "backing", "disk_size", "nic", "net", "binary",
                                 "emulator"})

    @classmethod
    def prepare(cls, targets: list["QemuTarget"]) -> str | None:
        return agree_kernels(targets)

    def __init__(self, name: str, options: dict[str, str]):
        super().__init__(name, options)
        where = tempfile.gettempdir()
        if "," in where:  # -qmp unix:PATH,server=on and -serial file:PATH read a comma as a separator
            raise UserError(f"target '{name}': the temporary directory {where} holds a comma, which QEMU's "
                            f"option syntax cannot take in a path: give a TMPDIR without one")
        self.binary = qemu_binary(options["binary"], name) if "binary" in options else QEMU
        self.accel_wanted = options.get("accel", "auto")
        if self.accel_wanted not in ("auto", "kvm", "tcg"):
            raise UserError(f"accel must be kvm, tcg or auto, got '{self.accel_wanted}'")
        self.machine = options.get("machine", "pc")
        if self.machine not in ("pc", "q35", "microvm"):
            raise UserError(f"machine must be pc, q35 or microvm, got '{self.machine}'")
        self.mem_mb = parse_size_mb(options.get("mem", "1G"))
        if self.mem_mb < 128:
            raise UserError(f"target '{name}': mem must be at least 128M for the guest kernel, "
                            f"got '{options['mem']}'")
        most = mem_and_swap_mb()
        if most is not None and self.mem_mb > most:  # QEMU could not map it: refused before it starts
            raise UserError(f"target '{name}': mem={options['mem']} is more memory than this host has "
                            f"({most / 1024:.1f} GiB of RAM and swap)")
        self.smp = option_number(name, options, "smp", 1, lo=1, hi=256, integer=True)
        self.emulator = options.get("emulator", "apart")
        if self.emulator not in ("apart", "together"):
            raise UserError(f"target '{name}': emulator must be apart or together, got '{self.emulator}'")
        self._devices_from(name, options)
        self.accel: str | None = None
        self.accel_note = ""
        self.emulator_cpus: list[int] = []
        self.vcpu_cpus: list[int] = []

    def _devices_from(self, name: str, options: dict[str, str]) -> None:
        """The disk options, checked before anything boots (UserError: exit 2)."""
        def choice(key: str, allowed, default: str) -> str:
            v = options.get(key, default)
            if v not in allowed:
                raise UserError(f"target '{name}': {key} must be one of {', '.join(allowed)}, got '{v}'")
            return v
        self.nic = choice("nic", (*devices.NICS, "none"), "none")
        self.net = choice("net", devices.NETS, "user")
        self.needs: list = []  # (drivers, what) the guest kernel must have
        if self.nic != "none":
            if self.machine == "microvm":
                raise UserError(f"target '{name}': nic={self.nic} needs machine=pc or q35 (microvm has no PCI bus)")
            self.needs.append((devices.NICS[self.nic].drivers, f"target '{name}': nic={self.nic}"))
        elif "net" in options:
            raise UserError(f"target '{name}': net= without a NIC: add nic=virtio (or e1000, rtl8139)")
        if self.net == "tap" and devices.tap_allowed():
            raise UserError(f"target '{name}': net=tap: {devices.tap_allowed()}")
        self.tap: devices.Tap | None = None
        self.tap_link = ""
        self._disk_from(name, options, choice)
        self.kernel, self.modules = (choose_kernel(options.get("kernel"), self.needs) if self.needs
                                     else (None, []))

    def _disk_from(self, name: str, options: dict[str, str], choice) -> None:
        self.disk = choice("disk", (*devices.DISKS, "none"), "none")
        self.image = choice("image", devices.IMAGES, "raw")
        self.cache = choice("cache", devices.CACHES, "none")
        self.backing = choice("backing", devices.BACKINGS, "file")
        try:
            self.disk_mb = parse_size_mb(options.get("disk_size", "1G"))
        except UserError:
            raise UserError(f"target '{name}': malformed disk_size '{options['disk_size']}' (try 1G or 512M)") \
                from None
        self.loop: devices.LoopDevice | None = None
        self.image_dir: Path | None = None
        if self.disk == "none":
            extra = [k for k in ("image", "cache", "backing", "disk_size") if k in options]
            if extra:
                raise UserError(f"target '{name}': {', '.join(extra)} without a disk: add disk=virtio "
                                f"(or scsi, nvme, ahci, ide)")
            return
        model = devices.DISKS[self.disk]
        if self.machine not in model.machines:
            raise UserError(f"target '{name}': disk={self.disk} needs machine={' or '.join(model.machines)}"
                            f"{' (microvm has no PCI bus)' if self.machine == 'microvm' else ''}, "
                            f"not {self.machine}")
        if self.disk_mb < 64:
            raise UserError(f"target '{name}': disk_size must be at least 64M, got '{options['disk_size']}'")
        if self.backing == "block" and self.image != "raw":
            raise UserError(f"target '{name}': backing=block is a loop device over a raw image: "
                            f"image=qcow2 cannot go with it")
        if self.backing == "block" and not os.access("/dev/loop-control", os.R_OK | os.W_OK):
            raise UserError(f"target '{name}': backing=block needs loop devices (/dev/loop-control), "
                            f"which this user cannot use: run as root")
        self.needs.append((model.drivers + devices.EXT4, f"target '{name}': disk={self.disk}"))

    def scratch_dir(self) -> str | None:
        return devices.MOUNT if self.disk != "none" else super().scratch_dir()

    def on_disk(self) -> bool:
        return self.disk != "none"

    def peer_address(self) -> str | None:
        """Where the guest reaches the host's peers (asked once started)."""
        if self.nic == "none":
            return None
        return self.tap.host if self.net == "tap" and self.tap else devices.HOST_FROM_GUEST

    def peer_listen(self) -> tuple[str, object]:
        """net=tap: the tap's host end, in its namespace; net=user: the
        host's loopback, which slirp's 10.0.2.2 leads to."""
        return (self.tap.host, self.tap.ns) if self.net == "tap" and self.tap else super().peer_listen()

    def _disk_args(self) -> list[str]:
        if self.disk == "none":
            return []
        self.image_dir = devices.image_dir()  # before anything that can fail: stop() removes it
        img = devices.make_image(self.image_dir, self.disk_mb, self.image)
        path = str(img)
        if self.backing == "block":
            self.loop = devices.LoopDevice(img)
            path = self.loop.path
        drive = (f"file={path},if=none,id=d0,format={self.image},cache={self.cache},aio=threads,"
                 f"discard=ignore")
        out = ["-drive", drive]
        for dev in devices.DISKS[self.disk].devices:
            out += ["-device", dev.format(drive="d0")]
        return out

    @classmethod
    def available(cls) -> tuple[bool, str]:
        if not shutil.which(QEMU):
            return False, f"{QEMU} is missing (apt install qemu-system-x86)"
        try:
            find_kernel()
            guest.busybox_path()
        except (TargetError, UserError) as e:
            return False, str(e)
        ok, why = kvm_usable()
        return True, "KVM may work (probed at boot)" if ok else f"TCG only: {why}"

    def argv(self, accel: str) -> list[str]:
        kernel = self.kernel or find_kernel(self.options.get("kernel"))
        append = ["console=ttyS0", "quiet", "loglevel=3", "panic=-1", "vmtax.chan=/dev/ttyS1"]
        disk = self._disk_args()
        if disk:
            append += [f"vmtax.disk={devices.DISKS[self.disk].node}"]
        nic = []
        if self.nic != "none":
            netdev = "user,id=n0"
            if self.net == "tap":
                self.tap = devices.Tap()  # closed in stop(); gone once QEMU's copy closes too
                append += [f"vmtax.net={self.tap.guest},{self.tap.host}"]
                # vhost-net moves the virtio rings into the host kernel: what a
                # KVM user runs; it needs KVM's ioeventfds, so not under TCG
                vhost = "on" if accel == "kvm" and os.path.exists("/dev/vhost-net") else "off"
                netdev = f"tap,id=n0,fd={self.tap.fd},vhost={vhost}"
                self.tap_link = f"{self.tap.describe()}, vhost-net {vhost}"
            else:
                append += [f"vmtax.net={devices.GUEST_ADDR},{devices.HOST_FROM_GUEST}"]
            nic = ["-netdev", netdev, "-device", f"{devices.NICS[self.nic].device},netdev=n0"]
        if self.modules:
            append += ["vmtax.modules=" + ",".join(self.modules)]
        machine = self.machine
        if machine == "microvm":
            khz = host_tsc_khz()
            if khz:
                append.append(f"tsc_early_khz={khz}")  # without it some microvm boots hang
            machine = "microvm,isa-serial=on,rtc=on"
        cpu = self.options.get("cpu", "host" if accel == "kvm" else "max")
        # ttyS0: the console, to a log file; ttyS1: the channel, on stdio.
        # microvm wires only one -serial, so its second port is named explicitly.
        channel = (["-chardev", "stdio,id=vmtaxchan", "-device",
                    "isa-serial,chardev=vmtaxchan,iobase=0x2f8,irq=3"]
                   if self.machine == "microvm" else ["-serial", "stdio"])
        # debug-threads=on names the vCPU threads "CPU n/TCG" (or /KVM): the pinning and the exit probe find them by it
        return [self.binary, "-name", "vmtax,debug-threads=on", "-nodefaults", "-no-user-config", "-display", "none",
                "-accel", accel, "-M", machine, "-cpu", cpu, "-smp", str(self.smp),
                "-m", f"{self.mem_mb}M", "-kernel", str(kernel),
                "-initrd", str(guest.initramfs(self.files + devices.module_files(kernel, self.modules))),
                "-append", " ".join(append), "-serial", f"file:{self.console_log}",
                *channel, *disk, *nic, "-qmp", f"unix:{self.workdir / 'qmp.sock'},server=on,wait=off",
                "-no-reboot"]

    def stop(self) -> None:
        super().stop()
        if self.tap is not None:
            self.tap.close()  # QEMU is gone: the tap goes with this last descriptor
            self.tap = None
        if self.loop is not None:
            self.loop.release()  # nobody holds it now: it detaches
            self.loop = None
        if self.image_dir is not None:
            shutil.rmtree(self.image_dir, ignore_errors=True)
            self.image_dir = None

    def agent_cpu(self) -> int | None:
        """Pinned, the whole guest runs on one host CPU and its agent on vCPU 0."""
        return 0 if self.host_cpu is not None else None

    # what QEMU takes beyond the guest's RAM (MiB): its own heap and, under
    # TCG, the translated code (a 256M TCG guest here: ~220 MiB resident)
    OVERHEAD_MB = {"kvm": 64.0, "tcg": 160.0}

    def memory_need_mb(self) -> float:
        accel = self.accel or self._accel_without_probe()
        return self.mem_mb + self.OVERHEAD_MB[accel]

    def vcpus(self) -> int:
        return self.smp

    def settles_at_start(self) -> bool:
        return self.accel_wanted == "auto" and kvm_usable(self.binary)[0]  # KVM not known to fail: start() probes it

    def begin_start(self) -> None:
        """Started in two halves (vmtax scale), accel=auto takes KVM if it
        is usable, without start()'s fallback: where that is not known yet,
        scale starts its first guest with start(), which settles it (a
        failed KVM probe is remembered; kvm_usable() then says no)."""
        if self.accel is None:
            self.accel = self._accel_without_probe()
        super().begin_start()

    def _accel_without_probe(self) -> str:
        if self.accel_wanted != "auto":
            return self.accel_wanted
        ok, why = kvm_usable(self.binary)
        if not ok:
            self.accel_note = f"TCG: {why}"
        return "kvm" if ok else "tcg"

    def launch(self) -> subprocess.Popen:
        argv = self.argv(self.accel)
        return self.spawn(argv, pass_fds=(self.tap.fd,) if self.tap else ())

    def start(self) -> None:
        want = self.accel_wanted
        if want == "auto":
            ok, why = kvm_usable(self.binary)
            if ok:
                self.accel = "kvm"
                # the probe gives up early, unless boot_timeout= says how long a boot may take
                # here (a working KVM nested under TCG boots a guest in ~20 s)
                wanted_timeout = self.boot_timeout
                if "boot_timeout" not in self.options:
                    self.boot_timeout = KVM_PROBE_TIMEOUT
                try:
                    super().start()
                    return
                except TargetError as e:
                    self.accel_note = f"KVM probe failed, fell back to TCG: {e}"
                    guest.remember_probe("kvm", _probe_key(self.binary), str(e))
                    self.stop()
                    self.boot_timeout = wanted_timeout
            else:
                self.accel_note = f"TCG: {why}"
            want = "tcg"
        self.accel = want
        super().start()

    def after_boot(self) -> None:
        if self.loop is not None:
            self.loop.release()  # QEMU holds it: it detaches when QEMU goes
        if self.disk != "none":
            devices.check_mounted(self, devices.DISKS[self.disk].node)
        if self.emulator == "apart":
            pin_emulator_apart(self.p.pid, self.host_cpu)
        vcpus = vcpu_threads(self.p.pid)  # where each kind of thread may run, read back from the kernel
        self.vcpu_cpus = threads_cpus(self.p.pid, vcpus)
        self.emulator_cpus = threads_cpus(self.p.pid, [t for t in tasks([self.p.pid]) if t not in vcpus])
        qmp = None
        if self.accel == "kvm":  # TCG has no VM exits to count
            try:
                qmp = Qmp(str(self.workdir / "qmp.sock"))
            except (OSError, ValueError) as e:
                self.probe_note = f"no QMP for exit counts: {e}"
        self.start_probe(lambda: [self.p.pid], qmp=qmp, vcpu_tids=vcpus if self.accel == "kvm" else None)
        self.mem_overhead = rss_beyond_mapping(self.p.pid, self.mem_mb)

    def own_facts(self) -> dict:
        return {"target_kind": self.kind, "accel": self.accel, "accel_note": self.accel_note,
                "machine": self.machine, "smp": self.smp, "mem_mb": self.mem_mb,
                "guest_kernel_image": str(self.kernel or find_kernel(self.options.get("kernel"))),
                "nic": self.nic, **({"net": self.net, "nic_device": devices.NICS[self.nic].note,
                                     **({"tap": self.tap_link} if self.net == "tap" else {})}
                                    if self.nic != "none" else {}),
                "disk": self.disk, **({"image": self.image, "cache": self.cache, "backing": self.backing,
                                       "disk_mb": self.disk_mb, "disk_device": devices.DISKS[self.disk].note,
                                       "loop_direct_io": self.loop.direct_io if self.loop else None}
                                      if self.disk != "none" else {}),
                "emulator": self.emulator if self.host_cpu is not None else None,
                "emulator_threads_on": self.emulator_cpus or None,
                "vcpu_threads_on": self.vcpu_cpus or None, **self.probe_facts(),
                "qemu": _qemu_version(self.binary), "qemu_binary": shutil.which(self.binary) or self.binary}

    def info(self):
        return replace(super().info(), accel=self.accel, idle_cpu_pct=self.idle_cpu,
                       mem_overhead_mb=self.mem_overhead)


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
    if not others:
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


def _qemu_version(binary: str = QEMU) -> str:
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10,
                             stdin=subprocess.DEVNULL).stdout
        return out.splitlines()[0] if out else "?"
    except (OSError, subprocess.SubprocessError):
        return "?"
