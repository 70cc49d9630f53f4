#!/usr/bin/env python3
"""Disk device models compared (benchmark script, not a test).

Two runs of the disk suite (fio with direct I/O on the target's disk, and
fsync latency), each a side-by-side comparison in one run, written with
their commands into results/disks.md (the JSON beside it):

  models:  vmtax compare local:dir=/var/tmp qemu:disk=virtio qemu:disk=scsi qemu:disk=nvme \\
               qemu:disk=ahci qemu:disk=ide --suite disk --tool-seconds 2 --min-processes 4 --precision 5% \\
               --max-time 12m
  images:  vmtax compare qemu:disk=virtio qemu:disk=virtio,image=qcow2 qemu:disk=virtio,backing=block \\
               qemu:disk=virtio,cache=writeback --suite disk ... (the same options)

with each target's host cost per GB moved (host_cpu_per_unit, s/GB, and the
rest of `vmtax explain`'s workload rows).

The net suite, NIC models on QEMU's user-mode network and virtio on a tap,
against loopback, into results/net.md:

  nics:    vmtax compare local qemu:nic=virtio qemu:nic=e1000 qemu:nic=rtl8139 qemu:nic=virtio,net=tap \\
               --suite net ... (the same options)

(the guests agree on one kernel: Debian's generic one, which has the e1000,
rtl8139 and ahci drivers the cloud kernel lacks).  --only NAME re-runs that
comparison alone and re-renders the others from their stored JSON.

Usage: .venv/bin/python examples/disks.py [--suite disk|net] [--max-time 12m] [--only models|images|nics]
       [--reuse]
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

from workloads import scoreboard  # examples/, beside this script

REPO = Path(__file__).resolve().parents[1]
VMTAX = str(REPO / ".venv" / "bin" / "vmtax")
OUT = REPO / "results"
RUNS = {
    "models": [
        "local:dir=/var/tmp",
        "qemu:disk=virtio",
        "qemu:disk=scsi",
        "qemu:disk=nvme",
        "qemu:disk=ahci",
        "qemu:disk=ide",
    ],
    "images": [
        "qemu:disk=virtio",
        "qemu:disk=virtio,image=qcow2",
        "qemu:disk=virtio,backing=block",
        "qemu:disk=virtio,cache=writeback",
    ],
    "nics": ["local", "qemu:nic=virtio", "qemu:nic=e1000", "qemu:nic=rtl8139", "qemu:nic=virtio,net=tap"],
}
SUITE = {"models": "disk", "images": "disk", "nics": "net"}


def explain(db: str, run_id: str) -> str:
    p = subprocess.run([VMTAX, "--db", db, "explain", run_id], capture_output=True, text=True, timeout=120)
    return p.stdout if p.returncode == 0 else f"(vmtax explain failed: {p.stderr.strip()[-300:]})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--max-time", default="12m")
    ap.add_argument("--only", choices=sorted(RUNS))
    ap.add_argument("--suite", choices=("disk", "net"), default="disk")
    ap.add_argument("--reuse", action="store_true", help="re-render the stored runs only")
    args = ap.parse_args()
    title = {"disk": "Disk device models compared", "net": "NIC models against loopback"}[args.suite]
    lines = [
        f"# {title}",
        "",
        f"Recorded {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by `examples/disks.py` on "
        f"{platform.machine()}; QEMU under TCG (this host's /dev/kvm does not boot a standard guest), "
        "every target pinned to host CPU 1, its emulator threads on the other. Images live in "
        "/var/tmp (ext4 on the host's virtio disk: itself a VM's disk here). Ratios are to the "
        "first target of each run; throughput rows: below 1 is slower.",
        "",
    ]
    for name, targets in RUNS.items():
        if (args.only and name != args.only) or SUITE[name] != args.suite:
            continue
        db, doc_path, board_path = (
            f"/tmp/vmtax-disks-{name}.db",
            OUT / f"disks-{name}.json",
            OUT / f"disks-{name}-scoreboard.txt",
        )
        cmd = [
            VMTAX,
            "--db",
            db,
            "compare",
            *targets,
            "--suite",
            args.suite,
            "--tool-seconds",
            "2",
            "--min-processes",
            "4",
            "--precision",
            "5%",
            "--max-time",
            args.max_time,
            "--json",
            str(doc_path),
        ]
        t0 = time.time()
        reuse = args.reuse or (args.only is not None and name != args.only)
        if reuse and not doc_path.exists():
            continue
        board = scoreboard(cmd, board_path, reuse)
        doc = json.loads(doc_path.read_text())
        lines += [
            f"## {name}",
            "",
            f"Run `{doc['run_id']}`" + ("" if reuse else f", {(time.time() - t0) / 60:.0f} min") + ":",
            "",
            "    " + " ".join(["vmtax", *cmd[3:-2]]),
            "",
            "```",
            board.rstrip(),
            "```",
            "",
            "Why, per unit of work: the host's cost per GB moved or per 1000 transactions "
            "(`host_cpu_per_unit` split user/system, host context switches of the target's host "
            "processes, the host-side peer's CPU), from every run, mean ± 95% CI half-width:",
            "",
            "    " + " ".join(["vmtax", "--db", db, "explain", doc["run_id"]]),
            "",
            "```",
            explain(db, doc["run_id"]).rstrip(),
            "```",
        ]
        lines.append("")
    (OUT / {"disk": "disks.md", "net": "net.md"}[args.suite]).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
