#!/usr/bin/env python3
"""A host busy in stretches, made on purpose: a CPU hog pinned to one CPU,
on for 0.5-2 s, off for 0.5-2 s (uniform, seeded), so that a fresh agent
process on that CPU runs either alone or sharing it.  A noisy cloud host
flips each vCPU between a fast and a slow state for seconds at a time; a
quiet machine can make the nearest thing with this.  tools/validity.py
--hog and tools/noisydemo.py run their rounds under it.

The rt kind (SCHED_FIFO, root) is busy 0.5 ms and asleep 1 ms through each
stretch, so every process on the CPU, whatever its cgroup, runs at about two
thirds of its speed there (about 1.5x slower, as a busy sibling made a cloud
host's vCPU); the plain kind is a busy loop under the ordinary scheduler,
which shares the CPU between cgroups by weight (a container's processes, in
their own cgroup, get more of it than the bare machine's).

Usage: .venv/bin/python tools/hog.py [--cpu N] [--seconds 600] [--seed 0] [--plain]
       (in the foreground, until --seconds or Ctrl-C: e.g. beside a vmtax doctor or compare)
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time


def hog(cpu: int, seconds: float, seed: int, rt: bool = False) -> subprocess.Popen:
    """A child that keeps CPU `cpu` busy in stretches, idle in between, for
    at most `seconds`, and ends when its parent does (killed with its process
    group by stop(); it also checks that its parent lives)."""
    code = (
        "import os,random,time\n"
        f"os.sched_setaffinity(0,{{{cpu}}}); r=random.Random({seed}); end=time.monotonic()+{seconds}\n"
        f"parent={os.getpid()}\n"
        + ("os.sched_setscheduler(0,os.SCHED_FIFO,os.sched_param(1))\n" if rt else "")
        + "while time.monotonic()<end and os.getppid()==parent:\n"
        "  t=time.monotonic()+r.uniform(0.5,2.0)\n"
        "  while time.monotonic()<t:\n"
        + (
            "    s=time.monotonic()+0.0005\n    while time.monotonic()<s: pass\n    time.sleep(0.001)\n"
            if rt
            else "    pass\n"
        )
        + "  time.sleep(r.uniform(0.5,2.0))\n"
    )
    h = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    time.sleep(0.3)
    if h.poll() is not None:  # e.g. SCHED_FIFO refused without root: a quiet machine is no hogged one
        raise SystemExit(f"the hog on CPU {cpu} ended at once (exit {h.returncode}): nothing measured")
    return h


def stop(p: subprocess.Popen) -> None:
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    p.wait()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--cpu",
        type=int,
        default=max(0, (os.cpu_count() or 1) - 1),
        help="the CPU to hog (default the last: the one vmtax's --cpu auto measures on)",
    )
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--plain", action="store_true", help="a busy loop under the ordinary scheduler, not SCHED_FIFO")
    a = ap.parse_args(argv)
    if a.cpu not in os.sched_getaffinity(0) or not 0 < a.seconds <= 86400:
        raise SystemExit(f"hog: --cpu {a.cpu} is not one of this process's CPUs, or --seconds is out of range")
    h = hog(a.cpu, a.seconds, a.seed, rt=not a.plain)
    print(
        f"hog: CPU {a.cpu} busy in stretches for {a.seconds:g} s ({'plain' if a.plain else 'rt'}); Ctrl-C ends it",
        file=sys.stderr,
    )
    try:
        h.wait()
    except KeyboardInterrupt:
        pass
    finally:
        stop(h)
    return 0


if __name__ == "__main__":
    sys.exit(main())
