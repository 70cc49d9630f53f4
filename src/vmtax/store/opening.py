"""Opening the results database.

Whichever way, a file that is not vmtax's is refused before anything is
written to it.  Read-write: the file is created if missing, put in WAL mode
and migrated under a write lock, so any number of vmtax processes may open a
brand-new path at once.  Read-only: the file is opened with mode=ro and never
written; an older schema is migrated in a private in-memory copy.  A
read-only connection may be used from any thread, one at a time (vmtax
serve hands each to one request at a time)."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from ..errors import UserError
from .migrations import APPLICATION_ID, MIGRATIONS, statements

BUSY_TIMEOUT_S = 30.0
SQLITE_BUSY, SQLITE_LOCKED, SQLITE_CANTOPEN, SQLITE_NOTADB = 5, 6, 14, 26
SQLITE_READONLY_DIRECTORY = 8 | 6 << 8


def open_readwrite(path: Path) -> sqlite3.Connection:
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(str(path), isolation_level=None, timeout=BUSY_TIMEOUT_S)
    try:
        retry_while_busy(lambda: _prepare(db, path))
    except BaseException:
        db.close()
        raise
    return db


def open_readonly(path: Path) -> sqlite3.Connection:
    if not path.exists():
        raise UserError(f"no results database at {path}")
    db, immutable = _connect_readonly(path)
    try:
        if immutable or _check_version(user_version(db), path) < len(MIGRATIONS):
            copy = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
            db.backup(copy)
            db.close()
            db = copy
            migrate(db, path)
        db.execute("PRAGMA query_only=ON")
    except BaseException:
        db.close()
        raise
    return db


def _connect_readonly(path: Path) -> tuple[sqlite3.Connection, bool]:
    """mode=ro, or else for a WAL database in a directory we cannot write
    (SQLite cannot create the -shm index its readers share) immutable=1:
    no writer is at work there, as it would have created that index, and
    the caller copies the file at once in case one starts."""
    uri = path.absolute().as_uri() + "?mode=ro"
    try:
        db = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=BUSY_TIMEOUT_S, check_same_thread=False)
        return _ours(db, path), False
    except sqlite3.OperationalError as e:
        if e.sqlite_errorcode != SQLITE_READONLY_DIRECTORY and e.sqlite_errorcode & 0xFF != SQLITE_CANTOPEN:
            raise
    wal = Path(f"{path}-wal")
    if wal.exists() and wal.stat().st_size:
        raise UserError(
            f"cannot read {path}: its directory is read-only, and its write-ahead log"
            f" {wal.name} holds changes that only a writer can apply"
        )
    db = sqlite3.connect(uri + "&immutable=1", uri=True, isolation_level=None, check_same_thread=False)
    return _ours(db, path), True


def _ours(db: sqlite3.Connection, path: Path) -> sqlite3.Connection:
    """db, once check_ours has passed it; closed if not."""
    try:
        retry_while_busy(lambda: check_ours(db, path))
    except BaseException:
        db.close()
        raise
    return db


def _prepare(db: sqlite3.Connection, path: Path) -> None:
    # Changing the journal mode takes an exclusive lock without waiting for
    # it, and other steps can meet a lock a concurrent opener holds: each step
    # is idempotent, so the whole of it is retried while busy.
    check_ours(db, path)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("PRAGMA foreign_keys=ON")
    migrate(db, path)


def retry_while_busy(step):
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    delay = 0.001
    while True:
        try:
            return step()
        except sqlite3.OperationalError as e:
            if e.sqlite_errorcode & 0xFF not in (SQLITE_BUSY, SQLITE_LOCKED) or time.monotonic() > deadline:
                raise
        time.sleep(delay)
        delay = min(2 * delay, 0.05)


def user_version(db: sqlite3.Connection) -> int:
    return db.execute("PRAGMA user_version").fetchone()[0]


def migrate(db: sqlite3.Connection, path: Path) -> None:
    """Apply the missing migrations in one transaction under the write lock,
    deciding what is missing inside it: a concurrent opener may have just
    applied them."""
    if _check_version(user_version(db), path) == len(MIGRATIONS):
        return
    db.execute("BEGIN IMMEDIATE")
    try:
        check_ours(db, path)
        for number in range(_check_version(user_version(db), path) + 1, len(MIGRATIONS) + 1):
            for statement in statements(MIGRATIONS[number - 1]):
                db.execute(statement)
            db.execute(f"PRAGMA user_version = {number}")
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise


def _check_version(have: int, path: Path) -> int:
    if have > len(MIGRATIONS):
        raise UserError(f"{path} has schema {have}, newer than this vmtax ({len(MIGRATIONS)})")
    return have


def check_ours(db: sqlite3.Connection, path: Path) -> None:
    """Refuse a file that is not a vmtax results database: ours carry vmtax's
    application_id, or (written before it was set) have user_version 1 or more
    and a runs table with a config_json column.  An empty file is new."""
    outside = not db.in_transaction  # then read in one snapshot: another opener may be migrating it
    try:
        if outside:
            db.execute("BEGIN")
        app_id = db.execute("PRAGMA application_id").fetchone()[0]
        version = user_version(db)
        tables = [
            r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view') ORDER BY name")
        ]
        empty = not db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
        old_vmtax = "config_json" in {r[0] for r in db.execute("SELECT name FROM pragma_table_info('runs')")}
    except sqlite3.DatabaseError as e:
        if e.sqlite_errorcode == SQLITE_NOTADB:
            raise UserError(f"{path} is not a vmtax results database (not an SQLite file)") from None
        raise
    finally:
        if outside and db.in_transaction:
            db.execute("COMMIT")
    new = empty and version == 0
    if app_id == APPLICATION_ID or (app_id == 0 and (new or (version >= 1 and old_vmtax))):
        return
    what = (
        f"it has tables {', '.join(tables)}"
        if tables
        else f"its application_id is {app_id:#x}"
        if app_id
        else f"its user_version is {version}"
    )
    raise UserError(f"{path} is not a vmtax results database ({what})")
