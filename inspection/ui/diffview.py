"""Two tasks side by side, as ``a2a-tape diff`` compares them (its normalisation: ids numbered by
first appearance, timestamps and JSON-RPC ids dropped): the lines of A and B aligned, equal
runs folded to their ends, the channels that differ shown whole; in a changed line or channel, the
words that differ are marked."""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence

import msgspec

from a2a_tape.inspection.diff import TaskSide, diff_sides

CONTEXT = 3
"""Equal lines kept on each side of a difference (the rest of an equal run is folded)."""


Part = tuple[str, bool]
"""A piece of a line and whether it differs from the other side (a word, spaces, a sign)."""

_TOKEN = re.compile(r"\w+|\s+|[^\w\s]")


def words(a: str, b: str) -> tuple[list[Part], list[Part]]:
    """``a`` and ``b`` in pieces, the words that differ marked (difflib over words, spaces and
    signs): what a changed line highlights, not the whole line."""
    ta, tb = _TOKEN.findall(a), _TOKEN.findall(b)
    pa: list[Part] = []
    pb: list[Part] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, ta, tb, autojunk=False).get_opcodes():
        same = tag == "equal"
        if i2 > i1:
            pa.append(("".join(ta[i1:i2]), not same))
        if j2 > j1:
            pb.append(("".join(tb[j1:j2]), not same))
    return pa, pb


class Line(msgspec.Struct, frozen=True):
    kind: str  # same / del / add / chg / fold
    a: str | None
    b: str | None
    a_no: int | None = None  # 1-based line numbers
    b_no: int | None = None
    a_parts: list[Part] | None = None  # a changed line: its pieces, the ones that differ marked
    b_parts: list[Part] | None = None


class ChannelDiff(msgspec.Struct, frozen=True):
    name: str
    a: str
    b: str
    a_parts: list[Part] = []  # the words that differ marked
    b_parts: list[Part] = []


class Comparison(msgspec.Struct, frozen=True):
    a: str
    b: str
    equal: bool
    channels: list[ChannelDiff]
    lines: list[Line]


def aligned(a: Sequence[str], b: Sequence[str], context: int = CONTEXT) -> list[Line]:
    """The lines of ``a`` and ``b`` side by side (difflib's alignment), long equal runs folded."""
    out: list[Line] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            n = i2 - i1
            keep = range(n) if n <= 2 * context + 1 else [*range(context), -1, *range(n - context, n)]
            for k in keep:
                if k < 0:
                    out.append(Line("fold", f"… {n - 2 * context} equal lines …", None))
                else:
                    out.append(Line("same", a[i1 + k], b[j1 + k], i1 + k + 1, j1 + k + 1))
            continue
        left, right = a[i1:i2], b[j1:j2]
        for k in range(max(len(left), len(right))):
            la = left[k] if k < len(left) else None
            lb = right[k] if k < len(right) else None
            kind = "chg" if la is not None and lb is not None else ("del" if la is not None else "add")
            pa, pb = words(la, lb) if la is not None and lb is not None else (None, None)
            a_no = i1 + k + 1 if la is not None else None
            out.append(Line(kind, la, lb, a_no, j1 + k + 1 if lb is not None else None, pa, pb))
    return out


def compare(a: TaskSide, b: TaskSide, *, labels: tuple[str, str] | None = None) -> Comparison:
    """``a`` and ``b`` side by side; ``labels``: what names them (default: their task ids; two
    runs: their selectors, ``TASK@N``)."""
    pair = diff_sides(a, b)
    channels = []
    for name in pair.channels:
        ca, cb = a.channels.get(name, ""), b.channels.get(name, "")
        channels.append(ChannelDiff(name, ca, cb, *words(ca, cb)))
    name_a, name_b = labels if labels is not None else (a.task_id, b.task_id)
    return Comparison(name_a, name_b, pair.equal, channels, aligned(a.events, b.events))
