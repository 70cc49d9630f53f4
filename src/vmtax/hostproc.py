"""What a target costs the host, read from /proc (seed 000's idle CPU and
memory overhead): CPU time of a process tree, and resident memory beyond
the guest's RAM."""

from __future__ import annotations

import os
import time

TICK = os.sysconf("SC_CLK_TCK")


def boot_id() -> str:
    """Changes at every host boot: the key for facts that hold until then."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return "?"


def pid_namespace() -> str:
    """This process's PID namespace (the inode of /proc/self/ns/pid): a pid
    names a process only inside one."""
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return "?"


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (of any user)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def running(pid: int) -> bool:
    """Whether this process exists and has not exited (a zombie has: it
    only waits to be reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def descendants(pid: int) -> list[int]:
    """pid and every process below it."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def children(pid: int) -> list[int]:
    """The processes whose parent is pid."""
    return [p for p in descendants(pid) if p != pid and _ppid(p) == pid]


def _ppid(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def process_name(pid: int) -> str:
    """The file name of a process's argv[0] ('' if it is gone)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return os.path.basename(f.read().split(b"\0")[0]).decode(errors="replace")
    except OSError:
        return ""


def tasks(pids: list[int]) -> list[int]:
    """Every thread of these processes."""
    out = []
    for pid in pids:
        try:
            out += [int(t) for t in os.listdir(f"/proc/{pid}/task")]
        except OSError:
            continue
    return out


def cpu_seconds(pids: list[int]) -> float:
    """User+system CPU seconds of these processes (all their threads)."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except (OSError, IndexError, ValueError):
            continue
    return total / TICK


def idle_cpu_pct(pid: int, window: float = 2.0) -> float:
    """Host CPU used by an idle target's process tree over `window` seconds,
    in percent of one CPU."""
    pids = descendants(pid)
    c0, t0 = cpu_seconds(pids), time.monotonic()
    time.sleep(window)
    c1, t1 = cpu_seconds(pids), time.monotonic()
    return 100.0 * (c1 - c0) / (t1 - t0)


def rss_kb_by_mapping(pid: int) -> list[tuple[int, int]]:
    """(size KiB, Rss KiB) of every mapping of pid."""
    out, size = [], None
    try:
        with open(f"/proc/{pid}/smaps") as f:
            for line in f:
                if line.startswith("Size:"):
                    size = int(line.split()[1])
                elif line.startswith("Rss:") and size is not None:
                    out.append((size, int(line.split()[1])))
                    size = None
    except OSError:
        return []
    return out


def rss_beyond_mapping(pid: int, guest_mb: int) -> float | None:
    """Resident memory of the hypervisor process beyond the guest's RAM, in
    MiB: total Rss minus the Rss of the mapping that backs guest RAM (the
    one mapping at least guest_mb large)."""
    maps = rss_kb_by_mapping(pid)
    if not maps:
        return None
    total = sum(r for _, r in maps)
    ram = [r for s, r in maps if s >= guest_mb * 1024]
    return (total - max(ram, default=0)) / 1024.0


def host_cpu_times() -> tuple[float, float]:
    """(busy, total) jiffies of every host CPU together, from /proc/stat:
    the host's utilisation over an interval is the ratio of the deltas
    (busy: user, nice, system, irq, softirq, steal; a guest's time is in user)."""
    with open("/proc/stat") as f:
        fields = [float(x) for x in f.readline().split()[1:]]
    user, nice, system, idle, iowait, irq, softirq, steal = (fields + [0.0] * 8)[:8]
    busy = user + nice + system + irq + softirq + steal
    return busy, busy + idle + iowait


def pss_mb(pids: list[int]) -> float:
    """The memory these processes hold, in MiB: the sum of their
    proportional set sizes (shared pages split among their sharers, so
    UML's many processes are not counted many times); Rss where the kernel
    has no smaps_rollup."""
    total = 0
    for pid in pids:
        for path, key in ((f"/proc/{pid}/smaps_rollup", "Pss:"), (f"/proc/{pid}/status", "VmRSS:")):
            try:
                with open(path) as f:
                    found = [int(line.split()[1]) for line in f if line.startswith(key)]
            except (OSError, ValueError, IndexError):
                continue
            total += found[0] if found else 0
            break
    return total / 1024.0


def mem_available_mb() -> float | None:
    """MemAvailable from /proc/meminfo, in MiB (None if it cannot be read)."""
    return _meminfo_mb("MemAvailable")


def mem_and_swap_mb() -> float | None:
    """MemTotal and SwapTotal from /proc/meminfo, in MiB: the most a guest's
    memory can be (None if it cannot be read)."""
    ram, swap = _meminfo_mb("MemTotal"), _meminfo_mb("SwapTotal")
    return None if ram is None else ram + (swap or 0.0)


def _meminfo_mb(key: str) -> float | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) / 1024.0
    except (OSError, ValueError, IndexError):
        pass
    return None
