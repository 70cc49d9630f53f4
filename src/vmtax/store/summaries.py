"""The summaries of finished runs (what vmtax serve's lists read): each
run's verdict and gate and its ratios, worked out by one version of the
analysis, saved in place of any before them and read for many runs in one
query."""

from __future__ import annotations

import json
import math

from .core import StoreCore, marks, upsert

SET_SUMMARY = upsert("run_summaries", ("run_id", "version", "verdict_json", "gate_json"), ("run_id",))
# a row_figures row, less its run_id and position: a ratio of a run with its interval and its two sides' means
FIGURE = (
    "benchmark",
    "suite",
    "baseline",
    "candidate",
    "unit",
    "direction",
    "estimand",
    "ratio",
    "ci_low",
    "ci_high",
    "base_mean",
    "base_ci_low",
    "base_ci_high",
    "cand_mean",
    "cand_ci_low",
    "cand_ci_high",
)
ADD_FIGURE = upsert("row_figures", ("run_id", "position", *FIGURE), ("run_id", "benchmark", "candidate"))


def _figure_value(x):
    """A figure as stored: NaN as NULL (SQLite stores it so; PostgreSQL would keep it)."""
    return None if isinstance(x, float) and math.isnan(x) else x


class Summaries(StoreCore):
    """A finished run's summary, saved and read."""

    def save_summary(self, run_id: str, version: int, verdict, gate, figures: list[dict]) -> None:
        """A finished run's summary, in place of any before it: its verdict and gate (JSON's
        values; None: none) and its ratios (dicts with FIGURE's keys), worked out by the
        analysis of `version`."""
        with self._write(f"store the summary of run {run_id}"):
            self._execute(SET_SUMMARY, (run_id, version, json.dumps(verdict), json.dumps(gate)))
            self._execute("DELETE FROM row_figures WHERE run_id = ?", (run_id,))
            self.db.cursor().executemany(  # an upsert: another writer may store the same at once
                self.dialect.sql(ADD_FIGURE),
                [(run_id, i, *(_figure_value(f[k]) for k in FIGURE)) for i, f in enumerate(figures)],
            )

    def summaries(self, run_ids: list[str], version: int) -> dict[str, tuple]:
        """run id -> (verdict, gate) of those of run_ids summarised by the analysis of
        `version`, in one query (a run without one, or with another version's, is left out)."""
        rows = self._rows(
            "SELECT run_id, verdict_json, gate_json FROM run_summaries"
            f" WHERE version = ? AND run_id IN ({marks(run_ids)})",
            (version, *run_ids),
        )
        return {r[0]: (json.loads(r[1]), json.loads(r[2])) for r in rows}

    def figures(self, run_ids: list[str], version: int, benchmark: str | None = None) -> dict[str, list[dict]]:
        """run id -> its ratios (of benchmark, where given) in the order they were saved, as dicts
        with FIGURE's keys (NaN for NULL), for those of run_ids summarised by the analysis of
        `version` (one without such a ratio: an empty list); one query, through the index on
        (benchmark, run_id) where a benchmark is given."""
        row = " AND f.benchmark = ?" if benchmark is not None else ""
        rows = self._rows(
            f"SELECT s.run_id, {', '.join('f.' + k for k in FIGURE)} FROM run_summaries s"
            f" LEFT JOIN row_figures f ON f.run_id = s.run_id{row}"
            f" WHERE s.version = ? AND s.run_id IN ({marks(run_ids)}) ORDER BY s.run_id, f.position",
            (*([benchmark] if benchmark is not None else []), version, *run_ids),
        )
        out: dict[str, list[dict]] = {}
        for r in rows:
            got = out.setdefault(r[0], [])
            if r[1] is not None:
                got.append({k: math.nan if v is None else v for k, v in zip(FIGURE, r[1:], strict=True)})
        return out
