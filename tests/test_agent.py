"""The real agent binary: every benchmark in its table runs, in the static
and the sanitizer build, and speaks the protocol."""

import json
import os
import random
import signal
import statistics
import subprocess
import time
from collections.abc import Iterator

import pytest

from conftest import AGENT, AGENT_SAN
from vmtax.hostproc import cpu_seconds

pytestmark = pytest.mark.e2e


def _list():
    return json.loads(subprocess.run([AGENT, "--list"], capture_output=True, check=True).stdout)


NAMES = [b["name"] for b in _list()]
SEEDS = [
    "getppid",
    "divzero",
    "segv",
    "threadswitch",
    "forkwait",
    "null_call",
    "null_read",
    "null_write",
    "stat",
    "open_close",
    "select_tcp",
    "sig_install",
    "sig_handle",
    "fork_exec",
    "fork_sh",
    "ctx_2p_0k",
    "ctx_2p_16k",
    "ctx_2p_64k",
    "ctx_8p_16k",
    "ctx_8p_64k",
    "ctx_16p_16k",
    "ctx_16p_64k",
    "mmap",
    "prot_fault",
    "page_fault",
    "page_fault_file",
    "pi",
    "cpuid",
    "rdtsc",
    "tlb_4k",
    "tlb_2m",
]


def run(binary, *args, timeout=120):
    p = subprocess.run([binary, *args], capture_output=True, text=True, timeout=timeout)
    return p.returncode, [json.loads(line) for line in p.stdout.splitlines()], p.stderr


def test_list_has_every_seed_benchmark():
    rows = _list()
    assert [r["name"] for r in rows] == NAMES and set(SEEDS) <= set(NAMES)
    for r in rows:
        assert r["direction"] in ("lower", "higher") and r["unit"] and r["description"]


# What a row's description must say (the rest of it is read in review).
ROW_FACTS = {
    "forkwait": ["one op", "fork proc", "lat_proc fork"],
    "page_fault": ["one op", "anonymous", "zero-fill", "lat_pagefault", "page_fault_file"],
    "page_fault_file": ["one op", "lat_pagefault", "PROT_READ", "MAP_SHARED", "permutation", "fault-around", "16384"],
}
ROW_FACTS["mmap"] = ["one op", "8 MiB", "PROT_READ|PROT_WRITE MAP_SHARED", "16 KiB", "first tenth", "munmap"]
ROW_FACTS["tlb_4k"] = ["one op", "64 MiB", "4 KiB", "MemAvailable"]
ROW_FACTS["tlb_2m"] = ["64 MiB", "2 MiB pages", "MemAvailable"]
ROW_FACTS.update(
    {
        "stat": ["private directory", "$FSDIR/lmbench"],
        "select_tcp": ["-n 100 tcp", "none is ready", "write set", "connected"],
        "sig_handle": ["kill(getpid(), SIGUSR1)", "subtracts"],
        "prot_fault": ["read-only", "MAP_SHARED", "subtracts"],
        "fork_exec": ["static agent", "dynamically linked"],
        "fork_sh": ["own /bin/sh", "sh fact"],
        "ctx_2p_0k": ["lat_ctx -s 0 2", "subtracts"],
        "ctx_16p_64k": ["lat_ctx -s 64 16", "64 KB"],
    }
)
SUITES = {"page_fault": "kernel", "page_fault_file": "lmbench"}


def test_rows_say_what_they_measure():
    rows = {r["name"]: r for r in _list()}
    assert "fork_exit" not in rows  # the same code as forkwait
    for name, suite in SUITES.items():
        assert rows[name]["suite"] == suite, name
    for r in rows.values():  # every row says what one operation is
        assert "one op" in r["description"], r["name"]
        assert r["suite"] != "lmbench" or r["description"].startswith("lat_"), r["name"]
    for name, facts in ROW_FACTS.items():
        for fact in facts:
            assert fact in rows[name]["description"], (name, fact)


def test_static_binary():
    out = subprocess.run(["file", "-L", str(AGENT)], capture_output=True, text=True).stdout
    assert "statically linked" in out or "static-pie" in out


@pytest.mark.parametrize("binary", [AGENT, AGENT_SAN], ids=["static", "sanitizer"])
@pytest.mark.parametrize("name", NAMES)
def test_benchmark_runs_and_speaks_protocol(binary, name):
    rc, lines, err = run(binary, "run", name, "--samples", "2", "--warmup", "1", "--iters", "2")
    assert rc == 0, err
    assert all(line["schema"] == 1 for line in lines)
    assert lines[-1] == {"schema": 1, "type": "done", "bench": name}
    if lines[0]["type"] == "skip":
        assert lines[0]["reason"]
        return
    samples = [line for line in lines if line["type"] == "sample"]
    assert [s["warmup"] for s in samples] == [True, False, False]
    for s in samples:
        assert s["bench"] == name and s["unit"] == "ns" and s["iters"] == 2
        assert s["value"] > 0 and s["overhead"] >= 0 and s["ops"] >= 2


def test_calibration_reaches_min_time():
    _rc, lines, _ = run(AGENT, "run", "getppid", "--samples", "1", "--min-time-ms", "20")
    cal = next(line for line in lines if line["type"] == "calibration")
    s = [line for line in lines if line["type"] == "sample"][-1]
    assert cal["iters"] == s["iters"] and s["ops"] == s["iters"] * 10
    assert s["value"] * s["ops"] >= 20e6 * 0.5  # a sample lasts about the goal
    assert s["overhead"] < 0.01 * s["value"]  # harness cost well under 1%


@pytest.mark.parametrize("name", ["ctx_2p_0k", "ctx_16p_16k"])
def test_parallel_ring_benchmarks_finish(name):
    # ring members inherited the barrier pipe, so the parent never saw every instance ready
    rc, lines, err = run(AGENT, "run", name, "--parallel", "2", "--iters", "2", "--samples", "1", timeout=30)
    assert rc == 0 and lines[-1]["type"] == "done", err
    assert len([line for line in lines if line["type"] == "sample"]) == 2 * 2


def test_parallel_instances_and_pinning():
    _rc, lines, _ = run(AGENT, "run", "getppid", "--parallel", "3", "--samples", "2", "--cpu", "0")
    samples = [line for line in lines if line["type"] == "sample"]
    assert sorted({s["instance"] for s in samples}) == [0, 1, 2]
    assert len(samples) == 3 * 3 and all(s["cpu"] == 0 for s in samples)


def test_env_reports_the_system():
    _rc, (env,), _ = run(AGENT, "--env")
    for key in (
        "kernel",
        "cpu_model",
        "cpus_online",
        "cpuid_hypervisor_bit",
        "clocksource",
        "thp_enabled",
        "mitigations",
        "hypervisor_vendor",
        "systemd_detect_virt",
        "tmpdir",
        "tmpdir_fs",
        "sh",
    ):
        assert key in env
    assert env["tmpdir"] == "/tmp" and env["sh"] == os.path.realpath("/bin/sh")


FS_NAMES = {
    0x01021994: "tmpfs",
    0xEF53: "ext2/3/4",
    0x58465342: "xfs",
    0x9123683E: "btrfs",
    0x794C7630: "overlay",
    0x01021997: "9p",
    0x65735546: "fuse",
    0x6969: "nfs",
}


@pytest.mark.parametrize("where", ["tmp_path", "/dev/shm", "/proc"])
def test_env_names_the_tmpdir_filesystem(tmp_path, where):
    d = str(tmp_path) if where == "tmp_path" else where
    if not os.path.isdir(d):
        pytest.skip(f"no {d} here")
    magic = int(subprocess.run(["stat", "-f", "-c", "%t", d], capture_output=True, text=True, check=True).stdout, 16)
    rc, (env,), err = run(AGENT, "--env", "--tmpdir", d)
    assert rc == 0, err
    assert env["tmpdir"] == d and env["tmpdir_fs"] == FS_NAMES.get(magic, hex(magic))


def test_pi_self_checks_its_digits():
    rc, lines, _ = run(AGENT, "run", "pi", "--samples", "1", "--iters", "1")
    s = [line for line in lines if line["type"] == "sample"][-1]
    assert rc == 0 and s["tsc_per_op"] > 0


BAD_ARGS = [
    [],
    ["run"],
    ["run", "nope"],
    ["frobnicate"],
    ["run", "getppid", "--bogus", "1"],
    ["run", "getppid", "--samples", "x"],
    ["run", "getppid", "--samples", ""],
    ["run", "getppid", "--samples"],
    ["run", "getppid", "--samples", "0"],
    ["run", "getppid", "--samples", "-3"],
    ["run", "getppid", "--samples", " 3"],
    ["run", "getppid", "--samples", "3x"],
    ["run", "getppid", "--warmup", ""],
    ["run", "getppid", "--min-time-ms", "3600001"],
    ["run", "getppid", "--iters", "0"],
    ["run", "getppid", "--iters", str((1 << 40) + 1)],
    ["run", "getppid", "--iters", "1" + "0" * 30],
    ["run", "getppid", "--parallel", "257"],
    ["run", "getppid", "--max-sample-ms", "-1"],
    ["run", "getppid", "--cpu", "1024"],
    ["run", "getppid", "--cpu", str(os.cpu_count() + 7)],
    ["run", "stat", "--tmpdir", "/nonexistent/dir"],
    ["run", "stat", "--tmpdir", "/etc/passwd"],
    ["run", "stat", "--tmpdir", ""],
    ["run", "stat", "--tmpdir", "/" * 4000],
    ["--env", "--tmpdir", "/nonexistent/dir"],
    ["--env", "--tmpdir"],
    ["--env", "--bogus"],
    *[
        ["run", "getppid", "--inject", v]
        for v in ["0", "100.5", "-5", "nan", "inf", "1e1", "0x10", " 5", "5%", "", "1.2.3", "."]
    ],
    ["run", "getppid", "--inject"],
    ["run", "getppid", "--duration-ms", "0"],
    ["run", "getppid", "--duration-ms", "5", "--samples", "0"],
    ["run", "getppid", "--ref-steps", "-1"],
    ["run", "getppid", "--ref-steps", "99999999999"],
]


@pytest.mark.parametrize("args", BAD_ARGS, ids=lambda a: " ".join(a)[:60] or "none")
def test_bad_arguments_exit_2_with_one_line(args):
    p = subprocess.run([AGENT, *args], capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and p.stdout == ""
    assert len(p.stderr.splitlines()) == 1 and p.stderr.startswith("vmtax-agent: ")


@pytest.mark.parametrize("name,cap", [("page_fault", 32768), ("page_fault_file", 16384)])
def test_iters_over_the_cap_is_refused_naming_it(name, cap):
    p = subprocess.run([AGENT, "run", name, "--iters", str(cap + 1)], capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and p.stdout == ""
    assert f"{name} runs at most {cap} iterations per sample" in p.stderr
    rc, lines, err = run(AGENT, "run", name, "--iters", str(cap), "--samples", "1")
    assert rc == 0 and lines[-1]["type"] == "done", err


@pytest.mark.parametrize("parallel", ["1", "2"])
def test_iters_that_would_run_for_hours_are_refused(parallel):
    p = subprocess.run(
        [AGENT, "run", "mmap", "--iters", "10000000000", "--parallel", parallel],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 2 and p.stdout == ""
    assert len(p.stderr.splitlines()) == 1 and "--max-sample-ms 60000" in p.stderr


def test_max_sample_ms_bounds_a_sample_given_by_iters():
    # getppid's 10 calls take well over 1 ns, so 10^9 of them last more than 1 s
    args = ["run", "getppid", "--iters", "1000000000", "--max-sample-ms", "1000"]
    p = subprocess.run([AGENT, *args], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "--max-sample-ms 1000" in p.stderr
    rc, lines, err = run(AGENT, "run", "getppid", "--iters", "100", "--max-sample-ms", "1000", "--samples", "1")
    assert rc == 0 and [line["iters"] for line in lines if line["type"] == "sample"] == [100, 100], err
    # 0: no probe -- the caller (vmtax, reusing its first process's calibration) vouches for --iters
    rc, lines, err = run(AGENT, "run", "getppid", "--iters", "100", "--max-sample-ms", "0", "--samples", "1")
    assert rc == 0 and [line["iters"] for line in lines if line["type"] == "sample"] == [100, 100], err


def _stepped(name: str, iters: int, samples: int, *extra: str) -> tuple[subprocess.Popen, Iterator[dict]]:
    """An agent that takes a sample of `name` at each go line (--step), pinned to CPU 0."""
    argv = [AGENT, "run", name, "--samples", str(samples), "--warmup", "2", "--iters", str(iters)]
    argv += ["--max-sample-ms", "0", "--cpu", "0", "--step", *extra]
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
    assert p.stdout is not None
    lines = (json.loads(raw) for raw in p.stdout)
    while next(lines)["type"] != "ready":
        pass
    return p, lines


def test_a_warm_line_runs_an_untimed_sample_before_the_next_go():
    """lockstep warms each turn: "warm" runs a sample's iterations and
    prints nothing; the go after it prints the one sample.  Four warms
    before a ~40 ms sample cost the process about five samples of CPU."""
    rc, lines, err = run(AGENT, "run", "getppid", "--samples", "1", "--min-time-ms", "40", "--cpu", "0")
    assert rc == 0, err
    iters = next(line["iters"] for line in lines if line["type"] == "calibration")
    p, msgs = _stepped("getppid", iters, 2, "--warmup", "0")
    assert p.stdin is not None
    before = cpu_seconds([p.pid])
    p.stdin.write("warm\nwarm\nwarm\nwarm\ngo\n")
    p.stdin.flush()
    m = next(msgs)
    assert m["type"] == "sample" and m["seq"] == 0, m
    spent = cpu_seconds([p.pid]) - before
    assert spent > 3 * m["value"] * m["ops"] / 1e9, (spent, m)
    p.stdin.write("warm\n")  # then the end of its input: an error, not a sample
    p.stdin.close()
    assert p.wait(timeout=30) != 0
    assert [m["type"] for m in msgs] == ["error"]


@pytest.mark.parametrize("name", ["rdtsc", "getppid", "page_fault_file"])
def test_inject_slows_every_operation_down(name):
    """--inject 50 adds half an operation's time: two processes, one with it,
    take ~2 ms samples by turns (lockstep, the order of each pair by a coin),
    and the fastest tenth of its samples is about 1.5 times the other's (this
    host's speed moves between runs and within milliseconds: only samples
    side by side compare, and a thread that breaks into one is no operation's;
    the injection that sized itself from untimed batches made page_fault_file
    faster, not slower)."""
    rc, lines, err = run(AGENT, "run", name, "--samples", "1", "--min-time-ms", "2", "--cpu", "0")
    assert rc == 0, err
    iters = next(line["iters"] for line in lines if line["type"] == "calibration")
    rounds, rng = 40, random.Random(7)
    sides = [_stepped(name, iters, rounds), _stepped(name, iters, rounds, "--inject", "50")]
    got: list[list[dict]] = [[], []]
    for _ in range(rounds + 2):
        for k in rng.sample([0, 1], 2):
            p, msgs = sides[k]
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
            m = next(msgs)
            while m["type"] != "sample":
                assert m["type"] != "error", m
                m = next(msgs)
            if not m["warmup"]:
                got[k].append(m)
    for p, _ in sides:
        assert p.stdin is not None
        p.stdin.close()
        assert p.wait(timeout=30) == 0
    plain, injected = got
    assert len(plain) == len(injected) == rounds
    assert all("inject_pct" not in s for s in plain) and all(s["inject_pct"] == 50 for s in injected)

    def low(side: list[dict]) -> float:  # a side's fastest tenth: the samples no other thread broke into
        return statistics.quantiles([s["value"] for s in side], n=10)[0]

    ratio = low(injected) / low(plain)
    assert 1.3 < ratio < 1.7, (ratio, [s["value"] for s in plain], [s["value"] for s in injected])


def test_help_and_a_good_tmpdir_are_accepted(tmp_path):
    p = subprocess.run([AGENT, "--help"], capture_output=True, text=True)
    assert p.returncode == 0 and "--max-sample-ms" in p.stdout and "--inject" in p.stdout
    rc, lines, err = run(AGENT, "run", "stat", "--tmpdir", str(tmp_path), "--iters", "2")
    assert rc == 0 and lines[-1]["type"] == "done", err


def test_harness_unit_tests():
    from conftest import REPO

    p = subprocess.run([REPO / "agent" / "build" / "test_harness"], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    assert " 0 failed" in p.stdout


# -- the temporary files of the file benchmarks ----------------------------------------------
FILE_BENCHES = ["stat", "open_close", "mmap", "page_fault_file"]
OLD_NAMES = ["vmtax-stat-{}", "vmtax-mmap-{}"]  # the predictable names of old agents


def _plant_symlinks(where, victim, count=2000):
    """Symlinks at the old predictable names, for the next `count` PIDs."""
    with open("/proc/sys/kernel/ns_last_pid") as f:
        first = int(f.read()) + 1
    for pid in range(first, first + count):
        for name in OLD_NAMES:
            (where / name.format(pid)).symlink_to(victim)
    return range(first, first + count)


@pytest.mark.parametrize("name", FILE_BENCHES)
def test_planted_symlinks_are_never_followed(tmp_path, name):
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    shared = tmp_path / "shared"
    shared.mkdir()
    pids = _plant_symlinks(shared, victim)
    p = subprocess.Popen(
        [AGENT, "run", name, "--samples", "1", "--warmup", "0", "--min-time-ms", "1", "--tmpdir", str(shared)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out, err = p.communicate(timeout=60)
    assert p.pid in pids, "the agent's PID fell outside the planted range: inconclusive"
    assert p.returncode == 0, err
    assert json.loads(out.splitlines()[-1])["type"] == "done"
    assert victim.read_text() == "precious\n"
    assert all(e.is_symlink() for e in shared.iterdir())  # nothing of the agent's left


@pytest.mark.parametrize("parallel", ["1", "2"])
@pytest.mark.parametrize("name", FILE_BENCHES)
def test_tmpdir_is_left_empty_after_a_run(tmp_path, name, parallel):
    rc, lines, err = run(
        AGENT, "run", name, "--iters", "2", "--samples", "1", "--parallel", parallel, "--tmpdir", str(tmp_path)
    )
    assert rc == 0 and lines[-1]["type"] == "done", err
    assert list(tmp_path.iterdir()) == []


def _wait_empty(d, timeout=5.0):
    end = time.monotonic() + timeout
    while list(d.iterdir()) and time.monotonic() < end:
        time.sleep(0.05)
    return list(d.iterdir())


@pytest.mark.parametrize(
    "sig,name,parallel",
    [
        *[(signal.SIGTERM, n, "1") for n in FILE_BENCHES],
        (signal.SIGINT, "stat", "1"),
        (signal.SIGHUP, "mmap", "1"),
        (signal.SIGTERM, "open_close", "2"),
    ],
)
def test_tmpdir_is_left_empty_after_a_signal(tmp_path, sig, name, parallel):
    p = subprocess.Popen(
        [
            AGENT,
            "run",
            name,
            "--samples",
            "1000",
            "--min-time-ms",
            "100",
            "--parallel",
            parallel,
            "--tmpdir",
            str(tmp_path),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        ready = 0
        for line in p.stdout:  # every instance has set up and calibrated
            ready += json.loads(line)["type"] == "calibration"
            if ready == int(parallel):
                break
        assert list(tmp_path.iterdir()), "the benchmark made no private directory"
        p.send_signal(sig)
        p.communicate(timeout=30)
    finally:
        p.kill()
        p.wait()
    assert p.returncode == -sig
    assert _wait_empty(tmp_path) == []


# -- the sanitizer sweep: every benchmark, long samples and extreme --iters -------------------
def _caps():
    """Iteration caps, as the agent states them when --iters passes one."""
    caps = {}
    for name in NAMES:
        p = subprocess.run(
            [AGENT, "run", name, "--iters", str(1 << 40), "--max-sample-ms", "1"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        if "iterations per sample" in p.stderr:
            caps[name] = int(p.stderr.split(" runs at most ")[1].split()[0])
    return caps


CAPS = _caps()


def _sweep_runs(name):
    long_sample = ["--min-time-ms", "300", "--samples", "1", "--warmup", "0"]
    runs = [long_sample, ["--iters", "2", "--parallel", "2", "--inject", "100", "--samples", "1"]]
    absurd = [10**10, 1 << 40]
    if name in CAPS:
        runs.append(["--iters", str(CAPS[name]), "--samples", "1", "--warmup", "0"])
        absurd += [CAPS[name] + 1, CAPS[name] * 10]
    return runs + [["--iters", str(n), "--samples", "1"] for n in absurd]


def _clean(args, p, out, err):
    """Exit 0 with the protocol's last line, or a clean refusal: exit 2 and one line."""
    assert "Sanitizer" not in err and "runtime error" not in err, (args, err)
    assert p.returncode in (0, 2), (args, p.returncode, err)
    if p.returncode == 2:
        assert out == "" and len(err.splitlines()) == 1, (args, err)
    else:
        assert json.loads(out.splitlines()[-1])["type"] == "done", (args, out, err)


@pytest.mark.parametrize("name", NAMES)
def test_sanitizer_sweep(name, tmp_path):
    """Under ASan/UBSan: a long sample, --iters at the cap and far past it, and absurdly large
    --iters; every run at once (they measure nothing here)."""
    procs = []
    try:
        for args in _sweep_runs(name):
            cmd = [AGENT_SAN, "run", name, "--tmpdir", str(tmp_path), *args]
            procs.append((args, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)))
        for args, p in procs:
            out, err = p.communicate(timeout=60)
            _clean(args, p, out, err)
    finally:  # a failure leaves nothing running
        for _, p in procs:
            p.kill()
            p.wait()
    assert list(tmp_path.iterdir()) == []


def test_caps_are_found():
    assert CAPS == {"page_fault": 32768, "page_fault_file": 16384}


@pytest.mark.parametrize("name", FILE_BENCHES)
def test_sanitizer_with_the_longest_tmpdir(tmp_path, name):
    deep = tmp_path
    while len(str(deep)) < 2900:  # --tmpdir takes up to 3000 bytes
        deep = deep / ("d" * min(200, 2900 - len(str(deep))))
    deep.mkdir(parents=True)
    p = subprocess.run(
        [AGENT_SAN, "run", name, "--tmpdir", str(deep), "--iters", "2", "--samples", "1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    _clean(["long tmpdir"], p, p.stdout, p.stderr)
    assert p.returncode == 0 and list(deep.iterdir()) == []


@pytest.mark.parametrize("parallel", ["1", "3"])
def test_go_holds_every_instance_until_the_go_line(parallel):
    """--go: calibrated instances wait at the barrier; nothing is timed
    before the go line, and --duration-ms then ends every instance's
    samples that long after it."""
    p = subprocess.Popen(
        [
            AGENT,
            "run",
            "getppid",
            "--iters",
            "100",
            "--parallel",
            parallel,
            "--warmup",
            "1",
            "--duration-ms",
            "300",
            "--go",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    first = [json.loads(p.stdout.readline()) for _ in range(int(parallel) + 1)]
    assert [m["type"] for m in first] == ["calibration"] * int(parallel) + ["ready"]
    time.sleep(0.3)
    t0 = time.monotonic()
    p.stdin.write("go\n")
    p.stdin.close()
    rest = [json.loads(line) for line in p.stdout]
    took = time.monotonic() - t0
    assert p.wait() == 0 and rest[-1]["type"] == "done"
    timed = [m for m in rest if m["type"] == "sample" and not m["warmup"]]
    assert {m["instance"] for m in timed} == set(range(int(parallel)))
    assert len(timed) > 3 * int(parallel) and 0.3 <= took < 3
    for i in range(int(parallel)):  # the samples tile the time from the go to the last one's end
        tiled = sum(m["value"] * m["ops"] for m in rest if m["type"] == "sample" and m["instance"] == i) / 1e9
        assert 0.3 * 0.9999 <= tiled <= took  # (each value is printed to 1e-3 ns: the sum rounds a little)


def test_go_without_its_line_is_an_error():
    for given in ("", "stop\n"):
        p = subprocess.run(
            [AGENT, "run", "getppid", "--iters", "10", "--go"], input=given, capture_output=True, text=True, timeout=30
        )
        assert p.returncode == 3 and '"type":"error"' in p.stdout and "go" in p.stderr


def test_the_agents_metric_names_are_the_registrys():
    """Every name the agent can put in a sample's metrics is a target-side
    metric of the registry, and the other way round: a typo on either side
    would make a counter vanish silently (agent.target_metrics drops names
    it does not know)."""
    from vmtax.metrics import METRICS

    out = subprocess.run([AGENT, "--list-metrics"], capture_output=True, text=True, check=True).stdout
    doc = json.loads(out)
    assert doc["schema"] == 1 and doc["type"] == "metrics"
    assert len(doc["names"]) == len(set(doc["names"]))
    assert set(doc["names"]) == {n for n, m in METRICS.items() if m.side == "target"}


def test_every_timed_sample_carries_the_reference_around_it():
    """ref_ns: the reference loop's ns per step right before and after each
    timed sample (the host's state it was taken in); none on a counted
    batch, none with --ref-steps 0, none between tiled samples."""
    rc, lines, _ = run(AGENT, "run", "getppid", "--samples", "3", "--count", "1", "--min-time-ms", "1")
    samples = [line for line in lines if line["type"] == "sample"]
    timed = [line for line in samples if not line.get("counting")]
    assert rc == 0 and len(timed) == 4 and len(samples) == 5
    for line in timed:
        before, after = line["ref_ns"]
        assert 0 < before < 1000 and 0 < after < 1000
        assert 0.5 < before / after < 2  # the same loop, microseconds apart
    assert "ref_ns" not in next(line for line in samples if line.get("counting"))
    for args in (("--ref-steps", "0"), ("--duration-ms", "20")):
        rc, lines, _ = run(AGENT, "run", "getppid", "--samples", "2", "--min-time-ms", "1", *args)
        assert rc == 0 and not any("ref_ns" in line for line in lines if line["type"] == "sample"), args


@pytest.mark.e2e
@pytest.mark.parametrize("name", ["getppid", "divzero", "segv"])
def test_trace_marks_leave_the_counted_batches_whole(name):
    """--trace-marks (a #DE stepped over, a CPUID of the marker's leaf)
    around each counted batch, under the sanitizers: the process survives
    the markers, a benchmark with a SIGFPE or SIGSEGV handler of its own
    keeps it, and every counted batch is reported."""
    rc, msgs, err = run(AGENT_SAN, "run", name, "--samples", "0", "--count", "3", "--trace-marks", "--min-time-ms", "5")
    assert rc == 0, err
    counted = [m for m in msgs if m["type"] == "sample" and m.get("counting")]
    assert len(counted) == 3 and all(m["ops"] > 0 for m in counted)
    assert msgs[-1]["type"] == "done"
