"""Labels and messages made of every Unicode category, through every
writer of XML, HTML and JSON: each output parses (xml.etree, a strict JSON
reader, HTML with no character its spec calls a parse error and every
inline SVG well-formed XML).  A target chooses its label and its messages:
a guest that could break CI's JUnit parser could hide a regression."""

import functools
import json
import random
import re
import unicodedata
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import store_run
from reportdata import run
from vmtax import watch
from vmtax.analysis import analyse
from vmtax.cli import main
from vmtax.model import BenchSpec
from vmtax.report import watch as watch_report
from vmtax.runner import RunConfig, Runner
from vmtax.store import Store
from vmtax.targets.base import Target

# What XML 1.0 forbids (Char: #x9 | #xA | #xD | [#x20-#xD7FF] | [#xE000-#xFFFD] | [#x10000-#x10FFFF])
# and what HTML calls a parse error (controls but ASCII whitespace, surrogates, noncharacters)
NONCHARACTERS = set(range(0xFDD0, 0xFDF0)) | {
    plane + k for plane in range(0, 0x110000, 0x10000) for k in (0xFFFE, 0xFFFF)
}
XML_FORBIDDEN = (set(range(0x20)) - {0x9, 0xA, 0xD}) | set(range(0xD800, 0xE000)) | {0xFFFE, 0xFFFF}
HTML_FORBIDDEN = (
    (set(range(0x20)) - {0x9, 0xA, 0xC, 0xD}) | set(range(0x7F, 0xA0)) | set(range(0xD800, 0xE000)) | NONCHARACTERS
)
# and what a terminal or a reader acts on: bidirectional overrides, line separators, a byte-order mark
SPECIAL = frozenset(
    XML_FORBIDDEN
    | HTML_FORBIDDEN
    | set(range(0x202A, 0x202F))
    | set(range(0x2066, 0x206A))
    | {0x2028, 0x2029, 0x200B, 0xFEFF}
)


@functools.cache
def by_category() -> dict[str, list[int]]:
    """Every code point, by its general category (Lu, Cc, Cn ... 30 of them)."""
    out: dict[str, list[int]] = {}
    for cp in range(0x110000):
        out.setdefault(unicodedata.category(chr(cp)), []).append(cp)
    return out


def label_of(category: str) -> str:
    """A label of one category: its first and last code points, every one
    XML or HTML forbids or a reader acts on, and a seeded sample of the rest."""
    cps = by_category()[category]
    rng = random.Random(category)
    chosen = {cps[0], cps[-1], *rng.sample(cps, min(8, len(cps)))}
    chosen |= {c for c in cps if c in SPECIAL}
    return category + "-" + "".join(chr(c) for c in sorted(chosen))


# a stored run holds no lone surrogate (SQLite and PostgreSQL store UTF-8): Cs comes from a target's
# own line, below
STORED = [c for c in sorted(by_category()) if c != "Cs"]


def _hostile_run(run_id: str, labels: list[str]):
    """A compare of local against one candidate per label: getppid
    measured, forkwait failed with the label as the target's message."""
    names = ("local", *(f"fake:label={x}" for x in labels))
    data = run(run_id=run_id, names=names, facts=None)
    data.benchmarks = [b for b in data.benchmarks if b.name in ("getppid", "forkwait")]
    data.samples = [s for s in data.samples if s.benchmark == "getppid" or s.target == "local"]
    data.outcomes = {k: v for k, v in data.outcomes.items() if k[1] in ("getppid", "forkwait")}
    for t, x in zip(data.targets[1:], labels, strict=True):
        t.facts["label"] = x
        data.outcomes[(t.name, "forkwait")] = ("error", f"agent said: {x}")
    return data


def _strict_json(text: str):
    def no_constant(name):
        raise ValueError(f"{name} is not JSON")

    doc = json.loads(text, parse_constant=no_constant)

    def walk(v):
        if isinstance(v, str):
            assert not re.search("[\ud800-\udfff]", v), f"a lone surrogate in {v!r}"
        elif isinstance(v, dict):
            for k, x in v.items():
                walk(k)
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    walk(doc)
    return doc


def _html_ok(page: str, what: str) -> None:
    bad = sorted({f"U+{ord(c):04X}" for c in page if ord(c) in HTML_FORBIDDEN})
    assert not bad, f"{what}: characters HTML forbids: {', '.join(bad[:20])}"
    HTMLParser().feed(page)
    svgs = re.findall(r"<svg\b.*?</svg>", page, re.S)
    assert svgs, what
    for svg in svgs:
        ET.fromstring(svg)  # raises ParseError where it is not well-formed


@pytest.fixture(scope="module")
def hostile_db(tmp_path_factory):
    """Two stored compare runs alike (diff and history need two), one candidate per category."""
    db = tmp_path_factory.mktemp("unicode") / "u.db"
    labels = [label_of(c) for c in STORED]
    with Store(db) as store:
        for run_id in ("20260101-120000-aaaa", "20260102-120000-bbbb"):
            store_run(store, _hostile_run(run_id, labels))
    return db


def test_the_labels_cover_every_category_and_what_xml_forbids():
    assert len(STORED) == 29
    held = {ord(c) for cat in STORED for c in label_of(cat)}
    assert {0x0, 0xB, 0x1F, 0x85, 0xFFFE, 0xFFFF, 0xFDD0, 0x1FFFF, 0x10FFFF, 0x10FFFD, 0x2028, 0x202E} <= held


def test_gate_junit_and_json_parse_for_labels_of_every_unicode_category(hostile_db, tmp_path, capsys):
    junit, gate_json = tmp_path / "g.xml", tmp_path / "g.json"
    assert main(["--db", str(hostile_db), "gate", "--junit", str(junit), "--json", str(gate_json)]) in (1, 4)
    capsys.readouterr()
    root = ET.parse(junit).getroot()
    cases = root.findall(".//testcase")
    assert len(cases) == 2 * len(STORED)
    assert len({c.get("classname") for c in cases}) == len(STORED)  # escaping merges no two labels
    assert all(c.get("classname").startswith("fake:label=") for c in cases)
    doc = _strict_json(gate_json.read_text())
    assert len(doc["gate"]["rows"]) == 2 * len(STORED)


@pytest.mark.parametrize(
    "argv",
    [
        ["show", "--json", "-"],
        ["runs", "--json", "-"],
        ["history", "--json", "-"],
        ["diff", "20260101", "20260102", "--json", "-"],
        ["explain", "--json", "-"],
    ],
)
def test_every_json_writer_is_strict_json_for_labels_of_every_category(hostile_db, argv, capsys):
    main(["--db", str(hostile_db), *argv])
    out = capsys.readouterr().out
    _strict_json(out)


def test_every_html_writer_parses_for_labels_of_every_category(hostile_db, tmp_path, capsys):
    report, history = tmp_path / "r.html", tmp_path / "h.html"
    assert main(["--db", str(hostile_db), "report", "--html", str(report)]) == 0
    assert main(["--db", str(hostile_db), "history", "--bench", "getppid", "--html", str(history)]) == 0
    capsys.readouterr()
    for f in (report, history):
        _html_ok(f.read_text(), f.name)


class _Says(Target):
    """A target whose 'agent' prints the given lines."""

    kind = "scripted"

    def __init__(self, name, lines):
        super().__init__(name, {"counters": "off"})
        self.lines = lines

    def run_agent(self, args, timeout):
        return iter(self.lines)


def test_a_targets_message_with_lone_surrogates_and_noncharacters_is_stored_and_gated(tmp_path, capsys):
    """JSON can spell a lone surrogate (\\ud800): the store cannot hold one
    (a traceback, the run lost) and no XML may carry it."""
    spec = BenchSpec("getppid", "kernel", "ns", "lower", "d")
    db = tmp_path / "s.db"
    store = Store(db)
    good = _Says(
        "good",
        [
            '{"schema":1,"type":"calibration","bench":"getppid","instance":0,"iters":10}',
            '{"schema":1,"type":"done","bench":"getppid"}',
        ],
    )
    evil = _Says(
        "evil",
        ['{"schema":1,"type":"error","bench":"getppid","message":"a\\ud800b\\udfffc\\uffffd\\ufffee\\u0000f\\u001bg"}'],
    )
    store.new_run("r", "compare", "t", "0", {})
    for i, t in enumerate((good, evil)):
        store.add_target("r", i, t.info(), "h")
    store.add_benchmarks("r", [spec])
    Runner(RunConfig(max_time=1, min_processes=2), [spec], [good, evil], store, "r").run()
    store.finish_run("r", "complete")
    how, reason = store.load("r").outcomes[("evil", "getppid")]
    assert how == "error" and reason.startswith("a") and reason.endswith("g")
    junit = tmp_path / "g.xml"
    main(["--db", str(db), "gate", "r", "--junit", str(junit)])
    capsys.readouterr()
    text = ET.tostring(ET.parse(junit).getroot(), encoding="unicode")
    assert "\ufffe" not in text and "\uffff" not in text


ALL_CATEGORIES = sorted(by_category())


@settings(max_examples=60, deadline=None)
@given(
    st.text(
        st.characters(categories=ALL_CATEGORIES) | st.sampled_from(sorted(SPECIAL)).map(chr), min_size=1, max_size=40
    )
)
def test_the_junit_writer_parses_for_any_label(label):
    data = run(names=("local", f"fake:label={label}"))
    data.outcomes[(data.targets[1].name, "pi")] = ("error", label)
    data.samples = [s for s in data.samples if not (s.benchmark == "pi" and s.target != "local")]
    g = watch.gate(data, analyse(data)[1], 0.02)
    root = ET.fromstring(watch_report.gate_junit(g, data.id).encode("utf-8", "surrogatepass"))
    assert len(root.findall(".//testcase")) == 3
