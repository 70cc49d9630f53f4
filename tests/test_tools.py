"""tools/ and examples/: every script is documented (a docstring that says
how to run it, a line in its folder's README), every tool answers `--help`
and reads runs and runs the agent through vmtax, and the README's scoreboard
splice keeps the rest of the README as it was."""

import ast
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("folder", ["tools", "examples"])
def test_every_script_is_documented(folder):
    index = (ROOT / folder / "README.md").read_text()
    scripts = sorted(p for p in (ROOT / folder).iterdir() if p.suffix in (".py", ".sh"))
    assert scripts
    for p in scripts:
        assert f"]({p.name})" in index, f"{folder}/README.md has no line for {p.name}"
        if p.suffix == ".py":
            doc = ast.get_docstring(ast.parse(p.read_text())) or ""
            assert len(doc) > 100, f"{p}: no docstring saying what it answers and how to run it"


def is_command(path: Path) -> bool:
    """Whether a script runs as a command (`if __name__ == "__main__"`)."""
    return any(
        isinstance(n, ast.If) and "__name__" in ast.unparse(n.test) and "__main__" in ast.unparse(n.test)
        for n in ast.parse(path.read_text()).body
    )


TOOLS = sorted((ROOT / "tools").glob("*.py"))
INDEX = ROOT / "tools" / "README.md"
COMMANDS = [p.stem for p in TOOLS if is_command(p)]


def how_to_run() -> dict[str, str]:
    """tools/README.md's table: script -> its last cell (how to run it)."""
    rows = (re.match(r"^\| \[([\w.]+)\]\(\1\) \|.*\| ([^|]*) \|$", line) for line in INDEX.read_text().splitlines())
    return {m.group(1): m.group(2).strip() for m in rows if m}


def test_a_tool_that_is_no_command_is_imported():
    """A script without a __main__ guard is a module the others import, and
    its README line says so (a command that lost its guard is no such module)."""
    run = how_to_run()
    assert {p.name: run.get(p.name) for p in TOOLS if p.stem not in COMMANDS} == {
        p.name: "imported" for p in TOOLS if p.stem not in COMMANDS
    }
    assert len(COMMANDS) >= 8


@pytest.fixture(scope="module")
def helps():
    """Every tool's `--help` (exit status, output), the tools started at once:
    each loads vmtax, a second or more apiece."""
    procs = {}
    try:
        for name in COMMANDS:
            argv = [sys.executable, str(ROOT / "tools" / f"{name}.py"), "--help"]
            procs[name] = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        return {name: (p.communicate(timeout=120)[0], p.returncode) for name, p in procs.items()}
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()


@pytest.mark.parametrize("name", COMMANDS)
def test_every_tool_says_how_to_run_it(helps, name):
    text, rc = helps[name]
    assert rc == 0, text
    assert sum(line.startswith("usage:") for line in text.splitlines()) == 1, text


def test_a_tool_reads_runs_and_runs_the_agent_through_vmtax():
    """A maintained tool reads stored runs through vmtax's Store and analysis
    (no SQL of its own) and starts the agent through vmtax (no path to its
    binary): one that needs its own is a finished experiment (research/)."""
    own = []
    for p in TOOLS:
        tree = ast.parse(p.read_text())
        names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        names |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        own += [f"{p.name} imports {m}" for m in sorted(names) if m.split(".")[0] in ("sqlite3", "psycopg", "psycopg2")]
        if "build/vmtax-agent" in p.read_text():
            own.append(f"{p.name} names the agent's binary")
    assert own == []


def test_the_scoreboard_is_spliced_between_the_markers():
    rs = load("readme_scoreboard")
    readme = f"# T\n\nbefore\n\n{rs.BEGIN}\nold\nlines\n{rs.END}\n\nafter\n"
    body = rs.block("run 1 (complete)  \n\nbenchmark  qemu   \n  getppid  3.83*\n")
    new = rs.splice(readme, body)
    assert new == (
        f"# T\n\nbefore\n\n{rs.BEGIN}\n```text\nrun 1 (complete)\n\nbenchmark  qemu\n"
        f"  getppid  3.83*\n```\n{rs.END}\n\nafter\n"
    )
    assert rs.splice(new, body) == new  # again: the same README


@pytest.mark.parametrize(
    "readme", ["no markers\n", "<!-- scoreboard: begin -->\n<!-- scoreboard: begin -->\n<!-- scoreboard: end -->\n"]
)
def test_a_readme_without_one_pair_of_markers_is_refused(readme):
    rs = load("readme_scoreboard")
    with pytest.raises(rs.SpliceError, match="once each"):
        rs.splice(readme, "x")


def test_a_scoreboard_with_a_fence_is_refused():
    rs = load("readme_scoreboard")
    with pytest.raises(rs.SpliceError, match="fence"):
        rs.block("a\n```\nb\n")


def test_the_hog_refuses_a_cpu_it_cannot_use(capsys):
    hog = load("hog")
    with pytest.raises(SystemExit, match="not one of this process's CPUs"):
        hog.main(["--cpu", "4096", "--seconds", "1"])


@pytest.mark.parametrize("label", ["<!-- scoreboard: end -->", "<!-- scoreboard: begin -->"])
def test_a_label_that_would_break_the_readme_is_refused_with_one_line(label, tmp_path, capsys):
    """A label holding the README's end marker was spliced in (every later
    `make readme` then failed with a traceback until the README was fixed by
    hand).  A fence that begins a line is refused alike (block): the same
    one line, where it was a traceback."""
    from vmtax.cli import main

    rs = load("readme_scoreboard")
    db, readme = tmp_path / "v.db", tmp_path / "README.md"
    assert (
        main(["--db", str(db), "compare", "fake", f"fake:label={label}", "--bench", "getppid", "--max-time", "2s"]) == 0
    )
    before = f"# T\n\n{rs.BEGIN}\nold\n{rs.END}\n"
    readme.write_text(before)
    capsys.readouterr()
    assert rs.main(["--run", "2", "--db", str(db), "--readme", str(readme)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "would break the README" in err and "Traceback" not in err, err
    assert readme.read_text() == before


def test_the_kvm_rig_says_the_cause_of_a_failure_inside_its_outer_guest_in_one_line(tmp_path):
    """inside.sh stopped before vmtax ran (a clone under /tmp hidden by the
    outer guest's tmpfs: "cd: can't cd to ..."): the rig said only "vmtax
    compare exit status none".  It says inside.sh's cause, or that it
    ended before the compare."""
    spec = importlib.util.spec_from_file_location("rig", ROOT / "scripts" / "kvm-rig" / "rig.py")
    rig = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rig)
    (tmp_path / "status").write_text("cause cannot cd to the repository /tmp/x inside the outer guest\ninside 2\n")
    assert rig.checks(tmp_path) == [
        (False, "inside the outer guest: cannot cd to the repository /tmp/x inside the outer guest")
    ]
    (tmp_path / "status").write_text("inside 2\n")
    assert rig.checks(tmp_path) == [(False, "inside the outer guest: inside.sh exited 2 before vmtax compare ended")]
    (tmp_path / "status").write_text("")  # stopped (--timeout) mid-compare
    assert rig.checks(tmp_path) == [
        (False, "inside the outer guest: vmtax compare had not ended when the outer guest stopped")
    ]
    # and inside.sh writes that cause where it cannot cd to the repository
    out = tmp_path / "out"
    out.mkdir()
    p = subprocess.run(
        ["sh", str(ROOT / "scripts" / "kvm-rig" / "inside.sh"), str(tmp_path / "nope"), str(out)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert p.returncode == 2 and "cannot cd to the repository" in (out / "status").read_text()
