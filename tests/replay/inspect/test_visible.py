"""The one rule of what a terminal may be given (inspection/visible.py), over any text."""

from __future__ import annotations

import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from a2a_tape.inspection.visible import visible

BIDI = {"\u200e", "\u200f", *map(chr, range(0x202A, 0x202F)), *map(chr, range(0x2066, 0x206A))}


def _acts(char: str, lines: bool) -> bool:
    if lines and char in "\n\t":
        return False
    return unicodedata.category(char) == "Cc" or char in BIDI


@given(st.text(), st.booleans())
def test_nothing_that_acts_on_a_terminal_is_left(text, lines):
    shown = visible(text, lines=lines)
    assert not any(_acts(c, lines) for c in shown)
    if not any(_acts(c, lines) for c in text):
        assert shown == text  # the rest is kept as it is


@given(st.text(alphabet=st.characters(codec="utf-8")))
def test_each_acting_character_is_shown_as_its_escape(text):
    expected = "".join(
        (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}") if _acts(c, True) else c for c in text
    )
    assert visible(text) == expected


def test_the_hostile_classes():
    assert visible("\x1b]52;c;aGk=\x07") == "\\x1b]52;c;aGk=\\x07"
    assert visible("\x1b[2J\x9b31m\u202eabc") == "\\x1b[2J\\x9b31m\\u202eabc"
    assert visible("a\nb\tc") == "a\nb\tc"
    assert visible("a\nb\tc", lines=False) == "a\\x0ab\\x09c"
