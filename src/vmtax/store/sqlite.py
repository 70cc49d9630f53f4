"""SQLite results store, the embedded default: WAL mode, numbered
migrations, every sample committed as it arrives (opening.py opens it)."""

from __future__ import annotations

import sqlite3
from contextlib import contextmanager
from pathlib import Path

from ..errors import UserError
from .base import Store
from .dialect import SQLITE
from .opening import open_readonly, open_readwrite, user_version

SQLITE_FULL = 13


class SqliteStore(Store):
    dialect = SQLITE
    errors = (sqlite3.Error,)

    def __init__(self, path: Path | str, readonly: bool = False):
        self.path, self.readonly = Path(path), readonly
        self.location = str(self.path)
        if self.path.exists() and not self.path.is_file():  # a FIFO would block the open for ever
            raise UserError(f"cannot open the results database {self.path}: not a regular file")
        try:
            self.db = open_readonly(self.path) if readonly else open_readwrite(self.path)
        except (sqlite3.DatabaseError, OSError) as e:
            raise UserError(f"cannot open the results database {self.path}: {e}") from None

    @property
    def schema_version(self) -> int:
        return user_version(self.db)

    @contextmanager
    def _transaction(self):
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield
            self.db.execute("COMMIT")
        except BaseException:
            if self.db.in_transaction:
                self.db.execute("ROLLBACK")
            raise

    def _full(self, error: BaseException) -> bool:
        return isinstance(error, sqlite3.Error) and error.sqlite_errorcode & 0xFF == SQLITE_FULL

    def _make_room(self) -> None:
        """A checkpoint, which can give back the space the write-ahead log holds."""
        try:
            self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.Error:
            pass
