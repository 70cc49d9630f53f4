#!/usr/bin/env python3
"""Put a real scoreboard into the README: the output of `vmtax show RUN`,
between the README's markers

    <!-- scoreboard: begin -->
    ...
    <!-- scoreboard: end -->

so the example a newcomer reads is what vmtax prints, never pasted by hand.

Usage: .venv/bin/python tools/readme_scoreboard.py --run RUN     (a stored run: vmtax show RUN)
       .venv/bin/python tools/readme_scoreboard.py --demo        (run make demo's command first: 7 min)
       .venv/bin/python tools/readme_scoreboard.py --compare local qemu container --bench getppid --max-time 2m
       [--db FILE|URL] [--readme PATH] [--columns 100] [--check]

--demo and --compare run the compare into the results database (--db, else
$VMTAX_DB, else vmtax's default) and take the run they made.  --check
changes nothing: it exits 1 if the README's block differs from what it
would write (e.g. after an edit by hand).  `make readme` runs --demo.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VMTAX = REPO / ".venv" / "bin" / "vmtax"
BEGIN = "<!-- scoreboard: begin -->"
END = "<!-- scoreboard: end -->"
FENCE = "```"
MARK = "<!-- scoreboard:"  # what both markers begin with


class SpliceError(ValueError):
    pass


def block(show_output: str) -> str:
    """The text that goes between the markers: `vmtax show`'s output,
    fenced, trailing blanks trimmed (and no fence inside to break it, nor
    a marker: a label can hold either)."""
    lines = [line.rstrip() for line in show_output.strip("\n").splitlines()]
    if any(line.lstrip().startswith(FENCE) for line in lines):
        raise SpliceError("the scoreboard holds a Markdown fence (a label?): it would break the README")
    if any(MARK in line for line in lines):
        raise SpliceError(f"the scoreboard holds the README's marker {MARK!r} (a label?): it would break the README")
    return "\n".join([FENCE + "text", *lines, FENCE])


def splice(readme: str, body: str) -> str:
    """readme with the text between its markers replaced by body."""
    if readme.count(BEGIN) != 1 or readme.count(END) != 1:
        raise SpliceError(f"the README must hold {BEGIN!r} and {END!r} once each")
    head, rest = readme.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{body}\n{END}{tail}"


def vmtax(args: list[str], env: dict, capture: bool = True) -> str:
    p = subprocess.run(
        [str(VMTAX), *args], env=env, text=True, stdout=subprocess.PIPE if capture else None, stderr=None
    )
    if p.returncode not in (0, 3):  # 3: finished, a benchmark failed: its scoreboard is still real
        raise SystemExit(f"readme_scoreboard: vmtax {' '.join(args[:2])} exited {p.returncode}")
    return p.stdout or ""


def latest_run_since(env: dict, since: float) -> str:
    runs = json.loads(vmtax(["runs", "--json", "-", "--limit", "1"], env))
    if not runs or runs[0]["started"] < since:
        raise SystemExit("readme_scoreboard: the compare stored no run")
    return runs[0]["id"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    what = ap.add_mutually_exclusive_group(required=True)
    what.add_argument("--run", help="a stored run id (or a unique prefix)")
    what.add_argument("--demo", action="store_true", help="run make demo's command, then take its run")
    what.add_argument("--compare", nargs=argparse.REMAINDER, help="run `vmtax compare ARGS...`, then take its run")
    ap.add_argument("--db", help="the results database (default: $VMTAX_DB, else vmtax's default)")
    ap.add_argument("--readme", type=Path, default=REPO / "README.md")
    ap.add_argument("--columns", type=int, default=100, help="the terminal width the scoreboard is laid out for")
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 if the README differs")
    args = ap.parse_args(argv)
    if not VMTAX.exists():
        raise SystemExit(f"readme_scoreboard: no {VMTAX}: run make setup first")
    env = {**os.environ, "COLUMNS": str(args.columns)}
    if args.db:
        env["VMTAX_DB"] = args.db  # not --db: the run's recorded command stays the one a reader would type
    run = args.run
    if args.demo or args.compare is not None:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from demojob import demo_args

        command = demo_args() if args.demo else ["compare", *args.compare]
        if not command or command[0] != "compare":
            raise SystemExit("readme_scoreboard: --compare takes the arguments of vmtax compare")
        since = time.time()
        vmtax(command, env, capture=False)  # its progress and scoreboard on the terminal
        run = latest_run_since(env, since)
    readme = args.readme.read_text()
    try:
        new = splice(readme, block(vmtax(["show", run], env)))
    except SpliceError as e:
        print(f"readme_scoreboard: {e}; {args.readme} left as it was", file=sys.stderr)
        return 2
    if args.check:
        if new != readme:
            print(f"{args.readme}: the scoreboard differs from vmtax show {run}", file=sys.stderr)
            return 1
        return 0
    args.readme.write_text(new)
    print(f"{args.readme}: the scoreboard of run {run} spliced in", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
