"""Input vmtax does not control -- a guest's channel, a target's facts and
labels, the database file it is pointed at -- tried as a hostile user
would.  Each test reproduces a failure found in a review."""

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import AGENT
from reportdata import run
from vmtax import proc
from vmtax.analysis import analyse
from vmtax.cli import main
from vmtax.errors import TargetError
from vmtax.model import BenchSpec
from vmtax.report import html
from vmtax.runner import RunConfig, Runner
from vmtax.store import Store
from vmtax.targets import parse_target
from vmtax.targets.base import Target
from vmtax.targets.channel import Channel
from vmtax.targets.fake import HOSTILE

ESC = "\x1b"
EVIL = f"{ESC}[2J{ESC}]52;c;cGF5bG9hZA=={chr(7)}{ESC}]0;owned{chr(7)}"


def _channel(script: str, tmp_path):
    """A channel to a 'guest' that answers every command with script's output."""
    peer = tmp_path / "peer.sh"
    peer.write_text("echo @@VMTAX-READY\nwhile read -r line; do\n" + script + "\ndone\n")
    p = proc.spawn(["sh", str(peer)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    c = Channel(p, "guest")
    c.wait_ready(10)
    return p, c


def test_a_malformed_end_frame_is_a_target_error_not_a_crash(tmp_path):
    p, c = _channel('echo "@@VMTAX-END abc"', tmp_path)
    try:
        with pytest.raises(TargetError, match="malformed end-of-answer"):
            list(c.command("RUN run getppid", 5))
    finally:
        proc.kill_group(p)


class _Scripted(Target):
    """A target whose 'agent' prints given lines: what a compromised guest
    could.  A Target subclass, so that it has every method the runner may
    call (a duck-typed one went stale when the interface grew)."""

    kind = "scripted"

    def __init__(self, name, lines):
        super().__init__(name, {"counters": "off"})
        self.lines = lines

    def run_agent(self, args, timeout):
        return iter(self.lines)


@pytest.mark.parametrize(
    "line,needle",
    [
        (
            '{"schema":1,"type":"sample","bench":"getppid","unit":"ns","instance":0,"seq":0,"warmup":false,'
            '"iters":10,"ops":10,"value":NaN,"overhead":0,"tsc_per_op":1,"cpu":-1}',
            "malformed",
        ),
        (
            '{"schema":1,"type":"sample","bench":"getppid","unit":"ns","instance":0,"seq":0,"warmup":false,'
            '"iters":10,"ops":10,"value":-5,"overhead":0,"tsc_per_op":1,"cpu":-1}',
            "invalid value",
        ),
        (
            '{"schema":1,"type":"sample","bench":"getppid","unit":"ns","instance":0,"seq":0,"warmup":"no",'
            '"iters":10,"ops":10,"value":5,"overhead":0,"tsc_per_op":1,"cpu":-1}',
            "invalid warmup",
        ),
        (
            '{"schema":1,"type":"sample","bench":"getppid","unit":"ns","instance":0,"seq":0,"warmup":false,'
            '"iters":1e400,"ops":10,"value":5,"overhead":0,"tsc_per_op":1,"cpu":-1}',
            "invalid iters",
        ),
        ('{"schema":1,"type":"calibration","bench":"getppid","iters":"lots"}', "iteration count"),
        ("[" * 100000, "agent output line"),
        (
            '{"schema":1,"type":"sample","bench":"getppid","unit":"ns","instance":0,"seq":0,"warmup":false,'
            '"iters":10,"ops":10,"value":5,"overhead":0,"tsc_per_op":1,"cpu":-1,"ref_ns":[1,-1]}',
            "invalid ref_ns",
        ),
        (
            '{"schema":1,"type":"sample","bench":"getppid","unit":"ns","instance":0,"seq":0,"warmup":false,'
            '"iters":10,"ops":10,"value":5,"overhead":0,"tsc_per_op":1,"cpu":-1,"ref_ns":"fast"}',
            "invalid ref_ns",
        ),
    ],
)
def test_whatever_an_agent_prints_is_recorded_as_its_error(tmp_path, line, needle):
    spec = BenchSpec("getppid", "kernel", "ns", "lower", "d")
    store = Store(tmp_path / "h.db")
    store.new_run("r", "run", "t", "0", {})
    calibrated = (
        []
        if '"calibration"' in line
        else ['{"schema":1,"type":"calibration","bench":"getppid","instance":0,"iters":10}']
    )
    target = _Scripted("evil", calibrated + [line, '{"schema":1,"type":"done","bench":"getppid"}'])
    Runner(RunConfig(max_time=1, min_processes=2), [spec], [target], store, "r").run()
    how, reason = store.load("r").outcomes[("evil", "getppid")]
    assert how == "error" and needle in reason


def test_facts_from_a_guest_are_cleaned():
    from vmtax.agent import clean_facts

    facts = clean_facts({"kernel": "x" * 100000, "nested": {"a": {"b": 1}}, "n": float("nan"), "ok": 3, "list": [1, 2]})
    assert len(facts["kernel"]) == 4096 and facts["n"] is None and facts["ok"] == 3
    assert isinstance(facts["nested"]["a"], str) and isinstance(facts["list"], str)


def test_terminal_output_never_carries_control_sequences(tmp_path, capsys):
    db = tmp_path / "t.db"
    label = f"label=x{EVIL}"
    assert (
        main(["--db", str(db), "compare", "fake", f"fake:scale=2,{label}", "--bench", "getppid", "--max-time", "5s"])
        == 0
    )
    for args in (["show"], ["runs"], ["show", "--all-rows"]):
        main(["--db", str(db), *args])
    out = capsys.readouterr()
    assert ESC not in out.out and ESC not in out.err and "\x07" not in out.out
    assert "\\x1b[2J" in out.out  # shown, not acted on


def test_dollar_signs_in_a_label_are_text_in_the_html(tmp_path):
    for label in ("$x$", r"$\frac{$", "a$b$c$"):
        data = run(names=("local", f"fake:label={label}"))
        page = html.document([(data, *analyse(data))], "vmtax report")
        assert label.replace("$", "") in page.replace("$", "") and "<svg" in page


def test_a_foreign_database_is_refused_and_left_alone(tmp_path, capsys):
    other = tmp_path / "other.db"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE customers (id INTEGER, name TEXT)")
    con.commit()
    con.close()
    before = other.read_bytes()
    for args in (["runs"], ["show"], ["run", "--target", "fake", "--bench", "getppid"]):
        assert main(["--db", str(other), *args]) == 2
        err = capsys.readouterr().err.strip()
        assert "not a vmtax results database" in err and len(err.splitlines()) == 1
    assert other.read_bytes() == before


def test_a_read_only_database_can_be_read(tmp_path, capsys):
    db = tmp_path / "ro.db"
    assert main(["--db", str(db), "run", "--target", "fake:noise=0.001", "--bench", "getppid", "--max-time", "5s"]) == 0
    capsys.readouterr()
    os.chmod(db, 0o444)
    before = db.read_bytes()
    assert main(["--db", str(db), "runs", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["status"] == "complete"
    assert main(["--db", str(db), "show"]) == 0
    assert db.read_bytes() == before


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tiny tmpfs needs root")
def test_a_full_disk_ends_the_run_with_one_line_and_reports_what_was_stored(tmp_path):
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=300k", "tmpfs", str(mnt)]).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        p = subprocess.run(
            [
                sys.executable,
                "-m",
                "vmtax.cli",
                "--db",
                str(mnt / "v.db"),
                "run",
                "--target",
                "fake:noise=0.5",
                "--bench",
                "getppid",
                "--precision",
                "0.001%",
                "--max-time",
                "60s",
                "--samples",
                "20",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert p.returncode == 1, p.stderr
        assert "Traceback" not in p.stderr
        assert "database or disk is full" in p.stderr
        assert "getppid" in p.stdout  # what was stored is reported
    finally:
        subprocess.run(["umount", "-l", str(mnt)])


@pytest.mark.e2e
def test_the_container_root_is_read_only():
    from vmtax.targets.container import ContainerTarget

    ok, why = ContainerTarget.available()
    if not ok:
        pytest.skip(why)
    for engine in ("auto", "unshare"):
        t = parse_target(f"container:engine={engine}")
        with t:
            lines = [
                json.loads(line)
                for line in t.run_agent(
                    ["run", "stat", "--samples", "1", "--warmup", "0", "--iters", "10", "--tmpdir", "/"], 30
                )
            ]
        assert lines[0]["type"] == "skip" and "Read-only file system" in lines[0]["reason"], lines


def test_an_end_frame_with_a_unicode_digit_is_a_target_error(tmp_path):
    p, c = _channel('echo "@@VMTAX-END ²"', tmp_path)  # str.isdigit() says yes, int() says no
    try:
        with pytest.raises(TargetError, match="malformed end-of-answer"):
            list(c.command("RUN run getppid", 5))
    finally:
        proc.kill_group(p)


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_a_hostile_sample_line_is_that_targets_error_and_the_others_are_measured(tmp_path, capsys, kind):
    """Through the CLI, the real runner and a real SQLite file: the line
    comes after a timed sample of the hostile target, which is kept."""
    db, evil = tmp_path / "h.db", f"fake:hostile={kind}"
    assert main(["--db", str(db), "compare", "fake", evil, "--bench", "getppid", "--max-time", "3s"]) == 3
    err = capsys.readouterr().err
    assert "Traceback" not in err
    store = Store(db)
    data = store.load(store.list_runs()[0]["id"])
    how, reason = data.outcomes[(evil, "getppid")]
    assert how == "error" and reason.startswith("sample line with an invalid ") and "\n" not in reason
    assert data.outcomes[("fake", "getppid")][0] != "error"
    by = {t: sum(1 for s in data.samples if s.target == t and not s.warmup) for t in ("fake", evil)}
    assert by["fake"] >= 3 and by[evil] >= 1


def test_sizing_survives_times_per_iteration_far_apart(tmp_path):
    """Valid lines, extreme values: the baseline's per-iteration time 1e36
    times a candidate's made the sizing ratio 0 (ZeroDivisionError)."""
    spec = BenchSpec("getppid", "kernel", "ns", "lower", "d")
    store = Store(tmp_path / "h.db")
    store.new_run("r", "compare", "t", "0", {})

    def lines(value, ops):
        sample = {
            "schema": 1,
            "type": "sample",
            "bench": "getppid",
            "unit": "ns",
            "instance": 0,
            "warmup": False,
            "iters": 1,
            "ops": ops,
            "value": value,
            "overhead": 0,
            "tsc_per_op": 1,
            "cpu": -1,
        }
        return (
            ['{"schema":1,"type":"calibration","bench":"getppid","instance":0,"iters":1}']
            + [json.dumps({**sample, "seq": i}) for i in range(4)]
            + ['{"schema":1,"type":"done","bench":"getppid"}']
        )

    targets = [_Scripted("slow", lines(1e18, 1e18)), _Scripted("fast", lines(1e-300, 1e-10))]
    Runner(RunConfig(max_time=1, min_processes=2), [spec], targets, store, "r").run()
    assert store.load("r").outcomes[("fast", "getppid")][0] != "error"


def _feed(fd, total, chunk=1 << 20):
    """Write total bytes of 'x' with no newline to fd, as a hostile target
    would; returns a list holding the bytes written so far."""
    written = [0]

    def run():
        block = b"x" * chunk
        try:
            while written[0] < total:
                written[0] += os.write(fd, block)
        except OSError:  # the reader closed its end
            pass
        finally:
            os.close(fd)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return written, t


def test_a_300_mb_line_is_refused_after_a_mib_without_reading_it_all():
    r, w = os.pipe()
    written, writer = _feed(w, 300 << 20)
    with os.fdopen(r, "rb") as stream:
        with pytest.raises(TargetError, match="longer than"):
            list(proc.read_lines(stream))
        time.sleep(0.2)  # the writer fills the pipe, then blocks: what it managed is what was read
        assert written[0] <= proc.MAX_LINE + (2 << 20)
    writer.join(10)
    assert not writer.is_alive() and written[0] < 300 << 20


def test_lines_up_to_the_bound_are_read_whole():
    r, w = os.pipe()
    with os.fdopen(r, "rb") as stream:
        line = b"y" * (proc.MAX_LINE - 1) + b"\n"
        t = threading.Thread(target=lambda: (os.write(w, line + b"last"), os.close(w)))
        t.start()
        assert list(proc.read_lines(stream)) == [line, b"last"]
        t.join()


def test_a_guest_printing_a_300_mb_line_is_a_target_error(tmp_path):
    p, c = _channel("head -c 300000000 /dev/zero | tr '\\\\0' x", tmp_path)
    try:
        started = time.monotonic()
        with pytest.raises(TargetError, match="guest: a line of output longer than"):
            list(c.command("RUN run getppid", 30))
        assert time.monotonic() - started < 10
    finally:
        proc.kill_group(p)


_IN_NEW_PID_NS = """
import os, sys
from vmtax import proc
with open("/proc/sys/kernel/ns_last_pid", "w") as f:  # this namespace's next pid: one dead outside it
    f.write(str(int(sys.argv[1]) - 1))
pid = os.fork()
if pid == 0:
    print(proc.private_dir("test", sys.argv[2]), flush=True)
    sys.stdin.read()  # alive until the test closes its stdin
    os._exit(0)
os.waitpid(pid, 0)
"""


def _dead_pid() -> int:
    from vmtax.hostproc import pid_alive

    return next(p for p in range(20000, 30000) if not pid_alive(p))


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="a PID namespace needs root")
def test_the_sweep_leaves_a_live_run_of_another_pid_namespace_alone(tmp_path):
    """Its pid is dead here, yet its owner lives: /tmp is shared, pids are not."""
    pid = _dead_pid()
    p = proc.spawn(
        ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", _IN_NEW_PID_NS, str(pid), str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        theirs = p.stdout.readline().strip()
        assert os.path.basename(theirs).startswith(f"vmtax-test-{pid}-") and os.path.isdir(theirs)
        assert proc.sweep(str(tmp_path)) == [] and os.path.isdir(theirs)
    finally:
        p.stdin.close()
        p.wait(10)
        proc.kill_group(p)
    # ... while what a dead process of this namespace left goes
    subprocess.run(
        [sys.executable, "-c", f"from vmtax import proc; proc.private_dir('test', {str(tmp_path)!r})"], check=True
    )
    ours = [str(d) for d in tmp_path.iterdir() if str(d) != theirs]
    assert len(ours) == 1 and proc.sweep(str(tmp_path)) == ours


_BUILD = """
import os, sys, time
from vmtax import guest
time.sleep(max(0.0, float(sys.argv[1]) - time.time()))  # all at once
print(guest.initramfs(), flush=True)
"""


@pytest.mark.skipif(
    not os.path.isfile("/bin/busybox") and not os.path.isfile("/usr/bin/busybox"),
    reason="the root is built from busybox-static",
)
def test_first_runs_at_once_build_one_cache_entry_whole(tmp_path):
    """Three first runs at once crashed two in three (FileNotFoundError on
    the shared initramfs-<key>.cpio.tmp): each builds under its own name."""
    import gzip

    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    start = str(time.time() + 2)
    ps = [
        subprocess.Popen(
            [sys.executable, "-c", _BUILD, start], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(6)
    ]
    outs = [p.communicate(timeout=120) for p in ps]
    assert [p.returncode for p in ps] == [0] * 6, [err[-300:] for _, err in outs]
    cache = tmp_path / "vmtax"
    made = {Path(out.strip()) for out, _ in outs}
    assert len(made) == 1
    initrd = made.pop()
    roots = [n for n in os.listdir(cache) if n.startswith("rootfs-")]
    assert sorted(os.listdir(cache)) == sorted([initrd.name, *roots]) and len(roots) == 1  # no temporary left
    data = gzip.decompress(initrd.read_bytes())  # a truncated file would not decompress
    assert data.rstrip(b"\0").endswith(b"TRAILER!!!") and b"vmtax-agent" in data
    root = cache / roots[0]
    assert (root / "vmtax-agent").stat().st_size == AGENT.stat().st_size


# -- small ones: one line, exit 2, no traceback (issue 22 item 8) ----------------------
@pytest.mark.parametrize(
    "argv,needle",
    [
        (["run", "--target", "\udcff"], "an argument is not valid UTF-8: b'\\xff'"),
        (["run", "--target", "local:dir=/proc"], "dir=/proc is on proc"),
        (["run", "--target", "uml:kernel=/etc/passwd"], "/etc/passwd is not a UML kernel"),
        (["run", "--target", "uml:binary=/no/such/linux"], "no such UML kernel file"),
        (["run", "--target", "qemu:mem=1e23G"], "malformed memory size '1e23G'"),
        (["run", "--target", "fake:label=a,label=b"], "target option 'label' is given twice"),
        (["show", "--json", "-", "--markdown", "-"], "--json and --markdown both go to stdout"),
        (["run", "--target", "qemu:mem=100000000000000000000000G"], "more memory than this host has"),
        (["run", "--target", "qemu:mem=17179869184G"], "more memory than this host has"),
    ],
)
def test_small_bad_inputs_are_one_line_and_exit_2(argv, needle, capsys, db):
    assert main(["--db", str(db), *argv]) == 2
    out = capsys.readouterr()
    assert out.err.count("\n") == 1 and needle in out.err and "Traceback" not in out.err


def test_a_tmpdir_with_a_comma_is_refused_before_qemu_misreads_it(tmp_path, monkeypatch, capsys, db):
    odd = tmp_path / "a,b"
    odd.mkdir()
    monkeypatch.setenv("TMPDIR", str(odd))
    monkeypatch.setattr("tempfile.tempdir", None)
    assert main(["--db", str(db), "run", "--target", "qemu:accel=tcg", "--bench", "getppid"]) == 2
    assert "holds a comma" in capsys.readouterr().err


def test_a_fifo_as_the_database_is_refused_at_once(tmp_path, capsys):
    fifo = tmp_path / "v.db"
    os.mkfifo(fifo)
    t0 = time.monotonic()
    assert main(["--db", str(fifo), "runs"]) == 2
    assert time.monotonic() - t0 < 5 and "not a regular file" in capsys.readouterr().err


def test_ctrl_c_while_vmtax_is_still_loading_is_one_line_and_130():
    """The console command, interrupted at moments within its first second
    (its imports take most of it): never a traceback."""
    exe = str(Path(sys.executable).parent / "vmtax")
    for delay in (0.05, 0.15, 0.3, 0.5, 0.8):
        p = subprocess.Popen([exe, "list"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        time.sleep(delay)
        p.send_signal(2)
        err = p.communicate(timeout=60)[1]
        if "init_import_site" in err:
            continue  # the interpreter's own start (its site module, on a loaded host): before any code of vmtax's
        assert "Traceback" not in err, (delay, err[-1500:])
        # -2: killed before Python had set its handler (no traceback either)
        assert p.returncode in (0, 130, -2), (delay, p.returncode, err)


def test_report_files_keep_no_control_sequence_from_a_target(tmp_path, capsys, db):
    evil = "fake:label=\x1b]0;pwned\x07\x1b[2J"
    assert main(["--db", str(db), "compare", "fake", evil, "--bench", "getppid", "--max-time", "3s"]) in (0, 3)
    capsys.readouterr()
    files = [tmp_path / f for f in ("r.md", "r.csv", "r.html")]
    assert (
        main(["--db", str(db), "report", "--markdown", str(files[0]), "--csv", str(files[1]), "--html", str(files[2])])
        == 0
    )
    err = capsys.readouterr().err
    for f in files:
        text = f.read_text()
        assert "\x1b" not in text and "\x07" not in text, f.name
        assert "\\x1b]0;pwned" in text, f.name  # shown, inert
    assert "\x1b" not in err  # matplotlib's glyph warnings included


# -- output paths are checked before anything is measured (issue 44 item 4) -------------------
@pytest.mark.parametrize(
    "argv,flag",
    [
        (["compare", "fake", "fake:label=b", "--gate", "2%", "--junit", "{missing}/x.xml"], "--junit"),
        (["compare", "fake", "fake:label=b", "--json", "{missing}/x.json"], "--json"),
        (["run", "--target", "fake", "--markdown", "{dir}"], "--markdown"),
        (["run", "--target", "fake", "--json", "/proc/vmtax-test.json"], "--json"),  # refused to root too
        (["scale", "fake", "--instances", "1", "--html", "{missing}/s.html"], "--html"),
        (["doctor", "--target", "fake", "--json", "{missing}/d.json"], "--json"),
    ],
)
def test_an_output_path_that_cannot_be_written_is_refused_before_measuring(tmp_path, argv, flag, capsys, db):
    argv = [a.format(missing=tmp_path / "no" / "such", dir=tmp_path) for a in argv]
    t0 = time.monotonic()
    code = main(["--db", str(db), *argv, "--max-time", "20s"])
    err = capsys.readouterr().err
    assert code == 2 and time.monotonic() - t0 < 5, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and flag in lines[0] and "Traceback" not in err, err
    assert not db.exists() or Store(db).list_runs() == []


def test_an_output_file_checked_before_measuring_is_not_left_behind_by_the_check(tmp_path, capsys, db):
    out = tmp_path / "r.json"
    assert main(["--db", str(db), "run", "--target", "fake", "--bench", "nope", "--json", str(out)]) == 2
    assert not out.exists()  # refused for the benchmark: the check made no file
    keep = tmp_path / "keep.md"
    keep.write_text("before")
    assert (
        main(
            [
                "--db",
                str(db),
                "run",
                "--target",
                "fake",
                "--bench",
                "getppid",
                "--max-time",
                "2s",
                "--markdown",
                str(keep),
            ]
        )
        == 0
    )
    assert "getppid" in keep.read_text()


# -- small ones of issue 44 item 6 -------------------------------------------------------------
def test_a_limit_out_of_range_is_one_line_and_means_one_thing_on_both_backends(location, capsys):
    """-1 read 'all' on SQLite (LIMIT -1) and failed on PostgreSQL; 10**20
    was an OverflowError."""
    assert main(
        [
            "--db",
            str(location),
            "compare",
            "fake",
            "fake:label=b",
            "--bench",
            "getppid",
            "--max-time",
            "1s",
            "--cpu",
            "none",
        ]
    ) in (0, 3)
    capsys.readouterr()
    for command in ("history", "runs"):
        for limit in ("-1", "0", "99999999999999999999"):
            assert main(["--db", str(location), command, "--limit", limit]) == 2, (command, limit)
            err = capsys.readouterr().err.strip().splitlines()
            assert len(err) == 1 and "--limit must be between 1 and" in err[0], (command, limit, err)
        assert main(["--db", str(location), command, "--limit", "1"]) == 0
    capsys.readouterr()


def test_progress_lines_to_a_pipe_carry_no_escape_sequence_from_a_label(db):
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "vmtax.cli",
            "--db",
            str(db),
            "compare",
            "fake",
            f"fake:label=x{EVIL}",
            "--bench",
            "getppid",
            "--max-time",
            "2s",
            "--cpu",
            "none",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    assert "[1/1] getppid" in p.stderr  # the progress line, one per finished row on a non-terminal
    assert ESC not in p.stderr and "\x07" not in p.stderr and "\\x1b[2J" in p.stderr


def test_matplotlib_says_nothing_on_stderr_for_long_or_unusual_labels(tmp_path):
    """Glyphs missing from its font, a layout that cannot fit a 300-character
    label: the SVG keeps the text (the browser draws it), so matplotlib's
    warnings are noise on vmtax's stderr."""
    from helpers import store_run

    db = tmp_path / "m.db"
    with Store(db) as store:
        for i, label in enumerate(("x" * 300, "\U0001e900\U0010fffd\u0378 long " + "y" * 120)):
            data = run(run_id=f"2026010{i + 1}-120000-abcd", names=("local", f"fake:label={label}"))
            data.targets[1].facts["label"] = "same"  # one history series
            store_run(store, data)
    for argv in (
        ["report", "20260101", "--html", str(tmp_path / "r.html")],
        ["report", "20260102", "--html", str(tmp_path / "r2.html")],
        ["history", "--html", str(tmp_path / "h.html")],
    ):
        p = subprocess.run(
            [sys.executable, "-m", "vmtax.cli", "--db", str(db), *argv], capture_output=True, text=True, timeout=120
        )
        assert p.returncode == 0, p.stderr
        noise = [line for line in p.stderr.splitlines() if not line.startswith("wrote ")]
        assert not noise, (argv[0], p.stderr[-2000:])


def test_a_scale_run_stopped_before_any_round_is_failed_not_complete(tmp_path, capsys, db):
    """A copy stuck before the barrier (here: in calibration, each sample a
    minute): the run stops at the budget plus its grace, and having
    measured no round it is failed, exit 1, not complete with exit 0."""
    t0 = time.monotonic()
    out = tmp_path / "s.json"
    code = main(
        [
            "--db",
            str(db),
            "scale",
            "fake:delay=60",
            "--instances",
            "2",
            "--bench",
            "getppid",
            "--round-time",
            "0.05s",
            "--rounds",
            "2",
            "--max-rounds",
            "2",
            "--max-time",
            "1s",
            "--json",
            str(out),
        ]
    )
    err = capsys.readouterr().err
    assert time.monotonic() - t0 < 1 + 5 + 5
    assert code == 1, err
    assert "no round" in err and "Traceback" not in err
    assert Store(db).list_runs()[0]["status"] == "failed"


# -- a label cannot forge a line of a log (issue 58 item 5) -------------------------------
FORGED = "a\nforged line: PASS\tend"


def _forged(text: str) -> list[str]:
    """The lines of text a label began (its own line: a forged one), or that hold a raw tab."""
    return [line for line in text.splitlines() if line.startswith("forged") or "\t" in line]


@pytest.mark.parametrize("label", [FORGED, "a\tb", "a\rforged", "a\u2028forged"])
@pytest.mark.parametrize("command", ["compare", "run"])
def test_a_line_break_in_a_label_is_refused_with_one_line(label, command, capsys, db):
    target = f"fake:label={label}"
    argv = ["compare", "fake", target] if command == "compare" else ["run", "--target", target]
    assert main(["--db", str(db), *argv, "--bench", "getppid", "--max-time", "2s"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "line break or tab" in err and not _forged(err), err
    assert not db.exists() or Store(db).list_runs() == []


def test_a_line_break_in_an_inventorys_label_is_refused_with_one_line(tmp_path, capsys, db):
    inv = tmp_path / "hosts.yml"
    inv.write_text(json.dumps({"all": {"hosts": {"h1": {"vmtax_label": FORGED}}}}))  # JSON is YAML
    assert main(["--db", str(db), "compare", "local", "@h1", "--inventory", str(inv), "--max-time", "2s"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "line break or tab" in err and not _forged(err), err


def test_a_stored_label_with_a_line_break_stays_on_its_line_in_every_terminal_table(monkeypatch, capsys, db):
    """A run stored with such a label (by a vmtax before the refusal, or
    another writer): the scoreboard's header, the targets table, the gate
    table, the runs table, diff, history and the progress lines keep it on
    its line, the newline and tab shown as escapes."""
    monkeypatch.setattr("vmtax.targets.options.line_break", lambda text: None)
    label = f"fake:label={FORGED}"
    for _ in range(2):  # two runs: diff and history compare them
        assert main(
            ["--db", str(db), "compare", "fake", label, "--bench", "getppid", "--max-time", "3s", "--gate", "5%"]
        ) in (0, 3)
    out = capsys.readouterr()
    assert "\\x0aforged line: PASS\\x09end" in out.out and not _forged(out.out) and not _forged(out.err), out
    runs = [r["id"] for r in Store(db).list_runs()]
    for argv in (
        ["show"],
        ["show", "--all-rows"],
        ["show", "--notes"],
        ["runs"],
        ["gate", "--threshold", "5%"],
        ["diff", *runs[:2]],
        ["history"],
        ["explain"],
    ):
        main(["--db", str(db), *argv])
        got = capsys.readouterr()
        assert not _forged(got.out) and not _forged(got.err), (argv, got)


def test_a_guest_flooding_lines_is_given_up_at_its_commands_timeout(tmp_path):
    """Lines that keep coming past a command's timeout (a flood of blank
    lines) do not hold it: before, the timeout was seen only once the
    queue was empty, and a flood never emptied it."""
    p, c = _channel("while :; do echo; done", tmp_path)
    got: list[BaseException] = []

    def command() -> None:
        try:
            for _ in c.command("RUN run getppid", 1):
                time.sleep(0.001)  # a reader slower than the flood: its queue never empties
        except TargetError as e:
            got.append(e)

    try:
        t0 = time.monotonic()
        th = threading.Thread(target=command, daemon=True)
        th.start()
        th.join(5)
        assert not th.is_alive() and time.monotonic() - t0 < 3, "the command outran its timeout"
        assert got and "no answer within 1 s" in str(got[0])
    finally:
        proc.kill_group(p)


@pytest.mark.parametrize(
    "argv",
    [
        ["doctor", "--target", "fake", "--bench", "nope", "--json", "{link}"],
        ["run", "--target", "fake", "--bench", "nope", "--json", "{link}"],
        ["compare", "fake", "fake:label=b", "--bench", "nope", "--markdown", "{link}"],
        ["compare", "fake", "fake:label=b", "--bench", "nope", "--gate", "2%", "--junit", "{link}"],
        ["gate", "no-such-run", "--junit", "{link}"],
    ],
)
def test_an_output_path_through_a_dangling_symlink_is_checked_without_making_its_file(tmp_path, argv, capsys, db):
    """The check opened the path for appending: through a dangling symlink
    that made an empty file at its target, and removing "what the check
    made" then removed the symlink instead."""
    target, link = tmp_path / "dir" / "newfile", tmp_path / "out"
    target.parent.mkdir()
    link.symlink_to(target)
    assert main(["--db", str(db), *[a.format(link=link) for a in argv]]) in (1, 2)
    capsys.readouterr()
    assert not target.exists() and link.is_symlink(), os.listdir(target.parent)
    assert os.listdir(target.parent) == []  # nor a file of the check's own
    # and a symlink into a directory that is not there is refused as before, with one line
    link.unlink()
    link.symlink_to(tmp_path / "no" / "such" / "file")
    assert main(["--db", str(db), *[a.format(link=link) for a in argv]]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot write there" in err and link.is_symlink()


# -- a child's stderr and a console log are read by their end (issue 58 item 7) --------------------
TAIL_PROBE = r"""
import subprocess, sys
from pathlib import Path
from vmtax import proc
from vmtax.targets.channel import Channel
log = Path(sys.argv[1])
try:
    for _ in proc.stream_lines(["sh", "-c", "yes x | head -c 400000000 >&2; echo last words >&2; exit 3"], 60):
        pass
except proc.ChildFailed as e:
    print("stderr:", e.stderr.splitlines()[-1])
with open(log, "wb") as f:  # a console log of 300 MB, written a MB at a time
    for _ in range(300):
        f.write(b"boot\n" * 200_000)
    f.write(b"the end\n")
p = subprocess.Popen(["true"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
print("console:", Channel(p, "guest", log).console_tail())
# its peak resident memory since its exec (ru_maxrss keeps the forking parent's)
print("maxrss_kib:", [line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM")][0])
"""


def test_a_childs_stderr_flood_and_a_huge_console_log_cost_their_tail_not_their_size(tmp_path):
    """400 MB on a child's stderr and a 300 MB console log: the error still
    quotes their last line, and the controller's peak resident memory stays
    far below either (it held the whole of both: 1.37 GB for 1.2 GB)."""
    p = subprocess.run(
        [sys.executable, "-c", TAIL_PROBE, str(tmp_path / "console.log")], capture_output=True, text=True, timeout=120
    )
    assert p.returncode == 0, p.stderr[-2000:]
    got = dict(line.split(": ", 1) for line in p.stdout.splitlines())
    assert got["stderr"] == "last words" and got["console"].endswith("boot | boot | the end"), got
    assert int(got["maxrss_kib"]) < 100 * 1024, got  # the interpreter and vmtax: ~25 MiB
