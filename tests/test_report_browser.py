"""The HTML report in a real browser: headless Chromium renders a report of
a real stored comparison; the charts drew, nothing reached for the network
(Chromium's own NetLog says so), and a hostile string in a target's facts
is shown as text."""

import json
import re
import shutil
import sqlite3
import subprocess
import sys

import pytest

from vmtax.targets.container import ContainerTarget

CHROMIUM = shutil.which("chromium")
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not CHROMIUM, reason="chromium is not installed (make setup installs it)"),
]

HOSTILE = "<script>document.title='pwned'</script><img src=x onerror=\"document.title='pwned'\">"


def page_requests(netlog_path) -> list[str]:
    """Remote URLs the page asked for.  Chromium's own services (updater,
    time sync, accounts) log their requests with the initiator 'not an
    origin'; a request a document makes carries that document's origin."""
    text = netlog_path.read_text().rstrip()
    if not text.endswith("}"):  # a log cut short at exit
        text = text.rstrip(",") + "]}"
    log = json.loads(text)
    start = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    out = []
    for e in log["events"]:
        p = e.get("params", {})
        if (
            e["type"] == start
            and re.match(r"(https?|wss?|ftp)://", p.get("url", ""))
            and p.get("initiator") != "not an origin"
        ):
            out.append(p["url"])
    return out


def load(tmp_path, page):
    netlog = tmp_path / f"netlog-{page.stem}.json"
    p = chromium(tmp_path, f"--log-net-log={netlog}", "--net-log-capture-mode=Everything", "--dump-dom", page.as_uri())
    return p.stdout, page_requests(netlog), p.stderr


def chromium(tmp_path, *args):
    profile = tmp_path / "profile"
    profile.mkdir(exist_ok=True)
    cmd = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        f"--user-data-dir={profile}",
        *args,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("report")
    db = tmp / "v.db"
    cand = "container" if ContainerTarget.available()[0] else "local:label=b"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "vmtax.cli",
            "--db",
            str(db),
            "compare",
            "local",
            cand,
            "--bench",
            "getppid",
            "null_call",
            "pi",
            "--precision",
            "50%",  # the charts need samples and ratios, not narrow intervals: it ends well before its budget
            "--max-time",
            "30s",
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    con = sqlite3.connect(db)
    with con:
        con.execute(
            "UPDATE run_targets SET facts_json = json_set(facts_json, '$.kernel', ?) WHERE position = 1", (HOSTILE,)
        )
    page = tmp / "report.html"
    subprocess.run(
        [sys.executable, "-m", "vmtax.cli", "--db", str(db), "report", "--html", str(page)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return tmp, page


def test_charts_draw_and_hostile_text_stays_text(report, tmp_path):
    _tmp, page = report
    dom, requests, err = load(tmp_path, page)
    assert "<h1>vmtax report</h1>" in dom, err[-2000:]
    svgs = re.findall(r"<svg.*?</svg>", dom, flags=re.S)
    assert len(svgs) >= 2 + 3  # ratio bars per suite, a distribution per benchmark
    assert all("<path" in s for s in svgs)
    assert "<title>vmtax report" in dom and "pwned</title>" not in dom
    assert "&lt;script&gt;document.title='pwned'&lt;/script&gt;" in dom
    assert '<img src="x"' not in dom
    assert requests == []


def test_the_network_check_can_fail(tmp_path):
    """Control: a page that does reach for the network is caught (loopback,
    a closed port: the attempt is logged, nothing is sent anywhere)."""
    page = tmp_path / "leaky.html"
    page.write_text('<!doctype html><img src="http://127.0.0.1:9/probe.png"><p>leaky</p>')
    dom, requests, _ = load(tmp_path, page)
    assert "leaky" in dom and requests == ["http://127.0.0.1:9/probe.png"]


def test_sortable_table_and_screenshot(report, tmp_path):
    _tmp, page = report
    shot = tmp_path / "shot.png"
    p = chromium(tmp_path, f"--screenshot={shot}", "--window-size=1200,900", page.as_uri())
    assert shot.exists() and shot.stat().st_size > 10000, p.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_history_page_draws_its_trend_and_change_point(tmp_path):
    """vmtax history --html of eight stored runs (fake targets: the page is
    what is tested), the last three 3% slower: Chromium renders the trend
    with its interval band and the change point, and asks for nothing."""
    from vmtax.cli import main

    db = tmp_path / "h.db"
    for i in range(8):  # in this process: eight interpreters' start-up would be most of the test
        opts = "noise=0.003,label=cand" + (",scale=1.03" if i >= 5 else "")
        main(
            [
                "--db",
                str(db),
                "compare",
                "fake:noise=0.003",
                f"fake:{opts}",
                "--bench",
                "getppid",
                "--max-time",
                "2s",
                "--precision",
                "0.3%",
                "--cpu",
                "none",
            ]
        )
    page = tmp_path / "history.html"
    assert main(["--db", str(db), "history", "--html", str(page)]) == 0
    dom, requests, err = load(tmp_path, page)
    assert "<h1>vmtax history</h1>" in dom, err[-2000:]
    (svg,) = re.findall(r"<svg.*?</svg>", dom, flags=re.S)
    assert "<path" in svg and "change point" in svg and "95% CI" in svg
    assert "cand.options.scale: absent → 1.03" in dom
    assert requests == []
    shot = tmp_path / "history.png"
    chromium(tmp_path, f"--screenshot={shot}", "--window-size=1000,600", page.as_uri())
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
