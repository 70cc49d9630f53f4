"""A deterministic stored run, built by hand, for report tests."""
import random

from vmtax.model import BenchSpec, RunData, Sample, TargetInfo

SPECS = [BenchSpec("getppid", "kernel", "ns", "lower", "getppid loop"),
         BenchSpec("forkwait", "kernel", "ns", "lower", "fork and wait"),
         BenchSpec("pi", "cpu", "ns", "lower", "PI digits")]


def run(kind="compare", run_id="20260101-120000-abcd", facts=None, names=("local", "qemu:accel=tcg"),
        agent_hash="a" * 64, cpu_model="Test CPU"):
    rng = random.Random(42)
    targets = [TargetInfo(n, n.split(":")[0], {"kernel": "6.1.0-test", "cpu_model": cpu_model,
                                                "cpus_online": 2, **(facts or {})},
                          accel="tcg" if n.startswith("qemu") else None,
                          boot_s=2.5 if n.startswith("qemu") else None) for n in names]
    means = {"getppid": 100.0, "forkwait": 90000.0, "pi": 5e6}
    scale = {names[0]: 1.0, **{n: 3.0 + i for i, n in enumerate(names[1:])}}
    samples, outcomes = [], {}
    for spec in SPECS:
        for n in names:
            for k in range(32):  # 8 blocks of one process with a warmup and 3 samples
                samples.append(Sample(spec.name, n, rng.gauss(means[spec.name] * scale[n],
                                                              means[spec.name] * 0.01),
                                      "ns", process=k // 4, seq=k % 4, warmup=(k % 4 == 0),
                                      t=1767268800.0 + k, block=k // 4))
            outcomes[(n, spec.name)] = ("precision", "") if spec.name != "pi" else ("budget", "")
    return RunData(id=run_id, kind=kind, started=1767268800.0, finished=1767269000.0, status="complete",
                   command="vmtax compare local qemu:accel=tcg", vmtax_version="0.1.0",
                   config={"precision": 0.01, "max_time": 360.0, "cpu": None},
                   targets=targets, agent_hashes={n: agent_hash for n in names},
                   benchmarks=list(SPECS), samples=samples, outcomes=outcomes)
