"""vmtax serve: a read-only web dashboard over the results store.

Pages: the runs (filtered, a page at a time), a run (the view of `vmtax
report --html`), a row's history with its change points, the diff of two
runs, the hosts, the gates; each with a JSON twin (?format=json) and its
state in its URL.  app.py holds the routes, guard.py what every request
passes, pages.py and history.py the view-models, charts.py the SVG, data.py
and queries.py the reads, server.py the command.  Starlette, uvicorn and
Jinja2 are the package's `serve` extra (make setup installs it)."""
