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
from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path

from .. import proc
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


def remember_probe(name: str, key: str, finding: str) -> str:
    """Record a probe's finding ('' when the thing works, else why not);
    returns it as recorded."""
    known = probe_memory(name)
    known[key] = finding[:300]
    publish(cache_dir() / f"{name}-probe.json", lambda tmp: tmp.write_text(json.dumps(known)))
    return known[key]


def publish(dest: Path, build: Callable[[Path], object]) -> Path:
    """Put a cache entry (a file or a directory) in place whole: build(path)
    makes it under a private directory beside dest, then a rename publishes
    it.  Any number of vmtax processes may build one entry at once: each
    builds its own, the last file renamed wins, a directory renamed first
    stays (all are alike: the key is their content).  What a killed build
    left is swept (proc.sweep)."""
    proc.sweep(str(dest.parent))
    work = proc.private_dir("build", str(dest.parent))
    try:
        build(work / dest.name)
        try:
            os.rename(work / dest.name, dest)
        except OSError:
            if not dest.is_dir():  # not another's whole directory: a real failure
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return dest


Extra = tuple[tuple[str, Path], ...]  # (path inside the root, host file)


APPLETS = ("sh", "ip", "mount", "stty", "poweroff", "sync", "cat", "mkdir", "mknod", "ln", "sleep", "rm", "true", "cp")


def _files(extra: Extra = ()) -> list[tuple[str, Path]]:
    """The root's files: its own, then the extras (never over its own or a
    busybox applet: /bin/sh in a root is busybox's, not the host's dash)."""
    base = [
        ("bin/busybox", busybox_path()),
        ("vmtax-agent", agent_path()),
        ("init", HERE / "init"),
        ("vmtax-shell", HERE / "vmtax-shell"),
    ]
    taken = {name for name, _ in base} | {f"bin/{a}" for a in APPLETS}
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


def closure(tools: list[str], data: Sequence[str] = ()) -> Extra:
    """What a root needs to run these host executables: each one and every
    shared library it loads (its ELF dependencies, as ldd resolves them on
    this host, the dynamic loader included), at the same paths, plus the
    data files named.  TargetError naming what cannot be found."""
    out: dict[str, Path] = {}
    for tool in tools:
        exe = tool if os.path.isabs(tool) and os.path.isfile(tool) else shutil.which(tool)
        if not exe:
            raise TargetError(f"{tool} is not installed on this host")
        out[exe.lstrip("/")] = Path(exe).resolve()
        out.update(_libraries(exe))
    for d in data:
        out.update(_data_files(d))
    return tuple(sorted(out.items()))


def _libraries(exe: str) -> dict[str, Path]:
    """The shared libraries an executable loads, as ldd resolves them here."""
    try:
        p = subprocess.run(["ldd", exe], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as e:
        raise TargetError(f"cannot list the libraries of {exe}: {e}") from None
    out: dict[str, Path] = {}
    if "not a dynamic executable" in p.stdout + p.stderr:
        return out
    for line in p.stdout.splitlines():
        if "not found" in line:
            raise TargetError(f"{exe} needs a library this host lacks: {line.strip()}")
        m = LDD_LINE.match(line)
        if m:
            out[m.group(2).lstrip("/")] = Path(m.group(2)).resolve()
    return out


def _data_files(d: str) -> dict[str, Path]:
    """A data file named, or every regular file of a tree."""
    if os.path.isdir(d):
        return {
            f.lstrip("/"): Path(f).resolve()
            for top, _, names in os.walk(d)
            for f in (os.path.join(top, n) for n in names)
            if os.path.isfile(f)
        }
    if not os.path.isfile(d):
        raise TargetError(f"{d} is missing on this host")
    return {d.lstrip("/"): Path(d).resolve()}


# what a traced run touches that is no file for a root: the kernel's and the
# run's own places, and the loader's cache (a root's libraries sit elsewhere)
TRACE_SKIP = ("/proc/", "/sys/", "/dev/", "/run/", "/tmp/", "/var/tmp/", "/etc/ld.so.cache")
TRACE_OK = re.compile(r'^\d*\s*(execve|openat|open)\((?:AT_FDCWD, )?"([^"\\]+)".*\) = (\d+)')


def traced(argv: list[str], cwd: str, env: dict | None = None, timeout: float = 900) -> Extra:
    """What a root needs to run a command as it runs here: run it once on
    this host under strace -f, keep every absolute path it opened or
    executed (outside cwd and the kernel's trees) and the libraries of every
    program it executed (the dynamic loader too, which the kernel opens
    unseen).  For a toolchain, whose files no ldd finds (cc1, as, ld, the
    headers, crt1.o, libc.so's linker script).  TargetError if it fails."""
    files, programs = _strace(argv, cwd, env, timeout)
    here = os.path.realpath(cwd) + "/"

    def ours(f: str) -> bool:
        return os.path.realpath(f).startswith(here) or f.startswith(here)

    keep = [f for f in files | programs if not f.startswith(TRACE_SKIP) and not ours(f) and os.path.isfile(f)]
    found = _without_unused_plugins(keep, programs)
    return tuple(sorted((os.path.normpath(k), v) for k, v in found.items() if not ours("/" + k)))


def _strace(argv: list[str], cwd: str, env: dict | None, timeout: float) -> tuple[set[str], set[str]]:
    """The absolute paths a command opened and the programs it executed,
    run once under strace -f (its whole tree killed on a timeout, on
    Ctrl-C and with vmtax)."""
    strace = shutil.which("strace")
    if not strace:
        raise TargetError("strace is not installed on this host (make setup installs it)")
    import tempfile

    with tempfile.TemporaryDirectory(prefix="vmtax-trace-") as tmp:
        try:
            p = proc.spawn(
                [strace, "-f", "-ff", "-qq", "-e", "trace=execve,open,openat", "-o", os.path.join(tmp, "t"), *argv],
                cwd=cwd,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        except OSError as e:
            raise TargetError(f"could not trace {argv[0]}: {e}") from None
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill_group(p)
            raise TargetError(f"{' '.join(argv[:3])} did not finish within {timeout:.0f} s on this host") from None
        except BaseException:
            proc.kill_group(p)
            raise
        proc.kill_group(p)  # reaped already: nothing of the build stays behind it
        if p.returncode != 0:
            tail = (err or out).strip().splitlines()[-1:] or ["no output"]
            raise TargetError(f"{' '.join(argv[:3])} failed on this host (status {p.returncode}): {tail[0][:200]}")
        return _read_traces(tmp)


def _read_traces(tmp: str) -> tuple[set[str], set[str]]:
    """The paths opened and the programs executed, from strace -ff's files."""
    files: set[str] = set()
    programs: set[str] = set()
    for name in os.listdir(tmp):
        with open(os.path.join(tmp, name), errors="replace") as f:
            for line in f:
                m = TRACE_OK.match(line)
                if m and m.group(2).startswith("/"):
                    (programs if m.group(1) == "execve" else files).add(m.group(2))
    return files, programs


def _without_unused_plugins(keep: list[str], programs: set[str]) -> dict[str, Path]:
    """The files kept and the programs' libraries, less binutils' plugins
    the build did not name.  binutils load every plugin in their
    bfd-plugins directory, whether the build uses it or not (LLVM's gold
    plugin brings its libraries): a plugin is kept only where the build
    names it itself (gcc passes its LTO plugin by path), and the libraries
    only a dropped plugin loads go with it (ldd's spelling; ld opens its
    link inputs by other paths)."""
    real: dict[str, list[str]] = {}
    for path in keep:
        real.setdefault(os.path.realpath(path), []).append(path)
    plugins = {f for f in keep if "/bfd-plugins/" in f and len(real[os.path.realpath(f)]) == 1}
    keep = [f for f in keep if f not in plugins]
    theirs = {k for k, _ in closure(sorted(plugins))}
    ran = dict(closure(sorted(x for x in programs if os.path.isfile(x))))  # ldd once per program
    opened = [f for f in keep if ".so" in os.path.basename(f) and f.lstrip("/") not in theirs]
    only_plugins = theirs - set(ran) - {k for k, _ in closure(sorted(opened))}
    found = dict(ran)
    found.update((f.lstrip("/"), Path(f).resolve()) for f in keep if f.lstrip("/") not in only_plugins)
    return found


def rootfs_dir(extra: Extra = ()) -> Path:
    """A directory root for containers, rebuilt when any input changes."""
    root = cache_dir() / f"rootfs-{_key(extra)}"
    if not root.is_dir():
        publish(root, lambda tmp: _fill_root(tmp, extra))
    return root


def _fill_root(tmp: Path, extra: Extra) -> None:
    for d in ("bin", "sbin", "proc", "sys", "dev", "tmp", "etc"):
        (tmp / d).mkdir(parents=True)
    for name, src in _files(extra):
        (tmp / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, tmp / name)
        os.chmod(tmp / name, 0o755)
    for applet in APPLETS:
        os.symlink("busybox", tmp / "bin" / applet)
    (tmp / "tmp").chmod(0o1777)


def initramfs(extra: Extra = ()) -> Path:
    """A gzip'd newc cpio of the root, for QEMU and UML (cached)."""
    out = cache_dir() / f"initramfs-{_key(extra)}.cpio.gz"
    if not out.exists():
        from .cpio import write_newc

        root = rootfs_dir(extra)
        publish(out, lambda tmp: write_newc(tmp, root, extra_nodes=[("dev/console", stat.S_IFCHR | 0o600, 5, 1)]))
    return out


def traced_cached(
    key: str, argv: list[str], cwd_setup: Callable[[str], None], env: dict | None = None, timeout: float = 900
) -> Extra:
    """traced(), remembered under `key` while every file it found is
    unchanged (size and mtime): a toolchain's trace costs one build (within
    `timeout` seconds).  cwd_setup(dir) prepares the directory the command runs in."""
    memo = cache_dir() / f"trace-{key}.json"
    try:
        known = json.loads(memo.read_text())
        if all(os.stat(src).st_size == size and os.stat(src).st_mtime == mtime for _, src, size, mtime in known):
            return tuple((name, Path(src)) for name, src, _, _ in known)
    except (OSError, ValueError, TypeError):
        pass
    import tempfile

    with tempfile.TemporaryDirectory(prefix="vmtax-build-") as tmp:
        cwd_setup(tmp)
        found = traced(argv, tmp, env, timeout)
    known = json.dumps([(n, str(src), src.stat().st_size, src.stat().st_mtime) for n, src in found])
    publish(memo, lambda tmp: tmp.write_text(known))
    return found
