"""The files of known differences between a TCK run directly and through a2a-tape: one line per difference.

    SETUP[~]  FIELD...  REASON

SETUP is where the difference shows (``proxy`` or ``serve``); a trailing ``~`` marks one that shows in some runs
only (it may agree, and is not held to "now agrees"). The FIELDs name the test (the TCK's node id, and for TCK
1.0 the transport before it); the REASON, the rest of the line, says why in words. ``#`` comments and blank lines
are ignored. The file's readers (tests/oracles/tck.py, tck1.py) decide what a line must still show.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

SETUPS = ("proxy", "serve")


@dataclass(frozen=True)
class Line:
    number: int
    setup: str  # "proxy" or "serve"
    fields: tuple[str, ...]
    reason: str
    sometimes: bool


def read(path: Path, fields: tuple[str, ...]) -> dict[tuple[str, ...], Line]:
    """Every line of ``path`` keyed by ``(setup, *fields)``; a malformed or repeated line is a ValueError naming it."""
    want = f"'proxy|serve[~] {' '.join(f.upper() for f in fields)} REASON'"
    out: dict[tuple[str, ...], Line] = {}
    for number, text in enumerate(path.read_text().splitlines(), 1):
        text = text.strip()
        if not text or text.startswith("#"):
            continue
        parts = text.split(None, len(fields) + 1)
        if len(parts) < len(fields) + 2 or parts[0].rstrip("~") not in SETUPS:
            raise ValueError(f"{path.name}:{number}: expected {want}, got {text!r}")
        word, *named, reason = parts
        line = Line(number, word.rstrip("~"), tuple(named), reason, sometimes=word.endswith("~"))
        key = (line.setup, *line.fields)
        if key in out:
            raise ValueError(f"{path.name}:{number}: {' '.join(key)} is listed twice (line {out[key].number})")
        out[key] = line
    return out
