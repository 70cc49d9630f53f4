"""Numbered schema migrations.  Append only: never edit a shipped one.
PRAGMA user_version holds the number of the last one applied, and
PRAGMA application_id marks the file as vmtax's (see opening.check_ours);
in PostgreSQL the table vmtax_schema does both (postgres.py), and
dialect.py turns each statement into PostgreSQL's SQL."""

import sqlite3

APPLICATION_ID = 0x766D7478  # "vmtx"

MIGRATIONS: list[str] = [
    # 1: runs, their targets and benchmarks, every sample, outcomes
    """
    CREATE TABLE runs (
        id TEXT PRIMARY KEY,
        kind TEXT NOT NULL,            -- 'run' or 'compare'
        started REAL NOT NULL,
        finished REAL,
        status TEXT NOT NULL,          -- running, complete, interrupted, failed
        command TEXT NOT NULL,
        vmtax_version TEXT NOT NULL,
        config_json TEXT NOT NULL
    );
    CREATE TABLE run_targets (
        run_id TEXT NOT NULL REFERENCES runs(id),
        position INTEGER NOT NULL,     -- 0 is the baseline
        name TEXT NOT NULL,
        kind TEXT NOT NULL,
        accel TEXT,
        boot_s REAL,
        idle_cpu_pct REAL,
        mem_overhead_mb REAL,
        agent_hash TEXT,
        facts_json TEXT NOT NULL,
        PRIMARY KEY (run_id, name)
    );
    CREATE TABLE run_benchmarks (
        run_id TEXT NOT NULL REFERENCES runs(id),
        position INTEGER NOT NULL,
        name TEXT NOT NULL,
        suite TEXT NOT NULL,
        unit TEXT NOT NULL,
        direction TEXT NOT NULL,
        description TEXT NOT NULL,
        PRIMARY KEY (run_id, name)
    );
    CREATE TABLE samples (
        id INTEGER PRIMARY KEY,
        run_id TEXT NOT NULL REFERENCES runs(id),
        target TEXT NOT NULL,
        benchmark TEXT NOT NULL,
        process INTEGER NOT NULL,
        instance INTEGER NOT NULL,
        seq INTEGER NOT NULL,
        warmup INTEGER NOT NULL,
        value REAL NOT NULL,
        unit TEXT NOT NULL,
        iters INTEGER NOT NULL,
        ops REAL NOT NULL,
        overhead REAL NOT NULL,
        tsc_per_op REAL NOT NULL,
        cpu INTEGER NOT NULL,
        t REAL NOT NULL
    );
    CREATE INDEX samples_by_run ON samples(run_id, benchmark, target);
    CREATE TABLE outcomes (
        run_id TEXT NOT NULL REFERENCES runs(id),
        target TEXT NOT NULL,
        benchmark TEXT NOT NULL,
        stopped_by TEXT NOT NULL,
        reason TEXT NOT NULL DEFAULT '',
        PRIMARY KEY (run_id, target, benchmark)
    );
    """,
    # 2: mark the file as a vmtax results database
    "PRAGMA application_id = 1986884728;",  # APPLICATION_ID
    # 3: the controller of each run (NULL for older runs), so that a run whose
    # controller is gone reads as abandoned (see controller.py)
    """
    ALTER TABLE runs ADD COLUMN host TEXT;
    ALTER TABLE runs ADD COLUMN user TEXT;
    ALTER TABLE runs ADD COLUMN pid INTEGER;
    ALTER TABLE runs ADD COLUMN pid_start INTEGER;  -- /proc/PID/stat field 22, against pid reuse
    ALTER TABLE runs ADD COLUMN boot_id TEXT;       -- /proc/sys/kernel/random/boot_id
    """,
    # 4: further figures per operation of each sample, by name
    """
    CREATE TABLE sample_metrics (
        sample_id INTEGER NOT NULL REFERENCES samples(id),
        name TEXT NOT NULL,
        value REAL NOT NULL,
        PRIMARY KEY (sample_id, name)
    );
    """,
    # 5: the runner's block of each sample (samples of one block were measured
    # side by side, one process per target, in random order; NULL before)
    "ALTER TABLE samples ADD COLUMN block INTEGER;",
    # 6: every agent process: where it ran in its block and where its time
    # went (started -> first line: start-up, setup, calibration; the rest:
    # warmups, samples, teardown, the channel), for `tools/precision.py`
    """
    CREATE TABLE processes (
        run_id TEXT NOT NULL REFERENCES runs(id),
        process INTEGER NOT NULL,
        target TEXT NOT NULL,
        benchmark TEXT NOT NULL,
        block INTEGER NOT NULL,
        slot INTEGER NOT NULL,          -- position in its block (0: first)
        started REAL NOT NULL,          -- wall-clock seconds
        first_line REAL,                -- its first line arrived (NULL: none)
        ended REAL NOT NULL,
        outcome TEXT NOT NULL,          -- ok, skipped, error
        PRIMARY KEY (run_id, process)
    );
    """,
    # 7: samples taken with counters on (their metrics are the run's counts;
    # counting costs time, so their time is left out of every estimate)
    "ALTER TABLE samples ADD COLUMN counting INTEGER NOT NULL DEFAULT 0;",
    # 8: the order a sample's metrics were given in (NULL before), for
    # PostgreSQL, which has no rowid to keep it (SQLite reads its rowid)
    "ALTER TABLE sample_metrics ADD COLUMN position INTEGER;",
    # 9: a row's kind (micro: an agent row; workload: a figure of a real tool's run), stored
    # with the run: how an old run reads must not hang on today's names (NULL before: read
    # from the name, as then)
    "ALTER TABLE run_benchmarks ADD COLUMN kind TEXT;",
    # 10: the agent's reference loop right before and after each timed sample, ns per step: the
    # host's state the sample was taken in (agent/harness.h; NULL before, and for workloads)
    """
    ALTER TABLE samples ADD COLUMN ref_before REAL;
    ALTER TABLE samples ADD COLUMN ref_after REAL;
    """,
    # 11: what a finished run's analysis says, as the dashboard's lists read it (vmtax serve):
    # its verdict and gate (run_summaries) and each ratio with its interval and its two sides'
    # means (row_figures), written once the run has ended; `version` is the analysis's that
    # worked them out (serve/summary.py): a summary of another version is read as none
    """
    CREATE TABLE run_summaries (
        run_id TEXT PRIMARY KEY REFERENCES runs(id),
        version INTEGER NOT NULL,
        verdict_json TEXT NOT NULL,     -- JSON: the verdict (null: none)
        gate_json TEXT NOT NULL         -- JSON: the gate's verdict (null: not gated)
    );
    CREATE TABLE row_figures (
        run_id TEXT NOT NULL REFERENCES runs(id),
        position INTEGER NOT NULL,      -- its order in the run's analysis
        benchmark TEXT NOT NULL,
        suite TEXT NOT NULL,
        baseline TEXT NOT NULL,         -- the target names, as run_targets holds them
        candidate TEXT NOT NULL,
        unit TEXT NOT NULL,
        direction TEXT NOT NULL,
        estimand TEXT NOT NULL,         -- which blocks the ratio is over
        ratio REAL,                     -- NULL: not a number
        ci_low REAL,
        ci_high REAL,
        base_mean REAL,                 -- each side's own mean with its interval (NULL: none)
        base_ci_low REAL,
        base_ci_high REAL,
        cand_mean REAL,
        cand_ci_low REAL,
        cand_ci_high REAL,
        PRIMARY KEY (run_id, benchmark, candidate)
    );
    CREATE INDEX row_figures_by_row ON row_figures(benchmark, run_id);
    """,
]


def statements(script: str):
    """The statements of a migration one by one, for either backend
    (executescript would commit the transaction they must run in)."""
    pending = ""
    for piece in script.split(";"):
        pending += piece + ";"
        if sqlite3.complete_statement(pending):
            if pending.strip(" \t\n;"):
                yield pending
            pending = ""
    if pending.strip(" \t\n;"):
        raise ValueError(f"incomplete statement in a migration: {pending!r}")
