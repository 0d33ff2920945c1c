"""What a terminal may be given of a recording: its text, with every character that would act on
the terminal instead of being shown made visible as its escape.

A recording is untrusted input. An agent's text, a status message, a task id, an artifact or tool
name may hold an escape sequence: ``ESC ] 52`` writes the clipboard, ``ESC ] 0`` sets the window
title, ``ESC ] 8`` forges a link, ``ESC [ 2J`` clears the screen, the C1 ``CSI`` (``\\x9b``) does the
same in one byte, and a bidirectional override (``U+202E``) makes text read backwards. Printed
raw, each acts. :func:`visible` shows each such character as its Python escape (``\\x1b``,
``\\x9b``, ``\\u202e``) and keeps the rest as it is:

- C0 controls (U+0000-U+001F) and DEL (U+007F): ``\\x..``; newline and tab stay where the layout
  allows them (``lines=True``: a table cell, a panel), else they are shown too;
- C1 controls (U+0080-U+009F): ``\\x..``;
- bidirectional marks, embeddings, overrides and isolates (U+200E, U+200F, U+202A-U+202E,
  U+2066-U+2069): ``\\u....``.

Every human output of the CLI passes it in one place (``cli.app``'s consoles, and its
one-line error writer); ``--json`` and ``--raw`` print the recording exactly.
"""

from __future__ import annotations

import re

CONTROLS = "\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069"
"""The characters that act on a terminal rather than show, less newline (\\n) and tab (\\t)."""

_IN_A_LAYOUT = re.compile(f"[{CONTROLS}]")
_ON_ONE_LINE = re.compile(f"[\t\n{CONTROLS}]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str, *, lines: bool = True) -> str:
    """``text`` with every terminal-acting character shown as its escape; newline and tab kept
    when ``lines`` (the layout wraps and aligns them), shown as ``\\x0a``/``\\x09`` otherwise."""
    pattern = _IN_A_LAYOUT if lines else _ON_ONE_LINE
    return pattern.sub(_escape, text) if pattern.search(text) else text
