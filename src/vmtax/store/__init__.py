"""Results store.  SQLite is the embedded default: WAL mode, numbered
migrations, every sample committed as it arrives so that a crash or a
Ctrl-C loses nothing already measured."""
from __future__ import annotations

import json
import math
import numbers
import os
import sqlite3
import time
from contextlib import contextmanager
from pathlib import Path

from ..errors import StoreError, UserError
from ..model import BenchSpec, RunData, Sample, TargetInfo
from .controller import effective_status, this_controller
from .opening import open_readonly, open_readwrite, user_version

SQLITE_FULL = 13


def default_db_path() -> Path:
    env = os.environ.get("VMTAX_DB")
    if env:
        return Path(env)
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "vmtax" / "vmtax.db"


def _finite(x) -> bool:
    try:
        return isinstance(x, numbers.Real) and math.isfinite(x)
    except OverflowError:  # an int too large for a float
        return False


class Store:
    """The results database.  readonly=True never writes to the file (for
    show, runs and report): it may be read-only, or in use by a run."""

    def __init__(self, path: Path | str, readonly: bool = False):
        self.path, self.readonly = Path(path), readonly
        try:
            self.db = open_readonly(self.path) if readonly else open_readwrite(self.path)
        except (sqlite3.DatabaseError, OSError) as e:
            raise UserError(f"cannot open the results database {self.path}: {e}") from None

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.db.close()

    @property
    def schema_version(self) -> int:
        return user_version(self.db)

    # -- writing: each call is one committed transaction ------------------------
    @contextmanager
    def _write(self, what: str):
        """A write transaction; any SQLite error in it becomes one StoreError."""
        if self.readonly:
            raise StoreError(f"results database {self.path}: cannot {what}: it was opened read-only")
        try:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                yield self.db
                self.db.execute("COMMIT")
            except BaseException:
                if self.db.in_transaction:
                    self.db.execute("ROLLBACK")
                raise
        except sqlite3.Error as e:
            kept = " (the samples stored so far are kept)" if e.sqlite_errorcode & 0xFF == SQLITE_FULL else ""
            raise StoreError(f"results database {self.path}: cannot {what}: {e}{kept}") from None

    def new_run(self, run_id: str, kind: str, command: str, version: str, config: dict) -> None:
        c = this_controller()
        with self._write(f"record run {run_id}") as db:
            db.execute("INSERT INTO runs (id, kind, started, finished, status, command, vmtax_version,"
                       " config_json, host, user, pid, pid_start, boot_id)"
                       " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                       (run_id, kind, time.time(), None, "running", command, version,
                        json.dumps(config, sort_keys=True),
                        c["host"], c["user"], c["pid"], c["pid_start"], c["boot_id"]))

    def add_target(self, run_id: str, position: int, info: TargetInfo, agent_hash: str) -> None:
        with self._write(f"store target {info.name}") as db:
            db.execute("INSERT OR REPLACE INTO run_targets VALUES (?,?,?,?,?,?,?,?,?,?)",
                       (run_id, position, info.name, info.kind, info.accel, info.boot_s,
                        info.idle_cpu_pct, info.mem_overhead_mb, agent_hash,
                        json.dumps(info.facts, sort_keys=True)))

    def add_benchmarks(self, run_id: str, specs: list[BenchSpec]) -> None:
        with self._write("store the benchmarks") as db:
            db.executemany("INSERT INTO run_benchmarks VALUES (?,?,?,?,?,?,?)",
                           [(run_id, i, s.name, s.suite, s.unit, s.direction, s.description)
                            for i, s in enumerate(specs)])

    def add_sample(self, run_id: str, s: Sample) -> None:
        """The sample and its metrics, together; ValueError for a value or
        metric that is not a finite number (nothing is stored then)."""
        bad = {k: v for k, v in [("value", s.value), *s.metrics.items()] if not _finite(v)}
        if bad:
            raise ValueError(f"sample of {s.benchmark} on {s.target}: not a finite number: {bad!r}")
        if not all(isinstance(k, str) and k for k in s.metrics):
            raise ValueError(f"sample of {s.benchmark} on {s.target}: a metric name that is not a"
                             f" non-empty string: {list(s.metrics)!r}")
        with self._write("store a sample") as db:
            sample_id = db.execute(
                "INSERT INTO samples (run_id,target,benchmark,process,instance,seq,warmup,value,unit,"
                "iters,ops,overhead,tsc_per_op,cpu,t,block,counting)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (run_id, s.target, s.benchmark, s.process, s.instance, s.seq, int(s.warmup), s.value,
                 s.unit, s.iters, s.ops, s.overhead, s.tsc_per_op, s.cpu, s.t,
                 s.block if s.block >= 0 else None, int(s.counting))).lastrowid
            db.executemany("INSERT INTO sample_metrics VALUES (?,?,?)",
                           [(sample_id, name, float(v)) for name, v in s.metrics.items()])

    def add_process(self, run_id: str, process: int, target: str, bench: str, block: int, slot: int,
                    started: float, first_line: float | None, ended: float, outcome: str) -> None:
        """When one agent process ran and where its time went."""
        with self._write("store a process") as db:
            db.execute("INSERT OR REPLACE INTO processes VALUES (?,?,?,?,?,?,?,?,?,?)",
                       (run_id, process, target, bench, block, slot, started, first_line, ended, outcome))

    def processes(self, run_id: str) -> list[dict]:
        """Every agent process of a run, in order (empty for runs before schema 6)."""
        keys = ("process", "target", "benchmark", "block", "slot", "started", "first_line", "ended",
                "outcome")
        rows = self.db.execute(f"SELECT {','.join(keys)} FROM processes WHERE run_id=? ORDER BY process",
                               (run_id,)).fetchall()
        return [dict(zip(keys, r)) for r in rows]

    def set_outcome(self, run_id: str, target: str, bench: str, stopped_by: str, reason: str = "") -> None:
        with self._write("store an outcome") as db:
            db.execute("INSERT OR REPLACE INTO outcomes VALUES (?,?,?,?,?)",
                       (run_id, target, bench, stopped_by, reason))

    def finish_run(self, run_id: str, status: str) -> None:
        """Record how the run ended.  On failure (a full disk) it checkpoints,
        which can give back the space the write-ahead log holds, and tries
        again; a run left 'running' reads as abandoned once vmtax has exited."""
        for attempt in (1, 2):
            try:
                with self._write(f"record that run {run_id} ended ({status})") as db:
                    db.execute("UPDATE runs SET finished=?, status=? WHERE id=?",
                               (time.time(), status, run_id))
                return
            except StoreError as e:
                if self.readonly:
                    raise
                if attempt == 2:
                    raise StoreError(f"{e}; the run reads as abandoned once this vmtax has exited") from None
            try:
                self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.Error:
                pass

    # -- reading --------------------------------------------------------------
    def list_runs(self, limit: int = 50) -> list[dict]:
        rows = self.db.execute(
            "SELECT r.id, r.kind, r.started, r.finished, r.status, r.command,"
            " (SELECT group_concat(name, ' ') FROM (SELECT name FROM run_targets t"
            "   WHERE t.run_id = r.id ORDER BY position)),"
            " (SELECT count(*) FROM run_benchmarks b WHERE b.run_id = r.id),"
            " (SELECT count(*) FROM samples s WHERE s.run_id = r.id AND NOT s.warmup),"
            " r.host, r.user, r.pid, r.pid_start, r.boot_id"
            " FROM runs r ORDER BY r.started DESC LIMIT ?", (limit,)).fetchall()
        keys = ("id", "kind", "started", "finished", "status", "command", "targets", "benchmarks", "samples",
                "host", "user", "pid", "pid_start", "boot_id")
        runs = [dict(zip(keys, r)) for r in rows]
        for run in runs:
            pid_start, boot = run.pop("pid_start"), run.pop("boot_id")
            run["status"] = effective_status(run["status"], run["host"], run["pid"], pid_start, boot)
        return runs

    def resolve(self, ref: str | None) -> str:
        """A run id from a full id, a unique literal prefix (no wildcards), or None/'last'."""
        if ref in (None, "last", "latest"):
            row = self.db.execute("SELECT id FROM runs ORDER BY started DESC LIMIT 1").fetchone()
            if not row:
                raise UserError(f"no runs stored in {self.path}")
            return row[0]
        if self.db.execute("SELECT 1 FROM runs WHERE id = ?", (ref,)).fetchone():
            return ref
        rows = self.db.execute("SELECT id FROM runs WHERE substr(id, 1, length(?1)) = ?1",
                               (ref,)).fetchall()
        if len(rows) != 1:
            what = "no run" if not rows else f"{len(rows)} runs"
            raise UserError(f"{what} matching '{ref}' in {self.path} (see `vmtax runs`)")
        return rows[0][0]

    def load(self, run_id: str) -> RunData:
        r = self.db.execute("SELECT id,kind,started,finished,status,command,vmtax_version,config_json,"
                            "host,pid,pid_start,boot_id FROM runs WHERE id=?", (run_id,)).fetchone()
        if not r:
            raise UserError(f"no run '{run_id}' in {self.path}")
        data = RunData(*r[:7], config=json.loads(r[7]))
        data.status = effective_status(r[4], *r[8:])
        for row in self.db.execute("SELECT name,kind,accel,boot_s,idle_cpu_pct,mem_overhead_mb,"
                                   "agent_hash,facts_json FROM run_targets WHERE run_id=?"
                                   " ORDER BY position", (run_id,)):
            data.targets.append(TargetInfo(name=row[0], kind=row[1], accel=row[2], boot_s=row[3],
                                           idle_cpu_pct=row[4], mem_overhead_mb=row[5],
                                           facts=json.loads(row[7])))
            data.agent_hashes[row[0]] = row[6]
        for row in self.db.execute("SELECT name,suite,unit,direction,description FROM run_benchmarks"
                                   " WHERE run_id=? ORDER BY position", (run_id,)):
            data.benchmarks.append(BenchSpec(*row, kind="workload" if "." in row[0] else "micro"))
        metrics: dict[int, dict[str, float]] = {}
        for sample_id, name, value in self.db.execute(
                "SELECT m.sample_id, m.name, m.value FROM sample_metrics m JOIN samples s"
                " ON s.id = m.sample_id WHERE s.run_id=? ORDER BY m.rowid", (run_id,)):
            metrics.setdefault(sample_id, {})[name] = value
        for row in self.db.execute("SELECT benchmark,target,value,unit,process,seq,instance,warmup,"
                                   "iters,ops,overhead,tsc_per_op,cpu,t,id,block,counting FROM samples"
                                   " WHERE run_id=? ORDER BY id", (run_id,)):
            data.samples.append(Sample(*row[:6], instance=row[6], warmup=bool(row[7]), iters=row[8],
                                       ops=row[9], overhead=row[10], tsc_per_op=row[11], cpu=row[12],
                                       t=row[13], metrics=metrics.get(row[14], {}),
                                       block=row[15] if row[15] is not None else -1,
                                       counting=bool(row[16])))
        for row in self.db.execute("SELECT target,benchmark,stopped_by,reason FROM outcomes"
                                   " WHERE run_id=?", (run_id,)):
            data.outcomes[(row[0], row[1])] = (row[2], row[3])
        return data

