"""Reading stored runs: the latest runs, a run id from a prefix, runs'
heads with their targets, a run's processes, and any query of the shared
SQL (the whole run, samples included, is Store.load's)."""

from __future__ import annotations

import json

from ..errors import UserError
from ..model import RunData, TargetInfo
from .controller import effective_status
from .core import StoreCore, marks
from .location import redact

RUN_HEAD = 'id,kind,started,finished,status,command,vmtax_version,config_json,host,pid,pid_start,boot_id,"user"'
TARGET_ROW = "name,kind,accel,boot_s,idle_cpu_pct,mem_overhead_mb,agent_hash,facts_json"


def run_head(r: tuple) -> RunData:
    """A run as its row in runs says (RUN_HEAD's columns), without targets, benchmarks or samples."""
    data = RunData(
        id=r[0],
        kind=r[1],
        started=r[2],
        finished=r[3],
        status=r[4],
        command=r[5],
        vmtax_version=r[6],
        config=json.loads(r[7]),
        host=r[8],
        user=r[12],
    )
    data.command = redact(data.command)  # a run stored before vmtax redacted its command line
    data.status = effective_status(r[4], *r[8:12])
    return data


def target_info(row: tuple) -> TargetInfo:
    """A target as its row in run_targets says (TARGET_ROW's columns)."""
    return TargetInfo(
        name=row[0],
        kind=row[1],
        accel=row[2],
        boot_s=row[3],
        idle_cpu_pct=row[4],
        mem_overhead_mb=row[5],
        facts=json.loads(row[7]),
    )


class RunReading(StoreCore):
    """The reads of stored runs, short of a whole run."""

    def processes(self, run_id: str) -> list[dict]:
        """Every agent process of a run, in order (empty for runs before schema 6)."""
        keys = ("process", "target", "benchmark", "block", "slot", "started", "first_line", "ended", "outcome")
        rows = self._rows(f"SELECT {','.join(keys)} FROM processes WHERE run_id=? ORDER BY process", (run_id,))
        return [dict(zip(keys, r, strict=True)) for r in rows]

    def read(self, statement: str, params=()) -> list[tuple]:
        """A query's rows (SQLite's SQL and ? placeholders: dialect.py turns
        them into the backend's); for readers that ask more than the methods
        below (vmtax serve's filtered, paginated lists)."""
        return self._rows(statement, params)

    def list_runs(self, limit: int = 50, host: str | None = None) -> list[dict]:
        """The latest runs, newest first; only those measured on host, if given."""
        where, params = ("WHERE r.host = ?", (host, limit)) if host is not None else ("", (limit,))
        rows = self._rows(
            "SELECT r.id, r.kind, r.started, r.finished, r.status, r.command, " + self.dialect.run_targets + ","
            " (SELECT count(*) FROM run_benchmarks b WHERE b.run_id = r.id),"
            " (SELECT count(*) FROM samples s WHERE s.run_id = r.id AND s.warmup = 0),"
            ' r.host, r."user", r.vmtax_version, r.pid, r.pid_start, r.boot_id'
            f" FROM runs r {where} ORDER BY r.started DESC LIMIT ?",
            params,
        )
        keys = (
            "id",
            "kind",
            "started",
            "finished",
            "status",
            "command",
            "targets",
            "benchmarks",
            "samples",
            "host",
            "user",
            "vmtax_version",
            "pid",
            "pid_start",
            "boot_id",
        )
        runs = [dict(zip(keys, r, strict=True)) for r in rows]
        for run in runs:
            run["command"] = redact(run["command"])
            pid_start, boot = run.pop("pid_start"), run.pop("boot_id")
            run["status"] = effective_status(run["status"], run["host"], run["pid"], pid_start, boot)
        return runs

    def resolve(self, ref: str | None) -> str:
        """A run id from a full id, a unique literal prefix (no wildcards), or None/'last'."""
        if ref in (None, "last", "latest"):
            rows = self._rows("SELECT id FROM runs ORDER BY started DESC LIMIT 1")
            if not rows:
                raise UserError(f"no runs stored in {self.location}")
            return rows[0][0]
        if self._rows("SELECT 1 FROM runs WHERE id = ?", (ref,)):
            return ref
        rows = self._rows("SELECT id FROM runs WHERE substr(id, 1, ?) = ?", (len(ref), ref))
        if len(rows) != 1:
            what = "no run" if not rows else f"{len(rows)} runs"
            raise UserError(f"{what} matching '{ref}' in {self.location} (see `vmtax runs`)")
        return rows[0][0]

    def heads(self, run_ids: list[str]) -> dict[str, RunData]:
        """run id -> the run with its targets, without benchmarks, samples or outcomes (two queries)."""
        some = marks(run_ids)
        out = {r[0]: run_head(r) for r in self._rows(f"SELECT {RUN_HEAD} FROM runs WHERE id IN ({some})", run_ids)}
        for row in self._rows(
            f"SELECT run_id, {TARGET_ROW} FROM run_targets WHERE run_id IN ({some}) ORDER BY run_id, position",
            run_ids,
        ):
            out[row[0]].targets.append(target_info(row[1:]))
            out[row[0]].agent_hashes[row[1]] = row[7]
        return out
