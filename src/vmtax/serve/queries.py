"""The SQL of the dashboard's lists: the runs that match a filter, a page at
a time, and the compare runs a row's history reads.  One statement per list,
in the SQL both backends share (store/dialect.py); every value a parameter."""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass

from ..errors import UserError
from ..store.controller import effective_status
from .data import Reader

PER_PAGE = 50
MAX_PER_PAGE = 200
FILTERS = ("host", "target", "label", "suite", "command", "kind", "since", "until")
RUN_KEYS = ("id", "kind", "started", "finished", "status", "command", "targets", "host", "user")


def like(text: str) -> str:
    """text as a LIKE pattern that matches it anywhere, its own % _ \\ taken literally."""
    return "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def day(text: str, name: str) -> float:
    """A date or time (UTC unless it says otherwise) as a timestamp; UserError otherwise."""
    try:
        when = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise UserError(f"{name} takes a date or time (2026-11-23, 2026-11-23T08:00), got {text!r}") from None
    return (when if when.tzinfo else when.replace(tzinfo=datetime.UTC)).timestamp()


def _target(v: str) -> tuple[str, tuple]:
    return "EXISTS (SELECT 1 FROM run_targets t WHERE t.run_id = r.id AND (t.name = ? OR t.kind = ?))", (v, v)


def _label(v: str) -> tuple[str, tuple]:
    pattern = like(f'"label": {json.dumps(v)}')
    return "EXISTS (SELECT 1 FROM run_targets t WHERE t.run_id = r.id AND t.facts_json LIKE ? ESCAPE '\\')", (pattern,)


CLAUSES = {
    "host": lambda v: ("r.host = ?", (v,)),
    "kind": lambda v: ("r.kind = ?", (v,)),
    "target": _target,
    "label": _label,
    "suite": lambda v: ("EXISTS (SELECT 1 FROM run_benchmarks b WHERE b.run_id = r.id AND b.suite = ?)", (v,)),
    "command": lambda v: ("r.command LIKE ? ESCAPE '\\'", (like(v),)),
    "since": lambda v: ("r.started >= ?", (day(v, "since"),)),
    "until": lambda v: ("r.started < ?", (day(v, "until") + (86400 if len(v) <= 10 else 0),)),
}


def where(filters: dict[str, str]) -> tuple[str, tuple]:
    parts, params = [], ()
    for key in FILTERS:
        if filters.get(key):
            sql, p = CLAUSES[key](filters[key])
            parts.append(sql)
            params += p
    return (" WHERE " + " AND ".join(parts) if parts else ""), params


@dataclass(frozen=True)
class RunPage:
    runs: list[dict]
    total: int
    page: int
    per: int

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // self.per))


def runs(reader: Reader, filters: dict[str, str], page: int = 1, per: int = PER_PAGE) -> RunPage:
    """The runs that match, newest first, one page of them."""
    clause, params = where(filters)
    total = reader.read(f"SELECT count(*) FROM runs r{clause}", params)[0][0]
    with reader.store() as s:
        rows = s.read(
            "SELECT r.id, r.kind, r.started, r.finished, r.status, r.command, "
            + s.dialect.run_targets
            + ', r.host, r."user", r.pid, r.pid_start, r.boot_id'
            + f" FROM runs r{clause} ORDER BY r.started DESC, r.id DESC LIMIT ? OFFSET ?",
            (*params, per, (page - 1) * per),
        )
    out = []
    for row in rows:
        run = dict(zip(RUN_KEYS, row[:9], strict=True))
        run["status"] = effective_status(row[4], row[7], *row[9:12])
        run["targets"] = (run["targets"] or "").split()
        out.append(run)
    return RunPage(out, total, page, per)


def compare_runs(reader: Reader, benchmark: str, host: str = "", limit: int = 200) -> list[tuple[str, str]]:
    """(id, status) of the latest complete compare runs that measured benchmark (on host), newest first."""
    clause = " AND r.host = ?" if host else ""
    return [
        (r[0], r[1])
        for r in reader.read(
            "SELECT r.id, r.status FROM runs r WHERE r.kind = 'compare' AND r.status = 'complete'"
            f" AND EXISTS (SELECT 1 FROM run_benchmarks b WHERE b.run_id = r.id AND b.name = ?){clause}"
            " ORDER BY r.started DESC LIMIT ?",
            (benchmark, *((host,) if host else ()), limit),
        )
    ]


def hosts(reader: Reader) -> list[tuple[str, int, float]]:
    """(host, its runs, its latest run's start) for every host that ran a run."""
    return [
        (r[0], r[1], r[2])
        for r in reader.read(
            "SELECT r.host, count(*), max(r.started) FROM runs r WHERE r.host IS NOT NULL"
            " GROUP BY r.host ORDER BY r.host"
        )
    ]


def latest_compares(reader: Reader, host: str, limit: int = 20) -> list[str]:
    """The latest complete compare runs measured on host, newest first."""
    return [
        r[0]
        for r in reader.read(
            "SELECT r.id FROM runs r WHERE r.host = ? AND r.kind = 'compare' AND r.status = 'complete'"
            " ORDER BY r.started DESC LIMIT ?",
            (host, limit),
        )
    ]


def gated(reader: Reader, limit: int = 500) -> list[tuple[str, str]]:
    """(id, command) of the latest compare runs that were gated (compare --gate), newest first."""
    return [
        (r[0], r[1])
        for r in reader.read(
            "SELECT r.id, r.command FROM runs r WHERE r.kind = 'compare' AND r.command LIKE ? ESCAPE '\\'"
            " ORDER BY r.started DESC LIMIT ?",
            (like("--gate"), limit),
        )
    ]
