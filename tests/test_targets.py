"""Target strings, options, and the A/A false-positive rate of compare."""

import pytest

from helpers import new_run
from vmtax.analysis import analyse
from vmtax.errors import UserError
from vmtax.model import BenchSpec
from vmtax.runner import RunConfig, Runner
from vmtax.store import Store
from vmtax.targets import KINDS, parse_target
from vmtax.targets.qemu import parse_size_mb


@pytest.mark.parametrize(
    "text,kind,opts",
    [
        ("local", "local", {}),
        ("local:label=b", "local", {"label": "b"}),
        (
            "qemu:accel=tcg,smp=2,mem=1G,machine=microvm",
            "qemu",
            {"accel": "tcg", "smp": "2", "mem": "1G", "machine": "microvm"},
        ),
        ("uml:mem=256M", "uml", {"mem": "256M"}),
        ("container:engine=unshare", "container", {"engine": "unshare"}),
    ],
)
def test_parse_target(text, kind, opts):
    t = parse_target(text)
    assert t.kind == kind and t.options == opts and t.name == text


@pytest.mark.parametrize(
    "text,needle",
    [
        ("qemu:accel=warp", "accel must be"),
        ("qemu:machine=vax", "machine must be"),
        ("qemu:emulator=elsewhere", "emulator must be apart or together, got 'elsewhere'"),
        ("qemu:mem=lots", "malformed memory size"),
        ("qemu:colour=blue", "unknown option(s) colour"),
        ("local:smp=2", "unknown option(s) smp"),
        ("container:engine=docker", "engine must be"),
    ],
)
def test_bad_target_options(text, needle):
    with pytest.raises(UserError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        parse_target(text)


def test_qemu_threads_not_named_as_vcpus_stay_where_they_are():
    """Without a thread named "CPU n/..." (QEMU names them only with debug-threads=on), moving
    the 'emulator' threads would move the guest itself off the CPU the run says: nothing moves."""
    import os
    import subprocess
    import sys

    from vmtax.targets.qemu import pin_emulator_apart, threads_cpus

    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        before = os.sched_getaffinity(p.pid)
        assert pin_emulator_apart(p.pid, max(before)) == []
        assert os.sched_getaffinity(p.pid) == before
        assert threads_cpus(p.pid, [p.pid]) == sorted(before) and threads_cpus(p.pid, []) == []
    finally:
        p.kill()
        p.wait()


@pytest.mark.skipif(len(__import__("os").sched_getaffinity(0)) < 2, reason="needs two CPUs to move threads apart")
def test_qemu_vcpu_threads_stay_on_the_cpu_and_the_others_move_apart():
    """A process with a thread named as QEMU names a vCPU's (debug-threads=on): that thread keeps
    the run's CPU, the others go to the remaining CPUs, and both read back so."""
    import os
    import subprocess
    import sys

    from vmtax.targets.qemu import pin_emulator_apart, threads_cpus, vcpu_threads

    code = (
        "import threading, time, ctypes\n"
        "def vcpu():\n"
        "    open(f'/proc/self/task/{threading.get_native_id()}/comm', 'w').write('CPU 0/TCG')\n"
        "    time.sleep(30)\n"
        "threading.Thread(target=vcpu, daemon=True).start(); print('ready', flush=True); time.sleep(30)\n"
    )
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        for _ in range(100):
            if vcpu_threads(p.pid):
                break
            __import__("time").sleep(0.02)
        (tid,) = vcpu_threads(p.pid)
        cpu = max(os.sched_getaffinity(0))
        others = sorted(os.sched_getaffinity(0) - {cpu})
        assert pin_emulator_apart(p.pid, cpu) == others
        assert threads_cpus(p.pid, [tid]) == [cpu]
        assert threads_cpus(p.pid, [p.pid]) == others  # the main thread, as QEMU's main loop
    finally:
        p.kill()
        p.wait()


@pytest.mark.skipif(len(__import__("os").sched_getaffinity(0)) < 2, reason="needs two CPUs to keep off one")
def test_keep_off_moves_every_thread_and_gives_the_cpus_back_on_an_exception():
    import os
    import threading

    from vmtax.proc import controller_cpus, keep_off, spawn

    mine = os.sched_getaffinity(0)
    cpu = max(mine)
    assert controller_cpus(None) == [] and controller_cpus(cpu) == sorted(mine - {cpu})
    assert controller_cpus(max(mine) + 64) == []  # a CPU it may not use: nothing to keep off
    parked, go = threading.Event(), threading.Event()
    t = threading.Thread(target=lambda: (parked.set(), go.wait(10)), daemon=True)
    t.start()
    parked.wait(10)
    with pytest.raises(KeyboardInterrupt):
        with keep_off(cpu) as others:
            assert others == sorted(mine - {cpu})
            assert os.sched_getaffinity(0) == set(others) == os.sched_getaffinity(t.native_id)
            # a pinned child starts on its CPU; an unpinned one, forked or vfork'd, with the CPUs vmtax had
            kids = [spawn(["sleep", "5"], cpu=cpu), spawn(["sleep", "5"]), spawn(["sleep", "5"], die_with_vmtax=False)]
            try:
                assert [os.sched_getaffinity(p.pid) for p in kids] == [{cpu}, mine, mine]
                assert os.sched_getaffinity(0) == set(others)
            finally:
                for p in kids:
                    p.kill()
                    p.wait()
            raise KeyboardInterrupt
    assert os.sched_getaffinity(0) == mine == os.sched_getaffinity(t.native_id)
    go.set()
    with keep_off(None) as others:
        assert others == [] and os.sched_getaffinity(0) == mine


def test_sizes():
    assert parse_size_mb("512M") == 512 and parse_size_mb("2G") == 2048 and parse_size_mb("64") == 64


@pytest.mark.e2e  # probes boot UML and start a podman container
def test_every_kind_reports_availability():
    """Every kind answers whether it can run here, and a kind that cannot
    says why in words; the bare machine and the fake always can."""
    for kind, cls in KINDS.items():
        ok, why = cls.available()
        assert isinstance(ok, bool) and isinstance(why, str), kind
        assert ok or len(why.strip()) > 10, (kind, why)
    assert KINDS["local"].available()[0] and KINDS["fake"].available()[0]


@pytest.mark.parametrize(
    "process_noise,host_noise",
    [
        (0.0, 0.0),  # seconds: in make test
        pytest.param(0.03, 0.0, marks=pytest.mark.sim),  # minutes each: make validity
        pytest.param(0.01, 0.03, marks=pytest.mark.sim),
    ],
)
def test_repeated_a_a_flags_about_alpha(tmp_path, process_noise, host_noise):
    """A/A comparisons through the whole runner (random block order, the
    stopping rule, the sign-flip test) flag no more than the significance
    level implies: 5% of 120 ~ 6, and a binomial 99.9% bound is 16.  With a
    per-process offset (samples of one process are not independent) this
    holds only if the process is the unit; with a busy host's slowdown shared
    by both targets and correlated in time, only if the test rests on the
    random order rather than on independent blocks."""
    from vmtax.targets import fake

    specs = [BenchSpec(f"b{i}", "s", "ns", "lower", "d") for i in range(12)]
    flagged = total = 0
    for rep in range(10):
        fake.HOST.reset(rep)
        store = Store(tmp_path / f"aa{rep}.db")
        opts = f"noise=0.02,process_noise={process_noise},host_noise={host_noise},host_rho=0.9"
        targets = [
            parse_target(f"fake:seed={rep * 2 + 1},{opts}"),
            parse_target(f"fake:seed={rep * 2 + 2},{opts},label=b"),
        ]
        new_run(store, targets, specs)
        Runner(RunConfig(precision=0.01, max_time=1e6, seed=rep), specs, targets, store, "r").run()
        _, cs = analyse(store.load("r"))
        flagged += sum(c.significant for c in cs)
        total += len(cs)
    assert total == 120
    assert flagged <= 16


def test_a_target_whose_agent_cannot_report_is_a_target_error(monkeypatch):
    from vmtax.errors import TargetError
    from vmtax.proc import ChildFailed

    t = parse_target("fake")

    def broken(args, timeout):
        raise ChildFailed(127, "vmtax-agent: not found")
        yield  # a generator, like every run_agent

    monkeypatch.setattr(t, "run_agent", broken)
    with pytest.raises(TargetError, match="could not report its environment"):
        t.facts()
