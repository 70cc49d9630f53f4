"""What the tests share, one of each: the CLI in this process or in a child
(vmtax, vmtax_process), waiting for a condition (wait_until) and for a
running vmtax to have stored samples (stored, wait_samples), and what a
controller left behind on this machine (leftovers, left_behind); a port
nothing listens on (closed_port)."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from vmtax.cli import main
from vmtax.peers import free_port
from vmtax.targets import devices

T = TypeVar("T")


# -- the CLI ------------------------------------------------------------------------------
def vmtax(*args, db=None) -> int:
    """`vmtax [--db DB] ARGS` in this process: its exit code."""
    return main((["--db", str(db)] if db else []) + [str(a) for a in args])


def vmtax_process(*args, db, timeout: float = 120) -> subprocess.CompletedProcess:
    """`vmtax --db DB ARGS` in a child process, its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "vmtax.cli", "--db", str(db), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def closed_port() -> int:
    """A loopback port nothing listens on (chosen free, closed at once)."""
    return free_port()


# -- waiting ------------------------------------------------------------------------------
def wait_until(
    probe: Callable[[], T], timeout: float, step: float = 0.1, alive: Callable[[], bool] = lambda: True
) -> T:
    """probe() every step seconds until it gives something true, timeout
    seconds pass, or alive() says the thing waited on is gone: its last
    value (the caller asserts on it)."""
    deadline = time.monotonic() + timeout
    got = probe()
    while not got and time.monotonic() < deadline and alive():
        time.sleep(step)
        got = probe()
    return got


def stored(db: Path | str, where: str = "", params: tuple = (), what: str = "count(*)") -> int:
    """Samples a (maybe still running) vmtax has stored in the SQLite file
    db so far, `where` a condition on them (`what`: another aggregate of
    them); 0 before the file has them."""
    try:
        con = sqlite3.connect(db, timeout=5)
        try:
            return con.execute(f"SELECT {what} FROM samples {'WHERE ' + where if where else ''}", params).fetchone()[0]
        finally:
            con.close()
    except sqlite3.OperationalError:  # not there yet, or not migrated
        return 0


def wait_samples(
    db: Path | str, n: int, timeout: float, where: str = "", params: tuple = (), proc: subprocess.Popen | None = None
) -> int:
    """Wait until db holds n samples (where ...), or timeout, or proc ends:
    how many it holds."""
    wait_until(
        lambda: stored(db, where, params) >= n,
        timeout,
        0.2,
        alive=(lambda: proc.poll() is None) if proc is not None else (lambda: True),
    )
    return stored(db, where, params)


# -- what was left behind -------------------------------------------------------------------
def leftovers(marker: str, defunct: bool = False) -> list[str]:
    """Processes whose command line names marker (pgrep -af), this one's
    pgrep aside; zombies too where defunct (a zombie holds nothing but its
    slot until its parent reaps it)."""
    out = subprocess.run(["pgrep", "-af", marker], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if "pgrep" not in line and (defunct or "defunct" not in line)]


def left_behind(pid: int, files: bool = True) -> list[str]:
    """Everything the vmtax controller pid made on this machine that is
    still here: processes of its guests, UML kernels and containers (their
    work directory vmtax-KIND-PID-... on their command line or as their
    cwd; zombies aside), its containers (podman names vmtax-PID-...), and
    (files) its guests' image directories and the loop devices over them
    (a controller killed with SIGKILL leaves its directories on purpose:
    the next run sweeps them -- files=False asks for the rest)."""
    marks = [f"vmtax-{kind}-{pid}-" for kind in ("qemu", "uml", "container")]
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cwd = os.readlink(f"/proc/{entry}/cwd")
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and any(m in cmd + " " + cwd for m in marks):
            out.append(f"{entry} {cmd[:100]}")
    if files and os.path.isdir(devices.IMAGE_PARENT):
        out += [d for d in os.listdir(devices.IMAGE_PARENT) if any(d.startswith(m) for m in marks)]
    for dev in os.listdir("/sys/block") if files else ():
        try:
            with open(f"/sys/block/{dev}/loop/backing_file") as f:
                backing = f.read()
            if any(m in backing for m in marks):
                out.append(dev)
        except OSError:
            pass
    if shutil.which("podman"):
        names = subprocess.run(
            ["podman", "ps", "-a", "--format", "{{.Names}}"], capture_output=True, text=True
        ).stdout.split()
        out += [n for n in names if n.startswith(f"vmtax-{pid}-")]
    return out


# -- the runner over fake targets ------------------------------------------------------------
class Steps:
    """A clock that moves a fixed step at every reading (the first reads
    start + step): budgets without real time."""

    def __init__(self, step: float = 0.01, start: float = 0.0):
        self.t, self.step = start, step

    def __call__(self) -> float:
        self.t += self.step
        return self.t


def new_run(store, targets: list, specs: list, kind: str = "compare", run_id: str = "r") -> list:
    """A run recorded as the CLI records it before measuring: its row, its
    targets (specs such as 'fake:noise=0.1' are parsed), its benchmarks.
    The targets, parsed."""
    from vmtax.targets import parse_target

    targets = [parse_target(t) if isinstance(t, str) else t for t in targets]
    store.new_run(run_id, kind, "test", "0", {})
    for i, t in enumerate(targets):
        store.add_target(run_id, i, t.info(), "h")
    store.add_benchmarks(run_id, specs)
    return targets


def store_run(store, data) -> None:
    """A hand-built RunData (reportdata.run), stored as the runner stores one."""
    store.new_run(data.id, data.kind, data.command, data.vmtax_version, data.config)
    for i, t in enumerate(data.targets):
        store.add_target(data.id, i, t, data.agent_hashes.get(t.name, ""))
    store.add_benchmarks(data.id, data.benchmarks)
    for s in data.samples:
        store.add_sample(data.id, s)
    for (target, bench), (how, why) in data.outcomes.items():
        store.set_outcome(data.id, target, bench, how, why)
    store.finish_run(data.id, data.status)


def run_fake(db, targets: list, specs: list, clock=None, kind: str = "run", **cfg):
    """One Runner over (fake) targets into the SQLite file db, on a clock of
    steps unless given one: (status, the stored run)."""
    from vmtax.plan import RunConfig
    from vmtax.runner import Runner
    from vmtax.store import Store

    store = Store(db)
    targets = new_run(store, targets, specs, kind)
    status = Runner(RunConfig(**cfg), specs, targets, store, "r", clock=clock or Steps()).run()
    return status, store.load("r")
