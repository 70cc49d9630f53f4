"""Text from targets and users made inert for a terminal or a page: the
functions live in src/vmtax/safe.py (the base layer: targets check labels with
them too); the report's modules import them from here."""

from ..safe import inert, line_break, one_line

__all__ = ["inert", "line_break", "one_line"]
