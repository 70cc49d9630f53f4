#!/usr/bin/env python3
"""vmtax history on real runs (benchmark script, not a test): RUNS stored
comparisons of the machine against itself under a label, the last CHANGED
of them with the agent adding INJECT% to every operation (`inject=` on the
labelled target: a changed option, as a new build would be a changed fact).
Does history put the change point at the first changed run, and list the
option among the facts that changed there?  Writes results/history.md,
results/history.json and results/history.html (and a screenshot of it in
Chromium, results/history.png, where Chromium is installed).

Usage: .venv/bin/python examples/history.py [--runs 10] [--changed 4] [--inject 3] [--max-time 20s]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VMTAX = str(REPO / ".venv" / "bin" / "vmtax")
OUT = REPO / "results"
DB = OUT / "history.db"
BENCH = ["getppid", "pi", "cpuid"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--changed", type=int, default=4)
    ap.add_argument("--inject", type=float, default=3.0)
    ap.add_argument("--max-time", default="20s")
    args = ap.parse_args()
    DB.unlink(missing_ok=True)
    commands = []
    t0 = time.time()
    for i in range(args.runs):
        cand = "local:label=cand" + (f",inject={args.inject:g}" if i >= args.runs - args.changed else "")
        cmd = [VMTAX, "--db", str(DB), "compare", "local", cand, "--bench", *BENCH, "--max-time", args.max_time]
        commands.append(" ".join(["vmtax", *cmd[3:]]))
        print(f"[{i + 1}/{args.runs}] $ {commands[-1]}", file=sys.stderr, flush=True)
        p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if p.returncode not in (0, 3):
            sys.exit(f"run {i + 1} failed ({p.returncode}): {p.stderr[-2000:]}")
    hist = [
        VMTAX,
        "--db",
        str(DB),
        "history",
        "--json",
        str(OUT / "history.json"),
        "--markdown",
        str(OUT / "history-table.md"),
        "--html",
        str(OUT / "history.html"),
    ]
    text = subprocess.run(hist, capture_output=True, text=True, check=True).stdout
    series = json.loads((OUT / "history.json").read_text())
    runs = json.loads(
        subprocess.run(
            [VMTAX, "--db", str(DB), "runs", "--json", "-"], capture_output=True, text=True, check=True
        ).stdout
    )[::-1]
    first_changed = runs[args.runs - args.changed]["id"]
    found = {s["benchmark"]: [c["run"] for c in s["change_points"]] for s in series}
    right = sum(found[b] == [first_changed] for b in found)
    shot = ""
    chromium = shutil.which("chromium")
    if chromium:
        with tempfile.TemporaryDirectory() as profile:
            subprocess.run(
                [
                    chromium,
                    "--headless",
                    "--no-sandbox",
                    "--disable-gpu",
                    f"--user-data-dir={profile}",
                    f"--screenshot={OUT / 'history.png'}",
                    "--window-size=1100,1800",
                    (OUT / "history.html").as_uri(),
                ],
                capture_output=True,
                timeout=120,
            )
        shot = " Its HTML page, rendered by headless Chromium: `results/history.png`."
    md = [
        "# vmtax history on real runs",
        "",
        f"Recorded {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by `examples/history.py --runs {args.runs} "
        f"--changed {args.changed} --inject {args.inject:g} --max-time {args.max_time}` "
        f"({(time.time() - t0) / 60:.0f} min). Runs, oldest first:",
        "",
    ]
    md += [f"{i + 1}. `{c}` → `{r['id']}`" for i, (c, r) in enumerate(zip(commands, runs, strict=True))]
    md += [
        "",
        f"**Change points found at the first changed run ({first_changed}) and nowhere else: "
        f"{right} of {len(found)} rows.**{shot}",
        "",
        f"`vmtax history` (`{' '.join(['vmtax', *hist[3:]])}`):",
        "",
        "```",
        text.rstrip(),
        "```",
        "",
    ]
    (OUT / "history.md").write_text("\n".join(md))
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
