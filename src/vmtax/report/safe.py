"""Text from targets and stored runs, made inert for a terminal.

A target label, a guest's facts or an agent's error message can hold
control sequences (`ESC [2J` clears the screen, `ESC ] 52` writes the
clipboard, OSC 0 sets the window title).  Everything vmtax prints on a
terminal goes through inert(): control characters (C0 but newline and tab,
DEL, C1) and the Unicode bidirectional overrides are shown as escapes
instead of acting."""
from __future__ import annotations

import re

_ACTIVE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def inert(text: str) -> str:
    return _ACTIVE.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100
                       else f"\\u{ord(m.group()):04x}", text)
