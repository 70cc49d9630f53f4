"""The results store's interface: Store, whose writes (writing.py), reads
(reading.py) and summaries (summaries.py) share one connection (core.py),
and which reads a whole run back itself (load).

Store(location) opens the results database at location and, as pathlib.Path
picks its flavour, returns the backend's Store: a postgresql:// (or
postgres://) URL opens PostgreSQL (postgres.py, a team's database), anything
else is an SQLite file (sqlite.py, the embedded default).  The runner, the
CLI and the reports see only this class.  Every write is one committed
transaction, so a crash or a Ctrl-C loses nothing already measured; any
error of the database becomes one StoreError (or a UserError on opening)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

from ..errors import UserError
from ..model import BenchSpec, RunData, Sample
from .core import one_line
from .location import is_url, redact
from .reading import RUN_HEAD, TARGET_ROW, RunReading, run_head, target_info
from .summaries import Summaries
from .writing import RunWriting

__all__ = ["Store", "is_url", "one_line", "redact"]


class Store(RunWriting, RunReading, Summaries):
    """The results database.  readonly=True never writes to it (for show,
    runs and report): it may be read-only, or in use by a run."""

    # (accepts(location), load() -> the backend's class): registered by store/__init__.py,
    # so that this interface knows none of its backends (no import cycle)
    backends: ClassVar[list[tuple[Callable[[str | Path], bool], Callable[[], type]]]] = []

    def __new__(cls, location: str | Path, readonly: bool = False):
        if cls is Store:
            cls = next(load() for accepts, load in Store.backends if accepts(location))
        return super().__new__(cls)

    def load(self, run_id: str, benchmark: str | None = None) -> RunData:
        """A run as stored; given a benchmark, that benchmark's alone (its spec, samples and outcomes)."""
        one, of = (" AND {} = ?", (benchmark,)) if benchmark is not None else ("", ())
        rows = self._rows(f"SELECT {RUN_HEAD} FROM runs WHERE id=?", (run_id,))
        if not rows:
            raise UserError(f"no run '{run_id}' in {self.location}")
        data = run_head(rows[0])
        for row in self._rows(f"SELECT {TARGET_ROW} FROM run_targets WHERE run_id=? ORDER BY position", (run_id,)):
            data.targets.append(target_info(row))
            data.agent_hashes[row[0]] = row[6]
        for row in self._rows(
            "SELECT name,suite,unit,direction,description,kind FROM run_benchmarks WHERE run_id=?"
            + one.format("name")
            + " ORDER BY position",
            (run_id, *of),
        ):
            # the kind as stored; a run stored before kinds were (schema < 9): from the name, as then
            data.benchmarks.append(
                BenchSpec(
                    name=row[0],
                    suite=row[1],
                    unit=row[2],
                    direction=row[3],
                    description=row[4],
                    kind=row[5] or ("workload" if "." in row[0] else "micro"),
                )
            )
        metrics: dict[int, dict[str, float]] = {}
        for sample_id, name, value in self._rows(
            "SELECT m.sample_id, m.name, m.value FROM sample_metrics m JOIN samples s"
            f" ON s.id = m.sample_id WHERE s.run_id=?{one.format('s.benchmark')}"
            f" ORDER BY m.sample_id, {self.dialect.metric_order}",
            (run_id, *of),
        ):
            metrics.setdefault(sample_id, {})[name] = value
        for row in self._rows(
            "SELECT benchmark,target,value,unit,process,seq,instance,warmup,"
            "iters,ops,overhead,tsc_per_op,cpu,t,id,block,counting,ref_before,ref_after FROM samples"
            " WHERE run_id=?" + one.format("benchmark") + " ORDER BY id",
            (run_id, *of),
        ):
            data.samples.append(
                Sample(
                    benchmark=row[0],
                    target=row[1],
                    value=row[2],
                    unit=row[3],
                    process=row[4],
                    seq=row[5],
                    instance=row[6],
                    warmup=bool(row[7]),
                    iters=row[8],
                    ops=row[9],
                    overhead=row[10],
                    tsc_per_op=row[11],
                    cpu=row[12],
                    t=row[13],
                    metrics=metrics.get(row[14], {}),
                    block=row[15] if row[15] is not None else -1,
                    counting=bool(row[16]),
                    ref_before=row[17],
                    ref_after=row[18],
                )
            )
        for row in self._rows(
            "SELECT target,benchmark,stopped_by,reason FROM outcomes WHERE run_id=?" + one.format("benchmark"),
            (run_id, *of),
        ):
            data.outcomes[(row[0], row[1])] = (row[2], row[3])
        return data
