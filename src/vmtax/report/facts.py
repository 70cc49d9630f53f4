"""The environment of runs, as rows, and warnings where runs that are
shown together differ (pyperf refuses to mix apples and oranges; we warn)."""
from __future__ import annotations

from ..model import RunData

# (label, fact key) shown for every target
FACTS = [("kernel", "kernel"), ("CPU", "cpu_model"), ("CPUs", "cpus_online"),
         ("hypervisor seen", "hypervisor_vendor"), ("accel / engine", "accel"),
         ("clocksource", "clocksource"), ("THP", "thp_enabled"), ("governor", "cpu_governor"),
         ("XSAVE bytes", "xsave_bytes"), ("systemd-detect-virt", "systemd_detect_virt")]

COMPARED = [("CPU model", "cpu_model"), ("kernel", "kernel")]


def fact_rows(data: RunData) -> list[list[str]]:
    rows = []
    for t in data.targets:
        f = {**t.facts, "accel": t.accel or t.facts.get("accel") or t.facts.get("engine")}
        rows.append([t.name] + [str(f.get(key) if f.get(key) is not None else "-") for _, key in FACTS]
                    + [(data.agent_hashes.get(t.name) or "-")[:12]])
    return rows


FACT_HEADER = ["target"] + [label for label, _ in FACTS] + ["agent sha256"]


def target_notes(data: RunData) -> list[tuple[list[str], str]]:
    """(targets, note) under the table of targets: why a target runs as it
    does (a KVM probe that failed, so TCG) and which were not measured.  A
    note several targets share (five QEMU guests of a disk comparison, one
    failed KVM probe) is said once, with their names."""
    by: dict[str, list[str]] = {}
    for t in data.targets:
        if t.facts.get("accel_note"):
            by.setdefault(str(t.facts["accel_note"]), []).append(t.name)
    for name, why in data.config.get("skipped_targets", {}).items():
        by.setdefault(f"not measured, it does not work here: {why}", []).append(name)
    return [(names, note) for note, names in by.items()]


def warnings(runs: list[RunData]) -> list[str]:
    """Where runs shown together differ in their baseline's CPU model or
    kernel, or in the agent binary."""
    out = []
    if len(runs) > 1:
        first = runs[0]
        for label, key in COMPARED:
            values = {r.id: (r.targets[0].facts.get(key) if r.targets else None) for r in runs}
            if len(set(values.values())) > 1:
                out.append(f"runs differ in the baseline's {label}: "
                           + "; ".join(f"{rid}: {v}" for rid, v in values.items()))
        hashes = {h for r in runs for h in r.agent_hashes.values() if h}
        if len(hashes) > 1:
            out.append(f"runs used {len(hashes)} different agent binaries (sha256 "
                       + ", ".join(sorted(h[:12] for h in hashes)) + f"); first run {first.id}")
    for r in runs:
        hashes = {h for h in r.agent_hashes.values() if h}
        if len(hashes) > 1:
            out.append(f"run {r.id}: its targets ran different agent binaries")
    return out
