"""How long does each page of `vmtax serve` take on a real-sized store?

Seeds a store with RUNS compare runs of the demo's shape (the baseline and
three candidates, 14 rows, 8 blocks of one process per target with a warmup
and 3 samples; tests/serveseed.py), in SQLite and in a throwaway PostgreSQL
server (tests/pgserver.py), and times the server's side of each page through
Starlette's test client (in process: the request through the whole app and
back, no socket): the runs list (50 a page), a run, a 42-row diff, a row's
history (over the 200 newest runs that measured it).  Each run is seeded
with its summary, as vmtax compare stores it at its end (serve/summary.py).
Each page twice: cold, on a reader that has kept nothing (the lists read
the summaries; a run's page loads and analyses its run), and warm, as a
page is once it has been asked for.  Medians over --repeat requests, each
cold one on a fresh reader and another run or pair; beside a cold request's
wall-clock time, the CPU time this process spent on it (on a loaded host,
the part that does not wait for a CPU; PostgreSQL's own is not in it).

    .venv/bin/python tools/serve_bench.py --runs 1000 --repeat 9 --out results/serve-pages.md
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "tests"))

from starlette.testclient import TestClient  # noqa: E402

import serveseed  # noqa: E402
from vmtax.serve.app import build  # noqa: E402
from vmtax.serve.data import Reader  # noqa: E402
from vmtax.stats.summary import t_quantile  # noqa: E402

PAGES = ("runs list", "a run", "a 42-row diff", "a row's history")


def urls(ids: list[str], k: int) -> dict[str, str]:
    """The k-th request of each page (another run, pair or row each time)."""
    half = len(ids) // 2
    i = half - 1 - (k * 7) % (half - 1)
    row = serveseed.DEMO_ROWS[k % len(serveseed.DEMO_ROWS)]
    return {
        "runs list": f"/?page={1 + k % 3}",
        "a run": f"/runs/{ids[i]}",
        "a 42-row diff": f"/diff?a={ids[i - 1]}&b={ids[i]}",
        "a row's history": f"/history?bench={row}&candidate=qemu:accel%3Dtcg&host={serveseed.STEP_HOST}",
    }


def timed(client: TestClient, url: str, cpu: list[float] | None = None) -> float:
    """The request's wall-clock seconds; its process's CPU seconds appended to cpu, where given."""
    t, c = time.perf_counter(), time.process_time()
    r = client.get(url)
    took = time.perf_counter() - t
    if cpu is not None:
        cpu.append(time.process_time() - c)
    assert r.status_code == 200, (url, r.status_code, r.text[:300])
    return took


def measure(location, ids: list[str], repeat: int) -> dict[str, dict[str, list[float]]]:
    out: dict[str, dict[str, list[float]]] = {p: {"cold": [], "cpu": [], "warm": []} for p in PAGES}
    for k in range(repeat):
        for page, url in urls(ids, k).items():
            reader = Reader(location)  # cold: nothing kept (nor the t quantiles a process caches)
            t_quantile.cache_clear()
            client = TestClient(build(reader, {"testserver"}))
            out[page]["cold"].append(timed(client, url, out[page]["cpu"]))
            out[page]["warm"].append(statistics.median(timed(client, url) for _ in range(5)))
            reader.close()
    return out


def seed(location, runs: int) -> tuple[list[str], float]:
    t = time.perf_counter()
    ids = serveseed.seed(location, runs_per_host=runs // 2, demo=True)
    return ids, time.perf_counter() - t


def ms(xs: list[float]) -> str:
    return f"{statistics.median(xs) * 1000:.0f} ms (min {min(xs) * 1000:.0f}, max {max(xs) * 1000:.0f})"


def table(name: str, got: dict, seeded: float, size: str) -> list[str]:
    out = [f"### {name}", "", f"seeded in {seeded:.0f} s; {size}", ""]
    out += ["| page | cold: median (min, max) | cold: its CPU time | warm: median (min, max) |", "|---|---|---|---|"]
    out += [f"| {p} | {ms(got[p]['cold'])} | {ms(got[p]['cpu'])} | {ms(got[p]['warm'])} |" for p in PAGES]
    return out + [""]


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def machine(began: str) -> str:
    lines = Path("/proc/cpuinfo").read_text().splitlines()
    cpu = next((line.split(":", 1)[1].strip() for line in lines if "model name" in line), "?")
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return (
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {platform.node()}: {os.cpu_count()} vCPUs of "
        f"{cpu}, {platform.system()} {platform.release()}, Python {platform.python_version()}, "
        f"commit {commit.stdout.strip() or '?'}; load average (1/5/15 min) {began} at the start, {load()} at the end"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=9, help="requests of each page, each way")
    ap.add_argument("--backends", default="sqlite,postgresql")
    ap.add_argument("--out", help="write the figures as Markdown here")
    args = ap.parse_args()
    lines, began = [], load()
    with tempfile.TemporaryDirectory(prefix="vmtax-serve-bench-") as tmp:
        if "sqlite" in args.backends:
            db = Path(tmp) / "bench.db"
            ids, took = seed(db, args.runs)
            size = f"{db.stat().st_size / 2**20:.0f} MiB file"
            lines += table("SQLite", measure(db, ids, args.repeat), took, size)
            print("\n".join(lines[-9:]), flush=True)
        if "postgresql" in args.backends:
            from pgserver import PgServer, binaries

            server = PgServer(binaries())
            try:
                server.start()
                url = server.url("vmtax", schema=server.create_schema())
                ids, took = seed(url, args.runs)
                where = "a throwaway server on a unix socket"
                lines += table("PostgreSQL", measure(url, ids, args.repeat), took, where)
                print("\n".join(lines[-9:]), flush=True)
            finally:
                server.stop()
    if args.out:
        head = [
            "# vmtax serve: page times on a store of 1,000 runs",
            "",
            f"{machine(began)}.",
            "",
            f"`{' '.join(['.venv/bin/python', 'tools/serve_bench.py', *sys.argv[1:]])}`",
            "",
        ]
        Path(args.out).write_text("\n".join(head + lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
