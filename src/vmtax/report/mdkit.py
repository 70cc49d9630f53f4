"""The pieces every Markdown writer of vmtax shares: text made safe for a
table cell, and the two-modes mark made literal."""

from __future__ import annotations


def md_cell(text: object) -> str:
    """Text safe inside a Markdown table cell."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def md_mark(text: str) -> str:
    """GitHub's Markdown strikes text between single tildes: escape the
    two-modes mark (~)."""
    return text.replace("~", "\\~")
