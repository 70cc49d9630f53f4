"""Results store.  SQLite is the embedded default (sqlite.py); a
postgresql:// URL stores runs in a team's PostgreSQL (postgres.py).  Both
are behind one interface, Store (base.py): Store(location) opens either."""

from __future__ import annotations

import os
from pathlib import Path

from .base import Store, is_url, redact

__all__ = ["Store", "default_db_path", "is_url", "redact"]


def _sqlite() -> type:
    from .sqlite import SqliteStore

    return SqliteStore


def _postgres() -> type:
    from .postgres import PostgresStore  # psycopg is loaded only for a postgresql:// URL

    return PostgresStore


Store.backends[:] = [(is_url, _postgres), (lambda location: not is_url(location), _sqlite)]


def default_db_path() -> Path | str:
    """$VMTAX_DB (a file, or a postgresql:// URL), else vmtax.db under $XDG_DATA_HOME."""
    env = os.environ.get("VMTAX_DB")
    if env:
        return env if is_url(env) else Path(env)
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "vmtax" / "vmtax.db"
