"""vmtax serve through Starlette's test client, on stores seeded with known
answers (serveseed.py), in SQLite and in the session's PostgreSQL: every
route and its JSON twin, the answers the history and the diff must find,
the twins against the CLI's own JSON, the guard (methods, Host, token, CSP),
read-only connections, and hostile labels on every page."""

import dataclasses
import json
import math
import os
import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import quote

import psycopg
import pytest
from starlette.testclient import TestClient

import serveseed
from helpers import vmtax
from pgserver import PASSWORD
from vmtax.analysis import analyse
from vmtax.cli import main
from vmtax.errors import UserError
from vmtax.report import jsondoc
from vmtax.serve import summary
from vmtax.serve.app import build
from vmtax.serve.data import Reader
from vmtax.serve.guard import CSP, host_name
from vmtax.store import Store
from vmtax.store.migrations import MIGRATIONS

ROW = {"bench": serveseed.STEP_ROW, "candidate": "qemu:accel=tcg", "host": serveseed.STEP_HOST}


def client(location, token=None, hosts=("testserver",)) -> tuple[TestClient, Reader]:
    reader = Reader(location)
    return TestClient(build(reader, set(hosts), token)), reader


@pytest.fixture(scope="module")
def seeded(tmp_path_factory):
    db = tmp_path_factory.mktemp("serve") / "seeded.db"
    ids = serveseed.seed(db)
    c, reader = client(db)
    yield db, ids, c
    reader.close()


@pytest.fixture(scope="module")
def seeded_pg(pg_server):
    """A team's database: its owner logs in over TCP with a password."""
    name = pg_server.create_db(owner="alice")
    url = pg_server.url(name, "alice", PASSWORD, tcp=True)
    ids = serveseed.seed(url, runs_per_host=14)
    c, reader = client(url)
    yield url, ids, c
    reader.close()
    pg_server.drop_db(name)


def step_urls(ids) -> list[str]:
    """Every page of the seeded store, as the browser's path visits them."""
    before, at = ids[serveseed.STEP_AT - 1], ids[serveseed.STEP_AT]
    row = "&".join(f"{k}={v}" for k, v in ROW.items())
    return ["/", "/?host=lab-a&page=2&per=5", f"/runs/{at}", f"/history?{row}", f"/diff?a={before}&b={at}", "/hosts"]


class Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.scripts, self.urls = [], []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "script":
            self.scripts.append(a.get("src"))
        self.urls += [v for k, v in attrs if k in ("href", "src", "action") and v]


def test_every_page_and_its_json_twin(seeded):
    _db, ids, c = seeded
    for url in [*step_urls(ids), "/gates"]:
        r = c.get(url)
        assert r.status_code == 200, (url, r.text[:500])
        assert r.headers["content-security-policy"] == CSP and "'unsafe-inline'" not in CSP.split("script-src")[1][:20]
        tags = Tags()
        tags.feed(r.text)
        assert tags.scripts[0] == "/static/app.js" and all(x and x.startswith("/static/") for x in tags.scripts), url
        assert all(u.startswith(("/", "#")) for u in tags.urls), (url, [u for u in tags.urls if u[0] != "/"])
        j = c.get(url + ("&" if "?" in url else "?") + "format=json")
        assert j.status_code == 200 and j.headers["content-type"] == "application/json"
        assert isinstance(j.json(), dict)
    assert c.get("/static/app.js").status_code == 200 and c.get("/healthz").text == "ok\n"
    from vmtax.report import htmlkit  # one style and one sorter for a report's pages and serve's

    css, js = c.get("/static/app.css"), c.get("/static/app.js")
    assert (
        css.text.startswith(htmlkit.CSS) and "nav{" in css.text and css.headers["content-type"].startswith("text/css")
    )
    assert js.text.endswith(htmlkit.SORT_JS) and js.headers["content-type"].startswith("text/javascript")
    for vendored in ("uPlot.iife.min.js", "uPlot.min.css", "LICENSE", "VERSION"):
        assert c.get(f"/static/uplot-1.6.32/{vendored}").status_code == 200
    run = c.get(f"/runs/{ids[0]}").text
    srcs = re.findall(r'<img src="(/runs/[^"]+\.svg)"', run)
    assert srcs == [f"/runs/{ids[0]}/dist/{name}.svg" for name, *_ in serveseed.ROWS]
    svg = c.get(srcs[0])
    assert svg.headers["content-type"] == "image/svg+xml" and svg.text.startswith("<svg")
    assert c.get(f"/runs/{ids[0]}/dist/nope.svg").status_code == 404
    assert c.head("/").status_code == 200


def test_the_runs_list_filters_and_pages(seeded):
    _db, ids, c = seeded
    doc = c.get("/?format=json").json()
    assert doc["total"] == len(ids) and len(doc["runs"]) == 48 and doc["pages"] == 1
    assert [r["started"] for r in doc["runs"]] == sorted((r["started"] for r in doc["runs"]), reverse=True)
    first = doc["runs"][0]
    assert first["verdict"]["ratios"] == 3 and first["status"] == "complete"
    page = c.get("/?host=lab-a&per=5&page=2&format=json").json()
    assert page["total"] == 24 and page["pages"] == 5 and len(page["runs"]) == 5
    assert {r["host"] for r in page["runs"]} == {"lab-a"}
    assert c.get("/?suite=nope&format=json").json()["total"] == 0
    assert c.get("/?suite=lmbench&target=qemu&format=json").json()["total"] == 48  # a target by its kind
    assert c.get("/?target=qemu:accel=tcg&kind=compare&format=json").json()["total"] == 48
    assert c.get("/?target=uml&format=json").json()["total"] == 0
    assert c.get("/?label=a%&format=json").json()["total"] == 0  # % is a character, not a wildcard
    assert c.get("/?since=2026-09-24&until=2026-09-24&format=json").json()["total"] == 2  # each host's run 3
    assert c.get("/?command=--gate&format=json").json()["total"] == 2 * (24 // 5)
    gated = [r for r in doc["runs"] if r["gate"]]
    assert gated and all(r["gate"]["threshold"] == 0.02 for r in gated)
    assert c.get("/?since=2026-13-01").status_code == 400
    assert c.get("/?page=x").status_code == 400


def test_history_finds_the_step_and_the_kernel_change_exactly(seeded):
    _db, ids, c = seeded
    s = c.get("/history", params={**ROW, "format": "json"}).json()["series"]
    (cp,) = s["change_points"]
    assert (cp["index"], cp["run"], cp["facts"]) == (serveseed.STEP_AT, ids[serveseed.STEP_AT], [])
    assert cp["after"] / cp["before"] == pytest.approx(1.05, abs=0.005)
    b = {"bench": serveseed.KERNEL_ROW, "candidate": "qemu:accel=tcg", "host": serveseed.KERNEL_HOST, "format": "json"}
    (cp,) = c.get("/history", params=b).json()["series"]["change_points"]
    old, new = serveseed.KERNELS
    assert cp["index"] == serveseed.KERNEL_AT and cp["facts"] == [
        {"fact": "local.kernel", "before": old, "after": new},
        {"fact": "qemu:accel=tcg.kernel", "before": old, "after": new},
    ]
    chart = c.get("/history", params={**b, "format": ""}).text
    assert f"<title>change point at {cp['run']}: " in chart and f"local.kernel: {old} → {new}; " in chart
    page = c.get("/history", params=ROW).text
    assert f'data-cp="{ids[serveseed.STEP_AT]}"' in page and "no fact changed there" in page
    assert f'href="/diff?a={ids[serveseed.STEP_AT - 1]}&amp;b={ids[serveseed.STEP_AT]}"' in page


def test_the_diff_puts_the_step_first_and_counts_it(seeded):
    _db, ids, c = seeded
    d = c.get("/diff", params={"a": ids[serveseed.STEP_AT - 1], "b": ids[serveseed.STEP_AT], "format": "json"}).json()
    assert d["counts"] == {"worse": 1, "better": 0, "within": 2}
    first = d["changes"][0]
    assert (first["benchmark"], first["moved"], first["significant"]) == (serveseed.STEP_ROW, "worse", True)
    assert first["change"] == pytest.approx(1.05, abs=0.01) and d["facts"] == []
    page = c.get("/diff", params={"a": ids[serveseed.STEP_AT - 1], "b": ids[serveseed.STEP_AT]}).text
    assert '<details id="insignificant">' in page
    shown = c.get("/diff", params={"a": ids[0], "b": ids[1], "show": "all"}).text
    assert '<details id="insignificant" open>' in shown


def test_the_json_twins_are_the_clis_own(seeded, tmp_path):
    db, ids, c = seeded
    run = ids[serveseed.STEP_AT]
    reader = Reader(db)
    data = reader.load(run)
    reader.close()
    want = json.loads(json.dumps(jsondoc.document(data, *analyse(data)), default=str).replace("NaN", "null"))
    assert c.get(f"/runs/{run}?format=json").json() == want
    out = tmp_path / "h.json"
    assert main(["--db", str(db), "history", "--bench", "getppid", "--host", "lab-a", "--json", str(out)]) == 0
    (cli,) = [s for s in json.loads(out.read_text()) if s["candidate"] == "qemu:accel=tcg"]
    assert c.get("/history", params={**ROW, "format": "json"}).json()["series"] == cli
    out = tmp_path / "d.json"
    assert main(["--db", str(db), "diff", ids[0], ids[30], "--json", str(out)]) == 0
    ours = c.get("/diff", params={"a": ids[0], "b": ids[30], "format": "json"}).json()
    strip = lambda d: sorted((x["benchmark"], x["change"], x["ci_low"]) for x in d["changes"])
    assert strip(ours) == strip(json.loads(out.read_text())) and ours["facts"] == json.loads(out.read_text())["facts"]


def test_hosts_and_gates(seeded):
    _db, ids, c = seeded
    h = c.get("/hosts?format=json").json()
    assert [x["host"] for x in h["hosts"]] == ["lab-a", "lab-b"] and h["targets"] == ["qemu:accel=tcg"]
    assert h["hosts"][1]["facts"]["kernel"] == serveseed.KERNELS[1]
    cell = next(x for x in h["matrix"] if x["host"] == "lab-a")
    kernel = next(s for s in cell["suites"] if s["suite"] == "kernel")
    assert kernel["ci_low"] < kernel["geomean"] < kernel["ci_high"] and kernel["geomean"] == pytest.approx(3.15, 0.01)
    g = c.get("/gates?format=json").json()
    (pair,) = g["pairs"]
    assert (pair["baseline"], pair["candidate"]) == ("local", "qemu:accel=tcg")
    verdicts = {x["run"]: x["verdict"] for x in pair["gates"]}
    assert len(verdicts) == 2 * (24 // 5) and ids[14] in verdicts  # every fifth run of a host was gated
    assert set(verdicts.values()) == {"regressed"}  # a candidate ~3x its baseline: regressed beyond 2%


def test_unknown_runs_and_bad_queries_are_answered_not_raised(seeded):
    _db, ids, c = seeded
    assert c.get("/runs/nope").status_code == 404
    assert c.get("/runs/nope?format=json").json()["error"].startswith("no run matching 'nope'")
    assert c.get("/diff?a=" + ids[0]).status_code == 400
    assert c.get("/history").status_code == 400
    assert c.get("/history?bench=nope&format=json").json()["series"] is None
    assert c.get("/no/such/page").status_code == 404


def test_the_guard(seeded):
    db, _ids, c = seeded
    assert c.post("/").status_code == 405 and c.request("DELETE", "/runs/x").status_code == 405
    assert c.put("/").headers["allow"] == "GET, HEAD"
    assert c.get("/", headers={"host": "evil.example"}).status_code == 400
    assert c.get("/", headers={"host": "evil.example:80"}).status_code == 400
    assert host_name("[::1]:8470") == "::1" and host_name("LocalHost:1") == "localhost"
    token = "t0ken-0123456789abcdef"
    tc, reader = client(db, token)
    try:
        assert tc.get("/").status_code == 401 and tc.get("/healthz").status_code == 401
        assert tc.get("/", headers={"authorization": "Bearer wrong-0123456789abc"}).status_code == 401
        assert tc.get("/", headers={"authorization": f"Bearer {token}"}).status_code == 200
        r = tc.get(f"/hosts?format=json&token={token}", follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == "/hosts?format=json"
        assert "HttpOnly" in r.headers["set-cookie"] and "SameSite=Strict" in r.headers["set-cookie"]
        assert tc.get("/hosts").status_code == 200  # the cookie, kept by the client
        assert tc.post("/", headers={"authorization": f"Bearer {token}"}).status_code == 405
    finally:
        reader.close()


def _write_fails(reader: Reader) -> str:
    with reader.store() as s, pytest.raises(s.errors) as e:
        s.db.execute(s.dialect.sql("UPDATE runs SET status = ? WHERE id = (SELECT min(id) FROM runs)"), ("x",))
    return str(e.value)


def test_a_write_through_the_servers_connection_fails(seeded):
    assert "readonly" in _write_fails(Reader(seeded[0])).replace("-", "")


def test_postgresql_pages_read_only_sessions(seeded_pg):
    url, ids, c = seeded_pg
    reader = Reader(url)
    try:
        assert "read-only transaction" in _write_fails(reader)
        with reader.store() as s:
            assert s.read("SHOW default_transaction_read_only") == [("on",)]
    finally:
        reader.close()
    s = c.get("/history", params={**ROW, "format": "json"}).json()["series"]
    assert [x["run"] for x in s["change_points"]] == [ids[serveseed.STEP_AT]]
    for url in step_urls(ids):
        for page in (url, url + ("&" if "?" in url else "?") + "format=json"):
            r = c.get(page)
            assert r.status_code == 200 and PASSWORD not in r.text and quote(PASSWORD, safe="") not in r.text, page
    assert "alice:***@127.0.0.1" in c.get("/").text


def test_hostile_labels_stay_text_on_every_page(tmp_path):
    db = tmp_path / "hostile.db"
    ids = serveseed.seed(db, runs_per_host=14, hostile=True)
    c, reader = client(db)
    try:
        label = serveseed.HOSTILE
        pages = [*step_urls(ids), "/gates", f"/history?bench=getppid&host=lab-a&candidate={label}"]
        for url in pages:
            r = c.get(url)
            assert r.status_code == 200, url
            assert "<script>alert" not in r.text and "\u202e" not in r.text and "\ufffe" not in r.text, url
            if url != "/":
                assert "&lt;script&gt;alert(1)&lt;/script&gt;" in r.text or "alert(1)" not in r.text, url
            j = c.get(url + ("&" if "?" in url else "?") + "format=json")
            assert j.status_code == 200 and re.fullmatch(rb"[\x20-\x7e\n]*", j.content), url
        assert c.get("/", params={"label": label, "format": "json"}).json()["total"] == 28
        page = c.get(f"/history?bench=getppid&host=lab-a&candidate={label}").text
        assert "&lt;script&gt;alert(1)&lt;/script&gt;\\ufffe\\u202eevil" in page and "x" * 10_000 in page
    finally:
        reader.close()


def test_serve_refuses_a_non_loopback_address_without_a_token(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("VMTAX_SERVE_TOKEN", raising=False)
    assert main(["serve", "--host", "0.0.0.0", "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a loopback address: give a token" in err
    short = tmp_path / "token"
    short.write_text("short\n")
    assert main(["serve", "--host", "0.0.0.0", "--token-file", str(short)]) == 2
    assert "a token is 16 to 512 characters" in capsys.readouterr().err
    assert main(["serve", "--token-file", str(tmp_path / "none")]) == 2
    assert "cannot read it" in capsys.readouterr().err
    assert main(["serve", "--port", "70000"]) == 2
    assert "--port must be between 0 and 65535" in capsys.readouterr().err
    assert main(["--db", str(tmp_path / "none.db"), "serve", "--port", "0"]) == 2
    assert capsys.readouterr().err.startswith("vmtax: no results database at ")


def _documented() -> dict[str, set[str]]:
    """docs/json.md's table of the pages' keys: page -> its first-level keys."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "json.md").read_text()
    section = text[text.index("## vmtax serve") :].split("\n## ")[0]
    out = {}
    for line in section.splitlines():
        m = re.match(r"\| `(/[^`]*)`[^|]*\| (.*) \|$", line)
        if m:
            keys = re.sub(r"\([^)]*\)", "", re.sub(r"\[[^]]*\]\([^)]*\)", "", m.group(2)))  # less links, then asides
            out[m.group(1)] = set(re.findall(r"`(\w+)(?:\[\])?`", keys))
    return out


def test_the_json_twins_have_the_keys_docs_json_md_gives(seeded):
    _db, ids, c = seeded
    docs = _documented()
    assert set(docs) == {"/", "/runs/RUN", "/history", "/diff", "/hosts", "/gates"}
    got = {
        "/": c.get("/?format=json").json(),
        "/history": c.get("/history", params={**ROW, "format": "json"}).json(),
        "/diff": c.get("/diff", params={"a": ids[0], "b": ids[1], "format": "json"}).json(),
        "/hosts": c.get("/hosts?format=json").json(),
        "/gates": c.get("/gates?format=json").json(),
    }
    diff_keys = {"run_a", "run_b", "only_a", "only_b", "changes", "facts"}  # vmtax diff's, documented above it
    for page, doc in got.items():
        want = docs[page] | (diff_keys if page == "/diff" else set())
        assert set(doc) == want, page
    run = got["/"]["runs"][0]
    assert set(run) == set("id kind started finished status command targets host user verdict gate".split())
    assert set(got["/history"]["series"]) == {"benchmark", "baseline", "candidate", "unit", "direction"} | {
        "points",
        "change_points",
    }


def _pages(location, urls: list[str]) -> tuple[dict, Reader]:
    c, reader = client(location)
    got = {u: c.get(u + ("&" if "?" in u else "?") + "format=json").json() for u in urls}
    reader.close()
    return got, reader


def _summaries(location) -> int:
    with Store(location, readonly=True) as s:
        return s.read("SELECT count(*) FROM run_summaries")[0][0]


def test_the_lists_read_stored_summaries_and_without_them_the_same(location, monkeypatch):
    """The runs list, the gates, a row's history and the diff read the runs' stored summaries
    (no run analysed); without them (a store from before, another version's) they analyse the
    runs and show the same; the server writes none."""
    ids = serveseed.seed(location, runs_per_host=14)
    before, at = ids[serveseed.STEP_AT - 1], ids[serveseed.STEP_AT]
    row = "&".join(f"{k}={v}" for k, v in ROW.items())
    urls = ["/", "/?host=lab-b&per=5&page=2", "/gates", f"/history?{row}", "/history?bench=stat&host=lab-b"]
    urls += [f"/diff?a={before}&b={at}"]
    stored, reader = _pages(location, urls)
    assert len(reader.digests) == len(reader.memo) == 0  # nothing analysed
    assert [x["run"] for x in stored[f"/history?{row}"]["series"]["change_points"]] == [at]
    assert stored["/"]["runs"][0]["verdict"]["line"] and stored["/gates"]["pairs"][0]["gates"]
    monkeypatch.setattr(summary, "VERSION", summary.VERSION + 1)  # the analysis changed since
    again, reader = _pages(location, urls)
    assert again == stored and len(reader.digests) > 0
    monkeypatch.undo()
    with Store(location) as s, s._write("forget the summaries"):  # as a store from before them
        s._execute("DELETE FROM row_figures")
        s._execute("DELETE FROM run_summaries")
    without, reader = _pages(location, urls)
    assert without == stored and len(reader.digests) > 0 and _summaries(location) == 0  # nothing written
    with Store(location) as s:  # the end of the next compare: the newest runs without one, summarised
        assert summary.catch_up(s, limit=5) == [r["id"] for r in stored["/"]["runs"][:5]]
    assert _summaries(location) == 5 and _pages(location, urls)[0] == stored


def test_a_compare_stores_its_summary_at_its_end(db):
    assert vmtax("compare", "fake", "fake:scale=2,label=b", "--bench", "getppid", db=db) == 0
    with Store(db, readonly=True) as s:
        run = s.resolve(None)
        data = s.load(run)
        (want,) = [summary.of(data, *analyse(data))]
        assert s.summaries([run], summary.VERSION) == {run: (want.verdict, want.gate)}
        assert s.figures([run], summary.VERSION) == {run: want.figures}
    assert want.verdict["ratios"] == 1 and want.figures[0]["ratio"] == pytest.approx(2, rel=0.05)


def _rounded(x):
    """x with its floats to 9 significant digits (a golden file holds what any platform gives)."""
    if isinstance(x, float):
        return float(f"{x:.9g}") if math.isfinite(x) else str(x)
    if isinstance(x, dict):
        return {k: _rounded(v) for k, v in x.items()}
    return [_rounded(v) for v in x] if isinstance(x, list) else x


def test_a_summarys_version_changes_with_what_the_analysis_gives(tmp_path):
    """A stored summary is read only by the VERSION that wrote it: this run's summary, as
    this VERSION gives it, is held in tests/golden; when the analysis gives another, raise
    serve/summary.py's VERSION (stored summaries are then worked out again) and rewrite it."""
    ids = serveseed.seed(tmp_path / "s.db", runs_per_host=5, hosts=(serveseed.STEP_HOST,), summaries=False)
    with Store(tmp_path / "s.db", readonly=True) as s:
        data = s.load(ids[4])  # gated (--gate 2%)
    got = summary.of(data, *analyse(data))
    assert got.gate is not None and got.verdict is not None and len(got.figures) == 3
    doc = {"version": summary.VERSION, **_rounded(dataclasses.asdict(got))}
    path = Path(__file__).parent / "golden" / f"serve-summary-v{summary.VERSION}.json"
    text = json.dumps(doc, indent=1, sort_keys=True) + "\n"
    if os.environ.get("UPDATE_GOLDEN"):
        path.write_text(text)
        pytest.fail(f"{path.name} rewritten (UPDATE_GOLDEN is set): review it, rerun without it")
    assert path.exists() and text == path.read_text(), (
        "the analysis gives another summary of this run: raise VERSION in src/vmtax/serve/summary.py,"
        " then rerun with UPDATE_GOLDEN=1"
    )


def test_serve_refuses_a_postgresql_store_of_an_older_schema_and_holds_no_lock(pg_url, monkeypatch):
    Store(pg_url).close()
    with psycopg.connect(pg_url, autocommit=True) as db:  # as the last migration found it
        db.execute("DROP TABLE row_figures")
        db.execute("DROP TABLE run_summaries")
        db.execute("UPDATE vmtax_schema SET version = %s", (len(MIGRATIONS) - 1,))
    with pytest.raises(UserError, match=f"has schema {len(MIGRATIONS) - 1}, older than this vmtax's"):
        Reader(pg_url)
    monkeypatch.setenv("PGOPTIONS", "-c lock_timeout=5000")  # a lock left held: an error, not a wait
    Store(pg_url).close()  # a writer migrates it
    Reader(pg_url).close()


def test_a_runs_ratio_charts_are_inline_svg_drawn_here(seeded):
    _db, ids, c = seeded
    page = c.get(f"/runs/{ids[0]}").text
    assert page.count('<svg class="bars"') == 3  # a chart per suite: kernel, lmbench, cpu
    (tip,) = re.findall(r"<title>getppid on qemu:accel=tcg: ([\d.]+) \[([\d.]+), ([\d.]+)\]</title>", page)
    ratio, low, high = map(float, tip)
    assert low < ratio < high and ratio == pytest.approx(3, rel=0.02)  # the bar's ratio and its interval
