"""The README and docs/ hold together: every relative link (and its #anchor)
leads somewhere, every repository path src/'s docstrings and comments name
exists, docs/cli.md lists exactly the options each command's --help gives,
the README stays short, and results/ holds only what its index names."""

import ast
import io
import re
import subprocess
import sys
import tokenize
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CLI_DOC = ROOT / "docs" / "cli.md"

LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^\s*(```|~~~)")
INLINE_CODE = re.compile(r"`[^`]*`")
OPTION = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")


def markdown_files() -> list[Path]:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    for folder in ("tools", "examples", "results", "research"):
        files += sorted((ROOT / folder).rglob("README.md"))
    return [f for f in files if f.is_file()]


def prose_lines(text: str, code: bool = False):
    """(line number, line) outside fenced code blocks, inline code blanked
    (kept with code=True)."""
    fenced = False
    for n, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield n, line if code else INLINE_CODE.sub("``", line)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, inline code and links as
    their text, punctuation dropped but for - and _, spaces as -."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower()).replace("`", "")
    kept = "".join(c for c in text if c in " -_" or unicodedata.category(c)[0] in "LN")
    return kept.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for _, line in prose_lines(path.read_text(), code=True):
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            base = slug(m.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
    return out


def test_the_slug_is_githubs():
    assert slug("The reference loop: `--reference`") == "the-reference-loop---reference"
    assert slug("How noisy is this host? `vmtax doctor`") == "how-noisy-is-this-host-vmtax-doctor"
    assert slug("Other machines: `ssh:HOST`") == "other-machines-sshhost"


def broken_links() -> list[str]:
    broken = []
    for md in markdown_files():
        for n, line in prose_lines(md.read_text()):
            for target in LINK.findall(line):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:: not ours to check
                    continue
                path, _, anchor = target.partition("#")
                dest = (md.parent / path).resolve() if path else md
                where = f"{md.relative_to(ROOT)}:{n}: {target}"
                if not dest.exists():
                    broken.append(f"{where}: no such file")
                elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                    broken.append(f"{where}: no heading #{anchor} in {dest.relative_to(ROOT)}")
                elif ROOT not in dest.parents and dest != ROOT:
                    broken.append(f"{where}: outside the repository")
    return broken


def test_every_relative_link_in_the_readme_and_docs_resolves():
    assert markdown_files()[0].name == "README.md" and len(markdown_files()) > 10
    assert broken_links() == []


def test_a_broken_link_is_found(tmp_path, monkeypatch):
    """The checker itself can fail: a missing file and a missing anchor."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text(
        "# T\n\n[a](docs/x.md) [b](docs/y.md#nope) [c](#t) `[d](nowhere.md)`\n```\n[e](nowhere.md)\n```\n"
    )
    (tmp_path / "docs" / "y.md").write_text("# Y\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert [b.split(": ", 1)[1] for b in broken_links()] == [
        "docs/x.md: no such file",
        "docs/y.md#nope: no heading #nope in docs/y.md",
    ]


# -- paths named in src/ -------------------------------------------------------------
# A path as prose names one: segments of a name and a slash, not inside an
# absolute path (/usr/share/...) or a parent's (../shared/...).
SRC_PATH = re.compile(r"(?<![\w/.~$-])((?:[A-Za-z_][\w.-]*/)+[\w.-]*\w)")
FILE_EXT = re.compile(r"\.(py|md|c|h|sh|txt|json|toml|cfg|ya?ml|png)$")


def notes(path: Path):
    """(line number, line) of a module's docstrings and comments."""
    text = path.read_text()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                yield from enumerate(doc.splitlines(), node.body[0].lineno)
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT:
            yield tok.start[0], tok.string


def missing_paths() -> list[str]:
    """Every repository path (one under a top-level folder, or any a/b.ext)
    that src/ names and that exists neither from the repository's root, nor
    from src/vmtax/, nor from the naming module's folder."""
    tops = {p.name for p in ROOT.iterdir() if p.is_dir() and not p.name.startswith(".")} | {"bench"}
    out = []
    for py in sorted((ROOT / "src").rglob("*.py")):
        for n, line in notes(py):
            for name in SRC_PATH.findall(line):
                if name.split("/")[0] not in tops and not FILE_EXT.search(name):
                    continue  # run/compare, Mops/s: prose
                if not any((base / name).exists() for base in (ROOT, ROOT / "src" / "vmtax", py.parent)):
                    out.append(f"{py.relative_to(ROOT)}:{n}: {name}")
    return out


def test_every_path_named_in_src_exists():
    assert missing_paths() == []


def test_a_missing_path_in_src_is_found(tmp_path, monkeypatch):
    """The checker itself can fail: in a docstring and in a comment; an
    absolute path, a parent's path and a slash of prose are not names."""
    (tmp_path / "src" / "vmtax" / "report").mkdir(parents=True)
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "here.md").write_text("x\n")
    (tmp_path / "src" / "vmtax" / "report" / "units.py").write_text("")
    (tmp_path / "src" / "vmtax" / "m.py").write_text(
        '"""See results/here.md and report/units.py; results/gone.md,\n'
        'not /usr/share/x.txt, ../shared/DESIGN.md or run/compare."""\n\n'
        "X = 1  # bench/modes.py measured it\n"
        'Y = "tools/not-a-note.py"\n'
    )
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert missing_paths() == ["src/vmtax/m.py:1: results/gone.md", "src/vmtax/m.py:4: bench/modes.py"]


# -- the source layout's map ----------------------------------------------------------
def layout_map(text: str) -> list[str]:
    """The paths docs/development.md's source layout names: each line's first
    column (up to two spaces); a bare name after a comma is in the first's folder."""
    block = text.split("## Source layout", 1)[1].split("```", 2)[1]
    out = []
    for line in block.splitlines():
        if line and not line[0].isspace():
            first, *more = re.split(r"\s{2,}", line, maxsplit=1)[0].split(", ")
            out += [first, *(f"{first.rsplit('/', 1)[0]}/{name}" for name in more)]
    return out


def test_the_layout_map_is_the_tree():
    """Every path the map names exists, and every module and package of
    src/vmtax has a line (a new one gets its line there)."""
    named = layout_map((ROOT / "docs" / "development.md").read_text())
    assert [p for p in named if not (ROOT / p).exists()] == []
    pkg = ROOT / "src" / "vmtax"
    tree = {f"src/vmtax/{p.name}" for p in pkg.glob("*.py") if p.name != "__init__.py"}
    tree |= {f"src/vmtax/{p.parent.name}/" for p in pkg.glob("*/__init__.py")}
    assert sorted(tree - set(named)) == []


def test_the_layout_map_is_read_as_written():
    text = "## Source layout\n\n```\nagent/   C\n           more\nsrc/vmtax/a.py, b.py   x, y\nsrc/vmtax/s/  z\n```\n"
    assert layout_map(text) == ["agent/", "src/vmtax/a.py", "src/vmtax/b.py", "src/vmtax/s/"]


# -- the CLI's options ---------------------------------------------------------------
def help_options(text: str) -> set[str]:
    """The long options an argparse --help lists under its options."""
    out, section = set(), None
    for line in text.splitlines():
        if re.match(r"^\S.*:$", line):
            section = line
            continue
        m = re.match(r"^\s{2}(?:-\w(?: \S+)?, )?(--[a-z][a-z0-9-]*)", line)
        if m and section and section.startswith("option"):
            out.add(m.group(1))
    return out - {"--help"}


def doc_sections(text: str) -> dict[str, set[str]]:
    """docs/cli.md: '' for the global options (before the first command),
    else each `## `vmtax CMD`` section's options, from its tables' first cells."""
    out: dict[str, set[str]] = {"": set()}
    current = ""
    for _, line in prose_lines(text.replace("`", "")):
        m = re.match(r"^##\s+vmtax (\w+)\s*$", line)
        if m:
            current = m.group(1)
            out[current] = set()
        elif line.startswith("## "):
            current = None
        elif current is not None and line.startswith("|"):
            first = line.split("|")[1]
            out[current] |= set(OPTION.findall(first))
    return out


def vmtax_help(*args: str) -> str:
    """What `vmtax ARGS --help` prints (argparse's own text, in this process:
    a subprocess per command would import vmtax fourteen times)."""
    import contextlib
    import io

    from vmtax.cli import build_parser

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), pytest.raises(SystemExit) as done:
        build_parser().parse_args([*args, "--help"])
    assert done.value.code == 0
    return buf.getvalue()


def test_docs_cli_lists_every_option_of_every_command(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    top = vmtax_help()
    commands = re.search(r"\{([a-z,]+)\}", top).group(1).split(",")
    documented = doc_sections(CLI_DOC.read_text())
    problems = []
    for cmd, text in [("", top), *((c, vmtax_help(c)) for c in commands)]:
        name = f"vmtax {cmd}".strip()
        if cmd not in documented:
            problems.append(f"docs/cli.md has no section '## `{name}`'")
            continue
        given, listed = help_options(text), documented[cmd]
        problems += [f"{name}: {o} is in --help, not in docs/cli.md" for o in sorted(given - listed)]
        problems += [f"{name}: {o} is in docs/cli.md, not in --help" for o in sorted(listed - given)]
    problems += [
        f"docs/cli.md documents `vmtax {c}`, which --help does not list" for c in documented if c and c not in commands
    ]
    assert len(commands) >= 13 and problems == []


def test_the_option_parsers_read_what_they_must():
    assert help_options(
        "usage: x\n\noptions:\n  -h, --help  help\n  --json [FILE]\n  --max-time DURATION  t\n"
        "                        (see --not-this)\n"
    ) == {"--json", "--max-time"}
    assert doc_sections(
        "| `--db X` | a |\n## `vmtax run`\n| option | meaning |\n|---|---|\n"
        "| `--a N` | like `--b` |\n## Exit codes\n| `--c` | x |\n"
    ) == {"": {"--db"}, "run": {"--a"}}


# -- the README and results/ --------------------------------------------------------
def test_the_readme_is_short_and_its_scoreboard_is_marked():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 300
    assert text.count("<!-- scoreboard: begin -->") == 1 and text.count("<!-- scoreboard: end -->") == 1


def tracked(folder: str) -> list[str]:
    p = subprocess.run(["git", "-C", str(ROOT), "ls-files", folder], capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip("not a git checkout: which files are tracked is unknown")
    return [line for line in p.stdout.splitlines() if line]


def test_results_holds_only_what_its_index_names():
    files = [Path(f).name for f in tracked("results") if Path(f).name != "README.md"]
    index = (ROOT / "results" / "README.md").read_text()
    assert [f for f in files if f"]({f})" not in index] == []
    assert len(files) + 1 <= 30
