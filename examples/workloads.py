#!/usr/bin/env python3
"""Real workloads in every target (benchmark script, not a test).

Runs the apps suite -- sysbench, fio, dbench, tbench, redis -- on the bare
machine, a QEMU guest, User-mode Linux and a container, side by side in one
run, and writes the scoreboard with the command into results/workloads.md
(the JSON beside it), with a reading of what the figures say:

    vmtax compare local qemu uml container --skip-unavailable --suite apps \\
        --max-time 25m --precision 3% --min-processes 6

The compile alone (a build takes ~8 s here, ~30 s in UML, ~100 s under
TCG), into results/compile.md:

    .venv/bin/python examples/workloads.py --bench compile_lua --name compile --min-processes 3 --max-time 25m

Usage: .venv/bin/python examples/workloads.py [--max-time 25m] [--suite apps | --bench NAME...]
       [--name workloads] [--min-processes 6] [--reuse]
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VMTAX = str(REPO / ".venv" / "bin" / "vmtax")
OUT = REPO / "results"


def scoreboard(cmd: list[str], path: Path, reuse: bool) -> str:
    """Run a vmtax command (exit 0 or 3: finished) and keep the scoreboard it
    printed in path; with reuse, what path already holds."""
    if not reuse:
        print("$ " + " ".join(cmd), file=sys.stderr)
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode not in (0, 3):
            sys.exit(f"failed ({p.returncode}): {p.stderr[-2000:]}")
        path.write_text(p.stdout)
    return path.read_text()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--max-time", default="25m")
    ap.add_argument("--suite", default="apps")
    ap.add_argument("--bench", nargs="+", help="these workloads instead of a suite")
    ap.add_argument("--name", default="workloads", help="results/NAME.md, .json, -scoreboard.txt")
    ap.add_argument("--min-processes", default="6")
    ap.add_argument("--reuse", action="store_true", help="re-render the stored run only")
    args = ap.parse_args()
    db, doc_path = f"/tmp/vmtax-{args.name}.db", OUT / f"{args.name}.json"
    chosen = ["--bench", *args.bench] if args.bench else ["--suite", args.suite]
    cmd = [
        VMTAX,
        "--db",
        db,
        "compare",
        "local",
        "qemu",
        "uml",
        "container",
        "--skip-unavailable",
        *chosen,
        "--max-time",
        args.max_time,
        "--precision",
        "3%",
        "--min-processes",
        args.min_processes,
        "--json",
        str(doc_path),
    ]
    shown = " ".join(["vmtax", *cmd[3:-2]])
    t0 = time.time()
    board = scoreboard(cmd, OUT / f"{args.name}-scoreboard.txt", args.reuse)
    doc = json.loads(doc_path.read_text())
    cs = doc["comparisons"]
    lines = [
        "# Real workloads in every target",
        "",
        f"Recorded {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by `examples/workloads.py` on "
        f"{platform.machine()} ({doc['environment'].get('cpu_model', '?')}, "
        f"{doc['environment'].get('cpus_online', '?')} CPUs), run `{doc['run_id']}`"
        + ("" if args.reuse else f", {(time.time() - t0) / 60:.0f} min")
        + ":",
        "",
        f"    {shown}",
        "",
        "Every tool is the host's Debian 12 package, copied with its shared libraries into the guest's "
        "initramfs and the container's root (the compile's toolchain: every file a build on the host "
        "opened or ran, found with strace); each runs in the target's tmpfs scratch directory "
        "(a tmpfs: disks are examples/disks.py's) and servers (tbench_srv, redis-server) on the target's own "
        "loopback.  One tool run is one unit of replication; the first run on each target is a warmup. "
        "Throughput rows: a ratio below 1 is slower than the bare machine.",
        "",
        "```",
        board.rstrip(),
        "```",
        "",
        "| workload figure | target | ratio | 95% CI | flagged |",
        "|---|---|---:|---|---|",
    ]
    for c in cs:
        ci = (
            f"{c['ratio_ci_low']:.3f}–{c['ratio_ci_high']:.3f}"
            if c["ratio_ci_low"] is not None and c["ratio_ci_high"] is not None
            else "unbounded"
        )
        lines.append(
            f"| {c['benchmark']} ({c['unit']}, {c['direction']} is better) | {c['candidate']} | "
            f"{c['ratio']:.3f} | {ci} | {'*' if c['significant'] else ''} |"
        )
    (OUT / f"{args.name}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
