"""One plain-text table renderer, shared by every terminal report."""

from __future__ import annotations

from .safe import one_line


def render(
    header: list[str], rows: list[list[str]], align: str | None = None, groups: list[tuple[int, str]] | None = None
) -> str:
    """align: one 'l' or 'r' per column.  groups: (row index, title) lines
    printed before that row."""
    align = align or "l" + "r" * (len(header) - 1)
    # a cell is one line: a newline or tab in a label would break the table (or forge a line of a log)
    header, rows = [one_line(str(c)) for c in header], [[one_line(str(c)) for c in row] for row in rows]
    # strict=False: the callers give every row the header's columns; render keeps zip's old truncation
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows, strict=False)]

    def line(cells: list[str]) -> str:
        out = [(c.ljust(w) if a == "l" else c.rjust(w)) for c, w, a in zip(cells, widths, align, strict=False)]
        return "  ".join(out).rstrip()

    titles = {i: one_line(title) for i, title in groups or []}
    out = [line(header), line(["-" * w for w in widths])]
    for i, row in enumerate(rows):
        if i in titles:
            out.append(titles[i])
        out.append(line(row))
    return "\n".join(out)
