"""What runs inside a target: a minimal root filesystem (busybox-static,
the static agent, /init and vmtax-shell, plus the tools of the workloads
chosen, each with the shared libraries it loads), as a directory for
containers or a newc cpio initramfs for QEMU and UML; built once per
content and cached."""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
from functools import lru_cache
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


Extra = tuple[tuple[str, Path], ...]  # (path inside the root, host file)


def _files(extra: Extra = ()) -> list[tuple[str, Path]]:
    base = [("bin/busybox", busybox_path()), ("vmtax-agent", agent_path()),
            ("init", HERE / "init"), ("vmtax-shell", HERE / "vmtax-shell")]
    taken = {name for name, _ in base}
    return base + [(name, src) for name, src in extra if name not in taken]


@lru_cache(maxsize=256)
def _digest(path: str, mtime: float, size: int) -> bytes:
    return hashlib.sha256(Path(path).read_bytes()).digest()


def _key(extra: Extra = ()) -> str:
    h = hashlib.sha256()
    for name, src in _files(extra):
        st = src.stat()
        h.update(name.encode() + b"\0" + _digest(str(src), st.st_mtime, st.st_size))
    return h.hexdigest()[:16]


LDD_LINE = re.compile(r"^\s*(?:(\S+) => )?(/\S+) \(0x[0-9a-f]+\)$")


def closure(tools: list[str], data: list[str] = ()) -> Extra:
    """What a root needs to run these host executables: each one and every
    shared library it loads (its ELF dependencies, as ldd resolves them on
    this host, the dynamic loader included), at the same paths, plus the
    data files named.  TargetError naming what cannot be found."""
    out: dict[str, Path] = {}
    for tool in tools:
        exe = shutil.which(tool)
        if not exe:
            raise TargetError(f"{tool} is not installed on this host")
        out[exe.lstrip("/")] = Path(exe).resolve()
        try:
            p = subprocess.run(["ldd", exe], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.SubprocessError) as e:
            raise TargetError(f"cannot list the libraries of {exe}: {e}") from None
        if "not a dynamic executable" in p.stdout + p.stderr:
            continue
        for line in p.stdout.splitlines():
            if "not found" in line:
                raise TargetError(f"{exe} needs a library this host lacks: {line.strip()}")
            m = LDD_LINE.match(line)
            if m:
                out[m.group(2).lstrip("/")] = Path(m.group(2)).resolve()
    for d in data:
        if not os.path.isfile(d):
            raise TargetError(f"{d} is missing on this host")
        out[d.lstrip("/")] = Path(d).resolve()
    return tuple(sorted(out.items()))


def rootfs_dir(extra: Extra = ()) -> Path:
    """A directory root for containers, rebuilt when any input changes."""
    root = cache_dir() / f"rootfs-{_key(extra)}"
    if root.is_dir():
        return root
    tmp = root.with_suffix(".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    for d in ("bin", "sbin", "proc", "sys", "dev", "tmp", "etc"):
        (tmp / d).mkdir(parents=True)
    for name, src in _files(extra):
        (tmp / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, tmp / name)
        os.chmod(tmp / name, 0o755)
    for applet in ("sh", "ip", "mount", "stty", "poweroff", "sync", "cat", "mkdir", "mknod", "ln",
                   "sleep", "rm", "true"):
        os.symlink("busybox", tmp / "bin" / applet)
    (tmp / "tmp").chmod(0o1777)
    tmp.rename(root)
    return root


def initramfs(extra: Extra = ()) -> Path:
    """A gzip'd newc cpio of the root, for QEMU and UML (cached)."""
    out = cache_dir() / f"initramfs-{_key(extra)}.cpio.gz"
    if not out.exists():
        from .cpio import write_newc
        tmp = out.with_suffix(".tmp")
        write_newc(tmp, rootfs_dir(extra), extra_nodes=[("dev/console", stat.S_IFCHR | 0o600, 5, 1)])
        tmp.rename(out)
    return out
