"""Writing a run as it is measured: the run, its targets, benchmarks,
samples, processes and outcomes, and how it ended; each call is one
committed transaction, so a crash or a Ctrl-C loses nothing already
measured."""

from __future__ import annotations

import json
import math
import numbers
import time

from ..errors import StoreError
from ..model import BenchSpec, ProcessRecord, Sample, TargetInfo
from .controller import this_controller
from .core import StoreCore, upsert

ADD_TARGET = upsert(
    "run_targets",
    (
        "run_id",
        "position",
        "name",
        "kind",
        "accel",
        "boot_s",
        "idle_cpu_pct",
        "mem_overhead_mb",
        "agent_hash",
        "facts_json",
    ),
    ("run_id", "name"),
)
ADD_PROCESS = upsert(
    "processes",
    ("run_id", "process", "target", "benchmark", "block", "slot", "started", "first_line", "ended", "outcome"),
    ("run_id", "process"),
)
SET_OUTCOME = upsert(
    "outcomes", ("run_id", "target", "benchmark", "stopped_by", "reason"), ("run_id", "target", "benchmark")
)


def _finite(x) -> bool:
    try:
        return isinstance(x, numbers.Real) and math.isfinite(x)
    except OverflowError:  # an int too large for a float
        return False


class RunWriting(StoreCore):
    """The writes of a run in progress."""

    def new_run(self, run_id: str, kind: str, command: str, version: str, config: dict) -> None:
        c = this_controller()
        with self._write(f"record run {run_id}"):
            self._execute(
                "INSERT INTO runs (id, kind, started, finished, status, command, vmtax_version,"
                ' config_json, host, "user", pid, pid_start, boot_id)'
                " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    run_id,
                    kind,
                    time.time(),
                    None,
                    "running",
                    command,
                    version,
                    json.dumps(config, sort_keys=True),
                    c["host"],
                    c["user"],
                    c["pid"],
                    c["pid_start"],
                    c["boot_id"],
                ),
            )

    def add_target(self, run_id: str, position: int, info: TargetInfo, agent_hash: str) -> None:
        with self._write(f"store target {info.name}"):
            self._execute(
                ADD_TARGET,
                (
                    run_id,
                    position,
                    info.name,
                    info.kind,
                    info.accel,
                    info.boot_s,
                    info.idle_cpu_pct,
                    info.mem_overhead_mb,
                    agent_hash,
                    json.dumps(info.facts, sort_keys=True),
                ),
            )

    def add_benchmarks(self, run_id: str, specs: list[BenchSpec]) -> None:
        with self._write("store the benchmarks"):
            self.db.cursor().executemany(
                self.dialect.sql(
                    "INSERT INTO run_benchmarks (run_id, position, name, suite, unit, direction,"
                    " description, kind) VALUES (?,?,?,?,?,?,?,?)"
                ),
                [(run_id, i, s.name, s.suite, s.unit, s.direction, s.description, s.kind) for i, s in enumerate(specs)],
            )

    def add_sample(self, run_id: str, s: Sample) -> None:
        """The sample and its metrics, together; ValueError for a value or
        metric that is not a finite number (nothing is stored then)."""
        refs = [(k, v) for k, v in (("ref_before", s.ref_before), ("ref_after", s.ref_after)) if v is not None]
        bad = {k: v for k, v in [("value", s.value), *refs, *s.metrics.items()] if not _finite(v)}
        if bad:
            raise ValueError(f"sample of {s.benchmark} on {s.target}: not a finite number: {bad!r}")
        if not all(isinstance(k, str) and k for k in s.metrics):
            raise ValueError(
                f"sample of {s.benchmark} on {s.target}: a metric name that is not a"
                f" non-empty string: {list(s.metrics)!r}"
            )
        with self._write("store a sample"):
            sample_id = self._execute(
                "INSERT INTO samples (run_id,target,benchmark,process,instance,seq,warmup,value,unit,"
                "iters,ops,overhead,tsc_per_op,cpu,t,block,counting,ref_before,ref_after)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) RETURNING id",
                (
                    run_id,
                    s.target,
                    s.benchmark,
                    s.process,
                    s.instance,
                    s.seq,
                    int(s.warmup),
                    s.value,
                    s.unit,
                    s.iters,
                    s.ops,
                    s.overhead,
                    s.tsc_per_op,
                    s.cpu,
                    s.t,
                    s.block if s.block >= 0 else None,
                    int(s.counting),
                    s.ref_before,
                    s.ref_after,
                ),
            ).fetchall()[0][0]
            if s.metrics:
                self.db.cursor().executemany(
                    self.dialect.sql("INSERT INTO sample_metrics (sample_id, name, value, position) VALUES (?,?,?,?)"),
                    [(sample_id, name, float(v), i) for i, (name, v) in enumerate(s.metrics.items())],
                )

    def add_process(self, run_id: str, p: ProcessRecord) -> None:
        """When one agent process ran and where its time went."""
        with self._write("store a process"):
            self._execute(
                ADD_PROCESS,
                (
                    run_id,
                    p.process,
                    p.target,
                    p.benchmark,
                    p.block,
                    p.slot,
                    p.started,
                    p.first_line,
                    p.ended,
                    p.outcome,
                ),
            )

    def set_outcome(self, run_id: str, target: str, bench: str, stopped_by: str, reason: str = "") -> None:
        with self._write("store an outcome"):
            self._execute(SET_OUTCOME, (run_id, target, bench, stopped_by, reason))

    def finish_run(self, run_id: str, status: str) -> None:
        """Record how the run ended.  On failure (a full disk) the backend
        gives back what space it can and it tries again; a run left
        'running' reads as abandoned once vmtax has exited."""
        for attempt in (1, 2):
            try:
                with self._write(f"record that run {run_id} ended ({status})"):
                    self._execute("UPDATE runs SET finished=?, status=? WHERE id=?", (time.time(), status, run_id))
                return
            except StoreError as e:
                if self.readonly:
                    raise
                if attempt == 2:
                    raise StoreError(f"{e}; the run reads as abandoned once this vmtax has exited") from None
            self._make_room()
