"""One interval type (model.Interval) behind every estimate: its figures,
its one text formatter (units.fmt_interval), and its one JSON spelling in
every `--json` document (docs/json.md): an interval's ends are `ci_low` and
`ci_high` beside its point, or `POINT_ci_low` and `POINT_ci_high` beside
`POINT` where the object holds more than one interval's figures."""

import json
import math

import pytest

from helpers import vmtax
from vmtax.model import Interval
from vmtax.report.units import fmt_interval

POINTS = ("ratio", "mean", "value", "change")  # the points a bare ci_low/ci_high stands beside
BOUNDS = ("low", "high", "lo", "hi")  # not "lower", "higher": counts of rows (host_state[])


def test_an_interval_says_its_width_and_what_it_leaves_out():
    iv = Interval(2.0, 1.9, 2.2)
    assert iv.halfwidth == pytest.approx(0.15) and iv.rel_halfwidth == pytest.approx(0.075) and iv.level == 0.95
    assert iv.excludes(1) and not iv.excludes(2.1) and iv.excludes(2.3)
    assert Interval(1.0, -math.inf, math.inf).rel_halfwidth == math.inf
    assert Interval(0.0, -1, 1).rel_halfwidth == math.inf and not Interval(1.0, math.nan, math.nan).bounded


def test_one_formatter_writes_an_interval_in_each_style_the_reports_use():
    iv, wide = Interval(1.2345, 1.2, 1.27), Interval(1.2345, -math.inf, math.inf)
    assert fmt_interval(iv) == "1.234 [1.200, 1.270]" and fmt_interval(wide) == "1.234, no interval"
    assert fmt_interval(Interval(math.nan, math.nan, math.nan)) == "no interval"
    assert fmt_interval(iv, "cell") == "1.234 (1.200–1.270)" and fmt_interval(wide, "cell") == "1.234 (unbounded)"
    assert fmt_interval(iv, "ends", lambda x: f"{x:.4g}") == "[1.2, 1.27]" and fmt_interval(wide, "ends") == "unbounded"
    assert fmt_interval(iv, "width") == "±2.8" and fmt_interval(wide, "width") == "-"


def _intervals(doc, where="$"):
    """Every object of a JSON document with a key naming an interval's end,
    checked as it goes: (where, the object, its point's key, its ends' keys)."""
    if isinstance(doc, list):
        for i, x in enumerate(doc):
            yield from _intervals(x, f"{where}[{i}]")
        return
    if not isinstance(doc, dict):
        return
    for key in doc:
        if key.split("_")[-1] not in BOUNDS:
            continue
        assert key.endswith(("ci_low", "ci_high")), f"{where}.{key}: an interval's end is ci_low or ci_high"
        prefix = key[: -len("ci_low" if key.endswith("low") else "ci_high")]
        point = prefix[:-1] if prefix else next((p for p in POINTS if p in doc), None)
        assert point in doc, f"{where}.{key}: no point beside it"
        assert prefix + "ci_low" in doc and prefix + "ci_high" in doc, f"{where}.{key}: its other end"
        if key.endswith("low"):
            yield where, doc, point, prefix + "ci_low", prefix + "ci_high"
    for key, x in doc.items():
        yield from _intervals(x, f"{where}.{key}")


def _json(capsys, *args, db) -> object:
    code = vmtax(*args, db=db)
    out = capsys.readouterr().out
    assert code in (0, 1, 3), (args, code)
    return json.loads(out)


def test_every_json_document_spells_an_interval_one_way(capsys, db):
    """A compare with two modes and a host that drifts (strata, the host's
    state, metrics), again with --fast-mode, a scale run, and every command's
    --json over them: each interval is spelled one way and holds its point."""
    targets = ["fake:seed=1,host_noise=0.05,host_rho=0.9", "fake:seed=2,scale=1.5,slow_share=0.3,slow_by=1.5"]
    for flag in ("--same-mode", "--fast-mode"):
        argv = ["compare", *targets, "--bench", "getppid", "--max-time", "3s", "--precision", "0.01%", "--cpu", "none"]
        assert vmtax(*argv, flag, db=db) == 0
    capsys.readouterr()
    assert vmtax("scale", "fake", "--instances", "1,2", "--bench", "getppid", "--round-time", "0.05s", db=db) == 0
    capsys.readouterr()
    docs = [_json(capsys, "show", "--json", db=db)]  # the scale run
    runs = [r["id"] for r in _json(capsys, "runs", "--json", db=db) if r["kind"] == "compare"]
    for run in runs:
        docs += [_json(capsys, c, run, "--json", db=db) for c in ("show", "explain")]
        docs.append(_json(capsys, "gate", run, "--reference", "--json", db=db))
    docs += [_json(capsys, "diff", *runs[:2], "--json", db=db), _json(capsys, "history", "--json", db=db)]
    found = [x for d in docs for x in _intervals(d)]
    for where, obj, point, low, high in found:
        if None not in (obj[point], obj[low], obj[high]):
            assert obj[low] <= obj[point] * (1 + 1e-12) and obj[point] <= obj[high] * (1 + 1e-12), where
    kinds = {(point, low) for _, _, point, low, _ in found}
    assert {("ratio", "ratio_ci_low"), ("ratio", "ci_low"), ("change", "change_ci_low"), ("mean", "ci_low")} <= kinds
    assert ("value", "ci_low") in kinds and ("change", "ci_low") in kinds  # scale's estimates, diff's change
