"""A deterministic stored run, built by hand, for report tests."""

import random

from vmtax.model import BenchSpec, RunData, Sample, TargetInfo

SPECS = [
    BenchSpec("getppid", "kernel", "ns", "lower", "getppid loop"),
    BenchSpec("forkwait", "kernel", "ns", "lower", "fork and wait"),
    BenchSpec("pi", "cpu", "ns", "lower", "PI digits"),
]


# Per-operation counts of each target's counting processes: a TCG guest
# emulates in user space (host user CPU ~ its CPU time in the counted
# batches, no exits); UML pays
# host context switches and syscalls for every guest syscall.
COUNTS = {
    "local": {
        "page_faults": 0.0,
        "context_switches": 0.0,
        "syscalls": 1.0,
        "task_clock_ns": 100.0,
        "host_cpu_ns": 100.0,
        "host_cpu_user_ns": 30.0,
        "host_cpu_sys_ns": 70.0,
        "host_context_switches": 0.0,
        "host_syscalls": 1.0,
    },
    "qemu:accel=tcg": {
        "page_faults": 0.0,
        "context_switches": 0.0,
        "syscalls": 1.0,
        "task_clock_ns": 310.0,
        "host_cpu_ns": 300.0,
        "host_cpu_user_ns": 295.0,
        "host_cpu_sys_ns": 5.0,
        "host_context_switches": 0.001,
        "host_syscalls": 0.01,
    },
    "uml": {
        "page_faults": 0.0,
        "context_switches": 0.0,
        "task_clock_ns": 120.0,
        "host_cpu_ns": 400.0,
        "host_cpu_user_ns": 40.0,
        "host_cpu_sys_ns": 360.0,
        "host_context_switches": 2.1,
        "host_syscalls": 16.8,
    },
}


def run(
    kind="compare",
    run_id="20260101-120000-abcd",
    facts=None,
    names=("local", "qemu:accel=tcg"),
    agent_hash="a" * 64,
    cpu_model="Test CPU",
    counts=False,
):
    rng = random.Random(42)
    targets = [
        TargetInfo(
            n,
            n.split(":")[0],
            {
                "kernel": "6.1.0-test",
                "cpu_model": cpu_model,
                "cpus_online": 2,
                "target_kind": n.split(":")[0],
                **(facts or {}),
            },
            accel="tcg" if n.startswith("qemu") else None,
            boot_s=2.5 if n.startswith("qemu") else None,
        )
        for n in names
    ]
    means = {"getppid": 100.0, "forkwait": 90000.0, "pi": 5e6}
    scale = {names[0]: 1.0, **{n: 3.0 + i for i, n in enumerate(names[1:])}}
    samples, outcomes = [], {}
    for spec in SPECS:
        for n in names:
            for k in range(32):  # 8 blocks of one process with a warmup and 3 samples
                samples.append(
                    Sample(
                        spec.name,
                        n,
                        rng.gauss(means[spec.name] * scale[n], means[spec.name] * 0.01),
                        "ns",
                        process=k // 4,
                        seq=k % 4,
                        warmup=(k % 4 == 0),
                        t=1767268800.0 + k,
                        block=k // 4,
                    )
                )
            if counts and n in COUNTS:
                for blk in range(8):  # a counting process per block, its one counted batch
                    per_op = means[spec.name] / 100.0  # COUNTS are for a 100-ns operation
                    samples.append(
                        Sample(
                            spec.name,
                            n,
                            means[spec.name] * 1.1,
                            "ns",
                            process=100 + blk,
                            seq=1,
                            counting=True,
                            block=blk,
                            t=1767268900.0 + blk,
                            metrics={
                                k: v * (1 + 0.01 * ((blk % 2) * 2 - 1)) * (per_op if k.endswith("_ns") else 1.0)
                                for k, v in COUNTS[n].items()
                            },
                        )
                    )
            outcomes[(n, spec.name)] = ("precision", "") if spec.name != "pi" else ("budget", "")
    return RunData(
        id=run_id,
        kind=kind,
        started=1767268800.0,
        finished=1767269000.0,
        status="complete",
        command="vmtax compare local qemu:accel=tcg",
        vmtax_version="0.1.0",
        config={"precision": 0.01, "max_time": 360.0, "cpu": None},
        targets=targets,
        agent_hashes={n: agent_hash for n in names},
        benchmarks=list(SPECS),
        samples=samples,
        outcomes=outcomes,
        host="lab-01",
        user="ci",
    )
