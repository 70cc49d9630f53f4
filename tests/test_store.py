import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

import vmtax

from vmtax.errors import UserError
from vmtax.model import BenchSpec, Sample, TargetInfo
from vmtax.store import Store, default_db_path
from vmtax.store.migrations import APPLICATION_ID, MIGRATIONS


def test_migrates_to_latest_in_wal_mode(db):
    s = Store(db)
    assert s.schema_version == len(MIGRATIONS)
    assert s.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    s.close()
    assert Store(db).schema_version == len(MIGRATIONS)  # idempotent


def test_refuses_a_newer_schema(db):
    Store(db).close()
    con = sqlite3.connect(db)
    con.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}")
    con.close()
    with pytest.raises(UserError, match="newer"):
        Store(db)


def test_sample_is_visible_to_another_connection_at_once(db):
    s = Store(db)
    s.new_run("r1", "run", "vmtax run", "0", {})
    s.add_sample("r1", Sample("getppid", "local", 100.0, "ns", process=0, seq=0))
    other = sqlite3.connect(db)  # as after a crash: no close(), no commit() called
    assert other.execute("SELECT count(*) FROM samples").fetchone()[0] == 1


def test_round_trip_and_resolve(db):
    s = Store(db)
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


def test_unwritable_location_is_one_clear_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(UserError, match="cannot open the results database"):
        Store(blocker / "sub" / "vmtax.db")


def test_resolve_matches_an_exact_id_or_a_literal_prefix(db):
    s = Store(db)
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
        return [con.execute("PRAGMA user_version").fetchone()[0],
                con.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name").fetchall()]
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
        procs = [subprocess.Popen([sys.executable, "-c", OPENER, str(go), str(path), str(r)], env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                 for r in ready]
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


@pytest.mark.parametrize("sql, says", [
    (["CREATE TABLE users (id, name)", "CREATE TABLE orders (id)"], "it has tables orders, users"),
    (["CREATE TABLE runs (id, kind)", "PRAGMA user_version = 1"], "it has tables runs"),
    (["CREATE TABLE runs (id, config_json)"], "it has tables runs"),  # user_version 0
    (["PRAGMA application_id = 1234", "CREATE TABLE runs (id, config_json)", "PRAGMA user_version = 1"],
     "it has tables runs"),
    (["PRAGMA user_version = 7"], "its user_version is 7"),
])
def test_refuses_another_programs_database_and_writes_nothing(tmp_path, sql, says):
    path = tmp_path / "theirs.db"
    before = _foreign(path, *sql)
    with pytest.raises(UserError, match=f"theirs.db is not a vmtax results database \\({says}\\)"):
        Store(path)
    assert path.read_bytes() == before and sorted(os.listdir(tmp_path)) == ["theirs.db"]


def test_refuses_a_file_that_is_not_sqlite(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("not a database, but long enough to have a header " * 10)
    with pytest.raises(UserError, match="notes.txt is not a vmtax results database \\(not an SQLite file\\)"):
        Store(path)
    assert path.read_text().startswith("not a database")
