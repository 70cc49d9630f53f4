"""vmtax serve in a real browser: the real `vmtax serve` on a store seeded
with known answers (serveseed.py), in SQLite and in PostgreSQL, and
Debian's Chromium headless driven by Playwright (pinned in the test extra,
pointed at /usr/bin/chromium: no browser is ever downloaded) along runs →
a run → a row's history → its change point → the diff behind it.  No console
error, no request beyond loopback (every request is routed through a guard
that counts them), a copied URL reopened elsewhere shows the same view, and
with JavaScript off the charts are there.  A screenshot of each page goes
to the test's temporary directory."""

import json
import os
import re
import select
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from urllib.parse import urlsplit

import pytest

import serveseed
from conftest import vmtax_cmd
from helpers import leftovers

CHROMIUM = shutil.which("chromium")
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.xdist_group("serve-browser"),  # no target started: beside the e2e group, not in it (conftest.py)
    pytest.mark.skipif(not CHROMIUM, reason="chromium is not installed (make setup installs it)"),
]
playwright = pytest.importorskip("playwright.sync_api", reason="playwright is in the test extra (make setup)")
# Chromium's own services stay off: on a closed network they are refused, and they are not the page's
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
START_S = 30


@pytest.fixture(scope="module")
def browser():
    with playwright.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            yield b
        finally:
            b.close()


def start_server(db, *options: str, url=r"http://127\.0\.0\.1:\d+/") -> tuple[subprocess.Popen, str]:
    """The real command, on a free port; its URL read from the line it prints."""
    proc = subprocess.Popen(
        [*vmtax_cmd(), "--db", str(db), "serve", "--port", "0", *options],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.5)
        if ready:
            line = proc.stdout.readline()
            m = re.search(f"listening on ({url})", line)
            if m:
                return proc, m.group(1)
        if proc.poll() is not None:
            break
    proc.kill()
    raise AssertionError(f"vmtax serve did not start: {proc.stderr.read()}")


def stop_server(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        assert proc.wait(timeout=15) == 0, proc.stderr.read()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


class Watch:
    """What a context's pages did wrong: console errors, page errors,
    failed requests, and requests beyond loopback (aborted)."""

    def __init__(self, context):
        self.errors, self.offloop = [], []
        context.route("**/*", self.guard)

    def guard(self, route):
        host = urlsplit(route.request.url).hostname
        if route.request.url.startswith(("data:", "about:")) or host == "127.0.0.1":
            route.continue_()
        else:
            self.offloop.append(route.request.url)
            route.abort()

    def page(self, context):
        page = context.new_page()
        page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        page.on("pageerror", lambda e: self.errors.append(str(e)))
        page.on("requestfailed", lambda r: self.errors.append(f"failed: {r.url}"))
        return page


def walk(browser, base: str, ids: list[str], shots) -> None:
    before, at = ids[serveseed.STEP_AT - 1], ids[serveseed.STEP_AT]
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    watch = Watch(context)
    page = watch.page(context)
    page.goto(base)
    assert page.locator("#runs tbody tr").count() == len(ids)
    page.screenshot(path=shots / "runs.png", full_page=True)
    page.fill("input[name=host]", serveseed.STEP_HOST)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"host=lab-a"))
    assert page.locator("#runs tbody tr").count() == len(ids) // 2
    page.click(f'a[href="/runs/{at}"]')
    page.wait_for_url(f"{base}runs/{at}")
    assert page.locator("section svg").count() >= 2
    images = page.locator("section img")  # the distributions: images loaded as they come into view
    assert images.count() == len(serveseed.ROWS)
    images.first.scroll_into_view_if_needed()
    page.wait_for_load_state("networkidle")
    assert images.first.evaluate("e => e.complete && e.naturalWidth > 0")
    page.screenshot(path=shots / "run.png")
    page.click("details.rows summary")
    page.click("a.history >> text=getppid: qemu:accel=tcg / local")
    page.wait_for_url(re.compile(r"/history\?"))
    chart = page.locator("svg.trend").first
    assert chart.locator("circle[data-run]").count() == len(ids) // 2
    assert page.locator("a.cp").first.get_attribute("data-cp") == at
    history_url = page.url
    zoom(page, ids[: len(ids) // 2])
    page.screenshot(path=shots / "history.png", full_page=True)
    page.locator("svg.trend a.cp").first.click()
    page.wait_for_url(re.compile(r"/diff\?"))
    assert page.url == f"{base}diff?a={before}&b={at}"
    assert page.inner_text("#counts") == "1 worse · 0 better · 2 within their interval"
    assert page.locator("h2 + table tbody tr").first.get_attribute("data-bench") == serveseed.STEP_ROW
    page.screenshot(path=shots / "diff.png", full_page=True)
    diff_url = page.url
    for name in ("hosts", "gates"):
        page.goto(base + name)
        page.screenshot(path=shots / f"{name}.png", full_page=True)
    again(browser, {history_url: "svg.trend", diff_url: "#counts"}, page)
    no_script(browser, history_url, len(ids) // 2, shots)
    assert watch.errors == [] and watch.offloop == []
    context.close()


def zoom(page, runs: list[str]) -> None:
    """The vendored uPlot draws the ratio again; its legend names the run under the cursor."""
    page.wait_for_selector("#zoom[data-ready] canvas")
    over = page.locator("#zoom .u-over")
    box = over.bounding_box()
    over.hover(position={"x": box["width"] - 2, "y": box["height"] / 2})
    assert page.inner_text("#zoom .u-legend tr:first-child .u-value") == runs[-1]


def again(browser, urls: dict[str, str], first) -> None:
    """Each URL opened in a fresh context shows what it showed."""
    context = browser.new_context()
    watch = Watch(context)
    page = watch.page(context)
    for url, selector in urls.items():
        for p in (first, page):
            p.goto(url)
            if p.locator("#zoom").count():  # drawn once its JSON has come
                p.wait_for_selector("#zoom[data-ready] canvas")
        assert page.inner_text("main") == first.inner_text("main"), url
        assert page.locator(selector).count() >= 1
    assert watch.errors == [] and watch.offloop == []
    context.close()


def no_script(browser, url: str, points: int, shots) -> None:
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    page.goto(url)
    assert page.locator("svg.trend").count() == 3  # the ratio, then each side's values
    assert page.locator("svg.trend").first.locator("circle[data-run]").count() == points
    assert page.locator("svg.trend polygon.band").count() == 3
    assert page.locator("#zoom").is_hidden() and page.locator("#zoom canvas").count() == 0
    page.screenshot(path=shots / "history-nojs.png", full_page=True)
    context.close()


def check(browser, db, ids, shots) -> None:
    shots.mkdir()
    proc, base = start_server(db)
    try:
        walk(browser, base, ids, shots)
    finally:
        stop_server(proc)
    assert leftovers(str(db)) == []  # the server, and nothing it started
    assert sorted(p.name for p in shots.iterdir()) == [
        "diff.png",
        "gates.png",
        "history-nojs.png",
        "history.png",
        "hosts.png",
        "run.png",
        "runs.png",
    ]


def test_the_path_from_the_runs_to_a_change_points_diff_sqlite(browser, tmp_path):
    db = tmp_path / "seeded.db"
    check(browser, db, serveseed.seed(db), tmp_path / "shots")


def test_the_path_from_the_runs_to_a_change_points_diff_postgresql(browser, pg_server, tmp_path):
    url = pg_server.url("vmtax", schema=pg_server.create_schema())
    check(browser, url, serveseed.seed(url), tmp_path / "shots")


def test_beyond_loopback_only_with_the_token(tmp_path):
    """Bound to every address with a token (reached here over loopback):
    401 without the token, 200 with it."""
    db = tmp_path / "seeded.db"
    serveseed.seed(db, runs_per_host=2)
    token = tmp_path / "token"
    token.write_text("s3cret-token-0123456789\n")
    proc, base = start_server(db, "--host", "0.0.0.0", "--token-file", str(token), url=r"http://0\.0\.0\.0:\d+/")
    try:
        local = base.replace("0.0.0.0", "127.0.0.1")
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(local, timeout=10)
        assert e.value.code == 401
        asked = urllib.request.Request(
            local + "?format=json", headers={"Authorization": "Bearer s3cret-token-0123456789"}
        )
        with urllib.request.urlopen(asked, timeout=10) as r:
            assert r.status == 200 and json.load(r)["total"] == 4
    finally:
        stop_server(proc)


def test_the_guard_counts_a_request_beyond_loopback(browser):
    """Control: a page that asks for another address is seen (and the request
    aborted before it leaves: nothing is sent)."""
    context = browser.new_context()
    watch = Watch(context)
    page = watch.page(context)
    page.route(
        "http://127.0.0.1:9/",
        lambda route: route.fulfill(body='<img src="http://192.0.2.1/x.png">', content_type="text/html"),
    )
    page.goto("http://127.0.0.1:9/")
    page.wait_for_load_state("load")
    assert watch.offloop == ["http://192.0.2.1/x.png"] and "failed: http://192.0.2.1/x.png" in watch.errors
    context.close()
