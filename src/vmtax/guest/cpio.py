"""A newc ("070701") cpio writer: enough for an initramfs, needs no root."""

from __future__ import annotations

import gzip
import os
import stat
from collections.abc import Sequence
from pathlib import Path


def _header(ino: int, mode: int, size: int, name: bytes, rmaj: int = 0, rmin: int = 0, nlink: int = 1) -> bytes:
    fields = [ino, mode, 0, 0, nlink, 0, size, 0, 0, rmaj, rmin, len(name) + 1, 0]
    hdr = b"070701" + b"".join(b"%08X" % f for f in fields) + name + b"\0"
    return hdr + b"\0" * (-len(hdr) % 4)


def _pad(n: int) -> bytes:
    return b"\0" * (-n % 4)


def write_newc(out: Path, root: Path, extra_nodes: Sequence[tuple[str, int, int, int]] = ()) -> None:
    """Archive every entry under root (dirs, files, symlinks), then device
    nodes given as (path, mode, major, minor), gzip-compressed."""
    ino = 1
    with gzip.open(out, "wb", compresslevel=6) as f:
        for path in _entries(root):
            f.write(_entry(ino, path, path.relative_to(root).as_posix().encode()))
            ino += 1
        for rel, mode, major, minor in extra_nodes:
            assert rel.split("/")[0] == "dev"
            f.write(_header(ino, mode, 0, rel.encode(), rmaj=major, rmin=minor))
            ino += 1
        f.write(_header(ino, 0, 0, b"TRAILER!!!"))


def _entries(root: Path) -> list[Path]:
    """Every entry under root, each directory's in name order."""
    names = []
    for dirpath, dirs, files in os.walk(root):
        dirs.sort()
        for n in sorted(dirs) + sorted(files):
            names.append(Path(dirpath, n))
    return names


def _entry(ino: int, path: Path, name: bytes) -> bytes:
    """One entry's header and data (a symlink's target, a file's bytes); b"" for another kind."""
    st = path.lstat()
    if stat.S_ISLNK(st.st_mode):
        target = os.readlink(path).encode()
        return _header(ino, stat.S_IFLNK | 0o777, len(target), name) + target + _pad(len(target))
    if stat.S_ISDIR(st.st_mode):
        return _header(ino, stat.S_IFDIR | stat.S_IMODE(st.st_mode), 0, name, nlink=2)
    if stat.S_ISREG(st.st_mode):
        data = path.read_bytes()
        return _header(ino, stat.S_IFREG | stat.S_IMODE(st.st_mode), len(data), name) + data + _pad(len(data))
    return b""
