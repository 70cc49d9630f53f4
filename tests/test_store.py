import math
import os
import pwd
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import vmtax
from vmtax.errors import StoreError, UserError
from vmtax.model import BenchSpec, Sample, TargetInfo
from vmtax.store import Store, default_db_path
from vmtax.store.migrations import APPLICATION_ID, MIGRATIONS
from vmtax.store.summaries import FIGURE


def test_migrates_to_latest_in_wal_mode(db):
    s = Store(db)
    assert s.schema_version == len(MIGRATIONS)
    assert s.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    s.close()
    assert Store(db).schema_version == len(MIGRATIONS)  # idempotent


def test_sample_is_visible_to_another_connection_at_once(db):
    s = Store(db)
    s.new_run("r1", "run", "vmtax run", "0", {})
    s.add_sample("r1", Sample("getppid", "local", 100.0, "ns", process=0, seq=0))
    other = sqlite3.connect(db)  # as after a crash: no close(), no commit() called
    assert other.execute("SELECT count(*) FROM samples").fetchone()[0] == 1


def test_a_ctrl_c_inside_a_write_is_taken_after_its_commit(location, monkeypatch):
    """A Ctrl-C that arrives while a sample is written (here: as its
    transaction begins) waits until the write is committed; the run's finish
    after it is committed too, as another connection sees.  (Cut inside the
    driver's BEGIN, the PostgreSQL connection stayed in a transaction that
    the finish joined and nobody committed: the run read 'running'.)"""
    import signal
    from contextlib import contextmanager

    s = Store(location)
    s.new_run("r1", "run", "vmtax run", "0", {})
    inner = s._transaction

    @contextmanager
    def interrupted():
        with inner():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)  # the signal is delivered here, inside the transaction
            yield

    monkeypatch.setattr(s, "_transaction", interrupted)
    with pytest.raises(KeyboardInterrupt):
        s.add_sample("r1", Sample("getppid", "local", 100.0, "ns", process=0, seq=0))
    monkeypatch.setattr(s, "_transaction", inner)
    s.finish_run("r1", "interrupted")
    other = Store(location)
    data = other.load("r1")
    assert [x.value for x in data.samples] == [100.0] and data.status == "interrupted"


def test_a_rows_kind_is_stored_with_the_run_not_read_from_its_name(location):
    """Renaming a workload (or a micro row with a dot) must not change how an
    old run reads: the kind comes back as it was stored."""
    s = Store(location)
    s.new_run("r1", "run", "vmtax run", "0", {})
    s.add_benchmarks(
        "r1",
        [
            BenchSpec("odd.name", "kernel", "ns", "lower", "d", kind="micro"),
            BenchSpec("tool", "apps", "s", "lower", "d", kind="workload"),
        ],
    )
    assert [b.kind for b in Store(location).load("r1").benchmarks] == ["micro", "workload"]


def test_a_samples_reference_is_stored_and_read_back(location):
    s = Store(location)
    s.new_run("r1", "run", "vmtax run", "0", {})
    s.add_sample("r1", Sample("getppid", "local", 42.0, "ns", 0, 0, ref_before=0.95, ref_after=0.97))
    s.add_sample("r1", Sample("getppid", "local", 43.0, "ns", 0, 1))
    got = Store(location).load("r1").samples
    assert [(x.ref_before, x.ref_after) for x in got] == [(0.95, 0.97), (None, None)]
    with pytest.raises(ValueError, match="ref_after"):
        s.add_sample("r1", Sample("getppid", "local", 44.0, "ns", 0, 2, ref_before=1.0, ref_after=float("nan")))


def test_round_trip_and_resolve(location):
    s = Store(location)
    s.new_run("20260101-000000-aaaa", "run", "vmtax run", "0.1", {"precision": 0.01})
    s.add_target("20260101-000000-aaaa", 0, TargetInfo("local", "local", {"kernel": "x"}), "abc")
    s.add_benchmarks("20260101-000000-aaaa", [BenchSpec("getppid", "kernel", "ns", "lower", "d")])
    s.add_sample("20260101-000000-aaaa", Sample("getppid", "local", 1.5, "ns", 0, 0, warmup=True))
    s.set_outcome("20260101-000000-aaaa", "local", "getppid", "budget")
    s.finish_run("20260101-000000-aaaa", "complete")
    d = s.load(s.resolve("2026"))
    assert d.status == "complete" and d.config == {"precision": 0.01}
    assert d.targets[0].facts == {"kernel": "x"} and d.agent_hashes["local"] == "abc"
    assert d.samples[0].warmup and d.samples[0].value == 1.5
    assert d.outcomes[("local", "getppid")] == ("budget", "")
    assert s.resolve(None) == d.id
    with pytest.raises(UserError):
        s.resolve("nope")


def test_default_path_follows_xdg(monkeypatch, tmp_path):
    monkeypatch.delenv("VMTAX_DB")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert default_db_path() == tmp_path / "vmtax" / "vmtax.db"


def test_vmtax_db_may_be_a_file_or_a_postgresql_url(monkeypatch, tmp_path):
    monkeypatch.setenv("VMTAX_DB", str(tmp_path / "a.db"))
    assert default_db_path() == tmp_path / "a.db"
    for url in ("postgresql://u:pw@db.example:5433/vmtax", "postgres:///vmtax?host=/run/postgresql"):
        monkeypatch.setenv("VMTAX_DB", url)
        assert default_db_path() == url  # as given: a Path would fold its //


def test_unwritable_location_is_one_clear_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(UserError, match="cannot open the results database"):
        Store(blocker / "sub" / "vmtax.db")


def test_resolve_matches_an_exact_id_or_a_literal_prefix(location):
    s = Store(location)
    for run_id in ("20260101-000000-4449", "20260101-000000-a_bc", "r1", "r10"):
        s.new_run(run_id, "run", "vmtax run", "0", {})
    assert s.resolve("20260101-000000-4449") == "20260101-000000-4449"
    assert s.resolve("20260101-000000-a_") == "20260101-000000-a_bc"
    assert s.resolve("r1") == "r1"  # exact, although it is also a prefix of r10
    for pattern in ("%4449", "_0260101", "20260101-000000-4_49", "%", "r_0"):
        with pytest.raises(UserError, match="no run matching"):
            s.resolve(pattern)
    with pytest.raises(UserError, match="2 runs matching"):
        s.resolve("20260101")


SRC = str(Path(vmtax.__file__).resolve().parents[1])  # the vmtax under test, for child processes


def _schema(path) -> list:
    con = sqlite3.connect(path)
    try:
        return [
            con.execute("PRAGMA user_version").fetchone()[0],
            con.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name").fetchall(),
        ]
    finally:
        con.close()


OPENER = """
import os, sys, time
from vmtax.store import Store
go, path, ready = sys.argv[1:]
open(ready, "w").close()
while not os.path.exists(go):
    time.sleep(0.0005)
Store(path).close()
"""


def test_first_opens_of_a_new_database_at_once_all_succeed(tmp_path):
    Store(tmp_path / "alone.db").close()
    expected = _schema(tmp_path / "alone.db")
    env = {**os.environ, "PYTHONPATH": SRC}
    for trial in range(10):
        go, path = tmp_path / f"go{trial}", tmp_path / f"new{trial}.db"
        ready = [tmp_path / f"ready{trial}.{i}" for i in range(8)]
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", OPENER, str(go), str(path), str(r)],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            for r in ready
        ]
        while not all(r.exists() for r in ready):  # every opener has imported vmtax and waits
            assert all(p.poll() is None for p in procs), "an opener died before the barrier"
            time.sleep(0.005)
        go.touch()
        failures = [out for out in (p.communicate(timeout=60)[0] for p in procs) if out]
        assert [p.returncode for p in procs] == [0] * 8, f"trial {trial}: {failures[0]}"
        assert _schema(path) == expected


def _foreign(path, *sql):
    con = sqlite3.connect(path, isolation_level=None)
    for statement in sql:
        con.execute(statement)
    con.close()
    return path.read_bytes()


def test_marks_its_database_with_its_application_id(db):
    Store(db).close()
    assert sqlite3.connect(db).execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID == 0x766D7478


def test_an_empty_file_is_initialised(db):
    db.touch()
    assert Store(db).schema_version == len(MIGRATIONS)


@pytest.mark.parametrize(
    "sql, says",
    [
        (["CREATE TABLE users (id, name)", "CREATE TABLE orders (id)"], "it has tables orders, users"),
        (["CREATE TABLE runs (id, kind)", "PRAGMA user_version = 1"], "it has tables runs"),
        (["CREATE TABLE runs (id, config_json)"], "it has tables runs"),  # user_version 0
        (
            ["PRAGMA application_id = 1234", "CREATE TABLE runs (id, config_json)", "PRAGMA user_version = 1"],
            "it has tables runs",
        ),
        (["PRAGMA user_version = 7"], "its user_version is 7"),
    ],
)
@pytest.mark.parametrize("readonly", [False, True])
def test_refuses_another_programs_database_and_writes_nothing(tmp_path, sql, says, readonly):
    path = tmp_path / "theirs.db"
    before = _foreign(path, *sql)
    with pytest.raises(UserError, match=f"theirs.db is not a vmtax results database \\({says}\\)"):
        Store(path, readonly=readonly)
    assert path.read_bytes() == before and sorted(os.listdir(tmp_path)) == ["theirs.db"]


@pytest.mark.parametrize("readonly", [False, True])
def test_refuses_a_file_that_is_not_sqlite(tmp_path, readonly):
    path = tmp_path / "notes.txt"
    path.write_text("not a database, but long enough to have a header " * 10)
    with pytest.raises(UserError, match=r"notes.txt is not a vmtax results database \(not an SQLite file\)"):
        Store(path, readonly=readonly)
    assert path.read_text().startswith("not a database")


def _schema1_db(path, run_id="20250101-000000-0001"):
    """A database as vmtax with only migration 1 wrote it, holding one run."""
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.executescript("BEGIN;\n" + MIGRATIONS[0] + "\nPRAGMA user_version = 1;\nCOMMIT;")
    con.execute(
        "INSERT INTO runs VALUES (?,?,?,?,?,?,?,?)",
        (run_id, "run", 1.0e9, None, "running", "vmtax run", "0.1.0", '{"precision": 0.01}'),
    )
    con.execute(
        "INSERT INTO samples (run_id,target,benchmark,process,instance,seq,warmup,value,unit,"
        "iters,ops,overhead,tsc_per_op,cpu,t) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        (run_id, "local", "getppid", 0, 0, 0, 0, 42.0, "ns", 1000, 1000.0, 1.0, 100.0, -1, 1.0e9),
    )
    con.close()
    return run_id


def _current_db(path, run_id="20260101-000000-0002"):
    s = Store(path)
    s.new_run(run_id, "run", "vmtax run", "0.1.0", {})
    s.add_sample(run_id, Sample("getppid", "local", 42.0, "ns", process=0, seq=0))
    s.finish_run(run_id, "complete")
    s.close()
    return run_id


def test_readonly_open_of_a_missing_file_is_one_clear_error(tmp_path):
    with pytest.raises(UserError, match=r"no results database at .*sub/vmtax.db$"):
        Store(tmp_path / "sub" / "vmtax.db", readonly=True)
    assert os.listdir(tmp_path) == []


def test_readonly_open_is_mode_ro(tmp_path):
    path = tmp_path / "odd ?#%&name.db"  # characters that mean something in a URI
    run_id = _current_db(path)
    s = Store(path, readonly=True)
    assert [r["id"] for r in s.list_runs()] == [run_id] and s.load(run_id).samples[0].value == 42.0
    s.db.execute("PRAGMA query_only=OFF")  # the file itself refuses writes: it is open read-only
    with pytest.raises(sqlite3.OperationalError, match="readonly database"):
        s.db.execute("CREATE TABLE other (x)")
    s.close()


@pytest.mark.parametrize("make", [_schema1_db, _current_db])
def test_readonly_open_leaves_the_file_as_it_was(db, make):
    run_id = make(db)
    before, stat = db.read_bytes(), db.stat()
    time.sleep(0.01)  # an mtime written now would differ
    s = Store(db, readonly=True)
    assert s.schema_version == len(MIGRATIONS)  # an old one migrated in a copy
    data = s.load(s.resolve(None))
    assert data.id == run_id and [x.value for x in data.samples] == [42.0]
    s.close()
    assert db.read_bytes() == before and db.stat().st_mtime_ns == stat.st_mtime_ns
    assert _schema(db)[0] == (1 if make is _schema1_db else len(MIGRATIONS))


READER = """
import sys
from vmtax.store import Store
s = Store(sys.argv[1], readonly=True)
print(" ".join(r["id"] for r in s.list_runs()))
"""


def _runs(argv, env, user) -> bool:
    try:
        return subprocess.run(argv, env=env, capture_output=True, **user).returncode == 0
    except OSError:
        return False


@pytest.fixture
def shared_dir():
    """A directory another user may traverse (pytest's tmp_path is private)."""
    path = Path(tempfile.mkdtemp(prefix="vmtax-ro-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        for p in [path, *path.iterdir()]:
            p.chmod(0o755)
        shutil.rmtree(path)


def _read_as_another_user(path):
    """READER on path, as nobody when we are root (root ignores permissions),
    with a Python that user can run."""
    user = {"user": 65534, "group": 65534, "extra_groups": []} if os.geteuid() == 0 else {}
    env = {**os.environ, "PYTHONPATH": SRC}
    python = next(
        (
            exe
            for exe in (sys.executable, shutil.which("python3"), "/usr/bin/python3")
            if exe and _runs([exe, "-c", "import sys, vmtax.store; assert sys.version_info >= (3, 11)"], env, user)
        ),
        None,
    )
    if python is None:
        pytest.skip("user nobody can run no Python >= 3.11 that imports vmtax here")
    return subprocess.run([python, "-c", READER, str(path)], env=env, capture_output=True, text=True, **user)


@pytest.mark.parametrize("make", [_schema1_db, _current_db])
def test_readonly_open_of_a_read_only_file_in_a_read_only_directory(shared_dir, make):
    path = shared_dir / "vmtax.db"
    run_id = make(path)
    path.chmod(0o444)
    shared_dir.chmod(0o555)
    out = _read_as_another_user(path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [run_id]
    assert sorted(os.listdir(shared_dir)) == ["vmtax.db"]


def test_readonly_open_in_a_read_only_directory_with_an_unapplied_log_says_so(shared_dir, db):
    s = Store(db)
    s.new_run("r1", "run", "vmtax run", "0", {})  # in the -wal until a checkpoint
    for suffix in ("", "-wal"):  # as if its writer had been killed
        shutil.copy(f"{db}{suffix}", f"{shared_dir / 'vmtax.db'}{suffix}")
    s.close()
    shared_dir.chmod(0o555)
    out = _read_as_another_user(shared_dir / "vmtax.db")
    assert out.returncode == 1 and "holds changes that only a writer can apply" in out.stderr


@pytest.mark.parametrize("readonly", [False, True])
def test_refuses_a_newer_schema(db, readonly):
    Store(db).close()
    con = sqlite3.connect(db)
    con.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}")
    con.close()
    with pytest.raises(UserError, match="newer"):
        Store(db, readonly=readonly)


def test_a_read_only_store_refuses_writes_with_a_store_error(location):
    _current_db(location)
    s = Store(location, readonly=True)
    with pytest.raises(StoreError, match="cannot record run r9: it was opened read-only"):
        s.new_run("r9", "run", "vmtax run", "0", {})
    with pytest.raises(StoreError, match=r"opened read-only$"):
        s.finish_run("r9", "complete")


@pytest.fixture
def tiny_fs(tmp_path):
    """A real 300 KiB file system, to fill."""
    if os.geteuid() != 0:
        pytest.skip("mounting a 300 KiB tmpfs needs root")
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=300k", "tmpfs", str(mnt)], capture_output=True, text=True
    )
    if mounted.returncode:
        pytest.skip(f"cannot mount a tmpfs: {mounted.stderr.strip()}")
    try:
        yield mnt
    finally:
        if subprocess.run(["umount", str(mnt)]).returncode:
            subprocess.run(["umount", "-l", str(mnt)])  # a connection left open: detach it anyway


def test_a_full_disk_is_one_store_error_and_what_was_stored_stays_readable(tiny_fs):
    path = tiny_fs / "vmtax.db"
    s = Store(path)
    s.new_run("r1", "run", "vmtax run", "0", {})
    stored = 0
    with pytest.raises(StoreError) as full:
        while stored < 100_000:
            s.add_sample("r1", Sample("getppid", "local", 40.0 + stored, "ns", process=0, seq=stored))
            stored += 1
    assert str(full.value) == (
        f"results database {path}: cannot store a sample: database or disk is full (the samples stored so far are kept)"
    )
    assert full.value.__suppress_context__  # one line, no chained sqlite3 traceback
    assert 10 < stored < 100_000
    assert [x.value for x in s.load("r1").samples] == [40.0 + i for i in range(stored)]
    reader = Store(path, readonly=True)
    assert len(reader.load("r1").samples) == stored and reader.list_runs()[0]["samples"] == stored
    reader.close()
    try:
        s.finish_run("r1", "failed")  # this may fit in the space the failed sample took
    except StoreError as e:
        assert "database or disk is full" in str(e) and "reads as abandoned" in str(e)
        subprocess.run(["mount", "-o", "remount,size=2m", str(tiny_fs)], check=True)
        s.finish_run("r1", "failed")
    assert s.load("r1").status == "failed"
    s.close()


CONTROLLER = """
import sys
from vmtax.store import Store
Store(sys.argv[1]).new_run("dead", "run", "vmtax run", "0", {})
"""  # and exits without finishing it, as if killed


def test_a_run_whose_controller_died_reads_as_abandoned_and_reading_writes_nothing(db):
    dead = subprocess.run([sys.executable, "-c", CONTROLLER, str(db)], env={**os.environ, "PYTHONPATH": SRC})
    assert dead.returncode == 0
    s = Store(db)
    s.new_run("alive", "run", "vmtax run", "0", {})  # this process controls it
    s.new_run("done", "run", "vmtax run", "0", {})
    s.finish_run("done", "complete")
    changes = s.db.total_changes
    runs = {r["id"]: r for r in s.list_runs()}
    assert {k: r["status"] for k, r in runs.items()} == {"dead": "abandoned", "alive": "running", "done": "complete"}
    assert runs["alive"]["host"] == socket.gethostname() and runs["alive"]["pid"] == os.getpid()
    assert runs["alive"]["user"] == pwd.getpwuid(os.getuid()).pw_name
    assert runs["dead"]["pid"] not in (None, os.getpid())
    assert s.load("dead").status == "abandoned" and s.load("alive").status == "running"
    assert Store(db, readonly=True).load("dead").status == "abandoned"
    assert s.db.total_changes == changes
    assert sqlite3.connect(db).execute("SELECT status FROM runs WHERE id = 'dead'").fetchone() == ("running",)


def test_abandoned_is_told_by_boot_and_start_time_and_only_on_this_host(db):
    s = Store(db)
    for run_id in ("reused", "rebooted", "elsewhere", "old"):
        s.new_run(run_id, "run", "vmtax run", "0", {})
    gone = subprocess.Popen(["true"])
    gone.wait()
    raw = sqlite3.connect(db, isolation_level=None)
    raw.execute("UPDATE runs SET pid_start = pid_start + 1 WHERE id = 'reused'")  # our pid, another process
    raw.execute("UPDATE runs SET boot_id = 'another-boot' WHERE id = 'rebooted'")
    raw.execute("UPDATE runs SET host = 'elsewhere.example', pid = ? WHERE id = 'elsewhere'", (gone.pid,))
    raw.execute(
        "UPDATE runs SET host = NULL, user = NULL, pid = NULL, pid_start = NULL, boot_id = NULL WHERE id = 'old'"
    )  # as stored before vmtax recorded controllers
    raw.close()
    assert {r["id"]: r["status"] for r in s.list_runs()} == {
        "reused": "abandoned",
        "rebooted": "abandoned",
        "elsewhere": "running",
        "old": "running",
    }


def test_sample_metrics_round_trip(location):
    s = Store(location)
    s.new_run("r1", "run", "vmtax run", "0", {})
    s.add_sample("r1", Sample("getppid", "local", 40.0, "ns", 0, 0, metrics={"host_ns": 41.5, "cycles": 120}))
    s.add_sample("r1", Sample("getppid", "local", 41.0, "ns", 0, 1))
    s.add_sample("r1", Sample("getppid", "local", 42.0, "ns", 0, 2, metrics={"cycles": -3.0, "a": 0.0}))
    s.add_sample("r1", Sample("getppid", "local", 43.0, "ns", 0, 3, metrics={f"m{i}": i for i in range(40, 0, -1)}))
    got = [x.metrics for x in Store(location, readonly=True).load("r1").samples]
    assert got[:3] == [{"host_ns": 41.5, "cycles": 120.0}, {}, {"cycles": -3.0, "a": 0.0}]
    assert [list(m) for m in got] == [
        ["host_ns", "cycles"],
        [],
        ["cycles", "a"],
        [f"m{i}" for i in range(40, 0, -1)],
    ]  # in the order given


@pytest.mark.parametrize(
    "value, metrics",
    [
        (float("nan"), {}),
        (float("inf"), {}),
        (-float("inf"), {"ok": 1.0}),
        (1.0, {"cycles": float("nan")}),
        (1.0, {"ok": 1.0, "cycles": float("-inf")}),
        (1.0, {"cycles": "12"}),
        (1.0, {"cycles": 10**400}),
        (1.0, {"": 1.0}),
        (1.0, {3: 1.0}),
    ],
)
def test_add_sample_refuses_what_is_not_a_finite_number(location, value, metrics):
    s = Store(location)
    s.new_run("r1", "run", "vmtax run", "0", {})
    with pytest.raises(ValueError, match=r"getppid on local: (not a finite number|a metric name that is not)"):
        s.add_sample("r1", Sample("getppid", "local", value, "ns", 0, 0, metrics=metrics))
    assert s.db.execute("SELECT count(*) FROM samples").fetchone() == (0,)
    assert s.db.execute("SELECT count(*) FROM sample_metrics").fetchone() == (0,)


def test_a_sample_and_its_metrics_are_stored_together_or_not_at_all(db):
    s = Store(db)
    s.new_run("r1", "run", "vmtax run", "0", {})
    s.db.execute(
        "CREATE TEMP TRIGGER refuse BEFORE INSERT ON sample_metrics WHEN NEW.name = 'boom'"
        " BEGIN SELECT RAISE(ABORT, 'refused'); END"
    )
    with pytest.raises(StoreError, match="cannot store a sample: refused"):
        s.add_sample("r1", Sample("getppid", "local", 1.0, "ns", 0, 0, metrics={"fine": 1.0, "boom": 2.0}))
    assert s.load("r1").samples == []
    assert s.db.execute("SELECT count(*) FROM sample_metrics").fetchone() == (0,)


def test_a_schema_1_database_opens_read_only_and_read_write(tmp_path):
    path = tmp_path / "schema1.db"
    run_id = _schema1_db(path)
    before = path.read_bytes()
    ro = Store(path, readonly=True)
    data = ro.load(ro.resolve(None))
    assert data.id == run_id and data.config == {"precision": 0.01}
    assert data.status == "running"  # its controller was not recorded: whether it lives cannot be known
    assert [(x.value, x.metrics) for x in data.samples] == [(42.0, {})]
    assert {k: ro.list_runs()[0][k] for k in ("id", "host", "user", "pid", "samples")} == {
        "id": run_id,
        "host": None,
        "user": None,
        "pid": None,
        "samples": 1,
    }
    ro.close()
    assert path.read_bytes() == before and _schema(path)[0] == 1

    rw = Store(path)
    Store(tmp_path / "fresh.db").close()
    assert _schema(path) == _schema(tmp_path / "fresh.db")
    assert rw.load(run_id) == data
    rw.add_sample(run_id, Sample("getppid", "local", 43.0, "ns", 0, 1, metrics={"cycles": 3.0}))
    rw.finish_run(run_id, "complete")
    rw.close()
    again = Store(path, readonly=True).load(run_id)
    assert again.status == "complete" and [x.metrics for x in again.samples] == [{}, {"cycles": 3.0}]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    ids=st.sets(st.text("ab%_-", min_size=1, max_size=4), min_size=1, max_size=6),
    ref=st.text("ab%_-", min_size=1, max_size=4),
)
def test_resolve_is_exact_or_literal_prefix(db, ids, ref):
    s = Store(db)
    s.db.execute("DELETE FROM runs")
    for run_id in ids:
        s.new_run(run_id, "run", "vmtax run", "0", {})
    expected = [ref] if ref in ids else [i for i in ids if i.startswith(ref)]
    if len(expected) == 1:
        assert s.resolve(ref) == expected[0]
    else:
        with pytest.raises(UserError):
            s.resolve(ref)
    s.close()


def test_a_run_loads_one_benchmark_alone_and_analyses_the_same(location):
    import serveseed
    from vmtax.analysis import analyse

    (run_id,) = serveseed.seed(location, runs_per_host=1, hosts=("h",))
    with Store(location, readonly=True) as s:
        whole, one = s.load(run_id), s.load(run_id, "stat")
    assert [b.name for b in one.benchmarks] == ["stat"] and {x.benchmark for x in one.samples} == {"stat"}
    assert len(one.samples) == sum(x.benchmark == "stat" for x in whole.samples) and set(one.outcomes) == {
        (t, "stat") for t in ("local", "qemu:accel=tcg")
    }
    assert one.targets == whole.targets and one.config == whole.config
    key = lambda c: (c.candidate, c.ratio, c.ratio_ci_low, c.ratio_ci_high, c.p_value)
    assert [key(c) for c in analyse(one)[1]] == [key(c) for c in analyse(whole)[1] if c.benchmark.name == "stat"]


def _figure(bench: str, cand: str, ratio: float, **kw) -> dict:
    f = dict.fromkeys(FIGURE, 1.0) | {"benchmark": bench, "suite": "kernel", "baseline": "local", "candidate": cand}
    return f | {"unit": "ns", "direction": "lower", "estimand": "all blocks", "ratio": ratio} | kw


def test_a_runs_summary_is_stored_replaced_and_read_by_its_version(location):
    s = Store(location)
    for i, run in enumerate(("r1", "r2")):
        s.new_run(run, "compare", "vmtax compare local qemu", "0", {})
        s.add_target(run, 0, TargetInfo("local", "local", {"kernel": "k"}), "a")
        s.add_target(run, 1, TargetInfo("qemu", "qemu", {"label": f"q{i}"}), "b")
        s.finish_run(run, "complete")
    verdict, gate = {"ratios": 2, "line": "2 of 2 ratios"}, {"threshold": 0.02, "verdict": "pass", "regressed": []}
    nan, inf = float("nan"), float("inf")
    figs = [_figure("stat", "qemu", 3.0, ci_high=inf, base_mean=nan), _figure("getppid", "qemu", 2.0)]
    s.save_summary("r1", 7, verdict, gate, figs)
    s.save_summary("r2", 7, None, None, [])
    ro = Store(location, readonly=True)
    assert ro.summaries(["r1", "r2", "nope"], 7) == {"r1": (verdict, gate), "r2": (None, None)}
    assert ro.summaries(["r1"], 8) == {} and ro.summaries([], 7) == {}  # another version's is none
    got = ro.figures(["r1", "r2", "nope"], 7, "stat")
    assert set(got) == {"r1", "r2"} and got["r2"] == []  # r2: summarised, without that row
    (stat,) = got["r1"]
    assert stat["ratio"] == 3.0 and stat["ci_high"] == inf and math.isnan(stat["base_mean"])
    assert {k: v for k, v in stat.items() if k != "base_mean"} == {k: v for k, v in figs[0].items() if k != "base_mean"}
    assert [f["benchmark"] for f in ro.figures(["r1"], 7)["r1"]] == ["stat", "getppid"]  # in the order saved
    assert ro.figures(["r1"], 8) == {}
    s.save_summary("r1", 8, None, None, figs[1:])  # replaces the one before
    assert Store(location, readonly=True).figures(["r1"], 8) == {"r1": [figs[1]]}
    heads = ro.heads(["r2", "r1"])
    assert [t.facts for t in heads["r2"].targets] == [{"kernel": "k"}, {"label": "q1"}]
    assert heads["r1"].status == "complete" and heads["r1"].samples == [] and heads["r1"].kind == "compare"
    with pytest.raises(StoreError, match="it was opened read-only"):
        ro.save_summary("r1", 7, None, None, [])


def test_a_rows_figures_are_read_through_their_index(db):
    s = Store(db)
    plan = s.read(
        "EXPLAIN QUERY PLAN SELECT s.run_id, f.ratio FROM run_summaries s LEFT JOIN row_figures f"
        " ON f.run_id = s.run_id AND f.benchmark = ? WHERE s.version = ? AND s.run_id IN (?, ?)",
        ("getppid", 1, "a", "b"),
    )
    assert any("row_figures_by_row" in str(row) or "sqlite_autoindex_row_figures" in str(row) for row in plan), plan
