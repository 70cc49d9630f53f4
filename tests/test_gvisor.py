"""gVisor (runsc) as the container target's runtime, before anything
starts: what a runsc offers, the options checked (one line, exit 2,
nothing started), the counters the agent has inside it, and the host
probe's parts (the Sentry's and the Gofer's own counts)."""

import os
import subprocess

import pytest

from helpers import vmtax, wait_until
from vmtax.errors import UserError
from vmtax.targets import gvisor, parse_target

OLD_FLAGS = """  -platform string
    \tspecifies which platform to use: ptrace (default), kvm. (default "ptrace")
  -platform_device_path string
"""
NEW_FLAGS = """  -platform string
    \tspecifies which platform to use: systrap (default), ptrace, kvm. (default "systrap")
"""


def fake_runtime(tmp_path, name: str, version: str, flags: str = OLD_FLAGS) -> str:
    """An executable that answers --version and `flags` as a runtime does
    (it starts nothing: every test here ends before a start)."""
    path = tmp_path / name
    (tmp_path / f"{name}.flags").write_text(flags)
    path.write_text(
        "#!/bin/sh\n"
        f'[ "$1" = --version ] && {{ echo "{version}"; echo "spec: 1.0.2-dev"; exit 0; }}\n'
        f'[ "$1" = flags ] && {{ cat "{tmp_path / name}.flags" >&2; exit 0; }}\n'
        "exit 1\n"
    )
    path.chmod(0o755)
    gvisor.runsc.cache_clear()
    return str(path)


def test_the_platforms_a_runsc_offers_are_read_from_its_flags():
    assert gvisor.parse_platforms(OLD_FLAGS) == (("ptrace", "kvm"), "ptrace")
    assert gvisor.parse_platforms(NEW_FLAGS) == (("systrap", "ptrace", "kvm"), "systrap")
    assert gvisor.parse_platforms("no such flag") == ((), "")


@pytest.mark.parametrize(
    "opts,needle",
    [
        ("platform=xen", "platform must be one of systrap, ptrace, kvm"),
        ("platform=systrap", "runsc 0.0~20221219.0 is too old for it (it offers ptrace, kvm"),
        ("net=bridge", "net=bridge with gVisor"),
        ("net=slirp4netns", "net=slirp4netns with gVisor"),
    ],
)
def test_bad_gvisor_options_are_one_line_before_anything_starts(tmp_path, opts, needle):
    runsc = fake_runtime(tmp_path, "runsc", "runsc version 0.0~20221219.0")
    with pytest.raises(UserError, match=needle.replace("(", r"\(")):
        parse_target(f"container:runtime={runsc},{opts}")


def test_a_newer_runsc_offers_systrap_and_defaults_to_it(tmp_path):
    runsc = fake_runtime(tmp_path, "runsc", "runsc version release-20240422.0", NEW_FLAGS)
    t = parse_target(f"container:runtime={runsc}")
    assert t.platform == "systrap" and t.agent_cpu() is None
    assert parse_target(f"container:runtime={runsc},platform=ptrace").platform == "ptrace"
    assert gvisor.runtime_flags("ptrace", "none") == [
        "--runtime-flag",
        "network=none",
        "--runtime-flag",
        "platform=ptrace",
    ]


def test_gvisor_options_with_another_runtime_are_refused(tmp_path):
    runc = fake_runtime(tmp_path, "myrunc", "runc version 1.1.5")
    with pytest.raises(UserError, match="platform= is gVisor's option"):
        parse_target(f"container:runtime={runc},platform=ptrace")
    t = parse_target(f"container:runtime={runc}")
    assert t.platform is None  # runc: the agent pins itself to the host CPU it sees
    t.pin(1)
    assert t.agent_cpu() == 1


def test_bad_gvisor_input_on_the_command_line_is_exit_2_and_one_line(tmp_path, capsys):
    runsc = fake_runtime(tmp_path, "runsc", "runsc version 0.0~20221219.0")
    db = tmp_path / "r.db"
    assert vmtax("compare", "local", f"container:runtime={runsc},platform=systrap", db=db) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "too old" in err and "Traceback" not in err
    assert not db.exists()  # refused before the store was opened: nothing begun
    assert vmtax("compare", "local", "container:platform=ptrace", db=db) == 2
    assert "platform= is gVisor's option" in capsys.readouterr().err


def test_runsc_not_installed_is_left_out_by_skip_unavailable_else_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))  # no runsc on it
    t = parse_target("container:runtime=runsc")
    ok, why = t.usable()
    assert not ok and "runsc is not installed" in why
    with pytest.raises(UserError, match="runsc is not installed"):
        t.check()
    with pytest.raises(UserError, match="platform must be one of"):
        parse_target("container:runtime=runsc,platform=xen")


def test_the_counters_inside_gvisor_are_said_as_a_fact():
    said = gvisor.counters_inside(
        {
            "page_faults": "getrusage (perf: No such device)",
            "context_switches": "getrusage (perf: No such device)",
            "cycles": "not counted: No such device",
        }
    )
    assert said.startswith("getrusage (perf: No such device): page_faults, context_switches")
    assert "not counted (no such counter in gVisor's kernel): cycles" in said
    assert gvisor.counters_inside(None) == "the agent reported no counters"


def test_leftovers_of_a_container_id_are_the_runsc_processes_named_by_it():
    """kill_leftovers ends a runsc process whose arguments carry the full
    id; another program carrying it, or a runsc process without it, is not
    touched (cat waits on its stdin, named as the test asks)."""
    cid = "ab" * 32

    def named(argv0: str, *args: str) -> subprocess.Popen:
        cmd = ["bash", "-c", f'exec -a {argv0} cat - "$@"', "x", *args]
        return subprocess.Popen(cmd, stdin=subprocess.PIPE, stderr=subprocess.DEVNULL)

    ours, other, elsewhere = named("runsc-sandbox", cid), named("cat", cid), named("runsc-gofer", "cd" * 32)
    try:
        named_now = {ours.pid: b"runsc-sandbox", other.pid: b"cat", elsewhere.pid: b"runsc-gofer"}
        wait_until(lambda: all(_cmdline(pid)[:1] == [n] for pid, n in named_now.items()), 5, 0.05)  # exec'd
        gvisor.kill_leftovers("not-an-id")
        gvisor.kill_leftovers(cid)
        ours.wait(timeout=10)
        assert other.poll() is None and elsewhere.poll() is None
    finally:
        for p in (ours, other, elsewhere):
            p.kill()
            p.wait()


def _cmdline(pid: int) -> list[bytes]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().split(b"\0")
    except OSError:
        return []


def test_the_host_probe_counts_a_part_apart():
    from vmtax.hostprobe import HostProbe

    try:
        p = HostProbe(lambda: [os.getpid()], parts={"me": [os.getpid()]})
    except OSError as e:
        pytest.skip(f"no host probe here: {e}")
    try:
        if not p.fds["host_cpu_ns"]:
            pytest.skip(f"perf task clock not counted here: {p.missing}")
        p.enable()
        a = p.read()
        sum(range(200_000))
        b = p.read()
        p.disable()
        assert b["host_cpu_me_ns"] > a["host_cpu_me_ns"] >= 0
        # every thread of this process is the part: its share is the whole, read a moment later
        assert b["host_cpu_me_ns"] - a["host_cpu_me_ns"] > 0.5 * (b["host_cpu_ns"] - a["host_cpu_ns"])
    finally:
        p.close()


def test_explain_reads_gvisors_round_trips_with_its_platform_and_flags_getrusage_zeros():
    """The reading names the platform, the host system calls and context
    switches per operation and the Sentry's and Gofer's share of the host
    CPU; a count inside that gVisor's getrusage leaves at 0 where the
    baseline counts some is said to be gVisor's accounting."""
    from vmtax.model import BenchSpec, Interval, Measurement, Summary
    from vmtax.report import explain

    def s(x: float) -> Summary:
        return Summary(8, Interval(x, x, x), x, 0.0, x, x)

    spec = BenchSpec("page_fault", "kernel", "ns", "lower", "one page fault")
    local = Measurement(spec, "local", "precision", s(2600.0), metrics={"page_faults": s(1.0)})
    gv = Measurement(
        spec,
        "gv",
        "precision",
        s(13000.0),
        metrics={
            "page_faults": s(0.0),
            "host_context_switches": s(2.5),
            "host_syscalls": s(6.0),
            "host_cpu_ns": s(8000.0),
            "host_cpu_sentry_ns": s(6000.0),
            "host_cpu_gofer_ns": s(0.0),
        },
    )
    facts = {
        "local": {"target_kind": "local"},
        "gv": {
            "target_kind": "container",
            "gvisor_platform": "ptrace",
            "counters": {"page_faults": "getrusage (perf: No such device)"},
        },
    }
    said = explain.readings("page_fault", ["local", "gv"], {"local": local, "gv": gv}, facts)
    assert len(said) == 1 and said[0].startswith("gv: gVisor on platform ptrace: ~6 host syscalls and ~2.5 host")
    assert "the Sentry 75%, the Gofer 0%" in said[0] and "PTRACE_SYSEMU" in said[0]
    assert "getrusage gave 0 page faults: gVisor's accounting" in said[0]
    facts["gv"]["gvisor_platform"] = "systrap"
    gv.metrics["host_context_switches"] = s(0.2)
    said = explain.readings("page_fault", ["local", "gv"], {"local": local, "gv": gv}, facts)
    assert "platform systrap" in said[0] and "PTRACE_SYSEMU" not in said[0]  # under one round trip: no story
