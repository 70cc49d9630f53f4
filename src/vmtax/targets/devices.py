"""The devices a QEMU guest gets besides its channel: a scratch disk of a
chosen model, image format, host cache mode and backing (a file, or a loop
block device standing in for seed 004's LVM volume); a NIC of a chosen model
on QEMU's user-mode network; and the guest kernel modules their drivers need.

vmtax makes the image itself (sparse, ext4 made on the host, so the guest
spends no boot time formatting it), in a private directory under /var/tmp
(a disk on a usual host: /tmp may be a tmpfs), removed when the guest
stops and swept by the next run if a controller was killed.  A loop device
is attached with the kernel's autoclear flag: it detaches itself when its
last user (QEMU) closes it, whatever killed whom.  The guest's /init loads
the modules named on the kernel command line and mounts the disk at
/mnt/disk, which becomes the target's scratch directory.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import shutil
import struct
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .. import proc
from ..errors import TargetError, UserError
from ..netns import NetNs, netns_allowed

MOUNT = "/mnt/disk"
IMAGE_PARENT = "/var/tmp"


@dataclass(frozen=True)
class DiskModel:
    devices: tuple[str, ...]  # QEMU -device arguments; {drive} is the drive id
    node: str  # the block device the guest sees
    drivers: tuple[tuple[str, str], ...]  # (module, CONFIG_ symbol), in load order
    machines: tuple[str, ...]
    note: str


VIRTIO_PCI = ("virtio_pci", "VIRTIO_PCI")
DISKS: dict[str, DiskModel] = {
    "virtio": DiskModel(
        ("virtio-blk-pci,drive={drive}",),
        "/dev/vda",
        (VIRTIO_PCI, ("virtio_blk", "VIRTIO_BLK")),
        ("pc", "q35"),
        "virtio-blk on PCI",
    ),
    "scsi": DiskModel(
        ("virtio-scsi-pci,id=vscsi", "scsi-hd,drive={drive},bus=vscsi.0"),
        "/dev/sda",
        (VIRTIO_PCI, ("virtio_scsi", "SCSI_VIRTIO"), ("sd_mod", "BLK_DEV_SD")),
        ("pc", "q35"),
        "virtio-scsi with a scsi-hd",
    ),
    "nvme": DiskModel(
        ("nvme,drive={drive},serial=vmtax",),
        "/dev/nvme0n1",
        (("nvme", "BLK_DEV_NVME"),),
        ("pc", "q35"),
        "an emulated NVMe controller",
    ),
    "ahci": DiskModel(
        ("ich9-ahci,id=sata", "ide-hd,drive={drive},bus=sata.0"),
        "/dev/sda",
        (("ahci", "SATA_AHCI"), ("sd_mod", "BLK_DEV_SD")),
        ("pc", "q35"),
        "an emulated AHCI SATA disk",
    ),
    "ide": DiskModel(
        ("ide-hd,drive={drive},bus=ide.0",),
        "/dev/sda",
        (("ata_piix", "ATA_PIIX"), ("sd_mod", "BLK_DEV_SD")),
        ("pc",),
        "an emulated IDE disk on the pc machine's PIIX controller",
    ),
}


@dataclass(frozen=True)
class NicModel:
    device: str  # QEMU -device, on netdev n0
    drivers: tuple[tuple[str, str], ...]  # (module, CONFIG_ symbol), in load order
    note: str


NICS: dict[str, NicModel] = {
    "virtio": NicModel("virtio-net-pci", (VIRTIO_PCI, ("virtio_net", "VIRTIO_NET")), "virtio-net on PCI"),
    "e1000": NicModel("e1000", (("e1000", "E1000"),), "an emulated Intel 82540EM (e1000)"),
    # QEMU models the C+ revision, which 8139too hands to 8139cp
    "rtl8139": NicModel("rtl8139", (("8139cp", "8139CP"),), "an emulated Realtek RTL8139C+"),
}
# the guest's ext4 scratch disk: ext4 asks for its crc32c checksum by name,
# which no modprobe in the guest would resolve (built in on the cloud kernel)
EXT4 = (("crc32c_generic", "CRYPTO_CRC32C"), ("ext4", "EXT4_FS"))
NETS = ("user", "tap")
# QEMU's user-mode network (slirp): the guest is 10.0.2.15, and 10.0.2.2 is
# the host's loopback as seen from it: where the host-side peers listen
GUEST_ADDR, HOST_FROM_GUEST = "10.0.2.15/24", "10.0.2.2"
# net=tap: each guest's tap lives in a network namespace of its own that
# vmtax makes (netns.py), the host's end of a /30 on it and the peers beside
# it: the guest's traffic crosses the host kernel's network stack, never
# the host's own namespace, so every guest can have the same addresses
TAP_HOST, TAP_GUEST = "10.213.0.1", "10.213.0.2/30"
IMAGES = ("raw", "qcow2")
CACHES = ("none", "writeback")
BACKINGS = ("file", "block")


def kernel_release(kernel: Path) -> str:
    """The release of a /boot/vmlinuz-RELEASE image (modules and config are
    found by it); '' when the name does not say."""
    m = re.match(r"vmlinuz-(.+)$", kernel.name)
    return m.group(1) if m else ""


def _config(release: str) -> dict[str, str]:
    try:
        text = Path(f"/boot/config-{release}").read_text()
    except OSError:
        return {}
    return dict(re.findall(r"^CONFIG_(\w+)=(\S+)$", text, re.MULTILINE))


def _deps(release: str) -> dict[str, list[str]]:
    """modules.dep: module path -> the paths it needs (relative to the
    release's module directory)."""
    try:
        text = Path(f"/lib/modules/{release}/modules.dep").read_text()
    except OSError:
        return {}
    out = {}
    for line in text.splitlines():
        mod, _, needs = line.partition(":")
        out[mod.strip()] = needs.split()
    return out


def modules_for(kernel: Path, drivers: tuple[tuple[str, str], ...], what: str) -> list[str]:
    """The module files (relative to /lib/modules/RELEASE), in load order,
    that give the guest kernel these drivers; [] for built-in ones.
    UserError naming the driver the kernel lacks."""
    release = kernel_release(kernel)
    config, deps = _config(release), _deps(release)
    by_name = {re.sub(r"\.ko(\.(xz|zst|gz))?$", "", Path(p).name).replace("-", "_"): p for p in deps}
    order: list[str] = []

    def add(path: str) -> None:
        for d in deps.get(path, []):
            add(d)
        if path not in order:
            order.append(path)

    for module, symbol in drivers:
        state = config.get(symbol)
        if state == "y":
            continue
        if state == "m" and module in by_name:
            add(by_name[module])
            continue
        raise UserError(
            f"{what} needs the {module} driver (CONFIG_{symbol}), which the guest kernel "
            f"{kernel.name} {'lacks' if config else 'cannot be checked for (no /boot/config-' + release + ')'}"
            f"; give kernel=PATH of one that has it (Debian's linux-image-amd64 has e1000, "
            f"ahci and rtl8139; the cloud kernel has virtio, nvme, scsi and ide)"
        )
    return order


def module_files(kernel: Path, modules: list[str]) -> tuple[tuple[str, Path], ...]:
    release = kernel_release(kernel)
    return tuple((f"lib/modules/{release}/{m}", Path(f"/lib/modules/{release}/{m}")) for m in modules)


# -- images --------------------------------------------------------------------------
def make_image(where: Path, size_mb: int, fmt: str) -> Path:
    """A sparse image with an ext4 filesystem made on the host (inode tables
    and journal written now, not lazily by the guest during a run)."""
    mkfs = shutil.which("mkfs.ext4") or shutil.which("mke2fs")
    if not mkfs:
        raise TargetError("mkfs.ext4 is missing (apt install e2fsprogs)")
    raw = where / "disk.raw"
    try:
        with open(raw, "wb") as f:
            f.truncate(size_mb * 2**20)
    except OSError as e:
        raise TargetError(f"cannot make the guest's disk image {raw}: {e.strerror}") from None
    _run(
        [mkfs, "-q", "-F", "-t", "ext4", "-E", "lazy_itable_init=0,lazy_journal_init=0", "-L", "vmtax", str(raw)],
        "mkfs.ext4",
    )
    if fmt == "raw":
        return raw
    img = where / "disk.qcow2"
    _run(["qemu-img", "convert", "-f", "raw", "-O", "qcow2", str(raw), str(img)], "qemu-img convert")
    raw.unlink()
    return img


def check_mounted(target, node: str) -> None:
    """TargetError unless the guest mounted its disk: else the tools would
    write to the initramfs, unsaid."""
    try:
        list(target.run_tool(["grep", "-q", f" {MOUNT} ", "/proc/mounts"], timeout=30))
    except proc.ChildFailed:
        raise TargetError(
            f"{target.name}: the guest did not mount its disk ({node}){target.channel.console_tail()}"
        ) from None


def _run(argv: list[str], what: str) -> None:
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.SubprocessError) as e:
        raise TargetError(f"{what} failed: {e}") from None
    if p.returncode != 0:
        raise TargetError(f"{what} failed: {(p.stderr or p.stdout).strip()[:300]}")


def image_dir(kind: str = "qemu") -> Path:
    """A private directory for images on the host's disk; what a killed
    controller left there goes first."""
    proc.sweep(IMAGE_PARENT)
    try:
        return proc.private_dir(kind, IMAGE_PARENT)
    except OSError as e:
        raise TargetError(f"cannot make a directory for the guest's disk in {IMAGE_PARENT}: {e.strerror}") from None


# -- loop devices ---------------------------------------------------------------------
_LOOP_CTL_GET_FREE, _LOOP_SET_FD, _LOOP_CLR_FD = 0x4C82, 0x4C00, 0x4C01
_LOOP_SET_STATUS64, _LOOP_SET_DIRECT_IO, _LOOP_CONFIGURE = 0x4C04, 0x4C08, 0x4C0A
_LO_FLAGS_AUTOCLEAR = 4
_INFO64 = struct.Struct("=QQQQQIIII64s64s32sQQ")  # struct loop_info64, 232 bytes
_CONFIG = struct.Struct("=II232s8Q")  # struct loop_config: fd, block_size, info, reserved


class LoopDevice:
    """A loop block device over an image file, with autoclear: once the
    handle is closed, the device detaches when its last user closes it.
    LOOP_CONFIGURE (Linux 5.8) attaches and sets autoclear in one step;
    older kernels get LOOP_SET_FD then LOOP_SET_STATUS64."""

    def __init__(self, image: Path):
        self.fd, self.direct_io = -1, False
        try:
            backing = os.open(image, os.O_RDWR | os.O_CLOEXEC)
        except OSError as e:
            raise TargetError(f"cannot open {image}: {e.strerror}") from None
        try:
            for _ in range(10):  # another process may take the free device first
                if self._attach(backing, image):
                    break
            else:
                raise TargetError("no free loop device after 10 tries")
        finally:
            os.close(backing)
        # like a logical volume, not a second page cache over the file's
        # (where the file's filesystem allows direct I/O)
        try:
            fcntl.ioctl(self.fd, _LOOP_SET_DIRECT_IO, 1)
            self.direct_io = True
        except OSError:
            pass

    def _attach(self, backing: int, image: Path) -> bool:
        """One try: False when the device was taken meanwhile."""
        try:
            ctl = os.open("/dev/loop-control", os.O_RDWR | os.O_CLOEXEC)
            try:
                n = fcntl.ioctl(ctl, _LOOP_CTL_GET_FREE)
            finally:
                os.close(ctl)
            self.path = f"/dev/loop{n}"
            self.fd = os.open(self.path, os.O_RDWR | os.O_CLOEXEC)
        except OSError as e:
            raise TargetError(
                f"backing=block needs a loop device: {e.strerror} (root, and /dev/loop* in this environment)"
            ) from None
        # struct loop_info64: eight numbers (device, inode, offsets, ...) left 0, the flags, the file's name,
        # the crypt name and key, and the two init words
        fields = (*[0] * 8, _LO_FLAGS_AUTOCLEAR, str(image)[-63:].encode(), b"", b"", 0, 0)
        info = _INFO64.pack(*fields)
        try:
            fcntl.ioctl(self.fd, _LOOP_CONFIGURE, _CONFIG.pack(backing, 0, info, *[0] * 8))
            return True
        except OSError as e:
            if e.errno == errno.EBUSY:
                return self._retry()
            if e.errno not in (errno.EINVAL, errno.ENOTTY):
                return self._fail(image, e)
        try:  # before Linux 5.8
            fcntl.ioctl(self.fd, _LOOP_SET_FD, backing)
        except OSError as e:
            return self._retry() if e.errno == errno.EBUSY else self._fail(image, e)
        try:
            fcntl.ioctl(self.fd, _LOOP_SET_STATUS64, info)
        except OSError as e:
            fcntl.ioctl(self.fd, _LOOP_CLR_FD)  # ours: we attached it
            return self._fail(image, e)
        return True

    def _retry(self) -> bool:
        os.close(self.fd)
        self.fd = -1
        return False

    def _fail(self, image: Path, e: OSError) -> bool:
        self._retry()
        raise TargetError(f"cannot attach {self.path} to {image}: {e.strerror}")

    def release(self) -> None:
        """Let go (QEMU holds it now, or nobody: then it detaches)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def loop_attached(path: str) -> bool:
    """Whether a loop device still has a backing file (for the tests)."""
    name = os.path.basename(path)
    return os.path.exists(f"/sys/block/{name}/loop/backing_file")


# -- tap network -----------------------------------------------------------------

TUNSETIFF = 0x400454CA
IFF_TAP, IFF_NO_PI, IFF_VNET_HDR = 0x0002, 0x1000, 0x4000


def tap_allowed() -> str | None:
    """Why this user cannot make a tap device in a namespace, or None."""
    if not os.path.exists("/dev/net/tun"):
        return "there is no /dev/net/tun (load the tun module)"
    if os.geteuid() != 0:
        return "a tap device and its address need root (CAP_NET_ADMIN): run as root, or use net=user"
    return netns_allowed()


class Tap:
    """A tap device for one guest, made inside a network namespace of its
    own with the host's end of a /30 on it: the guest's traffic crosses the
    host kernel's network stack, as with a bridged or routed tap in
    production, not QEMU's user-mode TCP/IP -- and not the host's own
    namespace, whose interfaces and routes stay as they were.  It is not
    persistent: the kernel removes it when the last holder of its
    descriptor closes it (vmtax and the QEMU it is handed to), and the
    namespace goes with its holder, whatever killed whom."""

    def __init__(self):
        self.fd: int | None = None
        self.ns: NetNs | None = None
        why = tap_allowed()
        if why:
            raise TargetError(f"net=tap: {why}")
        try:
            self.ns = NetNs("net=tap")
            with self.ns.entered():  # the tap is made where /dev/net/tun is opened
                self.fd = os.open("/dev/net/tun", os.O_RDWR | os.O_CLOEXEC)
                ifr = fcntl.ioctl(
                    self.fd, TUNSETIFF, struct.pack("16sH22x", b"vmtax%d", IFF_TAP | IFF_NO_PI | IFF_VNET_HDR)
                )
            self.name = ifr[:16].rstrip(b"\0").decode()
            self.host, self.guest = TAP_HOST, TAP_GUEST
            self.ns.run(["ip", "addr", "add", f"{self.host}/30", "dev", self.name])
            self.ns.run(["ip", "link", "set", self.name, "up"])
        except (OSError, TargetError) as e:
            self.close()
            if isinstance(e, TargetError):
                raise
            raise TargetError(f"net=tap: cannot make a tap device: {e.strerror or e}") from None

    def describe(self) -> str:
        assert self.ns is not None, "made in __init__"
        return f"{self.name} in network namespace {self.ns.describe()}: host {self.host}, guest {self.guest}"

    def close(self) -> None:
        """vmtax's descriptor and the namespace's holder; the device goes
        when QEMU's descriptor goes too."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        if self.ns is not None:
            self.ns.close()
            self.ns = None


def link_exists(name: str) -> bool:
    return os.path.exists(f"/sys/class/net/{name}")
