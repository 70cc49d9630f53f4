"""A results store with known answers, for vmtax serve's tests and its
page-time benchmark (tools/serve_bench.py): compare runs of a baseline and
candidates on two hosts, written straight into the store's tables (one
transaction a run; PostgreSQL's samples by COPY), as the runner would have
stored them, in blocks of one process per target with a warmup and samples.

The answers: on host STEP_HOST, row STEP_ROW's candidate is 5% slower from
run STEP_AT of that host on (a change point there, no fact changed); on host
KERNEL_HOST the kernel changes at its run KERNEL_AT and row KERNEL_ROW's
candidate moves 8% with it (a change point whose facts say the kernel)."""

from __future__ import annotations

import json
import random

from vmtax.model import BenchSpec
from vmtax.serve import summary
from vmtax.store import Store
from vmtax.store.writing import ADD_TARGET, SET_OUTCOME

STEP_HOST, STEP_ROW, STEP_AT = "lab-a", "getppid", 12
KERNEL_HOST, KERNEL_ROW, KERNEL_AT = "lab-b", "stat", 10
KERNELS = ("6.1.0-20-amd64", "6.1.0-21-amd64")
T0 = 1_790_000_000.0  # 2026-09-21
ROWS = [
    ("getppid", "kernel", "lower", 60.0),
    ("stat", "lmbench", "lower", 400.0),
    ("pi", "cpu", "lower", 2.0e6),
]
DEMO_ROWS = [
    "getppid",
    "segv",
    "forkwait",
    "page_fault",
    "null_read",
    "stat",
    "sig_handle",
    "fork_exec",
    "ctx_2p_16k",
    "mmap",
    "pi",
    "cpuid",
    "tlb_4k",
    "mmap_big",
]
CANDIDATES = {"qemu:accel=tcg": 3.0, "uml": 8.0, "container": 1.05}
HOSTILE = "<script>alert(1)</script>\ufffe\u202eevil" + "x" * 10_000
SAMPLE_COLUMNS = (
    "run_id,target,benchmark,process,instance,seq,warmup,value,unit,iters,ops,overhead,tsc_per_op,cpu,t,block,"
    "counting,ref_before,ref_after"
)


def rows_of(demo: bool) -> list[tuple[str, str, str, float]]:
    if not demo:
        return ROWS
    return [(name, "kernel", "lower", 100.0 * (i + 1)) for i, name in enumerate(DEMO_ROWS)]


def run_id(host: str, i: int) -> str:
    return f"2026{(i // 28) % 12 + 1:02d}{i % 28 + 1:02d}-{(i * 7) % 24:02d}0000-{host[-1]}{i:03x}"


def _samples(rid, targets, rows, host, i, rng, blocks, per):
    out = []
    for r, (name, _suite, _d, mean) in enumerate(rows):
        for b in range(blocks):
            for ti, (tname, scale) in enumerate(targets):
                step = 1.0
                if ti and host == STEP_HOST and name == STEP_ROW and i >= STEP_AT:
                    step = 1.05
                if ti and host == KERNEL_HOST and name == KERNEL_ROW and i >= KERNEL_AT:
                    step = 1.08
                proc = (r * blocks + b) * len(targets) + ti
                for seq in range(per + 1):
                    v = mean * scale * step * rng.gauss(1.0, 0.004)
                    t = T0 + i * 86400 + proc + seq * 0.01
                    out.append((rid, tname, name, proc, 0, seq, int(seq == 0), v, "ns", 1000, 1000.0, 0.0, 0.0, 1))
                    out[-1] += (t, b, 0, None, None)
    return out


def _write_run(store: Store, host: str, i: int, targets, rows, blocks: int, per: int, label: str) -> str:
    rng = random.Random(f"{host}-{i}")
    rid = run_id(host, i)
    kernel = KERNELS[host == KERNEL_HOST and i >= KERNEL_AT]
    started = T0 + i * 86400 + (3600 if host == KERNEL_HOST else 0)
    names = " ".join(t for t, _ in targets)
    command = f"vmtax compare {names} --bench {' '.join(r[0] for r in rows)}" + (" --gate 2%" if i % 5 == 4 else "")
    config = {"precision": 0.01, "max_time": 420.0, "cpu": 1, "samples_per_process": per, "warmup": 1}
    sql = store.dialect.sql
    with store._write("seed"):
        store.db.execute(
            sql(
                "INSERT INTO runs (id, kind, started, finished, status, command, vmtax_version, config_json, host,"
                ' "user", pid, pid_start, boot_id) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)'
            ),
            (rid, "compare", started, started + 400, "complete", command, "0.1.0", json.dumps(config), host, "ci")
            + (None, None, None),
        )
        for pos, (tname, _) in enumerate(targets):
            facts = {"kernel": kernel, "cpu_model": f"EPYC of {host}", "cpus_online": 2, "hypervisor": "KVMKVMKVM"}
            if pos == 1 and label:
                facts["label"] = label
            kind = tname.split(":")[0]
            store.db.execute(
                sql(ADD_TARGET),
                (rid, pos, tname, kind, None, None, None, None, "a" * 64, json.dumps(facts, sort_keys=True)),
            )
        store.db.cursor().executemany(
            sql(
                "INSERT INTO run_benchmarks (run_id, position, name, suite, unit, direction, description, kind)"
                " VALUES (?,?,?,?,?,?,?,?)"
            ),
            [(rid, p, n, s, "ns", d, f"{n} loop", "micro") for p, (n, s, d, _m) in enumerate(rows)],
        )
        store.db.cursor().executemany(
            sql(SET_OUTCOME), [(rid, t, n, "precision", "") for n, *_ in rows for t, _ in targets]
        )
        _insert_samples(store, _samples(rid, targets, rows, host, i, rng, blocks, per))
    return rid


def _insert_samples(store: Store, samples: list[tuple]) -> None:
    if store.dialect.name == "postgresql":
        with store.db.cursor().copy(f"COPY samples ({SAMPLE_COLUMNS}) FROM STDIN") as copy:
            for s in samples:
                copy.write_row(s)
        return
    store.db.cursor().executemany(
        f"INSERT INTO samples ({SAMPLE_COLUMNS}) VALUES ({','.join('?' * len(SAMPLE_COLUMNS.split(',')))})", samples
    )


def seed(
    location,
    runs_per_host: int = 24,
    demo: bool = False,
    blocks: int = 8,
    per: int = 3,
    hostile: bool = False,
    hosts=(STEP_HOST, KERNEL_HOST),
    summaries: bool = True,
) -> list[str]:
    """Write the runs; their ids, oldest first per host.  demo: the demo's
    shape (14 rows, the baseline and three candidates) instead of 3 rows
    and one candidate.  hostile: the candidate's label is HOSTILE.
    summaries: each run's summary stored at its end, as vmtax compare does
    (without: a store from before summaries)."""
    rows = rows_of(demo)
    cands = list(CANDIDATES.items()) if demo else [("qemu:accel=tcg", 3.0)]
    targets = [("local", 1.0), *cands]
    ids = []
    with Store(location) as store:
        for host in hosts:
            for i in range(runs_per_host):
                ids.append(_write_run(store, host, i, targets, rows, blocks, per, HOSTILE if hostile else ""))
                if summaries:
                    summary.record(store, ids[-1])
    return ids


SPECS = [BenchSpec(n, s, "ns", d, f"{n} loop") for n, s, d, _ in ROWS]
