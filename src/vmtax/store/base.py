"""The results store's interface, and the SQL its two backends share.

Store(location) opens the results database at location and, as pathlib.Path
picks its flavour, returns the backend's Store: a postgresql:// (or
postgres://) URL opens PostgreSQL (postgres.py, a team's database), anything
else is an SQLite file (sqlite.py, the embedded default).  The runner, the
CLI and the reports see only this class.  Every write is one committed
transaction, so a crash or a Ctrl-C loses nothing already measured; any
error of the database becomes one StoreError (or a UserError on opening)."""

from __future__ import annotations

import json
import math
import numbers
import os
import re
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

from ..errors import StoreError, UserError
from ..model import BenchSpec, ProcessRecord, RunData, Sample, TargetInfo
from ..proc import signals_held
from .controller import effective_status, this_controller
from .dialect import Dialect

URL_SCHEMES = ("postgresql://", "postgres://")


# libpq's connection keywords: `host=db port=5432 dbname=vt` is a PostgreSQL location, never a file name
LIBPQ_KEYWORDS = frozenset(
    (
        "host hostaddr port dbname user password passfile require_auth channel_binding connect_timeout "
        "client_encoding options application_name fallback_application_name keepalives keepalives_idle "
        "keepalives_interval keepalives_count tcp_user_timeout replication gssencmode sslmode requiressl "
        "sslcompression sslcert sslkey sslpassword sslcertmode sslrootcert sslcrl sslcrldir sslsni requirepeer "
        "ssl_min_protocol_version ssl_max_protocol_version krbsrvname gsslib gssdelegation service "
        "target_session_attrs load_balance_hosts sslnegotiation"
    ).split()
)
_PAIR = r"(\w+)\s*=\s*(?:'(?:[^'\\]|\\.)*'|[^\s']*)"
_CONNINFO = re.compile(rf"\s*{_PAIR}(?:\s+{_PAIR})*\s*")
_CONNINFO_KEY = re.compile(_PAIR)


def is_url(location: str | Path) -> bool:
    """Whether location names a PostgreSQL database: a postgresql:// URL,
    or a libpq keyword string (key=value ... with a libpq keyword)."""
    if not isinstance(location, str):
        return False
    if location.startswith(URL_SCHEMES):
        return True
    return _CONNINFO.fullmatch(location) is not None and any(
        k.lower() in LIBPQ_KEYWORDS for k in _CONNINFO_KEY.findall(location)
    )


_URL_PASSWORD = re.compile(r"(postgres(?:ql)?://[^\s:/@]*):[^\s/]*@", re.IGNORECASE)
_KEY_PASSWORD = re.compile(r"(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s&']+)", re.IGNORECASE)


def redact(text: str) -> str:
    """Text as shown or stored (a location, a command line, an error): no
    password from a postgresql:// URL (user:PASSWORD@, ?password=), a libpq
    keyword string (password=...) or $PGPASSWORD survives."""
    out = _KEY_PASSWORD.sub(r"\1***", _URL_PASSWORD.sub(r"\1:***@", str(text)))
    env = os.environ.get("PGPASSWORD", "")
    return out.replace(env, "***") if len(env) >= 3 else out


def _finite(x) -> bool:
    try:
        return isinstance(x, numbers.Real) and math.isfinite(x)
    except OverflowError:  # an int too large for a float
        return False


def _upsert(table: str, columns: tuple[str, ...], key: tuple[str, ...]) -> str:
    """INSERT, or on a row with the same key, UPDATE (both backends' syntax)."""
    updates = ", ".join(f"{c} = excluded.{c}" for c in columns if c not in key)
    return (
        f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
        f" ON CONFLICT ({', '.join(key)}) DO UPDATE SET {updates}"
    )


ADD_TARGET = _upsert(
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
ADD_PROCESS = _upsert(
    "processes",
    ("run_id", "process", "target", "benchmark", "block", "slot", "started", "first_line", "ended", "outcome"),
    ("run_id", "process"),
)
SET_OUTCOME = _upsert(
    "outcomes", ("run_id", "target", "benchmark", "stopped_by", "reason"), ("run_id", "target", "benchmark")
)
SET_SUMMARY = _upsert("run_summaries", ("run_id", "version", "verdict_json", "gate_json"), ("run_id",))
# a row_figures row, less its run_id and position: a ratio of a run with its interval and its two sides' means
FIGURE = (
    "benchmark",
    "suite",
    "baseline",
    "candidate",
    "unit",
    "direction",
    "estimand",
    "ratio",
    "ci_low",
    "ci_high",
    "base_mean",
    "base_ci_low",
    "base_ci_high",
    "cand_mean",
    "cand_ci_low",
    "cand_ci_high",
)
ADD_FIGURE = _upsert("row_figures", ("run_id", "position", *FIGURE), ("run_id", "benchmark", "candidate"))
RUN_HEAD = 'id,kind,started,finished,status,command,vmtax_version,config_json,host,pid,pid_start,boot_id,"user"'
TARGET_ROW = "name,kind,accel,boot_s,idle_cpu_pct,mem_overhead_mb,agent_hash,facts_json"


def _figure_value(x):
    """A figure as stored: NaN as NULL (SQLite stores it so; PostgreSQL would keep it)."""
    return None if isinstance(x, float) and math.isnan(x) else x


def _marks(ids: list[str]) -> str:
    return ",".join("?" * len(ids)) or "NULL"


def _head(r: tuple) -> RunData:
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


def _target(row: tuple) -> TargetInfo:
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


class Store:
    """The results database.  readonly=True never writes to it (for show,
    runs and report): it may be read-only, or in use by a run."""

    dialect: Dialect
    location: str  # for messages: the file, or the URL less its password
    readonly: bool
    db: Any = None  # the backend's DB-API connection (sqlite3 or psycopg: no type in common)
    # the schema version found on opening, before any migration (None: not told; PostgreSQL tells it,
    # whose read-only migration holds its lock, and keeps writers waiting, until the store is closed)
    found_version: int | None = None

    # (accepts(location), load() -> the backend's class): registered by store/__init__.py,
    # so that this interface knows none of its backends (no import cycle)
    backends: ClassVar[list[tuple[Callable[[str | Path], bool], Callable[[], type]]]] = []

    def __new__(cls, location: str | Path, readonly: bool = False):
        if cls is Store:
            cls = next(load() for accepts, load in Store.backends if accepts(location))
        return super().__new__(cls)

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.db.close()

    # -- what each backend provides --------------------------------------------------------
    errors: tuple[type[BaseException], ...] = ()  # the backend's own errors

    @property
    def schema_version(self) -> int:
        raise NotImplementedError

    @contextmanager
    def _transaction(self):
        """One write transaction: committed at the end, rolled back on any error."""
        raise NotImplementedError
        yield

    def _full(self, error: BaseException) -> bool:
        """Whether error says the disk is full."""
        return False

    def _make_room(self) -> None:
        """After a failed write: give back what space the backend can."""

    # -- the shared SQL -----------------------------------------------------------------
    def _execute(self, statement: str, params=()):
        return self.db.execute(self.dialect.sql(statement), params)

    def _rows(self, statement: str, params=()) -> list[tuple]:
        """A read; an error of the database becomes one StoreError."""
        try:
            return self._execute(statement, params).fetchall()
        except self.errors as e:
            raise StoreError(f"results database {self.location}: cannot read it: {one_line(e)}") from None

    @contextmanager
    def _write(self, what: str):
        """A write transaction; any error of the database in it becomes one StoreError."""
        if self.readonly:
            raise StoreError(f"results database {self.location}: cannot {what}: it was opened read-only")
        try:
            # a Ctrl-C is taken when the transaction has ended, never inside it: cut inside the
            # driver's BEGIN or COMMIT, it could leave the connection in a transaction that every
            # later write (the run's finish included) joins and that is never committed
            with signals_held(), self._transaction():
                yield
        except self.errors as e:
            kept = " (the samples stored so far are kept)" if self._full(e) else ""
            raise StoreError(f"results database {self.location}: cannot {what}: {one_line(e)}{kept}") from None

    # -- writing: each call is one committed transaction ------------------------
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

    def processes(self, run_id: str) -> list[dict]:
        """Every agent process of a run, in order (empty for runs before schema 6)."""
        keys = ("process", "target", "benchmark", "block", "slot", "started", "first_line", "ended", "outcome")
        rows = self._rows(f"SELECT {','.join(keys)} FROM processes WHERE run_id=? ORDER BY process", (run_id,))
        return [dict(zip(keys, r, strict=True)) for r in rows]

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

    # -- reading --------------------------------------------------------------
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

    def load(self, run_id: str, benchmark: str | None = None) -> RunData:
        """A run as stored; given a benchmark, that benchmark's alone (its spec, samples and outcomes)."""
        one, of = (" AND {} = ?", (benchmark,)) if benchmark is not None else ("", ())
        rows = self._rows(f"SELECT {RUN_HEAD} FROM runs WHERE id=?", (run_id,))
        if not rows:
            raise UserError(f"no run '{run_id}' in {self.location}")
        data = _head(rows[0])
        for row in self._rows(f"SELECT {TARGET_ROW} FROM run_targets WHERE run_id=? ORDER BY position", (run_id,)):
            data.targets.append(_target(row))
            data.agent_hashes[row[0]] = row[6]
        for row in self._rows(
            "SELECT name,suite,unit,direction,description,kind FROM run_benchmarks WHERE run_id=?"
            + one.format("name")
            + " ORDER BY position",
            (run_id, *of),
        ):
            # the kind as stored; a run stored before kinds were (schema < 9): from the name, as then
            data.benchmarks.append(
                BenchSpec(
                    name=row[0],
                    suite=row[1],
                    unit=row[2],
                    direction=row[3],
                    description=row[4],
                    kind=row[5] or ("workload" if "." in row[0] else "micro"),
                )
            )
        metrics: dict[int, dict[str, float]] = {}
        for sample_id, name, value in self._rows(
            "SELECT m.sample_id, m.name, m.value FROM sample_metrics m JOIN samples s"
            f" ON s.id = m.sample_id WHERE s.run_id=?{one.format('s.benchmark')}"
            f" ORDER BY m.sample_id, {self.dialect.metric_order}",
            (run_id, *of),
        ):
            metrics.setdefault(sample_id, {})[name] = value
        for row in self._rows(
            "SELECT benchmark,target,value,unit,process,seq,instance,warmup,"
            "iters,ops,overhead,tsc_per_op,cpu,t,id,block,counting,ref_before,ref_after FROM samples"
            " WHERE run_id=?" + one.format("benchmark") + " ORDER BY id",
            (run_id, *of),
        ):
            data.samples.append(
                Sample(
                    benchmark=row[0],
                    target=row[1],
                    value=row[2],
                    unit=row[3],
                    process=row[4],
                    seq=row[5],
                    instance=row[6],
                    warmup=bool(row[7]),
                    iters=row[8],
                    ops=row[9],
                    overhead=row[10],
                    tsc_per_op=row[11],
                    cpu=row[12],
                    t=row[13],
                    metrics=metrics.get(row[14], {}),
                    block=row[15] if row[15] is not None else -1,
                    counting=bool(row[16]),
                    ref_before=row[17],
                    ref_after=row[18],
                )
            )
        for row in self._rows(
            "SELECT target,benchmark,stopped_by,reason FROM outcomes WHERE run_id=?" + one.format("benchmark"),
            (run_id, *of),
        ):
            data.outcomes[(row[0], row[1])] = (row[2], row[3])
        return data

    # -- the summaries of finished runs (what vmtax serve's lists read) ---------------------
    def save_summary(self, run_id: str, version: int, verdict, gate, figures: list[dict]) -> None:
        """A finished run's summary, in place of any before it: its verdict and gate (JSON's
        values; None: none) and its ratios (dicts with FIGURE's keys), worked out by the
        analysis of `version`."""
        with self._write(f"store the summary of run {run_id}"):
            self._execute(SET_SUMMARY, (run_id, version, json.dumps(verdict), json.dumps(gate)))
            self._execute("DELETE FROM row_figures WHERE run_id = ?", (run_id,))
            self.db.cursor().executemany(  # an upsert: another writer may store the same at once
                self.dialect.sql(ADD_FIGURE),
                [(run_id, i, *(_figure_value(f[k]) for k in FIGURE)) for i, f in enumerate(figures)],
            )

    def summaries(self, run_ids: list[str], version: int) -> dict[str, tuple]:
        """run id -> (verdict, gate) of those of run_ids summarised by the analysis of
        `version`, in one query (a run without one, or with another version's, is left out)."""
        rows = self._rows(
            "SELECT run_id, verdict_json, gate_json FROM run_summaries"
            f" WHERE version = ? AND run_id IN ({_marks(run_ids)})",
            (version, *run_ids),
        )
        return {r[0]: (json.loads(r[1]), json.loads(r[2])) for r in rows}

    def figures(self, run_ids: list[str], version: int, benchmark: str | None = None) -> dict[str, list[dict]]:
        """run id -> its ratios (of benchmark, where given) in the order they were saved, as dicts
        with FIGURE's keys (NaN for NULL), for those of run_ids summarised by the analysis of
        `version` (one without such a ratio: an empty list); one query, through the index on
        (benchmark, run_id) where a benchmark is given."""
        row = " AND f.benchmark = ?" if benchmark is not None else ""
        rows = self._rows(
            f"SELECT s.run_id, {', '.join('f.' + k for k in FIGURE)} FROM run_summaries s"
            f" LEFT JOIN row_figures f ON f.run_id = s.run_id{row}"
            f" WHERE s.version = ? AND s.run_id IN ({_marks(run_ids)}) ORDER BY s.run_id, f.position",
            (*([benchmark] if benchmark is not None else []), version, *run_ids),
        )
        out: dict[str, list[dict]] = {}
        for r in rows:
            got = out.setdefault(r[0], [])
            if r[1] is not None:
                got.append({k: math.nan if v is None else v for k, v in zip(FIGURE, r[1:], strict=True)})
        return out

    def heads(self, run_ids: list[str]) -> dict[str, RunData]:
        """run id -> the run with its targets, without benchmarks, samples or outcomes (two queries)."""
        marks = _marks(run_ids)
        out = {r[0]: _head(r) for r in self._rows(f"SELECT {RUN_HEAD} FROM runs WHERE id IN ({marks})", run_ids)}
        for row in self._rows(
            f"SELECT run_id, {TARGET_ROW} FROM run_targets WHERE run_id IN ({marks}) ORDER BY run_id, position",
            run_ids,
        ):
            out[row[0]].targets.append(_target(row[1:]))
            out[row[0]].agent_hashes[row[1]] = row[7]
        return out


def one_line(error: BaseException) -> str:
    """A database's message on one line (PostgreSQL's span several)."""
    return " ".join(str(error).split())
