"""What every Store stands on: the backend's connection, its reads, and
its write transactions (each one committed, a Ctrl-C taken only between
them), any error of the database one StoreError; and the SQL helpers the
tables' writers share."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Self

from ..errors import StoreError
from ..proc import signals_held
from .dialect import Dialect


def upsert(table: str, columns: tuple[str, ...], key: tuple[str, ...]) -> str:
    """INSERT, or on a row with the same key, UPDATE (both backends' syntax)."""
    updates = ", ".join(f"{c} = excluded.{c}" for c in columns if c not in key)
    return (
        f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
        f" ON CONFLICT ({', '.join(key)}) DO UPDATE SET {updates}"
    )


def marks(ids: list[str]) -> str:
    """As many ? placeholders as ids (NULL for none: an IN () matching nothing)."""
    return ",".join("?" * len(ids)) or "NULL"


class StoreCore:
    """A results database's connection: what a backend provides (its
    errors, its transaction) and the shared reads and writes through it."""

    dialect: Dialect
    location: str  # for messages: the file, or the URL less its password
    readonly: bool
    db: Any = None  # the backend's DB-API connection (sqlite3 or psycopg: no type in common)
    # the schema version found on opening, before any migration (None: not told; PostgreSQL tells it,
    # whose read-only migration holds its lock, and keeps writers waiting, until the store is closed)
    found_version: int | None = None

    def __enter__(self) -> Self:
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


def one_line(error: BaseException) -> str:
    """A database's message on one line (PostgreSQL's span several)."""
    return " ".join(str(error).split())
