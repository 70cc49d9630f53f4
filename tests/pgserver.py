"""A throwaway PostgreSQL server for the tests (conftest's pg_server): Debian's
initdb and postgres, a cluster in a fresh directory under /tmp, listening on
a unix socket in that directory and on a free port of 127.0.0.1.

initdb and postgres refuse to run as root: as root, the cluster belongs to
the user postgres (Debian's postgresql package creates it; else nobody), and
both run as that user through util-linux's setpriv.  postgres is this
process's own child (not daemonized, as pg_ctl would) with a parent-death
signal: SIGQUIT, its immediate shutdown, reaches it if the test session dies,
even killed; stop() ends it and removes the directory on every other path.

Roles: vmtax, the superuser, trusted (no password); alice, who must give her
password (PASSWORD below), on the socket and over TCP alike.  A test's own
results database is a schema of its own (the URL sets its search_path)."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

import psycopg

PASSWORD = "s3cret:/@?"  # characters a URL must escape
HBA = """\
local all alice scram-sha-256
host  all alice 127.0.0.1/32 scram-sha-256
local all all trust
host  all all 127.0.0.1/32 trust
"""
SETTINGS = [
    "fsync=off",
    "synchronous_commit=off",
    "full_page_writes=off",
    "shared_buffers=16MB",
    "max_connections=40",
    "logging_collector=off",
]


def binaries() -> Path | None:
    """The newest Debian PostgreSQL server's bin directory, if one is installed."""
    found = [
        Path(p).parent for p in glob.glob("/usr/lib/postgresql/*/bin/initdb") if Path(p).with_name("postgres").exists()
    ]
    return max(found, key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0, default=None)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PgServer:
    def __init__(self, bin_dir: Path):
        self.bin = bin_dir
        self.dir = Path(tempfile.mkdtemp(prefix="vmtax-test-pg-"))
        self.proc: subprocess.Popen | None = None
        self.port = 0
        self.serial = 0
        self.as_user: list[str] = []
        if os.geteuid() == 0:
            try:
                owner = pwd.getpwnam("postgres")
            except KeyError:
                owner = pwd.getpwnam("nobody")
            os.chown(self.dir, owner.pw_uid, owner.pw_gid)
            self.as_user = ["setpriv", f"--reuid={owner.pw_uid}", f"--regid={owner.pw_gid}", "--init-groups"]

    def start(self) -> None:
        data = self.dir / "data"
        subprocess.run(
            [
                *self.as_user,
                str(self.bin / "initdb"),
                "-D",
                str(data),
                "-U",
                "vmtax",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
                "--auth=trust",
            ],
            check=True,
            capture_output=True,
            cwd="/",
        )
        (data / "pg_hba.conf").write_text(HBA)
        for _attempt in range(3):  # the free port may be taken before postgres binds it
            self.port = _free_port()
            with open(self.dir / "postgres.log", "w") as log:
                self.proc = subprocess.Popen(
                    [
                        *(self.as_user or ["setpriv"]),
                        "--pdeathsig=SIGQUIT",
                        str(self.bin / "postgres"),
                        "-D",
                        str(data),
                        "-k",
                        str(self.dir),
                        "-h",
                        "127.0.0.1",
                        "-p",
                        str(self.port),
                        *[arg for s in SETTINGS for arg in ("-c", s)],
                    ],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd="/",
                )
            if self._wait_ready():
                break
        else:
            raise RuntimeError(f"postgres did not start: {self.log()}")
        self.admin(f"CREATE ROLE alice LOGIN PASSWORD '{PASSWORD.replace(chr(39), chr(39) * 2)}'")
        self.admin("CREATE DATABASE vmtax")  # the tests' results databases: a schema each

    def _wait_ready(self) -> bool:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                psycopg.connect(self.url("postgres"), connect_timeout=2).close()
                return True
            except psycopg.OperationalError:
                time.sleep(0.05)
        raise RuntimeError(f"postgres did not accept connections: {self.log()}")

    def log(self) -> str:
        return (self.dir / "postgres.log").read_text()[-2000:]

    def stop(self) -> None:
        try:
            if self.proc and self.proc.poll() is None:
                self.proc.send_signal(signal.SIGQUIT)  # immediate shutdown: the cluster is thrown away
                try:
                    self.proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    def url(
        self,
        dbname: str,
        user: str = "vmtax",
        password: str | None = None,
        tcp: bool = False,
        schema: str | None = None,
    ) -> str:
        auth = quote(user, safe="") + (":" + quote(password, safe="") if password is not None else "")
        where = f"127.0.0.1:{self.port}" if tcp else f"{quote(str(self.dir), safe='')}:{self.port}"
        options = f"?options={quote(f'-c search_path={schema}', safe='')}" if schema else ""
        return f"postgresql://{auth}@{where}/{dbname}{options}"

    def admin(self, sql: str) -> None:
        with psycopg.connect(self.url("postgres"), autocommit=True) as db:
            db.execute(sql)

    def create_schema(self) -> str:
        """A new, empty schema in the database vmtax: a fresh results
        database in a few milliseconds (a database takes a few hundred)."""
        self.serial += 1
        name = f"s{self.serial}"
        with psycopg.connect(self.url("vmtax"), autocommit=True) as db:
            db.execute(f"CREATE SCHEMA {name}")
        return name

    def create_db(self, owner: str = "vmtax") -> str:
        self.serial += 1
        name = f"t{self.serial}"
        self.admin(f"CREATE DATABASE {name} OWNER {owner}")
        return name

    def drop_db(self, name: str) -> None:
        self.admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
