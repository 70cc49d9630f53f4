"""The engine's shape, checked: compare (runner.py) and scale (scale.py)
both measure through the one engine package and share nothing else of
it; the engine depends on neither; and every piece of src/ stays small (no
class over 180 statements, no function over 45: about 250 and 60 lines as
the code was written before ruff format, which puts a call's arguments one
to a line and so says nothing of a piece's size)."""

import ast

from test_layout import SRC, imports, modules


def _edges() -> dict[str, set[str]]:
    return {m: {t for t, _ in found} for m, found in imports(modules()).items()}


def test_compare_and_scale_both_measure_through_the_engine_package():
    graph = _edges()
    for user in ("vmtax.runner", "vmtax.scale"):
        assert any(t.startswith("vmtax.engine") for t in graph[user]), user
    engine = {m for m in graph if m.startswith("vmtax.engine")}
    assert engine >= {"vmtax.engine.execute", "vmtax.engine.session", "vmtax.engine.stop"}
    for m in engine:  # the engine is below both: it imports neither
        assert not graph[m] & {"vmtax.runner", "vmtax.scale", "vmtax.cli"}, m
    assert "vmtax.core" not in graph  # one engine, not a core beside it


def test_one_place_writes_a_process_row():
    calls = []
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_process":
                calls.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert len(calls) == 1 and calls[0].startswith("vmtax/engine/execute.py"), calls


def _sizes(path) -> list[tuple[str, int, str]]:
    """Each class's and function's size: the lines its statements begin on
    (its docstring one, comments and wrapped expressions none)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            kind = "class" if isinstance(node, ast.ClassDef) else "def"
            size = len({n.lineno for n in ast.walk(node) if isinstance(n, ast.stmt)})
            out.append((kind, size, f"{path.relative_to(SRC)}:{node.lineno} {node.name}"))
    return out


def test_every_class_and_function_in_src_is_a_small_piece():
    files = sorted(SRC.rglob("*.py"))
    big = [(kind, n, where) for f in files for kind, n, where in _sizes(f) if n > (180 if kind == "class" else 45)]
    assert files and not big, big
