"""The dashboard's reads: a few read-only stores, each lent to one request
at a time.  The lists read the runs' stored summaries (summary.py; one
query a page); a run without one, and a run's own page, are worked out from
the run (its measurements and ratios), kept per run once the run can no
longer change (any status but running).  The digest keeps the run less its
samples: a thousand runs fit in memory; a page that draws samples loads its
run afresh."""

from __future__ import annotations

import dataclasses
import queue
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..analysis import analyse
from ..errors import UserError
from ..model import Comparison, Measurement, RunData
from ..store import Store
from . import summary

POOL = 4  # stores open at most: requests beyond wait for one
WAIT_S = 30.0  # how long a request waits for a store
DIGESTS = 5000  # runs' digests kept
PAGES = 256  # rendered run pages and charts kept


@dataclass(frozen=True)
class Digest:
    """A stored run as the lists, the history and the diff read it."""

    data: RunData  # without its samples
    ms: list[Measurement]
    cs: list[Comparison]


class Lru(OrderedDict):
    """The last `size` values made, by key; a value being made by one thread
    is waited for by another that asks for it (two requests at once work
    each run out once)."""

    def __init__(self, size: int):
        super().__init__()
        self.size, self.lock = size, threading.Lock()
        self._making: dict = {}  # key -> the lock its maker holds

    def get_or(self, key, make, keep=lambda value: True):
        """The value kept under key, else make()'s, kept where keep(value) says so."""
        with self.lock:
            if key in self:
                self.move_to_end(key)
                return self[key]
            making = self._making.setdefault(key, threading.Lock())
        with making:
            with self.lock:
                if key in self:
                    return self[key]
            try:
                value = make()
                with self.lock:
                    if keep(value):
                        self[key] = value
                        while len(self) > self.size:
                            self.popitem(last=False)
            finally:
                with self.lock:
                    self._making.pop(key, None)
            return value


class Reader:
    """The store behind the dashboard, opened read-only."""

    def __init__(self, location: str | Path, size: int = POOL):
        self.location = location
        self._free: queue.LifoQueue[Store] = queue.LifoQueue()
        self._opened, self._size, self._lock = 0, size, threading.Lock()
        self._all: list[Store] = []
        self.digests = Lru(DIGESTS)
        # a run's digest for one row, ("row", run id, benchmark), and its summary, ("summary", run id)
        self.memo = Lru(3 * DIGESTS)
        self.pages = Lru(PAGES)
        try:
            with self.store() as s:  # fails now, not at the first request, if the store cannot be read
                self.where = s.location
                self.backend = s.dialect.name
                _not_migrated_here(s)
        except BaseException:
            self.close()
            raise

    def _open(self) -> Store:
        s = Store(self.location, readonly=True)
        self._all.append(s)
        return s

    @contextmanager
    def store(self) -> Iterator[Store]:
        try:
            s = self._free.get_nowait()
        except queue.Empty:
            with self._lock:
                grow = self._opened < self._size
                self._opened += grow
            try:
                s = self._open() if grow else self._free.get(timeout=WAIT_S)
            except queue.Empty:
                raise UserError("the results database is busy: every connection is in use") from None
            except BaseException:
                with self._lock:
                    self._opened -= grow
                raise
        try:
            yield s
        finally:
            self._free.put(s)

    def close(self) -> None:
        for s in self._all:
            s.close()
        self._all.clear()

    def load(self, run_id: str) -> RunData:
        with self.store() as s:
            return s.load(run_id)

    def digest(self, run_id: str) -> Digest:
        """A run's digest; one still running is worked out afresh each time."""
        return self.digests.get_or(run_id, lambda: self._digest(run_id), lambda d: d.data.status != "running")

    def row(self, run_id: str, benchmark: str) -> Digest:
        """A run's digest for one benchmark (its ratios alone): from the run's digest where
        it is kept, else from that benchmark's samples alone (a fourteenth of a demo's run)."""
        with self.digests.lock:
            whole = self.digests.get(run_id)
        if whole is not None:
            return whole

        def make() -> Digest:
            with self.store() as s:
                data = s.load(run_id, benchmark)
            ms, cs = analyse(data)
            return Digest(dataclasses.replace(data, samples=[]), ms, cs)

        return self.memo.get_or(("row", run_id, benchmark), make, lambda d: d.data.status != "running")

    def whole(self, run_id: str) -> tuple[RunData, Digest]:
        """A run with its samples, and its digest (worked out from it where not kept): one load."""
        data = self.load(run_id)
        return data, self.digests.get_or(run_id, lambda: _digest(data), lambda d: d.data.status != "running")

    def _digest(self, run_id: str) -> Digest:
        return _digest(self.load(run_id))

    # -- the summaries of ended runs: stored, else worked out here ------------------------------
    def summaries(self, run_ids: list[str]) -> dict[str, tuple[dict | None, dict | None]]:
        """run id -> (verdict, gate): those stored in one query, the others from their analysis."""
        with self.store() as s:
            got = s.summaries(run_ids, summary.VERSION)
        for run_id in run_ids:
            if run_id not in got:
                worked = self.summary(run_id)
                got[run_id] = (worked.verdict, worked.gate)
        return got

    def summary(self, run_id: str) -> summary.Summary:
        """A run's summary worked out here, as summary.record would store it (kept as its digest is)."""

        def make() -> tuple[str, summary.Summary]:
            data = self.load(run_id)
            d = self.digests.get_or(run_id, lambda: _digest(data), lambda d: d.data.status != "running")
            return data.status, summary.of(data, d.ms, d.cs)

        return self.memo.get_or(("summary", run_id), make, lambda got: got[0] != "running")[1]

    def figures(self, run_ids: list[str], benchmark: str | None = None) -> dict[str, list[dict]]:
        """run id -> its ratios (of benchmark, where given; summary.figures): those stored in
        one query, the others from the run's analysis (of that benchmark's samples alone)."""
        with self.store() as s:
            got = s.figures(run_ids, summary.VERSION, benchmark)
        for run_id in run_ids:
            if run_id in got:
                continue
            if benchmark is None:
                got[run_id] = self.summary(run_id).figures
            else:
                d = self.row(run_id, benchmark)
                got[run_id] = summary.figures(d.ms, d.cs, benchmark)
        return got

    def heads(self, run_ids: list[str]) -> dict[str, RunData]:
        """run id -> the run and its targets (no benchmarks, samples or outcomes), in two queries."""
        with self.store() as s:
            return s.heads(run_ids)

    def resolve(self, ref: str) -> str:
        with self.store() as s:
            return s.resolve(ref)

    def read(self, statement: str, params=()) -> list[tuple]:
        with self.store() as s:
            return s.read(statement, params)


def _digest(data: RunData) -> Digest:
    """A run's digest, from the run with its samples."""
    ms, cs = analyse(data) if data.kind != "scale" else ([], [])
    return Digest(dataclasses.replace(data, samples=[]), ms, cs)


def _not_migrated_here(s: Store) -> None:
    """UserError for a PostgreSQL store of an older schema: read-only, it is migrated in a
    transaction whose lock every writer (the next compare) would wait on while the server runs."""
    if s.found_version is not None and s.found_version < s.schema_version:
        raise UserError(
            f"{s.location} has schema {s.found_version}, older than this vmtax's ({s.schema_version}): "
            "let a writing vmtax (compare, run) migrate it first; vmtax serve only reads, and reading it "
            "migrated would keep every writer waiting while it runs"
        )
