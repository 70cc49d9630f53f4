"""The real agent binary: every benchmark in its table runs, in the static
and the sanitizer build, and speaks the protocol."""
import json
import subprocess

import pytest

from conftest import AGENT, AGENT_SAN

pytestmark = pytest.mark.e2e


def _list():
    return json.loads(subprocess.run([AGENT, "--list"], capture_output=True, check=True).stdout)


NAMES = [b["name"] for b in _list()]
SEEDS = ["getppid", "divzero", "segv", "threadswitch", "forkwait", "null_call", "null_read",
         "null_write", "stat", "open_close", "select_tcp", "sig_install", "sig_handle", "fork_exit",
         "fork_exec", "fork_sh", "ctx_2p_0k", "ctx_2p_16k", "ctx_2p_64k", "ctx_8p_16k", "ctx_8p_64k",
         "ctx_16p_16k", "ctx_16p_64k", "mmap", "prot_fault", "page_fault", "pi", "cpuid", "rdtsc",
         "tlb_4k", "tlb_2m"]


def run(binary, *args, timeout=120):
    p = subprocess.run([binary, *args], capture_output=True, text=True, timeout=timeout)
    return p.returncode, [json.loads(l) for l in p.stdout.splitlines()], p.stderr


def test_list_has_every_seed_benchmark():
    rows = _list()
    assert NAMES == [r["name"] for r in rows] and set(SEEDS) <= set(NAMES)
    for r in rows:
        assert r["direction"] in ("lower", "higher") and r["unit"] and r["description"]


def test_static_binary():
    out = subprocess.run(["file", "-L", str(AGENT)], capture_output=True, text=True).stdout
    assert "statically linked" in out or "static-pie" in out


@pytest.mark.parametrize("binary", [AGENT, AGENT_SAN], ids=["static", "sanitizer"])
@pytest.mark.parametrize("name", NAMES)
def test_benchmark_runs_and_speaks_protocol(binary, name):
    rc, lines, err = run(binary, "run", name, "--samples", "2", "--warmup", "1", "--iters", "2")
    assert rc == 0, err
    assert all(l["schema"] == 1 for l in lines)
    assert lines[-1] == {"schema": 1, "type": "done", "bench": name}
    if lines[0]["type"] == "skip":
        assert lines[0]["reason"]
        return
    samples = [l for l in lines if l["type"] == "sample"]
    assert [s["warmup"] for s in samples] == [True, False, False]
    for s in samples:
        assert s["bench"] == name and s["unit"] == "ns" and s["iters"] == 2
        assert s["value"] > 0 and s["overhead"] >= 0 and s["ops"] >= 2


def test_calibration_reaches_min_time():
    rc, lines, _ = run(AGENT, "run", "getppid", "--samples", "1", "--min-time-ms", "20")
    cal = next(l for l in lines if l["type"] == "calibration")
    s = [l for l in lines if l["type"] == "sample"][-1]
    assert cal["iters"] == s["iters"] and s["ops"] == s["iters"] * 10
    assert s["value"] * s["ops"] >= 20e6 * 0.5  # a sample lasts about the goal
    assert s["overhead"] < 0.01 * s["value"]  # harness cost well under 1%


def test_parallel_instances_and_pinning():
    rc, lines, _ = run(AGENT, "run", "getppid", "--parallel", "3", "--samples", "2", "--cpu", "0")
    samples = [l for l in lines if l["type"] == "sample"]
    assert sorted({s["instance"] for s in samples}) == [0, 1, 2]
    assert len(samples) == 3 * 3 and all(s["cpu"] == 0 for s in samples)


def test_env_reports_the_system():
    rc, (env,), _ = run(AGENT, "--env")
    for key in ("kernel", "cpu_model", "cpus_online", "cpuid_hypervisor_bit", "clocksource",
                "thp_enabled", "mitigations", "hypervisor_vendor", "systemd_detect_virt"):
        assert key in env


def test_pi_self_checks_its_digits():
    rc, lines, _ = run(AGENT, "run", "pi", "--samples", "1", "--iters", "1")
    s = [l for l in lines if l["type"] == "sample"][-1]
    assert rc == 0 and s["tsc_per_op"] > 0


@pytest.mark.parametrize("args", [["run", "nope"], ["run", "getppid", "--samples", "x"],
                                  ["run", "getppid", "--bogus", "1"], ["frobnicate"]])
def test_bad_arguments_exit_2(args):
    p = subprocess.run([AGENT, *args], capture_output=True, text=True)
    assert p.returncode == 2 and p.stderr.strip()


def test_harness_unit_tests():
    from conftest import REPO
    p = subprocess.run([REPO / "agent" / "build" / "test_harness"], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    assert " 0 failed" in p.stdout
