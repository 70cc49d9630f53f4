"""PostgreSQL results store, for a team's database: --db postgresql://...

The same tables through the same migrations (dialect.py turns them into
PostgreSQL's SQL).  The table vmtax_schema holds the number of the last
migration applied and marks the database (its current schema) as vmtax's:
one that has other tables and not that one is refused before anything is
written.  Any number of vmtax processes may write at once: each write is one
short transaction, samples take their ids from an identity column, and the
migrations run under an advisory lock, deciding inside it what is missing.
Read-only (show, runs, report): the session is read-only; an older schema is
migrated inside a transaction that is never committed (as SQLite migrates a
private copy), which holds its locks until the store is closed."""

from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.types.string import StrDumperUnknown

from ..errors import UserError
from .base import Store, one_line, redact
from .dialect import POSTGRES
from .migrations import APPLICATION_ID, MIGRATIONS, statements

CONNECT_TIMEOUT_S = 10
DISK_FULL = "53100"  # SQLSTATE disk_full


class _TextDumper(StrDumperUnknown):
    """PostgreSQL text cannot hold NUL, which SQLite's can: stored as U+FFFD
    (a target's output is hostile input, and must not fail the run)."""

    def dump(self, obj: str):
        return super().dump(obj.replace("\x00", "\ufffd"))


def connect(url: str) -> psycopg.Connection:
    where = redact(url)
    try:
        params: dict[str, Any] = conninfo_to_dict(url)  # libpq keywords, as psycopg.connect takes them
    except psycopg.Error as e:
        raise UserError(f"bad PostgreSQL URL {where}: {one_line(e).replace(url, where)}") from None
    if "PGCONNECT_TIMEOUT" not in os.environ:
        params.setdefault("connect_timeout", CONNECT_TIMEOUT_S)  # libpq's default waits for ever
    params.setdefault("application_name", "vmtax")
    params["client_encoding"] = "utf8"
    try:
        db = psycopg.connect(**params, autocommit=True)
    except psycopg.Error as e:
        raise UserError(f"cannot open the results database {where}: {one_line(e).replace(url, where)}") from None
    db.adapters.register_dumper(str, _TextDumper)
    return db


class PostgresStore(Store):
    dialect = POSTGRES
    errors = (psycopg.Error,)

    def __init__(self, url: str, readonly: bool = False):
        self.location, self.readonly = redact(url), readonly
        self.db = connect(url)
        try:
            self.found_version = _prepare(self.db, self.location, readonly)
        except psycopg.Error as e:
            self.db.close()
            raise UserError(f"cannot open the results database {self.location}: {one_line(e)}") from None
        except BaseException:
            self.db.close()
            raise

    @property
    def schema_version(self) -> int:
        return _version(self.db)

    @contextmanager
    def _transaction(self):
        with self.db.transaction():
            yield

    def _full(self, error: BaseException) -> bool:
        return getattr(error, "sqlstate", None) == DISK_FULL


def _prepare(db: psycopg.Connection, where: str, readonly: bool) -> int:
    """Make the schema this vmtax's (read-only: in a transaction never committed); the
    version it found."""
    if (found := _check_ours(db, where)) == len(MIGRATIONS):
        if readonly:
            db.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
        return found
    db.execute("BEGIN")
    db.execute("SELECT pg_advisory_xact_lock(%s)", (APPLICATION_ID,))
    have = _check_ours(db, where)  # a concurrent opener may have just migrated it
    if not _tables(db):
        db.execute("CREATE TABLE vmtax_schema (version INTEGER NOT NULL)")
        db.execute("INSERT INTO vmtax_schema VALUES (0)")
    for number in range(have + 1, len(MIGRATIONS) + 1):
        for statement in statements(MIGRATIONS[number - 1]):
            if (ours := POSTGRES.schema(statement)) is not None:
                db.execute(ours)
        db.execute("UPDATE vmtax_schema SET version = %s", (number,))
    if not readonly:
        db.execute("COMMIT")
    return found


def _tables(db: psycopg.Connection) -> list[str]:
    return [
        r[0]
        for r in db.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY table_name"
        )
    ]


def _version(db: psycopg.Connection) -> int:
    row = db.execute("SELECT version FROM vmtax_schema").fetchone()
    assert row is not None, "vmtax_schema holds one row from its creation on"
    return row[0]


def _check_ours(db: psycopg.Connection, where: str) -> int:
    """The schema version of a vmtax database (0: an empty one, to create);
    UserError for one that is someone else's, or newer than this vmtax."""
    tables = _tables(db)
    if "vmtax_schema" in tables:
        have = _version(db)
        if have > len(MIGRATIONS):
            raise UserError(f"{where} has schema {have}, newer than this vmtax ({len(MIGRATIONS)})")
        return have
    if tables:
        raise UserError(f"{where} is not a vmtax results database (it has tables {', '.join(tables)})")
    return 0
