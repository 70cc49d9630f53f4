"""The pieces every HTML page of vmtax shares: its style, its policy (no
network: a Content-Security-Policy forbids every fetch), sortable tables and
the page itself.  Every string from a run goes through escape()."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from html import escape

from .. import __version__

CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"

CSS = """
body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;margin:2em auto;max-width:1200px;
 padding:0 1em;color:#222}
h1{font-size:1.6em;margin-bottom:.2em}h2{border-bottom:2px solid #ddd;padding-bottom:.2em;margin-top:2em}
table{border-collapse:collapse;margin:.6em 0;font-size:13px;display:block;overflow-x:auto;max-width:100%}
th,td{border-bottom:1px solid #e4e4e4;padding:3px 8px;text-align:right;white-space:nowrap}
th{background:#f4f4f4;cursor:pointer;user-select:none}th:hover{background:#e8e8e8}
td.l,th.l{text-align:left}td.wrap{white-space:normal;max-width:28em;text-align:left}
.sig{color:#b00;font-weight:600}.prec{color:#888}.meta{color:#555}.verdict{font-weight:600}
.warn{background:#fff4e0;border-left:4px solid #f0a000;padding:.5em 1em;margin:.5em 0}
.charts{display:flex;flex-wrap:wrap;gap:1em}.charts>figure{margin:0}
figure svg{max-width:100%;height:auto}figcaption{font-size:12px;color:#555}
code{background:#f4f4f4;padding:0 .3em}
"""

SORT_JS = """
document.querySelectorAll('table.sortable th').forEach(function(th, col){
  th.addEventListener('click', function(){
    var table = th.closest('table'), body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var dir = th.dataset.dir === 'asc' ? -1 : 1; th.dataset.dir = dir === 1 ? 'asc' : 'desc';
    rows.sort(function(a, b){
      var x = a.cells[col], y = b.cells[col];
      var u = parseFloat(x.dataset.v), v = parseFloat(y.dataset.v);
      if (!isNaN(u) && !isNaN(v)) return dir * (u - v);
      return dir * x.textContent.localeCompare(y.textContent);
    });
    rows.forEach(function(r){ body.appendChild(r); });
  });
});
"""


def td(text: object, v: float | None = None, cls: str = "") -> str:
    attrs = f' class="{cls}"' if cls else ""
    if v is not None and math.isfinite(v):
        attrs += f' data-v="{v!r}"'
    return f"<td{attrs}>{escape(str(text))}</td>"


def table(header: list[str], rows: list[str], left: int = 1) -> str:
    ths = "".join(
        f'<th class="l">{escape(h)}</th>' if i < left else f"<th>{escape(h)}</th>" for i, h in enumerate(header)
    )
    return f'<table class="sortable"><thead><tr>{ths}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def page(title: str, heading: str, command: str, body: str, warn: Sequence[str] = (), source: str = "") -> str:
    """A whole self-contained page (source: what it was made from, said after the version)."""
    made = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    warn_html = "".join(f'<div class="warn">⚠ {escape(w)}</div>' for w in warn)
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        f'<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>{escape(title)}</title><style>{CSS}</style></head><body>"
        f'<h1>{escape(heading)}</h1><p class="meta">made {escape(made)} by <code>{escape(command)}</code> '
        f"with vmtax {escape(__version__)}{escape(source)}</p>{warn_html}{body}"
        f"<script>{SORT_JS}</script></body></html>\n"
    )
