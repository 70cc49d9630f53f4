"""What the nested rigs (kvm-rig, xen-rig) share: the outer guest's kernel
and its initramfs (busybox, the modules in load order, the rig's own /init),
cached by content in vmtax's cache."""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from pathlib import Path

from vmtax import guest
from vmtax.errors import UserError
from vmtax.guest.cpio import write_newc
from vmtax.targets import devices
from vmtax.targets.qemu import kernels


def outer_kernel(drivers: tuple[tuple[str, str], ...], what: str) -> tuple[Path, list[str]]:
    """The first kernel under /boot whose modules give these drivers, and
    the module files in load order; UserError naming what is missing."""
    first = None
    for k in kernels():
        try:
            return k, devices.modules_for(k, drivers, what)
        except UserError as e:
            first = first or e
    raise first or UserError("no kernel under /boot (linux-image-amd64)")


def initramfs(kernel: Path, modules: list[str], init: Path, prefix: str) -> Path:
    """busybox, the modules in load order (listed in /modules) and init,
    cached as PREFIX-HASH.cpio.gz by content."""
    release = devices.kernel_release(kernel)
    files = [("bin/busybox", guest.busybox_path()), ("init", init)]
    files += [(f"lib/modules/{release}/{m}", Path(f"/lib/modules/{release}/{m}")) for m in modules]
    order = "".join(f"lib/modules/{release}/{m}\n" for m in modules)
    h = hashlib.sha256(order.encode())
    for name, src in files:
        h.update(name.encode() + b"\0" + src.read_bytes())
    out = guest.cache_dir() / f"{prefix}-{h.hexdigest()[:16]}.cpio.gz"
    if out.exists():
        return out

    def build(dest: Path) -> None:
        root = dest.parent / "root"
        for name, src in files:
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, root / name)
            os.chmod(root / name, 0o755)
        (root / "modules").write_text(order)
        for d in ("dev", "proc", "sys"):
            (root / d).mkdir()
        write_newc(dest, root, extra_nodes=[("dev/console", stat.S_IFCHR | 0o600, 5, 1)])

    return guest.publish(out, build)
