"""A guest's devices before anything boots: options checked, drivers found
in the guest kernel's own modules, real images and loop devices."""
import glob
import os
import subprocess
import sys
from pathlib import Path

import pytest

from vmtax.errors import UserError
from vmtax.suite.workloads import BY_NAME
from vmtax.targets import devices, parse_target
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
@pytest.mark.parametrize("options,says", [
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
    ("nic=virtio,net=tap", "net must be one of user"),
    ("net=user", "net= without a NIC"),
    ("nic=virtio,machine=microvm", "nic=virtio needs machine=pc or q35 (microvm has no PCI bus)"),
])
def test_bad_device_options_are_one_line_before_anything_boots(options, says):
    with pytest.raises(UserError) as e:
        parse_target(f"qemu:{options}")
    assert says in str(e.value) and "\n" not in str(e.value)


@needs_kernel
@pytest.mark.parametrize("option,module,symbol", [("disk=ahci", "ahci", "SATA_AHCI"), ("nic=e1000", "e1000", "E1000")])
def test_a_driver_the_guest_kernel_lacks_is_named(option, module, symbol):
    if config_has(symbol):
        pytest.skip(f"this guest kernel has {module}")
    with pytest.raises(UserError, match=rf"{option} needs the {module} driver \(CONFIG_{symbol}\)"):
        parse_target(f"qemu:{option}")


@needs_kernel
def test_a_disk_and_a_nic_load_their_shared_modules_once():
    if not (config_has("VIRTIO_NET=m") and config_has("VIRTIO_BLK=m")):
        pytest.skip("virtio is built in or missing in this guest kernel")
    t = parse_target("qemu:nic=virtio,disk=virtio")
    assert len(t.modules) == len(set(t.modules)) and any(m.endswith("virtio_pci.ko") for m in t.modules)
    assert t.peer_address() == devices.HOST_FROM_GUEST and parse_target("qemu").peer_address() is None


def test_the_cli_says_a_bad_device_in_one_line_and_exits_2(tmp_path):
    p = subprocess.run([sys.executable, "-m", "vmtax.cli", "--db", str(tmp_path / "x.db"), "compare", "local",
                        "qemu:disk=floppy", "--bench", "getppid"], capture_output=True, text=True, timeout=60)
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
        assert img.stat().st_size == 64 * 2 ** 20 and img.stat().st_blocks * 512 < 64 * 2 ** 20  # sparse
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
    assert BY_NAME["disk_fsync"].parse((DATA / "fio-3.33-fsync.json").read_text()) == \
        {"iops": 3667.332667, "fsync_p99_us": 333.824, "_bytes": 15036416.0}  # the bytes: host CPU per GB
    assert BY_NAME["disk_randread"].parse((DATA / "fio-3.33-randread.json").read_text())["iops"] > 0


def test_host_cpu_per_gb_is_the_cpu_less_the_idle_rate_over_the_bytes():
    from types import SimpleNamespace
    from vmtax.runner import _per_gb
    guest = SimpleNamespace(host_probe=SimpleNamespace(idle={"host_cpu_ns": 0.1e9}))  # 0.1 s of CPU per s idle
    assert _per_gb(guest, 2e9, 10.0, 13.0, 10.0) == pytest.approx((3.0 - 1.0) / 2)  # s/GB
    assert _per_gb(guest, 2e9, 10.0, 10.5, 10.0) == 0.0  # never below zero
    assert _per_gb(guest, None, 10.0, 13.0, 1.0) is None and _per_gb(guest, 1e9, None, 1.0, 1.0) is None
