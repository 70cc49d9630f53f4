"""The package's shape, checked: no import cycle in src/ (imports inside
functions included: hiding one there is still a cycle), imports point down
the layers (LAYERS), and no module imports another's private (underscore)
name."""

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def modules() -> dict[str, tuple[Path, bool]]:
    out = {}
    for p in SRC.rglob("*.py"):
        parts = list(p.relative_to(SRC).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_pkg else parts)] = (p, is_pkg)
    return out


def imports(mods) -> dict[str, set[tuple[str, str]]]:
    """module -> {(imported module, name imported from it or '')}, every
    import statement anywhere in the file."""
    out = {}
    for mod, (path, is_pkg) in mods.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {(a.name, "") for a in node.names if a.name in mods}
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = mod.split(".") if is_pkg else mod.split(".")[:-1]
                    base = base[: len(base) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                for a in node.names:
                    sub = f"{target}.{a.name}"
                    if sub in mods:
                        found.add((sub, ""))
                    elif target in mods:
                        found.add((target, a.name))
        out[mod] = {(m, n) for m, n in found if m != mod}
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle_in_src():
    graph = {m: {t for t, _ in found} for m, found in imports(modules()).items()}
    assert cycles(graph) == []


def test_the_cycle_check_can_fail():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


# The layers, lowest first: a module imports its own layer or a lower one,
# never a higher one.  A module belongs to the layer of its longest prefix
# here ("vmtax" alone is the package's __init__); a new module or package
# needs a line (the test below names it).
LAYERS = [
    ("base", ["vmtax", "vmtax.errors", "vmtax.model", "vmtax.metrics", "vmtax.duration", "vmtax.safe"]),
    ("statistics", ["vmtax.stats", "vmtax.analysis", "vmtax.scaling"]),
    (
        "host, agent, suite",
        [
            *("vmtax.proc", "vmtax.hostproc", "vmtax.hostprobe", "vmtax.kvmexits", "vmtax.perfevent"),
            *("vmtax.xentrace", "vmtax.netns", "vmtax.peers", "vmtax.inventory"),
            *("vmtax.agent", "vmtax.guest", "vmtax.suite"),
        ],
    ),
    ("targets, store", ["vmtax.targets", "vmtax.store"]),
    ("engine", ["vmtax.engine"]),
    ("planning", ["vmtax.plan", "vmtax.schedule"]),
    (
        "commands",
        [
            "vmtax.runner",
            "vmtax.rounds",
            "vmtax.rowblocks",
            "vmtax.processes",
            "vmtax.scale",
            "vmtax.doctor",
            "vmtax.noise",
            "vmtax.watch",
        ],
    ),
    ("report", ["vmtax.report"]),
    ("serve", ["vmtax.serve"]),
    ("cli", ["vmtax.cli", "vmtax.entry"]),
]


def layer_of(mod: str) -> int | None:
    """The index in LAYERS of mod's longest prefix; None where none is."""
    best, rank = "", None
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            fits = mod == p or (p != "vmtax" and mod.startswith(p + "."))
            if fits and len(p) > len(best):
                best, rank = p, i
    return rank


def upward(graph: dict[str, set[str]]) -> list[str]:
    """Every import of a higher layer, as `a (layer) imports b (layer)`."""
    out = []
    for mod, targets in sorted(graph.items()):
        for t in sorted(targets):
            a, b = layer_of(mod), layer_of(t)
            if a is not None and b is not None and b > a:
                out.append(f"{mod} ({LAYERS[a][0]}) imports {t} ({LAYERS[b][0]})")
    return out


def test_every_module_has_a_layer():
    assert [m for m in sorted(modules()) if layer_of(m) is None] == [], "give it a line in LAYERS"


def test_no_module_imports_a_higher_layer():
    graph = {m: {t for t, _ in found} for m, found in imports(modules()).items()}
    assert upward(graph) == []


def test_the_direction_check_can_fail():
    graph = {"vmtax.plan": {"vmtax.report.units", "vmtax.stats"}, "vmtax.stats.modes": {"vmtax.model"}}
    assert upward(graph) == ["vmtax.plan (planning) imports vmtax.report.units (report)"]
    assert layer_of("vmtax") == 0 and layer_of("vmtax.vmtaxy") is None and layer_of("vmtax.engine.stop") == 4


def test_no_module_imports_another_modules_private_name():
    private = sorted(
        f"{m} imports {n} from {t}"
        for m, found in imports(modules()).items()
        for t, n in found
        if n.startswith("_") and not n.startswith("__")
    )
    assert private == []


# Constants of one name in two modules that mean different things there.
SAME_NAME_OTHER_MEANING = {
    "ALPHA",  # watch: a gate's family-wise error rate; analysis: one test's level
    "CSP",  # report/htmlkit: a standalone report's (its inline script); serve/guard: the server's (none inline)
    "HERE",  # each module's own folder
    "HOST",  # targets/ssh: a host name's pattern; targets/fake: the fake host
    "NAME",  # a pattern of names, each of its own thing
    "SCHEMA",  # each JSON document's own version
    "SHELL",  # each target kind's shell
}


def constants(path: Path) -> set[str]:
    """The UPPER_CASE names a module assigns at its top level (imports aside)."""
    out = set()
    for node in ast.parse(path.read_text()).body:
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        out |= {t.id for t in targets if isinstance(t, ast.Name) and t.id.isupper()}
    return out


def test_a_constant_is_defined_in_one_module():
    """MIN_BLOCKS (the sign-flip test's fewest blocks) once, in stats/; the
    others import it."""
    where: dict[str, list[str]] = {}
    for mod, (path, _) in sorted(modules().items()):
        for name in constants(path):
            where.setdefault(name, []).append(mod)
    twice = {n: ms for n, ms in where.items() if len(ms) > 1 and n not in SAME_NAME_OTHER_MEANING}
    assert twice == {}
    assert where["MIN_BLOCKS"] == ["vmtax.stats.signflip"]


def test_every_kind_declares_what_it_can_do():
    """A kind's capabilities match what it implements: "barrier" where it
    holds a run at a barrier (run_gated), "parallel_start" where its start
    is split in two; callers ask the declaration, never the method."""
    from vmtax.targets import KINDS
    from vmtax.targets.base import Target

    for kind, cls in KINDS.items():
        assert ("barrier" in cls.capabilities) == (cls.run_gated is not Target.run_gated), kind
        assert ("parallel_start" in cls.capabilities) == (cls.begin_start is not Target.begin_start), kind
    src = Path(__file__).resolve().parents[1] / "src" / "vmtax"
    for path in src.rglob("*.py"):
        if path.parent.name != "targets":
            text = path.read_text()
            assert "is Target." not in text and "isinstance(t, ChannelTarget)" not in text, path


def test_the_benchmark_scripts_run_the_demo_the_makefile_runs():
    """tools/demojob.py reads `make demo`'s command from the Makefile (the
    scripts that run it follow it): what it reads parses as a compare of
    rows that exist, with the Makefile's own DEMO_BENCH."""
    import importlib.util
    import re

    from vmtax import suite
    from vmtax.cli import build_parser

    root = SRC.parent
    spec = importlib.util.spec_from_file_location("demojob", root / "tools" / "demojob.py")
    demojob = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demojob)
    args = build_parser().parse_args(demojob.demo_args())
    make = (root / "Makefile").read_text().replace("\\\n", " ")
    assert args.command == "compare" and args.baseline == "local"
    assert args.bench == re.search(r"^DEMO_BENCH\s*:=\s*(.+)$", make, re.M).group(1).split()
    assert len(suite.select(None, args.bench)) >= len(args.bench)  # an unknown name is a UserError
