#!/usr/bin/env python3
"""Before and after, interleaved in time (benchmark script, not a test).

A shared host's noise changes from minute to minute more than any change to
vmtax does, so one run before and one after compare two moments, not two
programs.  This alternates, round after round:

  before  the old commit's main job: `vmtax compare local qemu uml container
          --skip-unavailable --max-time 5m`, run from a checkout of it (its own
          agent, its own Python package)
  same    today's vmtax on that same command
  demo    today's `make demo` command (as the new checkout's Makefile has it)

and reports, per run and per variant, the median 95% CI half-width of the
ratios and how many are within ±1% and ±2%, into results/before-after.md.
With --demo only the demo's command runs, by the old package and the new,
in turn, the order reversed every other round (ABBA: the host's drift falls
on both alike), into results/before-after-demo.md.

Usage: .venv/bin/python tools/before_after.py OLD_CHECKOUT [--new CHECKOUT] [--rounds 2] [--demo]
       (a checkout: e.g. `git worktree add /tmp/old 280736a && make -C /tmp/old/agent`;
       --new defaults to this one -- give a frozen one if you edit this tree meanwhile)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from demojob import demo_args

REPO = Path(__file__).resolve().parents[1]
PY = str(REPO / ".venv" / "bin" / "python")
OUT = REPO / "results"
ALL = ["compare", "local", "qemu", "uml", "container", "--skip-unavailable", "--max-time", "5m"]


def variants(old: Path, new: Path, demo: bool = False) -> dict[str, tuple[list[str], dict]]:
    """name -> (argv prefix, environment): each package (and its agent) from its checkout."""
    env_old = {**os.environ, "PYTHONPATH": str(old / "src")}
    env_new = {**os.environ, "PYTHONPATH": str(new / "src")}
    if demo:  # the same command, old and new
        return {
            "before-demo": ([PY, "-m", "vmtax.cli", *demo_args(new / "Makefile")], env_old),
            "demo": ([PY, "-m", "vmtax.cli", *demo_args(new / "Makefile")], env_new),
        }
    return {
        "before": ([PY, "-m", "vmtax.cli", *ALL], env_old),
        "same": ([PY, "-m", "vmtax.cli", *ALL], env_new),
        "demo": ([PY, "-m", "vmtax.cli", *demo_args(new / "Makefile")], env_new),
    }


def git_head(path: Path) -> str:
    out = subprocess.run(["git", "-C", str(path), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return out.stdout.strip() or "?"


def widths(doc: dict, candidate: str | None = None) -> list[float]:
    """Each ratio's 95% CI half-width, relative (candidate: that candidate's only)."""
    out = []
    for c in doc.get("comparisons", []):
        if candidate is not None and c["candidate"] != candidate:
            continue
        r, lo, hi = c["ratio"], c["ratio_ci_low"], c["ratio_ci_high"]
        out.append((hi - lo) / 2 / r if r and lo is not None and hi is not None else math.inf)
    return out


def by_candidate(doc: dict) -> str:
    """Each candidate's median half-width, as 'qemu ±3.4%, uml ±1.6%'."""
    names = dict.fromkeys(c["candidate"] for c in doc.get("comparisons", []))
    return ", ".join(f"{n} ±{statistics.median(widths(doc, n)) * 100:.2f}%" for n in names)


def one_round(rnd: int, args: argparse.Namespace, tmp: Path) -> list[dict]:
    """Each variant once; its database a fresh one in tmp (each vmtax its own schema; the JSON in
    results/ keeps what the report reads), removed with tmp when the script ends, however it ends."""
    runs = []
    ways = list(variants(args.old, args.new, args.demo).items())
    for name, (argv, env) in ways[::-1] if args.demo and rnd % 2 == 0 else ways:
        out = OUT / f"before-after-{name}-{rnd}.json"
        db = tmp / f"{name}-{rnd}.db"
        cmd = argv[:3] + ["--db", str(db)] + argv[3:] + ["--json", str(out)]
        print(f"[round {rnd}] {name}: $ {' '.join(cmd)}", file=sys.stderr, flush=True)
        t0 = time.time()
        p = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if p.returncode not in (0, 3):
            print(f"[round {rnd}] {name} failed ({p.returncode}): {p.stderr[-1500:]}", file=sys.stderr, flush=True)
        doc = json.loads(out.read_text()) if out.exists() else {}
        w = widths(doc)
        runs.append(
            {
                "round": rnd,
                "variant": name,
                "rc": p.returncode,
                "wall_s": time.time() - t0,
                "ratios": len(w),
                "median": statistics.median(w) if w else math.inf,
                "within1": sum(x <= 0.01 for x in w),
                "within2": sum(x <= 0.02 for x in w),
                "started": time.strftime("%H:%M", time.localtime(t0)),
                "by_candidate": by_candidate(doc),
            }
        )
    return runs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old", type=Path)
    ap.add_argument("--new", type=Path, default=REPO)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--demo", action="store_true", help="only the demo's command, old and new, ABBA")
    args = ap.parse_args()
    runs = []
    with tempfile.TemporaryDirectory(prefix="vmtax-before-after-") as tmp:
        for rnd in range(1, args.rounds + 1):
            runs += one_round(rnd, args, Path(tmp))
    lines = [
        "# Before and after, interleaved in time",
        "",
        f"Recorded {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by `tools/before_after.py "
        f"{args.old} --new {args.new}{' --demo' if args.demo else ''}` ({args.rounds} rounds; the old checkout at "
        f"{git_head(args.old)}, the new at {git_head(args.new)}). Variants:",
        "",
        *(
            [f"- before-demo: the old commit's package, `vmtax {' '.join(demo_args(args.new / 'Makefile'))}`"]
            if args.demo
            else [
                f"- before: the old commit's package, `vmtax {' '.join(ALL)}`",
                "- same: today's vmtax, the same command",
            ]
        ),
        f"- demo: today's `make demo`, `vmtax {' '.join(demo_args(args.new / 'Makefile'))}`"
        + (" (the order reversed every other round)" if args.demo else ""),
        "",
        "| round | started | variant | exit | wall | ratios | median 95% CI half-width | within ±1% | within ±2% "
        "| by candidate |",
        "|---:|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in runs:
        lines.append(
            f"| {r['round']} | {r['started']} | {r['variant']} | {r['rc']} | {r['wall_s'] / 60:.1f} min | "
            f"{r['ratios']} | ±{r['median'] * 100:.2f}% | "
            f"{r['within1']} ({r['within1'] / max(1, r['ratios']) * 100:.0f}%) | "
            f"{r['within2']} ({r['within2'] / max(1, r['ratios']) * 100:.0f}%) | {r['by_candidate']} |"
        )
    lines.append("")
    (OUT / ("before-after-demo.md" if args.demo else "before-after.md")).write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
