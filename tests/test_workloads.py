"""Workloads: parsers against real captured output of the Debian 12 tools,
the registry and selection, provisioning, and the runner's handling of
a workload (with the fake target: these tests are about the runner)."""

import math
import shutil
import subprocess
from pathlib import Path

import pytest

from helpers import Steps, new_run, run_fake
from vmtax import suite
from vmtax.analysis import analyse
from vmtax.engine.jobs import jobs_of
from vmtax.errors import TargetError, UserError
from vmtax.guest import closure
from vmtax.runner import RunConfig, Runner
from vmtax.store import Store
from vmtax.suite import workloads
from vmtax.suite.workloads import BY_NAME, ParseError
from vmtax.targets import parse_target

DATA = Path(__file__).parent / "data" / "workloads"


def read(name):
    return (DATA / name).read_text()


# -- parsers: real output of sysbench 1.0.20, fio 3.33, dbench 4.0, redis 7.0.15, stress-ng 0.15.06 -------
def test_sysbench_cpu_memory_fileio_mutex_threads():
    assert BY_NAME["sysbench_cpu"].parse(read("sysbench-1.0.20-cpu.txt")) == {"events_per_s": 3607.03}
    assert BY_NAME["sysbench_memory"].parse(read("sysbench-1.0.20-memory.txt")) == {"mib_per_s": 6186.92}
    assert BY_NAME["sysbench_fileio"].parse(read("sysbench-1.0.20-fileio.txt")) == {
        "read_mib_s": 2026.30,
        "written_mib_s": 1350.87,
    }
    assert BY_NAME["sysbench_mutex"].parse(read("sysbench-1.0.20-mutex.txt")) == {"time_s": 0.2794}
    eps = BY_NAME["sysbench_threads"].parse(read("sysbench-1.0.20-threads.txt"))["events_per_s"]
    text = read("sysbench-1.0.20-threads.txt")
    events = int(text.split("total number of events:")[1].split()[0])
    secs = float(text.split("total time:")[1].split()[0].rstrip("s"))
    assert eps == pytest.approx(events / secs)


def test_fio_json():
    out = BY_NAME["fio_randread"].parse(read("fio-3.33-randread.json"))
    assert out["iops"] == pytest.approx(448000.49975)
    assert 0 < out["p99_us"] < 1000
    seq = BY_NAME["fio_seqread"].parse(read("fio-3.33-randread.json"))  # same document shape
    assert seq["mib_per_s"] == pytest.approx(1835010046 / 2**20)


def test_dbench_tbench_redis_stress_ng():
    assert BY_NAME["dbench"].parse(read("dbench-4.0-1.txt")) == {"mb_per_s": 560.775}
    assert BY_NAME["tbench"].parse(read("tbench-4.0-1.txt")) == {"mb_per_s": 204.623}
    assert BY_NAME["redis"].parse(read("redis-benchmark-7.0.15.csv")) == {"set_rps": 43478.26, "get_rps": 45146.73}
    assert BY_NAME["stress_fork"].parse(read("stress-ng-0.15.06-cpu.txt")) == {"ops_per_s": 2552.514606}


def test_iperf3_json_and_sockperf_ping_pong():
    tx = BY_NAME["net_stream_tx"].parse(read("iperf3-3.12.json"))
    assert tx == {"gbit_per_s": pytest.approx(39.53798472506924), "_bytes": 4942594048.0}
    assert BY_NAME["net_rr"].parse(read("sockperf-3.7.txt")) == {
        "tx_per_s": pytest.approx(25821 / 0.550),
        "_tx": 25821.0,
        "p50_us": 20.828,
        "p99_us": 33.282,
    }


def test_compile_time_is_the_uptime_difference_the_script_prints():
    assert BY_NAME["compile_lua"].parse("ar: `u' modifier ignored\nvmtax-compile: 1234.56 1243.01\n") == {
        "seconds": pytest.approx(8.45)
    }


@pytest.mark.parametrize(
    "name,text,says",
    [
        ("compile_lua", "make: *** [Makefile:55: posix] Error 2\n", "no 'vmtax-compile: START END' line"),
        ("net_stream_tx", '{"start": {"version": "iperf 3.99"}, "end": {}}', "iperf 3.99"),
        ("net_stream_tx", '{"start": {}, "end": {}, "error": "unable to connect to server"}', "unable to connect"),
        ("net_rr", "sockperf: == version #4.0 ==\nsockperf: Summary: Round trip is 21 usec\n", "sockperf 4.0"),
        ("sysbench_cpu", "sysbench 2.0.0 (using bundled LuaJIT)\nCPU speed:\n    ev/s: 12\n", "sysbench 2.0.0"),
        ("sysbench_cpu", "", "no sysbench version line"),
        ("fio_randread", "fio: something went wrong\n", "no JSON document"),
        ("fio_randread", '{"fio version": "fio-9.1", "jobs": [{"read": {}}]}', "fio-9.1"),
        ("dbench", "dbench version 5.00\nthroughput: 3 MB/s\n", "dbench 5.00"),
        ("redis", '"op","qps"\n"SET","3"\n', "header with 'test' and 'rps'"),
        ("redis", '"test","rps"\n"SET","3"\n', "no GET row"),
    ],
)
def test_output_of_another_version_gets_one_line_naming_it(name, text, says):
    with pytest.raises(ParseError) as e:
        BY_NAME[name].parse(text)
    assert says in str(e.value) and "\n" not in str(e.value)


# -- the registry ----------------------------------------------------------------------
def test_every_workload_is_well_formed():
    for w in workloads.WORKLOADS:
        assert w.suite in workloads.SUITES and w.tools and w.figures
        assert "\n" not in w.script  # one channel line
        for spec in w.specs():
            assert spec.name.startswith(w.name + ".") and spec.kind == "workload"
            assert spec.direction in ("higher", "lower") and spec.unit


def test_selection_by_suite_workload_or_figure():
    names = lambda specs: [s.name for s in specs]
    default = suite.select()
    assert default and all(s.kind == "micro" for s in default)
    apps = suite.select(["apps"])
    assert "sysbench_cpu.events_per_s" in names(apps) and all(s.suite == "apps" for s in apps)
    assert names(suite.select(None, ["redis"])) == ["redis.set_rps", "redis.get_rps"]
    assert names(suite.select(None, ["redis.get_rps"])) == ["redis.get_rps"]
    assert len(suite.select(["all"])) == len(suite.all_benchmarks())
    with pytest.raises(UserError):
        suite.select(None, ["redi"])
    with pytest.raises(UserError):
        suite.select(["apss"])


def test_jobs_group_a_workloads_figures():
    specs = suite.select(None, ["getppid", "redis", "sysbench_cpu"])
    jobs = jobs_of(specs)
    assert [j.name for j in jobs] == ["getppid", "sysbench_cpu", "redis"]
    assert [s.name for s in jobs[2].specs] == ["redis.set_rps", "redis.get_rps"]


def test_closure_brings_the_loader_and_libraries():
    files = dict(closure(["sh"]))
    exe = shutil.which("sh").lstrip("/")
    assert exe in files
    assert any(name.endswith("ld-linux-x86-64.so.2") for name in files)
    assert any("libc.so" in name for name in files)
    for name, src in files.items():
        assert not name.startswith("/") and src.is_file()


@pytest.mark.skipif(not shutil.which("strace"), reason="strace is not installed (make setup installs it)")
def test_a_trace_finds_what_a_command_opens_and_runs(tmp_path):
    from vmtax.guest import traced

    (tmp_path / "inside").write_text("x")
    files = dict(traced(["/bin/sh", "-c", "cat /etc/os-release ./inside >/dev/null"], str(tmp_path)))
    assert "etc/os-release" in files  # opened, under the name it was opened by
    assert any(n.endswith("bin/cat") for n in files)  # executed, with its libraries and the loader
    assert "lib64/ld-linux-x86-64.so.2" in files and any("libc.so" in n for n in files)
    assert not any("inside" in n for n in files) and "etc/ld.so.cache" not in files
    with pytest.raises(TargetError, match="failed on this host"):
        traced(["/bin/sh", "-c", "exit 3"], str(tmp_path))


@pytest.mark.skipif(
    not (shutil.which("strace") and shutil.which("gcc") and shutil.which("make")),
    reason="strace, gcc and make are needed (make setup installs them)",
)
@pytest.mark.skipif(
    not Path(workloads.LUA_SRC, "src", "lua.c").is_file(),
    reason="the Lua source is not fetched (make setup runs scripts/fetch-sources.sh)",
)
def test_the_toolchain_of_the_compile_is_found_without_the_plugins_it_never_uses():
    files = dict(workloads.lua_toolchain())
    names = " ".join(files)
    for needed in ("/cc1", "bin/as", "bin/ld", "bin/make", "Scrt1.o", "libc.so", "stdio.h", "libgcc.a"):
        assert needed in names, needed
    assert "LLVM" not in names and "libstdc++" not in names  # binutils load LLVM's gold plugin: not the build
    assert sum(src.stat().st_size for src in files.values()) < 100e6
    assert files == dict(workloads.lua_toolchain())  # remembered


@pytest.mark.skipif(not shutil.which("sysbench"), reason="sysbench is not installed")
def test_provisioned_root_runs_the_tool_under_busybox(tmp_path):
    """The closure alone (no host /usr) runs sysbench, with busybox's sh:
    what a guest and a container get."""
    from vmtax.guest import rootfs_dir

    files = workloads.provision(suite.select(None, ["sysbench_cpu"]))
    root = rootfs_dir(files)
    argv = BY_NAME["sysbench_cpu"].argv("/tmp", 1, 1)
    argv[0] = "/bin/sh"
    p = subprocess.run(
        ["unshare", "--mount", "--fork", "chroot", str(root), *argv], capture_output=True, text=True, timeout=60
    )
    if p.returncode != 0 and "unshare" in p.stderr:
        pytest.skip(f"chroot not possible here: {p.stderr.strip()}")
    assert p.returncode == 0, p.stderr
    assert BY_NAME["sysbench_cpu"].parse(p.stdout)["events_per_s"] > 0


# -- the runner with workloads (fake target) ---------------------------------------------
def _run(db, targets, specs, **cfg):
    return run_fake(db, targets, specs, Steps(0.5, start=-0.5), "compare", **{"max_time": 200, **cfg})[1]


def test_one_run_gives_every_figure_and_the_first_is_a_warmup(db):
    specs = suite.select(None, ["sysbench_threads", "getppid"])
    data = _run(db, ["fake", "fake:scale=2,label=b"], specs, min_processes=3)
    wl = [s for s in data.samples if s.benchmark.startswith("sysbench_threads.")]
    per_process = {}
    for s in wl:
        per_process.setdefault((s.target, s.process), []).append(s)
    assert all(len(v) == 1 for v in per_process.values())  # one figure: one sample per run
    for target in ("fake", "fake:scale=2,label=b"):
        mine = sorted((s for s in wl if s.target == target), key=lambda s: s.process)
        assert mine[0].warmup and not any(s.warmup for s in mine[1:])
    _ms, cs = analyse(data)
    c = next(c for c in cs if c.benchmark.name == "sysbench_threads.events_per_s")
    assert c.ratio == pytest.approx(0.5, rel=0.05)  # the candidate is twice as slow: half the rate


def test_a_workload_that_fails_in_one_target_is_an_error_there_only(db):
    specs = suite.select(None, ["sysbench_fileio"])  # two figures from one run
    bad, garbled = "fake:crash=sysbench_fileio,label=b", "fake:garbage=sysbench_fileio,label=c"
    data = _run(db, ["fake", bad, garbled], specs, min_processes=3)
    for figure in ("sysbench_fileio.read_mib_s", "sysbench_fileio.written_mib_s"):
        assert data.outcomes[(bad, figure)][0] == "error"
        assert "cannot run here" in data.outcomes[(bad, figure)][1]
        assert "no sysbench version line" in data.outcomes[(garbled, figure)][1]
        assert data.outcomes[("fake", figure)][0] in ("precision", "budget")
    ms, _ = analyse(data)
    assert all(m.summary.n >= 3 for m in ms if m.target == "fake")


def test_a_workload_whose_tool_this_host_lacks_is_skipped_with_the_reason(db, monkeypatch):
    monkeypatch.setattr(workloads.shutil, "which", lambda name: None)
    data = _run(db, ["fake", "fake:label=b"], suite.select(None, ["sysbench_cpu"]), min_processes=3)
    how, why = data.outcomes[("fake:label=b", "sysbench_cpu.events_per_s")]
    assert how == "skipped" and "apt install sysbench" in why
    assert not data.samples


def test_a_disk_workload_is_skipped_where_the_scratch_directory_is_a_tmpfs(db, monkeypatch):
    from vmtax.targets.fake import FakeTarget

    monkeypatch.setattr(FakeTarget, "on_disk", lambda self: self.name == "fake:label=b")
    data = _run(db, ["fake", "fake:label=b"], suite.select(None, ["disk_randread"]), min_processes=3)
    how, why = data.outcomes[("fake", "disk_randread.iops")]
    assert how == "skipped" and "needs direct I/O" in why and "qemu:disk=virtio" in why
    assert data.outcomes[("fake:label=b", "disk_randread.iops")][0] != "skipped"


def test_a_network_workload_is_skipped_where_the_target_has_no_way_to_the_host(db):
    data = _run(db, ["fake"], suite.select(None, ["net_rr"]), min_processes=3)
    how, why = data.outcomes[("fake", "net_rr.tx_per_s")]
    assert how == "skipped" and "needs a peer on the host" in why and "qemu:nic=virtio" in why


@pytest.mark.skipif(
    not (shutil.which("sockperf") and shutil.which("iperf3") and shutil.which("ss")),
    reason="sockperf, iperf3 and ss are needed (make setup installs them)",
)
@pytest.mark.parametrize("name", ["net_rr", "net_stream_tx"])
def test_a_peer_listens_on_loopback_alone(name):
    """Each server vmtax starts binds the one address its target reaches
    (here the bare machine's loopback), never a wildcard address."""
    from vmtax.peers import free_port, start_peer
    from vmtax.proc import kill_group

    port = free_port()
    p = start_peer(BY_NAME[name], port, None)
    try:
        lines = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True).stdout.split("\n")
        local = [line.split()[3] for line in lines if line.strip()]
        assert local == [f"127.0.0.1:{port}"], local
    finally:
        kill_group(p)


@pytest.mark.skipif(not shutil.which("sockperf"), reason="sockperf is not installed (make setup installs it)")
def test_a_peer_listens_before_the_run_and_is_gone_after():
    from vmtax.peers import free_port, listening, start_peer
    from vmtax.proc import kill_group

    port = free_port()
    p = start_peer(BY_NAME["net_rr"], port, None)
    try:
        assert listening(port) and p.poll() is None
    finally:
        kill_group(p)
    assert p.poll() is not None and not listening(port)
    gone = workloads.Workload("x", "net", "d", "p", ("sh",), "true", (), lambda t: {}, peer="sh -c 'exit 3' {port}")
    with pytest.raises(TargetError, match="exited at once"):
        start_peer(gone, free_port(), None)


@pytest.mark.skipif(not shutil.which("strace"), reason="strace is not installed (make setup installs it)")
def test_a_trace_that_runs_too_long_is_ended_whole(tmp_path):
    from vmtax.guest import traced

    marker = f"vmtax-trace-test-{tmp_path.name}"
    with pytest.raises(TargetError, match="did not finish within 1 s"):
        traced(["/bin/sh", "-c", f"sleep 30 & exec -a {marker} sleep 30"], str(tmp_path), timeout=1)
    left = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout.split()
    assert not left


def test_a_workloads_next_block_is_judged_without_its_warmup_runs(db):
    """The first block of a workload holds a warmup run per target besides
    the timed one: twice as long as the blocks after it.  Judged by it, a
    block that fits the budget was not begun (a 40 s guest NIC test ran one
    block where two fitted); the run still keeps to the budget."""
    from vmtax.targets.fake import FakeTarget

    t = [0.0]
    store = Store(db)
    targets = [parse_target("fake"), parse_target("fake:scale=2,label=b")]
    for target in targets:

        def slow(argv, timeout, target=target):
            t[0] += 10.0  # every run of the tool takes 10 s
            return FakeTarget.run_tool(target, argv, timeout)

        target.run_tool = slow
    specs = suite.select(None, ["sysbench_threads"])
    new_run(store, targets, specs)
    Runner(
        RunConfig(max_time=70, min_processes=3, precision=1e-6), specs, targets, store, "r", clock=lambda: t[0]
    ).run()
    # block 0: 2 x (warmup + timed) = 40 s; a plain block is 20 s: one more fits in 70 s, two do not
    timed = [s for s in store.load("r").samples if not s.warmup]
    assert sorted({s.block for s in timed}) == [0, 1] and t[0] <= 70, t[0]


# -- a budget buys the rows it can finish (issue 44 item 2) ---------------------------------
SYSBENCH = ["sysbench_cpu", "sysbench_memory", "sysbench_threads", "sysbench_fileio"]  # time-based runs


def _tool_runs_of(seconds: float, targets: list[str], clock: list[float]):
    """Targets whose every tool run takes `seconds` of the clock."""
    from vmtax.targets.fake import FakeTarget

    out = [parse_target(t) for t in targets]
    for target in out:

        def slow(argv, timeout, target=target):
            clock[0] += seconds
            return FakeTarget.run_tool(target, argv, timeout)

        target.run_tool = slow
    return out


def test_a_budget_too_small_for_every_row_measures_the_rows_it_can_finish_and_names_the_others(db):
    """Four rows on three targets, each tool run 10 s: two blocks of a row
    (a warmup and a timed run per target, then a timed run each) cost 90 s.
    5 minutes bought one block of every row and no ratio; they buy two
    blocks of the first three rows in the order given, and the last is
    left out, with the budget that would add it."""
    t = [0.0]
    store = Store(db)
    targets = _tool_runs_of(10.0, ["fake", "fake:scale=2,label=b", "fake:scale=3,label=c"], t)
    specs = suite.select(None, SYSBENCH)
    new_run(store, targets, specs)
    notes = []

    class Notes:
        def update(self, *a, **k):
            pass

        def finished(self, *a):
            pass

        def close(self):
            pass

        def note(self, text):
            notes.append(text)

    Runner(
        RunConfig(max_time=300, min_processes=3, precision=1e-6),
        specs,
        targets,
        store,
        "r",
        progress=Notes(),
        clock=lambda: t[0],
    ).run()
    data = store.load("r")
    _, cs = analyse(data)
    by_row = {}
    for c in cs:
        by_row.setdefault(c.benchmark.name.split(".")[0], []).append(c)
    assert sorted(by_row) == sorted(SYSBENCH[:3]), sorted(by_row)  # the first three, in the order given
    assert all(math.isfinite(c.ratio) and c.ratio > 0 for cs_ in by_row.values() for c in cs_)
    for name in SYSBENCH[:3]:  # two blocks at least on every target
        assert all(
            len(
                {
                    s.block
                    for s in data.samples
                    if s.benchmark.startswith(name + ".") and s.target == t.name and not s.warmup
                }
            )
            >= 2
            for t in data.targets
        ), name
    for name in SYSBENCH[3:]:
        for spec in (s for s in specs if s.name.startswith(name + ".")):
            for target in data.targets:
                how, why = data.outcomes[(target.name, spec.name)]
                assert how == "budget" and why.startswith("left out:") and "--max-time" in why, (spec.name, why)
    assert not [s for s in data.samples if s.benchmark.split(".")[0] in SYSBENCH[3:]]  # not begun
    assert t[0] <= 300, t[0]
    said = [n for n in notes if "left out" in n]
    assert len(said) == 1 and all(name in said[0] for name in SYSBENCH[3:]) and "--max-time" in said[0], notes


def test_the_time_before_the_first_measurement_counts_against_the_budget(db):
    """Targets that took 13.6 s to start: a 20 s budget has 6.4 s left for
    the rows (`run --target local --suite apps --max-time 20s` ran 38.6 s)."""
    t = [0.0]
    store = Store(db)
    targets = _tool_runs_of(1.0, ["fake"], t)
    specs = suite.select(None, SYSBENCH)
    new_run(store, targets, specs, "run")
    Runner(
        RunConfig(max_time=20, min_processes=3, precision=1e-6),
        specs,
        targets,
        store,
        "r",
        clock=lambda: t[0],
        spent_before=13.6,
    ).run()
    assert t[0] + 13.6 <= 20 + 0.5, t[0]
