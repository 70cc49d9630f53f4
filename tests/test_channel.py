"""The framed channel, against the real vmtax-shell script run on the host
with the real agent (the transport differs in a guest; the framing does not)."""

import subprocess

import pytest

from conftest import AGENT, REPO
from vmtax import proc
from vmtax.errors import TargetError
from vmtax.proc import ChildFailed
from vmtax.targets.channel import Channel

SHELL = REPO / "src" / "vmtax" / "guest" / "vmtax-shell"


@pytest.fixture
def chan(tmp_path):
    log = tmp_path / "console.log"
    p = proc.spawn(
        ["sh", str(SHELL)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={"VMTAX_AGENT_PATH": str(AGENT), "VMTAX_STDERR": str(log), "PATH": "/usr/bin:/bin"},
    )
    c = Channel(p, "shell", log)
    c.wait_ready(10)
    yield c
    proc.kill_group(p)


def test_command_yields_whole_lines_then_stops_at_the_frame(chan):
    lines = list(chan.command("RUN run getppid --samples 3 --warmup 0 --iters 10", 30))
    assert lines[-1].startswith('{"schema":1,"type":"done"')
    assert sum('"sample"' in line for line in lines) == 3
    # the channel is in step for the next command
    assert list(chan.command("PING", 5)) == []


def test_nonzero_status_is_child_failed_with_stderr(chan):
    with pytest.raises(ChildFailed) as e:
        list(chan.command("RUN run nope", 10))
    assert e.value.returncode == 2 and "unknown benchmark" in e.value.stderr


def test_abandoned_answer_is_drained(chan):
    gen = chan.command("RUN run getppid --samples 50 --warmup 0 --iters 10", 30)
    next(gen)
    gen.close()  # consumer stops early
    assert list(chan.command("PING", 5)) == []


def test_timeout_marks_the_channel_broken(chan):
    with pytest.raises(TargetError, match="no answer within"):
        list(chan.command("RUN run fork_sh --samples 1000 --warmup 0 --iters 50", 0.5))
    with pytest.raises(TargetError):
        list(chan.command("PING", 5))


def test_dead_peer_is_a_target_error(tmp_path):
    p = proc.spawn(["sh", "-c", "echo starting; exit 3"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    c = Channel(p, "dying", None)
    with pytest.raises(TargetError, match="went away"):
        c.wait_ready(10)


def _until_ready(gen):
    before = []
    for line in gen:
        before.append(line)
        if '"type":"ready"' in line:
            return before
    raise AssertionError(f"no ready line: {before}")


def test_go_holds_the_agent_at_the_barrier_until_its_go_line(chan):
    gen = chan.command("GO run getppid --iters 10 --samples 2 --warmup 0 --go", 30)
    assert not any('"sample"' in line for line in _until_ready(gen))
    chan.send("go")
    assert sum('"sample"' in line for line in gen) == 2
    assert list(chan.command("PING", 5)) == []  # the agent took its go line and nothing more
    gen = chan.command("GO run getppid --iters 10 --samples 2 --warmup 0 --go", 30)
    _until_ready(gen)
    chan.send("stop")
    with pytest.raises(ChildFailed) as e:
        list(gen)
    assert e.value.returncode == 3
    assert list(chan.command("PING", 5)) == []


def test_wait_holds_a_tool_until_go_and_refuses_anything_else(chan):
    gen = chan.command("WAIT echo hello", 10)
    assert next(gen) == "@@VMTAX-GATE"
    chan.send("go")
    assert list(gen) == ["hello"]
    gen = chan.command("WAIT echo hello", 10)
    assert next(gen) == "@@VMTAX-GATE"
    chan.send("later")
    with pytest.raises(ChildFailed) as e:
        list(gen)
    assert e.value.returncode == 125
    assert list(chan.command("PING", 5)) == []
