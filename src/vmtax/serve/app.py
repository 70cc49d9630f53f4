"""The dashboard's routes (Starlette): each page a view-model (pages.py,
history.py) laid out by a Jinja2 template with autoescape on, or returned
as it is with ?format=json.  A page's whole state is in its URL (path and
query string): the URL is its permalink.  Handlers are plain functions,
which Starlette runs in its thread pool; the reader lends each a store."""

from __future__ import annotations

import json
import math
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from .. import __version__
from ..errors import UserError, VmtaxError
from ..report import htmlkit
from ..report.safe import inert
from ..store import redact
from . import history, pages, queries
from .data import Reader
from .guard import Guard

HERE = Path(__file__).parent


def _clean(x):
    """JSON's values: NaN and the infinities as null."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    return x


class Json(JSONResponse):
    def render(self, content) -> bytes:
        return json.dumps(_clean(content), allow_nan=False, default=str).encode("ascii")  # \u escapes: inert text


def _int(request: Request, name: str, default: int, least: int = 1, most: int = 10**6) -> int:
    text = request.query_params.get(name)
    if text is None or text == "":
        return default
    try:
        return max(least, min(most, int(text)))
    except ValueError:
        raise UserError(f"{name} takes a whole number, got {text!r}") from None


class Site:
    """The pages over one reader."""

    def __init__(self, reader: Reader):
        self.reader = reader
        self.env = Environment(
            loader=FileSystemLoader(HERE / "templates"),
            autoescape=select_autoescape(default=True),
            trim_blocks=True,
            finalize=_inert,
        )
        self.env.globals.update(version=__version__, store=redact(str(reader.where)), backend=reader.backend)
        self.env.filters["when"] = _when
        self.env.filters["num"] = _num
        self.env.filters["pct"] = _pct

    def respond(self, request: Request, template: str, model: dict, **extra) -> Response:
        if request.query_params.get("format") == "json":
            return Json(model)
        url = str(request.url.path) + ("?" + request.url.query if request.url.query else "")
        body = self.env.get_template(template).render(m=model, url=url, q=request.query_params, **extra)
        return HTMLResponse(body)

    def runs(self, request: Request) -> Response:
        filters = {k: request.query_params.get(k, "").strip() for k in queries.FILTERS}
        page = _int(request, "page", 1)
        per = _int(request, "per", queries.PER_PAGE, 1, queries.MAX_PER_PAGE)
        return self.respond(request, "runs.html", pages.runs_page(self.reader, filters, page, per))

    def run(self, request: Request) -> Response:
        run_id = self.reader.resolve(request.path_params["run"])
        doc, section = pages.run_page(self.reader, run_id)
        links = pages.row_links(self.reader.digest(run_id))
        return self.respond(request, "run.html", doc, section=Markup(section), links=links)

    def distribution(self, request: Request) -> Response:
        run_id = self.reader.resolve(request.path_params["run"])
        svg = pages.distribution_svg(self.reader, run_id, request.path_params["bench"])
        if svg is None:
            raise UserError(f"no run '{run_id}' chart of {request.path_params['bench']!r}")
        return Response(svg, media_type="image/svg+xml")

    def history(self, request: Request) -> Response:
        q = {k: request.query_params.get(k, "") for k in ("bench", "candidate", "baseline", "host")}
        model = history.history_page(self.reader, {k: v for k, v in q.items() if v}, _int(request, "limit", 200))
        svgs = {k: Markup(v) for k, v in history.history_charts(model).items()}
        return self.respond(request, "history.html", model, charts=svgs)

    def diff(self, request: Request) -> Response:
        model = history.diff_page(self.reader, request.query_params.get("a", ""), request.query_params.get("b", ""))
        return self.respond(request, "diff.html", model, show_all=request.query_params.get("show") == "all")

    def hosts(self, request: Request) -> Response:
        return self.respond(request, "hosts.html", pages.hosts_page(self.reader))

    def gates(self, request: Request) -> Response:
        return self.respond(request, "gates.html", pages.gates_page(self.reader, _int(request, "limit", 500)))

    def error(self, request: Request, status: int, text: str) -> Response:
        if request.query_params.get("format") == "json":
            return Json({"error": text}, status_code=status)
        body = self.env.get_template("error.html").render(m={"error": text}, status=status, url="", q={})
        return HTMLResponse(body, status_code=status)


def _inert(v):
    """Every value a template shows, its control and bidi characters shown as escapes (report/safe.py)."""
    if isinstance(v, Markup):
        return Markup(inert(str(v)))
    return v if v is None or isinstance(v, (int, float)) else inert(str(v))


def _when(t) -> str:
    import time

    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(t)) if isinstance(t, (int, float)) else "-"


def _num(v, digits: int = 4) -> str:
    return f"{v:#.{digits}g}" if isinstance(v, (int, float)) and math.isfinite(v) else "-"


def _pct(v) -> str:
    return f"{v - 1:+.2%}" if isinstance(v, (int, float)) and math.isfinite(v) else "-"


def _handle(site: Site, method):
    def endpoint(request: Request) -> Response:
        try:
            return method(request)
        except UserError as e:
            said = redact(str(e))
            return site.error(request, 404 if said.startswith(("no run", "no runs")) else 400, said)
        except VmtaxError as e:
            return site.error(request, 500, redact(str(e)))

    return endpoint


# one style and one table sorter for every page vmtax makes (report/htmlkit.py), serve's with its own rules
PAGE_CSS = htmlkit.CSS + (HERE / "static" / "serve.css").read_text()
PAGE_JS = "/* vmtax serve: sortable tables (a page reads the same without it) */" + htmlkit.SORT_JS


def build(reader: Reader, allowed: set[str], token: str | None = None) -> Guard:
    """The whole application: the site behind its guard."""
    site = Site(reader)
    routes = [
        Route("/", _handle(site, site.runs), methods=["GET", "HEAD"]),
        Route("/runs/{run}", _handle(site, site.run), methods=["GET", "HEAD"]),
        Route("/runs/{run}/dist/{bench}.svg", _handle(site, site.distribution), methods=["GET", "HEAD"]),
        Route("/history", _handle(site, site.history), methods=["GET", "HEAD"]),
        Route("/diff", _handle(site, site.diff), methods=["GET", "HEAD"]),
        Route("/hosts", _handle(site, site.hosts), methods=["GET", "HEAD"]),
        Route("/gates", _handle(site, site.gates), methods=["GET", "HEAD"]),
        Route("/healthz", lambda request: PlainTextResponse("ok\n"), methods=["GET", "HEAD"]),
        Route("/static/app.css", lambda request: Response(PAGE_CSS, media_type="text/css"), methods=["GET", "HEAD"]),
        Route(
            "/static/app.js", lambda request: Response(PAGE_JS, media_type="text/javascript"), methods=["GET", "HEAD"]
        ),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    app = Starlette(routes=routes)
    app.state.site = site
    return Guard(app, allowed, token)
