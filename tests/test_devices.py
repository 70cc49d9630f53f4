"""A guest's devices before anything boots: options checked, drivers found
in the guest kernel's own modules, real images and loop devices."""

import glob
import itertools
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import wait_until
from vmtax.errors import UserError
from vmtax.hostproc import running
from vmtax.suite.workloads import BY_NAME
from vmtax.targets import devices, parse_target, qemu
from vmtax.targets.local import filesystem
from vmtax.targets.qemu import find_kernel

DATA = Path(__file__).parent / "data" / "workloads"
KERNELS = glob.glob("/boot/vmlinuz-*")
needs_kernel = pytest.mark.skipif(not KERNELS, reason="no guest kernel under /boot (make setup installs one)")


def config_has(symbol: str) -> bool:
    release = devices.kernel_release(find_kernel())
    text = Path(f"/boot/config-{release}").read_text() if os.path.exists(f"/boot/config-{release}") else ""
    want = f"CONFIG_{symbol}" if "=" in symbol else f"CONFIG_{symbol}="  # SYMBOL (set) or SYMBOL=m
    return any(line.startswith(want) for line in text.splitlines())


@needs_kernel
@pytest.mark.parametrize(
    "options,says",
    [
        ("disk=floppy", "disk must be one of virtio, scsi, nvme, ahci, ide, none"),
        ("disk=virtio,image=vmdk", "image must be one of raw, qcow2"),
        ("disk=virtio,cache=unsafe", "cache must be one of none, writeback"),
        ("image=qcow2", "image without a disk"),
        ("disk=nvme,machine=microvm", "disk=nvme needs machine=pc or q35 (microvm has no PCI bus)"),
        ("disk=ide,machine=q35", "disk=ide needs machine=pc"),
        ("disk=virtio,backing=block,image=qcow2", "image=qcow2 cannot go with it"),
        ("disk=virtio,disk_size=10M", "disk_size must be at least 64M"),
        ("disk=virtio,disk_size=lots", "malformed disk_size 'lots'"),
        ("nic=ne2000", "nic must be one of virtio, e1000, rtl8139, none"),
        ("nic=virtio,net=bridge", "net must be one of user, tap"),
        ("net=user", "net= without a NIC"),
        ("nic=virtio,machine=microvm", "nic=virtio needs machine=pc or q35 (microvm has no PCI bus)"),
        ("container:net=wifi", "net must be one of none, host, bridge, slirp4netns"),
        ("container:engine=unshare,net=bridge", "net=bridge needs engine=podman"),
        ("uml:disk=virtio", "disk must be ubd or none"),
        ("uml:disk_size=2G", "disk_size without a disk: add disk=ubd"),
        ("uml:disk=ubd,disk_size=1M", "disk_size must be at least 64M"),
    ],
)
def test_bad_device_options_are_one_line_before_anything_boots(options, says):
    with pytest.raises(UserError) as e:
        parse_target(options if ":" in options else f"qemu:{options}")
    assert says in str(e.value) and "\n" not in str(e.value)


def kernels_with(symbol: str) -> list[str]:
    return [
        k
        for k in sorted(KERNELS)
        if f"CONFIG_{symbol}=" in Path(f"/boot/config-{devices.kernel_release(Path(k))}").read_text(errors="replace")
    ]


@needs_kernel
@pytest.mark.parametrize("option,module,symbol", [("disk=ahci", "ahci", "SATA_AHCI"), ("nic=e1000", "e1000", "E1000")])
def test_a_driver_the_chosen_guest_kernel_lacks_is_named(option, module, symbol):
    lacking = [k for k in KERNELS if k not in kernels_with(symbol)]
    if not lacking:
        pytest.skip(f"every kernel under /boot has {module}")
    with pytest.raises(UserError, match=rf"{option} needs the {module} driver \(CONFIG_{symbol}\)"):
        parse_target(f"qemu:{option},kernel={lacking[0]}")


@needs_kernel
def test_a_device_boots_a_kernel_that_has_its_driver_and_the_others_follow():
    """qemu:nic=e1000 picks a kernel with e1000 when the default lacks it;
    compared with it, a virtio guest boots the same kernel."""
    have = kernels_with("E1000")
    if not have:
        pytest.skip("no kernel under /boot has e1000 (make setup installs linux-image-amd64)")
    from vmtax.targets.qemu import agree_kernels, find_kernel

    e1000, virtio, plain = (parse_target(t) for t in ("qemu:nic=e1000", "qemu:nic=virtio,label=b", "qemu:label=c"))
    assert str(e1000.kernel) in have and any(m.endswith("/e1000.ko") for m in e1000.modules)
    note = agree_kernels([e1000, virtio, plain])
    if virtio.kernel == e1000.kernel and find_kernel() == e1000.kernel:
        assert note is None
    else:
        assert note and e1000.kernel.name in note
    assert virtio.kernel == plain.kernel == e1000.kernel
    assert any(m.endswith("/virtio_net.ko") for m in virtio.modules) or config_has("VIRTIO_NET=y")


def test_net_tap_without_root_is_one_line_before_anything_boots(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(UserError, match=r"net=tap: (a tap device and its address need root|there is no /dev/net/tun)"):
        parse_target("qemu:nic=virtio,net=tap")


def _links(ns_pid: int | None = None) -> str:
    where = ["nsenter", f"--net=/proc/{ns_pid}/ns/net"] if ns_pid else []
    return subprocess.run([*where, "ip", "-o", "addr"], capture_output=True, text=True).stdout


@pytest.mark.skipif(devices.tap_allowed() is not None, reason=str(devices.tap_allowed()))
def test_a_tap_lives_in_a_namespace_of_its_own_and_goes_with_its_last_descriptor():
    host = (_links(), subprocess.run(["ip", "route"], capture_output=True, text=True).stdout)
    tap = devices.Tap()
    name, ns_pid, ns_path = tap.name, tap.ns.pid, tap.ns.path
    ns_id = os.stat(ns_path).st_ino
    held = os.dup(tap.fd)  # QEMU's copy, in a real run
    try:
        inside = _links(ns_pid)
        assert any(name in line and f"inet {tap.host}/30" in line for line in inside.splitlines()), inside
        assert tap.guest.startswith(tap.host.rsplit(".", 1)[0])
        # the host's own namespace: not a device, address or route more
        assert (_links(), subprocess.run(["ip", "route"], capture_output=True, text=True).stdout) == host
        assert not devices.link_exists(name)
        tap.close()  # the namespace's holder is gone; QEMU's descriptor still holds the tap
        assert not os.path.exists(ns_path)
    finally:
        os.close(held)
    ns_left = subprocess.run(["lsns", "-t", "net", "-n", "-o", "NS"], capture_output=True, text=True).stdout.split()
    assert str(ns_id) not in ns_left


@needs_kernel
def test_a_disk_and_a_nic_load_their_shared_modules_once():
    if not (config_has("VIRTIO_NET=m") and config_has("VIRTIO_BLK=m")):
        pytest.skip("virtio is built in or missing in this guest kernel")
    t = parse_target("qemu:nic=virtio,disk=virtio")
    assert len(t.modules) == len(set(t.modules)) and any(m.endswith("virtio_pci.ko") for m in t.modules)
    assert t.peer_address() == devices.HOST_FROM_GUEST and parse_target("qemu").peer_address() is None


def test_the_cli_says_a_bad_device_in_one_line_and_exits_2(tmp_path):
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "vmtax.cli",
            "--db",
            str(tmp_path / "x.db"),
            "compare",
            "local",
            "qemu:disk=floppy",
            "--bench",
            "getppid",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert "disk must be one of" in p.stderr


@needs_kernel
def test_modules_come_from_the_guest_kernels_own_tree_dependencies_first():
    kernel = find_kernel()
    if not config_has("SCSI_VIRTIO"):
        pytest.skip("this guest kernel has no virtio-scsi")
    mods = devices.modules_for(kernel, devices.DISKS["scsi"].drivers, "disk=scsi")
    deps = devices._deps(devices.kernel_release(kernel))
    for i, m in enumerate(mods):
        assert all(mods.index(d) < i for d in deps[m]), m  # every dependency loaded before it
    names = [Path(m).name for m in mods]
    if config_has("SCSI_VIRTIO=m"):
        assert "virtio_scsi.ko" in names
    for name, src in devices.module_files(kernel, mods):
        assert name.startswith("lib/modules/") and src.is_file()


@pytest.mark.parametrize("fmt,magic,offset", [("raw", b"\x53\xef", 1080), ("qcow2", b"QFI\xfb", 0)])
def test_images_are_made_with_their_filesystem(tmp_path, fmt, magic, offset):
    img = devices.make_image(tmp_path, 64, fmt)
    with open(img, "rb") as f:
        f.seek(offset)
        assert f.read(len(magic)) == magic
    if fmt == "raw":
        assert img.stat().st_size == 64 * 2**20 and img.stat().st_blocks * 512 < 64 * 2**20  # sparse
    assert [p.name for p in tmp_path.iterdir()] == [img.name]  # the raw one is gone after conversion


@pytest.mark.skipif(not os.access("/dev/loop-control", os.R_OK | os.W_OK), reason="no loop devices for this user")
def test_a_loop_device_detaches_itself_when_its_last_user_closes_it(tmp_path):
    import fcntl
    import time

    from vmtax.errors import TargetError

    img = devices.make_image(tmp_path, 64, "raw")
    try:
        loop = devices.LoopDevice(img)
    except TargetError as e:
        if "needs a loop device" in str(e):  # no /dev/loopN nodes in this environment
            pytest.skip(str(e))
        raise
    name = os.path.basename(loop.path)
    user = os.open(loop.path, os.O_RDONLY)  # QEMU, in a real run
    try:
        assert devices.loop_attached(loop.path)
        assert Path(f"/sys/block/{name}/loop/autoclear").read_text().strip() == "1"
        assert Path(f"/sys/block/{name}/loop/backing_file").read_text().strip() == str(img)
        loop.release()
        assert devices.loop_attached(loop.path)  # QEMU still has it
    finally:
        os.close(user)
        loop.release()
    for _ in range(50):
        if not devices.loop_attached(loop.path):
            break
        time.sleep(0.1)
    if devices.loop_attached(loop.path):  # never leak it, whatever failed
        with open(loop.path) as f:
            fcntl.ioctl(f, 0x4C01)
        pytest.fail(f"{loop.path} stayed attached")


def test_local_dir_puts_the_baseline_on_the_hosts_disk(tmp_path):
    assert filesystem("/dev/shm") == "tmpfs" and filesystem("/proc/self") == "proc"
    assert not parse_target("local").on_disk()
    t = parse_target(f"local:dir={tmp_path}")
    assert t.on_disk() == (filesystem(str(tmp_path)) not in ("tmpfs", "ramfs"))
    with pytest.raises(UserError, match="not a writable directory"):
        parse_target("local:dir=/nonexistent/x")


def test_fsync_latency_is_read_from_fios_sync_section():
    assert BY_NAME["disk_fsync"].parse((DATA / "fio-3.33-fsync.json").read_text()) == {
        "iops": 3667.332667,
        "fsync_p99_us": 333.824,
        "_bytes": 15036416.0,
    }  # the bytes: host CPU per GB
    assert BY_NAME["disk_randread"].parse((DATA / "fio-3.33-randread.json").read_text())["iops"] > 0


def test_host_cost_per_unit_is_the_cost_less_the_idle_rate_over_the_work():
    from types import SimpleNamespace

    from vmtax.engine.hostcost import per_unit

    # 0.1 s of CPU and 50 context switches per second while the guest idles
    guest = SimpleNamespace(host_probe=SimpleNamespace(idle={"host_cpu_ns": 0.1e9, "host_context_switches": 50.0}))
    before = {"user": 10.0, "sys": 0.0, "switches": 1000.0}
    after = {"user": 12.25, "sys": 0.75, "switches": 3000.0}  # 3 s of CPU, a quarter of it in the kernel
    got = per_unit(guest, "GB", {"_bytes": 2e9}, before, after, 10.0, 0.5)
    assert got["host_cpu_per_unit"] == pytest.approx((3.0 - 1.0) / 2)  # s/GB
    assert got["host_cpu_sys_per_unit"] == pytest.approx(0.25) and got["host_cpu_user_per_unit"] == pytest.approx(0.75)
    assert got["host_context_switches_per_unit"] == pytest.approx((2000 - 500) / 2)
    assert got["peer_cpu_per_unit"] == pytest.approx(0.25)
    # transactions: milliseconds per 1000
    tx = per_unit(guest, "1000tx", {"_tx": 4000.0}, before, after, 10.0, None)
    assert tx["host_cpu_per_unit"] == pytest.approx(2.0 * 1e3 / 4) and "peer_cpu_per_unit" not in tx
    assert (
        per_unit(guest, "GB", {"_bytes": 2e9}, before, {**after, "user": 10.1, "sys": 0.0}, 10.0, None)[
            "host_cpu_per_unit"
        ]
        == 0.0
    )  # never below zero
    assert per_unit(guest, "GB", {}, before, after, 1.0, None) == {}
    assert per_unit(guest, "GB", {"_bytes": 1e9}, None, after, 1.0, None) == {}
    assert per_unit(guest, "", {"_bytes": 1e9}, before, after, 1.0, None) == {}


def test_per_unit_metrics_carry_the_workloads_unit_of_work():
    from types import SimpleNamespace

    from vmtax.metrics import unit_of
    from vmtax.model import Interval
    from vmtax.report.jsondoc import metric_rows

    assert BY_NAME["net_rr"].work == "1000tx" and BY_NAME["net_stream_tx"].work == "GB"
    assert BY_NAME["disk_fsync"].work == "GB" and BY_NAME["sysbench_cpu"].work == ""
    assert unit_of("host_cpu_per_unit", "1000tx") == "ms/1000tx" and unit_of("host_cpu_per_unit", "GB") == "s/GB"
    assert unit_of("host_context_switches_per_unit", "GB") == "switches/GB"
    assert unit_of("host_context_switches") == "switches"
    s = SimpleNamespace(ci=Interval(2.0, 1.0, 3.0), units=5)
    assert metric_rows({"host_cpu_per_unit": s}, "net_rr.p99_us")["host_cpu_per_unit"]["unit"] == "ms/1000tx"
    assert metric_rows({"host_cpu_per_unit": s}, "disk_fsync.iops")["host_cpu_per_unit"]["unit"] == "s/GB"
    assert BY_NAME["net_rr"].parse((DATA / "sockperf-3.7.txt").read_text())["_tx"] > 0


def test_context_switches_of_a_process_are_read_from_proc():
    from vmtax.hostprobe import switches

    a = switches([os.getpid()])
    time.sleep(0.01)  # a voluntary switch
    assert switches([os.getpid()]) > a > 0 and switches([2**22 + 7]) == 0


# -- builds as targets (issue 19): binary=, runtime= ----------------------------------
@pytest.mark.parametrize(
    "text,needle",
    [
        ("qemu:binary=/bin/true", "is not a QEMU"),
        ("qemu:binary=/no/such/qemu", "no such executable"),
        ("container:runtime=/etc/passwd", "no such executable OCI runtime"),
        ("container:runtime=/bin/true", "is not an OCI runtime"),
        ("container:engine=unshare,runtime=runc", "engine=unshare has none"),
        ("uml:binary=/etc/passwd", "is not a UML kernel"),
        ("uml:binary=/usr/bin/linux.uml,kernel=/usr/bin/linux.uml", "name the same thing"),
    ],
)
def test_an_unknown_build_is_one_line_before_anything_starts(text, needle):
    with pytest.raises(UserError, match=needle):
        parse_target(text)


@pytest.mark.skipif(not shutil.which("qemu-system-x86_64"), reason="qemu-system-x86 is not installed")
def test_qemu_binary_runs_that_build_and_says_its_version(tmp_path):
    """Another path to QEMU (a wrapper standing for a second build) is the
    one the target runs (QemuTarget.argv starts with self.binary; the
    version read from it is its fact: test_devices_e2e)."""
    wrapper = tmp_path / "qemu-b"
    wrapper.write_text(f'#!/bin/sh\nexec {shutil.which("qemu-system-x86_64")} "$@"\n')
    wrapper.chmod(0o755)
    t = parse_target(f"qemu:accel=tcg,binary={wrapper}")
    assert t.binary == str(wrapper)
    from vmtax.targets.qemu import _qemu_version

    assert _qemu_version(str(wrapper)).startswith("QEMU emulator version")
    assert parse_target("qemu:accel=tcg").binary == "qemu-system-x86_64"


def test_a_vcpu_thread_that_cannot_be_counted_leaves_no_counter_open():
    """exits_userspace counts every vCPU thread or none: where one cannot be opened (a thread
    gone), those already opened are closed, and the facts say why."""
    import os

    from vmtax.hostprobe import HostProbe, syscall_tracepoint

    if syscall_tracepoint()[0] is None:
        pytest.skip("no syscall tracepoint here: exits_userspace is not counted at all")
    before = set(os.listdir("/proc/self/fd"))
    p = HostProbe(lambda: [os.getpid()], vcpu_tids=[os.getpid(), 2**22 + 12345])  # the second: no such thread
    try:
        assert p.fds["exits_userspace"] == [] and "exits_userspace" in p.missing
        assert "exits_userspace" in p.facts()["host_probe_missing"]
    finally:
        p.close()
    assert set(os.listdir("/proc/self/fd")) == before


def test_the_qemu_command_line_is_built_for_every_device_option_and_makes_nothing(monkeypatch):
    """qemu_argv is a pure function of a guest's config and its plumbing:
    every disk model, image format, cache mode and backing, every NIC
    model on either network, each machine and accelerator, built without
    root, files or devices (whatever would make one refuses here)."""
    from vmtax.targets import qemu

    def refuse(*a, **kw):
        raise AssertionError("the command line made something")

    for name in ("make_image", "image_dir", "LoopDevice", "Tap", "module_files"):
        monkeypatch.setattr(devices, name, refuse)
    monkeypatch.setattr(qemu.guest, "initramfs", refuse)
    tap = qemu.TapEnds(7, devices.TAP_GUEST, devices.TAP_HOST)
    built = 0
    for machine in ("pc", "q35", "microvm"):
        for disk in (*devices.DISKS, "none"):
            if disk != "none" and machine not in devices.DISKS[disk].machines:
                continue
            for image, cache, backing in (
                (i, c, b)
                for i in devices.IMAGES
                for c in devices.CACHES
                for b in devices.BACKINGS
                if not (b == "block" and i != "raw")
            ):
                for nic, net in [("none", "user")] + [
                    (n, w) for n in devices.NICS for w in devices.NETS if machine != "microvm"
                ]:
                    for accel, chan in itertools.product(("kvm", "tcg"), qemu.CHANNELS):
                        if chan == "virtio" and machine == "microvm":
                            continue
                        cfg = qemu.QemuConfig(
                            accel=accel,
                            chan=chan,
                            machine=machine,
                            smp=2,
                            mem_mb=512,
                            nic=nic,
                            net=net,
                            disk=disk,
                            image=image,
                            cache=cache,
                            backing=backing,
                            modules=("kernel/virtio_pci.ko",),
                        )
                        path = "/dev/loop7" if backing == "block" else f"/img/disk.{image}"
                        p = qemu.Plumbing(
                            Path("/k/vmlinuz"),
                            Path("/k/initrd"),
                            Path("/w/console.log"),
                            Path("/w/qmp.sock"),
                            path if disk != "none" else None,
                            tap if net == "tap" else None,
                            2_000_000,
                            vhost_net=True,
                        )
                        _check_argv(qemu.qemu_argv(cfg, accel, p), cfg, accel, p)
                        built += 1
    assert built > 800


def _check_argv(argv: list[str], cfg, accel: str, p) -> None:
    def after(flag: str) -> list[str]:
        return [argv[i + 1] for i, a in enumerate(argv) if a == flag]

    append = after("-append")[0].split()
    assert argv[0] == cfg.binary and after("-accel") == [accel] and after("-smp") == ["2"] and after("-m") == ["512M"]
    assert after("-cpu") == ["host" if accel == "kvm" else "max"] and after("-M")[0].split(",")[0] == cfg.machine
    assert after("-kernel") == ["/k/vmlinuz"] and after("-initrd") == ["/k/initrd"]
    assert "vmtax.modules=kernel/virtio_pci.ko" in append
    assert ("tsc_early_khz=2000000" in append) == (cfg.machine == "microvm")
    assert ("isa-serial,chardev=vmtaxchan,iobase=0x2f8,irq=3" in argv) == (cfg.machine == "microvm")
    virtio = "virtserialport,bus=vmtaxser.0,chardev=vmtaxchan,name=vmtax" in argv
    assert virtio == (cfg.chan == "virtio") and ("virtio-serial-pci,id=vmtaxser" in argv) == virtio
    assert (f"vmtax.chan={'virtio:vmtax' if virtio else '/dev/ttyS1'}") in append
    assert (after("-serial") == ["file:/w/console.log", "stdio"]) == (cfg.chan == "serial" and cfg.machine != "microvm")
    assert after("-qmp") == ["unix:/w/qmp.sock,server=on,wait=off"] and "file:/w/console.log" in after("-serial")
    devs = after("-device")
    if cfg.disk == "none":
        assert not after("-drive") and not any(a.startswith("vmtax.disk=") for a in append)
    else:
        model = devices.DISKS[cfg.disk]
        assert after("-drive") == [
            f"file={p.disk},if=none,id=d0,format={cfg.image},cache={cfg.cache},aio=threads,discard=ignore"
        ]
        assert all(d.format(drive="d0") in devs for d in model.devices) and f"vmtax.disk={model.node}" in append
    if cfg.nic == "none":
        assert not after("-netdev") and not any(a.startswith("vmtax.net=") for a in append)
        return
    assert f"{devices.NICS[cfg.nic].device},netdev=n0" in devs
    if cfg.net == "tap":
        vhost = "on" if accel == "kvm" else "off"  # vhost-net needs KVM's ioeventfds
        assert after("-netdev") == [f"tap,id=n0,fd=7,vhost={vhost}"]
        assert f"vmtax.net={devices.TAP_GUEST},{devices.TAP_HOST}" in append
    else:
        assert after("-netdev") == ["user,id=n0"]
        assert f"vmtax.net={devices.GUEST_ADDR},{devices.HOST_FROM_GUEST}" in append


def test_the_channel_is_a_virtio_serial_port_where_the_kernel_has_its_driver_else_the_serial_port():
    cfg = qemu.QemuConfig.parse("qemu", {})
    assert cfg.chan == "virtio" and any(m.endswith("virtio_console.ko") for m in cfg.modules)
    assert cfg.facts()["channel"] == "virtio-serial port"
    assert qemu.QemuConfig.parse("qemu", {"chan": "serial"}).modules == ()  # nothing loaded for it
    assert qemu.QemuConfig.parse("qemu", {"machine": "microvm"}).chan == "serial"  # no PCI bus: the fallback
    with pytest.raises(UserError, match="chan=virtio needs machine=pc or q35"):
        qemu.QemuConfig.parse("qemu", {"machine": "microvm", "chan": "virtio"})
    with pytest.raises(UserError, match="chan must be one of auto, virtio, serial"):
        qemu.QemuConfig.parse("qemu", {"chan": "vsock"})


def test_a_kernel_without_virtio_console_falls_back_to_the_serial_port_unless_virtio_was_asked(monkeypatch):
    real = devices.modules_for

    def lacking(kernel, drivers, what):
        if any(m == "virtio_console" for m, _ in drivers):
            raise UserError(
                f"{what} needs the virtio_console driver (CONFIG_VIRTIO_CONSOLE), which the guest kernel lacks"
            )
        return real(kernel, drivers, what)

    monkeypatch.setattr(devices, "modules_for", lacking)
    assert qemu.QemuConfig.parse("qemu", {}).chan == "serial"
    with pytest.raises(UserError, match="chan=virtio needs the virtio_console driver"):
        qemu.QemuConfig.parse("qemu", {"chan": "virtio"})


def test_what_a_boot_is_given_is_released_by_one_exit_stack_on_every_path(monkeypatch, tmp_path):
    """acquire() makes a guest's image directory, loop device and tap at
    launch; its exit stack lets them go, last made first, when the guest
    stops -- and when a later step fails, what was made before it."""
    from contextlib import ExitStack

    from vmtax.errors import TargetError
    from vmtax.targets import qemu

    gone = []

    class Held:
        def __init__(self, what, *a):
            self.what, self.path, self.fd, self.guest, self.host = what, "/dev/loop9", 9, "g", "h"

        def release(self):
            gone.append(self.what)

        close = release

    monkeypatch.setattr(devices, "image_dir", lambda: tmp_path / "img")
    monkeypatch.setattr(devices, "make_image", lambda where, mb, fmt: (where.mkdir(), where / "disk.raw")[1])
    monkeypatch.setattr(devices, "LoopDevice", lambda image: Held("loop"))
    monkeypatch.setattr(devices, "Tap", lambda: Held("tap"))
    monkeypatch.setattr(qemu.guest, "initramfs", lambda files: tmp_path / "initrd")
    cfg = qemu.QemuConfig(disk="virtio", backing="block", nic="virtio", net="tap", kernel=Path("/k/vmlinuz"))
    with ExitStack() as held:
        got = qemu.acquire(cfg, tmp_path, (), held)
        assert got.plumbing.disk == "/dev/loop9" and got.plumbing.tap.fd == 9 and (tmp_path / "img").is_dir()
        assert gone == []
    assert gone == ["tap", "loop"] and not (tmp_path / "img").exists()
    gone.clear()

    def no_tap():
        raise TargetError("net=tap: no")

    monkeypatch.setattr(devices, "Tap", no_tap)
    with pytest.raises(TargetError):
        with ExitStack() as held:
            qemu.acquire(cfg, tmp_path, (), held)
    assert gone == ["loop"] and not (tmp_path / "img").exists()


def test_a_runtime_whose_version_hangs_is_one_line_and_leaves_nothing(tmp_path, monkeypatch):
    """`RUNTIME --version` that never answers: a UserError saying it timed
    out, and the runtime's own children killed with it (the timeout killed
    only the direct child: its sleep was left with PPID 1)."""
    from vmtax.targets import container

    monkeypatch.setattr(container, "VERSION_TIMEOUT", 1.0, raising=False)
    hung, pids = tmp_path / "hangrt", tmp_path / "pids"
    hung.write_text(f"#!/bin/sh\nsleep 100000 & echo $! > {pids}\nwait\n")
    hung.chmod(0o755)
    t0 = time.monotonic()
    with pytest.raises(UserError, match=r"--version timed out \(1 s\)"):
        parse_target(f"container:runtime={hung}")
    assert time.monotonic() - t0 < 5
    sleep = int(pids.read_text())
    assert wait_until(lambda: not running(sleep), 3), f"its sleep {sleep} is still running"
