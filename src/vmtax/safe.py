"""Text from targets and stored runs, made inert for a terminal.

A target label, a guest's facts or an agent's error message can hold
control sequences (`ESC [2J` clears the screen, `ESC ] 52` writes the
clipboard, OSC 0 sets the window title).  Everything vmtax prints on a
terminal goes through inert(): control characters (C0 but newline and tab,
DEL, C1) and the Unicode bidirectional overrides are shown as escapes
instead of acting; so are the code points no text may hold, which XML
forbids and HTML calls a parse error (a lone surrogate, a noncharacter
such as U+FFFE): whatever a target says, a JUnit file still parses.
What stands on one line (a table's cell, a label in a line) goes through
one_line(), which shows newline and tab as escapes too: a label cannot
begin a line of its own ("forged line: PASS") in a CI log."""

from __future__ import annotations

import re

_NONCHARACTERS = "\ufdd0-\ufdef" + "".join(
    f"{chr(plane + 0xFFFE)}{chr(plane + 0xFFFF)}" for plane in range(0, 0x110000, 0x10000)
)
_ACTIVE = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff{_NONCHARACTERS}]")


def _escape(c: str) -> str:
    n = ord(c)
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}"


def inert(text: str) -> str:
    return _ACTIVE.sub(lambda m: _escape(m.group()), text)


_BREAKS = re.compile("[\t\n\x0b\x0c\r\x85\u2028\u2029]")


def one_line(text: str) -> str:
    """inert(), and newline, tab and every other line break shown as escapes too."""
    return inert(_BREAKS.sub(lambda m: _escape(m.group()), text))


def line_break(text: str) -> str | None:
    """The first newline, tab or other line break in text, escaped ('\\x0a'); None where there is none."""
    m = _BREAKS.search(text)
    return _escape(m.group()) if m else None
