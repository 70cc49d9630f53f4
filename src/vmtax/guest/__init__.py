"""What runs inside a target: a minimal root filesystem (busybox-static,
the static agent, /init and vmtax-shell), as a directory for containers or
a newc cpio initramfs for QEMU and UML."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
from pathlib import Path

from ..agent import agent_path
from ..errors import TargetError

HERE = Path(__file__).resolve().parent
BUSYBOX_CANDIDATES = ("/bin/busybox", "/usr/bin/busybox")


def busybox_path() -> Path:
    for p in BUSYBOX_CANDIDATES:
        if os.path.isfile(p):
            return Path(p)
    raise TargetError("busybox is missing: install busybox-static (make setup does)")


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    d = Path(base) / "vmtax"
    d.mkdir(parents=True, exist_ok=True)
    return d


def probe_memory(name: str) -> dict:
    """What earlier probes of this machine found (`name`: e.g. kvm, uml),
    keyed by whatever invalidates them (the host's boot id, a binary)."""
    try:
        return json.loads((cache_dir() / f"{name}-probe.json").read_text())
    except (OSError, ValueError):
        return {}


def remember_probe(name: str, key: str, finding: str) -> None:
    """Record a probe's finding ('' when the thing works, else why not)."""
    known = probe_memory(name)
    known[key] = finding[:300]
    (cache_dir() / f"{name}-probe.json").write_text(json.dumps(known))


def _files() -> list[tuple[str, Path]]:
    return [("bin/busybox", busybox_path()), ("vmtax-agent", agent_path()),
            ("init", HERE / "init"), ("vmtax-shell", HERE / "vmtax-shell")]


def _key() -> str:
    h = hashlib.sha256()
    for name, src in _files():
        h.update(name.encode() + b"\0" + src.read_bytes())
    return h.hexdigest()[:16]


def rootfs_dir() -> Path:
    """A directory root for containers, rebuilt when any input changes."""
    root = cache_dir() / f"rootfs-{_key()}"
    if root.is_dir():
        return root
    tmp = root.with_suffix(".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    for d in ("bin", "sbin", "proc", "sys", "dev", "tmp", "etc"):
        (tmp / d).mkdir(parents=True)
    for name, src in _files():
        shutil.copy2(src, tmp / name)
        os.chmod(tmp / name, 0o755)
    for applet in ("sh", "ip", "mount", "stty", "poweroff", "sync", "cat", "mkdir", "mknod", "ln"):
        os.symlink("busybox", tmp / "bin" / applet)
    (tmp / "tmp").chmod(0o1777)
    tmp.rename(root)
    return root


def initramfs() -> Path:
    """A gzip'd newc cpio of the root, for QEMU and UML (cached)."""
    out = cache_dir() / f"initramfs-{_key()}.cpio.gz"
    if not out.exists():
        from .cpio import write_newc
        tmp = out.with_suffix(".tmp")
        write_newc(tmp, rootfs_dir(), extra_nodes=[("dev/console", stat.S_IFCHR | 0o600, 5, 1)])
        tmp.rename(out)
    return out
