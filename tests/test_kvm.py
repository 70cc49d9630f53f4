"""The KVM-only code paths against a real KVM: a guest started with
accel=kvm, accel=auto's probe taking KVM, and VM exits counted by reason
from KVM's kvm:kvm_exit tracepoint (with KVM's own total from QMP beside).

Marked `kvm`, deselected by default (pyproject's addopts).  They need a KVM
that runs a standard guest (kvm_amd or kvm_intel) and root; elsewhere they
skip, saying why.  `make test-kvm` runs them inside a TCG guest with an
emulated AMD-V and a real KVM (scripts/kvm-rig/), where a skip fails it."""

import os

import pytest

from vmtax import guest, kvmexits
from vmtax.engine.protocol import agent_argv, read_agent
from vmtax.suite import select
from vmtax.targets import parse_target
from vmtax.targets.qemu import QemuTarget, _probe_key

pytestmark = [pytest.mark.kvm, pytest.mark.e2e]


def kvm_here() -> str:
    """Why a standard KVM guest cannot run here ('' when it can)."""
    ok, why = QemuTarget.available()
    if not ok:
        return why
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return "no /dev/kvm this user can open"
    isa, why = kvmexits.host_isa()
    if isa is None:
        return why + ": no standard KVM here (make test-kvm runs these tests under a nested one)"
    if os.geteuid() != 0:
        return "counting VM exits by reason (perf on kvm:kvm_exit) needs root"
    return ""


WHY = kvm_here()
needs_kvm = pytest.mark.skipif(bool(WHY), reason=WHY)
# a guest under a KVM nested in TCG boots in ~20 s (its clock); QEMU's own
# default wait is enough, but accel=auto's probe would give up at 15 s
SLOW_BOOT = "boot_timeout=600"


@pytest.fixture(scope="module")
def kvm_guest():
    t = parse_target(f"qemu:accel=kvm,mem=256M,{SLOW_BOOT}")
    with t:
        yield t


def counted(t, bench: str, iters: int) -> dict[str, float]:
    """One counted batch of `iters` operations on t, as compare's counting
    processes run it: its host metrics per operation."""
    spec = select(bench_names=[bench])[0]
    got: list[dict] = []
    lines = t.run_agent(agent_argv(t, spec, warmup=1, iters=iters, count_settle_ms=t.count_settle_ms), 600)
    read_agent(t, lines, spec, lambda f, _: got.append(f), t.host_probe)
    batch = [f for f in got if f["counting"]]
    assert len(batch) == 1, got
    assert batch[0]["ops"] >= iters
    return batch[0]["metrics"]


@needs_kvm
def test_an_accel_kvm_guest_runs_under_kvm_and_its_exits_are_counted_by_reason(kvm_guest):
    f = kvm_guest.facts()
    assert f["accel"] == "kvm" and f["accel_note"] == ""
    assert f["hypervisor_vendor"] == "KVMKVMKVM"  # what the guest's own CPUID says
    assert "kvm:kvm_exit" in f["host_probe"], f
    assert "exits_by_reason" not in f.get("host_probe_missing", "")


@needs_kvm
def test_a_cpuid_is_one_exit_of_reason_cpuid_and_a_getppid_none(kvm_guest):
    cpuid = counted(kvm_guest, "cpuid", 3000)
    assert 0.95 <= cpuid["exits_cpuid"] <= 1.05, cpuid
    # the rest is the batch's share of timer ticks and of the agent's report over the serial port
    assert cpuid["exits"] >= cpuid["exits_cpuid"] and cpuid["exits"] < 1.5, cpuid
    # the rows add up (each less its own idle rate, so within a little)
    reasons = sum(v for k, v in cpuid.items() if k.startswith("exits_") and k != "exits_userspace")
    assert reasons == pytest.approx(cpuid["exits"], rel=0.02)
    getppid = counted(kvm_guest, "getppid", 20000)
    assert getppid["exits"] < 0.1 and getppid["exits_cpuid"] < 0.01, getppid


@needs_kvm
def test_kvm_s_own_exit_counter_agrees_with_the_tracepoint(kvm_guest):
    """KVM's binary statistics (QMP query-stats) and its tracepoint count
    the same exits: over one CPUID batch, within the few that fall between
    the two reads."""
    p = kvm_guest.host_probe
    assert p.qmp is not None, p.missing
    p.enable()
    try:
        q0, k0 = p.qmp.vcpu_exits()["exits"], p.kvm.read()["exits"]
        list(
            kvm_guest.run_agent(
                ["run", "cpuid", "--samples", "1", "--warmup", "0", "--iters", "2000", "--max-sample-ms", "0"], 600
            )
        )
        k1, q1 = p.kvm.read()["exits"], p.qmp.vcpu_exits()["exits"]
    finally:
        p.disable()
    assert k1 - k0 >= 2000
    assert q1 - q0 == pytest.approx(k1 - k0, rel=0.05, abs=50)


@needs_kvm
def test_accel_auto_probes_kvm_and_takes_it():
    t = parse_target(f"qemu:mem=256M,{SLOW_BOOT}")
    with t:
        f = t.facts()
        assert f["accel"] == "kvm" and f["accel_note"] == "", f
        assert f["hypervisor_vendor"] == "KVMKVMKVM"
    assert not guest.probe_memory("kvm").get(_probe_key())  # no failure remembered
