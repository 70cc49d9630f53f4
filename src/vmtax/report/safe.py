"""Text from targets and stored runs, made inert for a terminal.

A target label, a guest's facts or an agent's error message can hold
control sequences (`ESC [2J` clears the screen, `ESC ] 52` writes the
clipboard, OSC 0 sets the window title).  Everything vmtax prints on a
terminal goes through inert(): control characters (C0 but newline and tab,
DEL, C1) and the Unicode bidirectional overrides are shown as escapes
instead of acting; so are the code points no text may hold, which XML
forbids and HTML calls a parse error (a lone surrogate, a noncharacter
such as U+FFFE): whatever a target says, a JUnit file still parses."""

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
