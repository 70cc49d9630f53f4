"""A target's options, checked as the target is made: those every kind
takes (COMMON_OPTIONS), the kind's own, and numbers in their range; one
clear line for a bad one."""

from __future__ import annotations

import math

from ..errors import UserError
from ..safe import line_break, one_line

# Every kind takes these: label=TEXT, so that `local local:label=b` is an A/A
# pair, and inject=PCT, which makes the agent add PCT percent of extra work to
# every operation: a known slowdown, to check that vmtax finds it; and
# counters=off, which runs no counting process on it (to measure what
# counting costs).
COMMON_OPTIONS = frozenset({"label", "inject", "counters"})


def check_options(name: str, options: dict[str, str], allowed: frozenset[str]) -> None:
    """UserError for an option the kind does not take, or a line break or
    tab in the target's name or an option's value."""
    unknown = set(options) - allowed - COMMON_OPTIONS
    if unknown:
        known = sorted(allowed | COMMON_OPTIONS)
        raise UserError(f"target '{name}': unknown option(s) {', '.join(sorted(unknown))} (known: {', '.join(known)})")
    for text in (name, *options.values()):
        if (c := line_break(text)) is not None:  # other control characters are shown inert
            raise UserError(
                f"target '{one_line(name)}': a line break or tab ({c}) in a target or its label is refused "
                "(each is shown on one line of a table or a log)"
            )


def counters_option(name: str, options: dict[str, str]) -> str:
    """counters=on (the default) or off."""
    counters = options.get("counters", "on")
    if counters not in ("on", "off"):
        raise UserError(f"target '{name}': counters must be on or off, got '{counters}'")
    return counters


def option_number(
    name: str,
    options: dict[str, str],
    key: str,
    default,
    lo: float,
    hi: float,
    integer: bool = False,
    strip: str = "",
    open_lo: bool = False,
):
    """A numeric target option, checked: one clear line for a bad one."""
    if key not in options:
        return default
    text = options[key].strip().removesuffix(strip) if strip else options[key].strip()
    try:
        v = int(text) if integer else float(text)
    except ValueError:
        v = None
    if v is None or not math.isfinite(v) or v > hi or v < lo or (open_lo and v == lo):
        what = "an integer" if integer else "a number"
        top = f"{int(hi)}" if integer else f"{hi:g}"
        raise UserError(
            f"target '{name}': {key} must be {what} {'>' if open_lo else '>='} {lo:g} "
            f"and <= {top}, got '{options[key]}'"
        )
    return v
