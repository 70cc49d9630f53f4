"""The PostgreSQL results store against a real server of the session's own
(conftest.pg_server): the migrations, a run read back as SQLite reads it,
two vmtax processes from two hosts writing at once, the CLI's one-line errors."""

import csv
import io
import json
import os
import pwd
import signal
import socket
import sqlite3
import subprocess
import sys
from urllib.parse import quote

import psycopg
import pytest

import vmtax
from conftest import vmtax_cmd
from helpers import closed_port, wait_until
from pgserver import PASSWORD
from vmtax.analysis import analyse
from vmtax.cli import build_parser, main
from vmtax.errors import StoreError, UserError
from vmtax.model import ProcessRecord, Sample
from vmtax.report import jsondoc
from vmtax.store import Store
from vmtax.store.migrations import MIGRATIONS


def _sql(url: str, statement: str, params=()) -> list:
    with psycopg.connect(url, autocommit=True) as db:
        cur = db.execute(statement, params)
        return cur.fetchall() if cur.description else []


def _columns(url: str) -> dict:
    return {
        (t, c): kind
        for t, c, kind in _sql(
            url,
            "SELECT table_name, column_name, data_type FROM information_schema.columns"
            " WHERE table_schema = current_schema()",
        )
    }


def _version(url: str) -> int:
    return _sql(url, "SELECT version FROM vmtax_schema")[0][0]


def test_the_migrations_make_on_an_empty_database_what_they_make_in_sqlite(pg_url, tmp_path):
    s = Store(pg_url)
    assert s.schema_version == len(MIGRATIONS) == _version(pg_url)
    s.close()
    Store(tmp_path / "x.db").close()
    lite = sqlite3.connect(tmp_path / "x.db")
    tables = [r[0] for r in lite.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    expected = {(t, r[1]) for t in tables for r in lite.execute(f"PRAGMA table_info({t})")}
    columns = _columns(pg_url)
    assert set(columns) == expected | {("vmtax_schema", "version")}
    # SQLite's integers and reals are 8 bytes: so are these
    assert {kind for (t, _), kind in columns.items() if t != "vmtax_schema"} == {"text", "bigint", "double precision"}
    Store(pg_url).close()  # idempotent
    assert _version(pg_url) == len(MIGRATIONS)


@pytest.mark.parametrize("readonly", [False, True])
def test_refuses_another_programs_database_and_writes_nothing(pg_url, readonly):
    _sql(pg_url, "CREATE TABLE customers (id int)")
    with pytest.raises(
        UserError,
        match=r"search_path%3Ds\d+ is not a vmtax results database \(it has tables"
        r" customers\)$",
    ):
        Store(pg_url, readonly=readonly)
    assert set(_columns(pg_url)) == {("customers", "id")}


@pytest.mark.parametrize("readonly", [False, True])
def test_refuses_a_newer_schema(pg_url, readonly):
    Store(pg_url).close()
    _sql(pg_url, "UPDATE vmtax_schema SET version = version + 1")
    with pytest.raises(UserError, match=f"has schema {len(MIGRATIONS) + 1}, newer than this vmtax"):
        Store(pg_url, readonly=readonly)


def test_read_only_reads_an_older_schema_migrated_in_a_transaction_it_never_commits(pg_url):
    s = Store(pg_url)
    s.new_run("r1", "run", "vmtax run", "0.1.0", {})
    s.add_sample("r1", Sample("getppid", "local", 42.0, "ns", 0, 0))
    s.close()
    _sql(pg_url, "DROP TABLE row_figures")  # as the last migration found it
    _sql(pg_url, "DROP TABLE run_summaries")
    _sql(pg_url, "UPDATE vmtax_schema SET version = %s", (len(MIGRATIONS) - 1,))
    before = _columns(pg_url)
    ro = Store(pg_url, readonly=True)
    assert ro.schema_version == len(MIGRATIONS)
    assert [x.value for x in ro.load(ro.resolve(None)).samples] == [42.0]
    with pytest.raises(StoreError, match="cannot record run r2: it was opened read-only"):
        ro.new_run("r2", "run", "vmtax run", "0", {})
    ro.close()
    assert _version(pg_url) == len(MIGRATIONS) - 1 and _columns(pg_url) == before
    Store(pg_url).close()  # a writer migrates it for good
    assert _version(pg_url) == len(MIGRATIONS) and ("row_figures", "ratio") in _columns(pg_url)


def test_a_read_only_session_is_refused_writes_by_the_server_too(pg_url):
    Store(pg_url).close()
    ro = Store(pg_url, readonly=True)
    with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
        ro.db.execute("DELETE FROM runs")
    ro.close()


def _copy(data, processes: list[dict], dest: Store) -> None:
    """A stored run written again, through the calls the runner makes."""
    dest.new_run(data.id, data.kind, data.command, data.vmtax_version, data.config)
    for position, t in enumerate(data.targets):
        dest.add_target(data.id, position, t, data.agent_hashes[t.name])
    dest.add_benchmarks(data.id, data.benchmarks)
    for s in data.samples:
        dest.add_sample(data.id, s)
    for p in processes:
        dest.add_process(data.id, ProcessRecord(**p))
    for (target, bench), (how, why) in data.outcomes.items():
        dest.set_outcome(data.id, target, bench, how, why)
    dest.finish_run(data.id, data.status)


def test_a_full_run_reads_back_identically_from_both_backends(pg_url, tmp_path, capsys):
    lite = tmp_path / "v.db"
    assert (
        main(["--db", str(lite), "compare", "fake", "fake:scale=2", "--bench", "getppid", "segv", "--max-time", "5s"])
        == 0
    )
    with Store(lite, readonly=True) as s:
        data, processes, listed = s.load(s.resolve(None)), s.processes(s.resolve(None)), s.list_runs()
    assert any(x.metrics for x in data.samples) and processes and data.host and data.user
    with Store(pg_url) as pg:
        _copy(data, processes, pg)
    # the copy's own start and end times (the run itself was recorded by this process, as the copy)
    _sql(pg_url, "UPDATE runs SET started = %s, finished = %s", (data.started, data.finished))
    with Store(pg_url, readonly=True) as pg:
        assert pg.load(data.id) == data
        assert pg.processes(data.id) == processes and pg.list_runs() == listed
    docs = []
    assert jsondoc.document(data, *analyse(data))["host"] == socket.gethostname()
    for db in (str(lite), pg_url):
        capsys.readouterr()
        assert main(["--db", db, "show", data.id[:15], "--json", "-"]) == 0
        docs.append(json.loads(capsys.readouterr().out))
    assert docs[0] == docs[1] == jsondoc.document(data, *analyse(data))


def _as_host(name: str) -> list[str]:
    """A command prefix: what follows runs with hostname name (a UTS namespace of its own)."""
    ns = ["unshare", "--uts"] if os.geteuid() == 0 else ["unshare", "--user", "--map-root-user", "--uts"]
    return [*ns, "sh", "-c", 'hostname "$0" && exec "$@"', name]


def test_two_runs_from_two_hosts_write_at_once_and_read_back_by_host(location, tmp_path, capsys):
    db = str(location)  # a new database: the two also migrate it at once
    hosts = ["hosta", "hostb"]
    docs = [tmp_path / f"{h}.json" for h in hosts]
    procs = [
        subprocess.Popen(
            [
                *_as_host(h),
                *vmtax_cmd(),
                "--db",
                db,
                "run",
                "--target",
                "fake:delay=0.01",
                "--bench",
                "getppid",
                "--max-time",
                "5s",
                "--precision",
                "0.0001%",
                "--json",
                str(doc),
            ],  # each runs 5 s: they overlap unless one starts 5 s late
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for h, doc in zip(hosts, docs, strict=True)
    ]
    try:
        outs = [p.communicate(timeout=120) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert [p.returncode for p in procs] == [0, 0], outs
    ids = [json.loads(d.read_text())["run_id"] for d in docs]

    capsys.readouterr()
    assert main(["--db", db, "runs", "--json"]) == 0
    runs = {r["id"]: r for r in json.loads(capsys.readouterr().out)}
    assert sorted(runs) == sorted(ids)
    a, b = runs[ids[0]], runs[ids[1]]
    assert (a["host"], b["host"]) == ("hosta", "hostb")
    assert {r["status"] for r in (a, b)} == {"complete"} and {r["vmtax_version"] for r in (a, b)} == {vmtax.__version__}
    if os.geteuid() == 0:
        assert a["user"] == b["user"] == pwd.getpwuid(0).pw_name
    assert a["started"] < b["finished"] and b["started"] < a["finished"], "the two did not write at once"

    assert main(["--db", db, "runs", "--host", "hostb", "--json"]) == 0
    assert [r["id"] for r in json.loads(capsys.readouterr().out)] == [ids[1]]
    assert main(["--db", db, "runs", "--host", "hosta"]) == 0
    out = capsys.readouterr().out
    assert ids[0] in out and "hosta" in out and ids[1] not in out
    assert main(["--db", db, "runs", "--host", "elsewhere"]) == 0
    assert capsys.readouterr().out.strip() == "no runs stored"

    page = tmp_path / "r.html"
    assert main(["--db", db, "report", *ids, "--csv", "-", "--html", str(page)]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert sorted((r["run_id"], r["host"]) for r in rows) == sorted(zip(ids, hosts, strict=True))
    assert "on hosta" in page.read_text() and "on hostb" in page.read_text()


def test_a_run_over_tcp_with_a_password_is_stored_and_the_password_never_shown(pg_server, capsys):
    name = pg_server.create_db(owner="alice")  # a team's database: its owner is no superuser
    try:
        url = pg_server.url(name, "alice", PASSWORD, tcp=True)
        assert main(["--db", url, "run", "--target", "fake", "--bench", "getppid", "--max-time", "5s"]) == 0
        ran = capsys.readouterr()
        assert main(["--db", url, "runs", "--json"]) == 0
        listed = capsys.readouterr()
        assert f"results in postgresql://alice:***@127.0.0.1:{pg_server.port}/{name}" in ran.err
        assert [r["status"] for r in json.loads(listed.out)] == ["complete"]
        for secret in (PASSWORD, quote(PASSWORD, safe="")):
            assert secret not in ran.out + ran.err + listed.out + listed.err
    finally:
        pg_server.drop_db(name)


def test_help_shows_vmtax_db_without_its_password(monkeypatch):
    monkeypatch.setenv("VMTAX_DB", "postgresql://alice:hunter2@db.example/vmtax?password=hunter3&sslrootcert=%2Fca")
    text = "".join(build_parser().format_help().split())  # argparse wraps even inside a word
    assert "hunter" not in text and "postgresql://alice:***@db.example/vmtax?password=***&sslrootcert=%2Fca" in text


@pytest.mark.parametrize(
    "make, says",
    [
        (
            lambda pg, tmp: "postgresql://vmtax:hunter2@[::1/x",
            "bad PostgreSQL URL postgresql://vmtax:***@[::1/x: end of string",
        ),
        (
            lambda pg, tmp: "postgresql://vmtax:hunter2@localhost/x?frobnicate=1",
            "bad PostgreSQL URL postgresql://vmtax:***@localhost/x?frobnicate=1: invalid URI query parameter:"
            ' "frobnicate"',
        ),
        (lambda pg, tmp: f"postgresql://vmtax:hunter2@127.0.0.1:{closed_port()}/x", "Connection refused"),
        (
            lambda pg, tmp: f"postgresql://vmtax@{quote(str(tmp), safe='')}/x",
            "No such file or directory Is the server running locally",
        ),
        (
            lambda pg, tmp: pg.url("postgres", "alice", "hunter2", tcp=True),
            'password authentication failed for user "alice"',
        ),
        (lambda pg, tmp: pg.url("postgres", "alice", "hunter2"), 'password authentication failed for user "alice"'),
        (lambda pg, tmp: pg.url("nosuchdb"), 'database "nosuchdb" does not exist'),
    ],
)
@pytest.mark.parametrize("command", [["runs"], ["run", "--target", "fake", "--bench", "getppid"]])
def test_a_database_that_cannot_be_reached_is_one_line_and_exit_2(
    pg_server, tmp_path, capsys, monkeypatch, make, says, command
):
    url = make(pg_server, tmp_path)
    for argv in (["--db", url, *command], command):
        monkeypatch.setenv("VMTAX_DB", url)  # the second: from $VMTAX_DB
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert says in err and len(err.splitlines()) == 1 and "Traceback" not in err, err
        assert "hunter2" not in err


def test_a_lost_connection_is_one_store_error_and_what_was_stored_stays(pg_server, pg_url):
    s = Store(pg_url)
    s.new_run("r1", "run", "vmtax run", "0", {})
    s.add_sample("r1", Sample("getppid", "local", 40.0, "ns", 0, 0))
    pid = s.db.info.backend_pid
    pg_server.admin(f"SELECT pg_terminate_backend({pid})")
    with pytest.raises(StoreError, match=r"^results database .*: cannot store a sample: ") as lost:
        s.add_sample("r1", Sample("getppid", "local", 41.0, "ns", 0, 1))
    assert "\n" not in str(lost.value) and lost.value.__suppress_context__
    s.close()
    assert [x.value for x in Store(pg_url, readonly=True).load("r1").samples] == [40.0]


def test_text_with_nul_is_stored_with_a_replacement_character(pg_url):
    s = Store(pg_url)
    s.new_run("r1", "run", "vmtax run", "0", {})
    s.set_outcome("r1", "local", "getppid", "error", "agent said: bad\x00output")
    assert s.load("r1").outcomes[("local", "getppid")] == ("error", "agent said: bad\ufffdoutput")


def test_ctrl_c_keeps_what_was_stored_in_postgresql(pg_url):
    p = subprocess.Popen(
        [
            *vmtax_cmd(),
            "--db",
            pg_url,
            "run",
            "--target",
            "fake:delay=0.05",
            "--bench",
            "getppid",
            "--max-time",
            "5m",
            "--precision",
            "0.001%",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:

        def samples() -> int:
            try:
                return _sql(pg_url, "SELECT count(*) FROM samples")[0][0]
            except psycopg.errors.UndefinedTable:  # not migrated yet
                return 0

        wait_until(lambda: samples() >= 5, 60, alive=lambda: p.poll() is None)
        n = samples()
        assert n >= 5, "no samples arrived"
        p.send_signal(signal.SIGINT)
        _out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 130 and "samples kept" in err, err
    assert _sql(pg_url, "SELECT status FROM runs") == [("interrupted",)]
    assert _sql(pg_url, "SELECT count(*) FROM samples")[0][0] >= n


# -- no password anywhere (issue 22) -------------------------------------------------
SECRET = "pw-Secret-4217"


@pytest.mark.parametrize(
    "text,shown",
    [
        (f"postgresql://alice:{SECRET}@127.0.0.1:5432/db", "postgresql://alice:***@127.0.0.1:5432/db"),
        (
            f"postgresql://alice:{SECRET}@h/db?password={SECRET}&sslmode=disable",
            "postgresql://alice:***@h/db?password=***&sslmode=disable",
        ),
        (f"postgresql://host=127.0.0.1 password={SECRET}", "postgresql://host=127.0.0.1 password=***"),
        (f"host=h password='{SECRET} x' dbname=d", "host=h password=*** dbname=d"),
        ("postgresql://alice@h/db", "postgresql://alice@h/db"),
    ],
)
def test_redact_takes_every_password_out(text, shown):
    from vmtax.store import redact

    assert redact(text) == shown


def test_redact_takes_out_pgpassword(monkeypatch):
    from vmtax.store import redact

    monkeypatch.setenv("PGPASSWORD", SECRET)
    assert redact(f"could not connect: {SECRET} refused") == "could not connect: *** refused"


def test_a_malformed_keyword_url_does_not_echo_its_password(capsys):
    assert main(["--db", f"postgresql://host=127.0.0.1 password={SECRET}", "runs"]) == 2
    out = capsys.readouterr()
    assert SECRET not in out.err + out.out and "password=***" in out.err


def test_no_password_reaches_the_store_or_any_report(pg_server, tmp_path, capsys, monkeypatch):
    """A whole session against a PostgreSQL URL with a password (the
    server trusts this role, so any password opens it): every stored row
    and every report format is free of it."""
    schema = pg_server.create_schema()
    url = pg_server.url("vmtax", password=SECRET, tcp=True, schema=schema)
    monkeypatch.setattr(sys, "argv", ["vmtax", "--db", url, "run"])
    assert main(["--db", url, "run", "--target", "fake", "--bench", "getppid", "--max-time", "3s"]) == 0
    seen = capsys.readouterr()
    outputs = [seen.out, seen.err]
    for argv in (
        ["runs", "--json", "-"],
        ["show"],
        ["show", "--json", "-"],
        ["explain"],
        [
            "report",
            "--html",
            str(tmp_path / "r.html"),
            "--markdown",
            str(tmp_path / "r.md"),
            "--csv",
            str(tmp_path / "r.csv"),
        ],
    ):
        assert main(["--db", url, *argv]) in (0, 3), argv
        seen = capsys.readouterr()
        outputs += [seen.out, seen.err]
    outputs += [(tmp_path / f).read_text() for f in ("r.html", "r.md", "r.csv")]
    assert all(SECRET not in o for o in outputs)
    assert any("postgresql://vmtax:***@127.0.0.1" in o for o in outputs)  # the command line, redacted
    with psycopg.connect(pg_server.url("vmtax")) as db:
        tables = [
            r[0]
            for r in db.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (schema,))
        ]
        assert "runs" in tables
        for t in tables:
            for row in db.execute(f'SELECT * FROM {schema}."{t}"'):
                assert SECRET not in repr(row), t


# -- a libpq keyword string is PostgreSQL, never a file name (issue 44 item 5) ----------------
def test_a_libpq_keyword_string_is_never_taken_for_a_file_name(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    conninfo = f"host=127.0.0.1 port={closed_port()} password=PW dbname=vt connect_timeout=2"
    for argv in (["run", "--target", "fake", "--bench", "getppid", "--max-time", "1s"], ["runs"]):
        assert main(["--db", conninfo, *argv]) == 2
        err = capsys.readouterr().err
        lines = err.strip().splitlines()
        assert len(lines) == 1 and "cannot open the results database" in lines[0], err
        assert "PW" not in err and "password=***" in lines[0]
    assert os.listdir(tmp_path) == []  # no file named with the password


def test_a_libpq_keyword_string_opens_the_postgresql_database(pg_url, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    conninfo = make_conninfo(**conninfo_to_dict(pg_url))
    assert conninfo.startswith(("host=", "user=", "dbname=", "port=", "password=", "options=")), conninfo
    assert main(["--db", conninfo, "run", "--target", "fake", "--bench", "getppid", "--max-time", "1s"]) == 0
    capsys.readouterr()
    assert main(["--db", pg_url, "runs", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 1
    monkeypatch.setenv("VMTAX_DB", conninfo)
    assert main(["runs", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 1
    assert os.listdir(tmp_path) == []
