"""What ``a2a-tape verify`` compares: two runs of one task, at contract level (docs/verify.md).

Pure: two contracts in (:mod:`inspection.run_contract`: what is kept of a run), the divergences
out (:func:`compare`), the first one first. What a client relies on is compared, never bytes:

- ``states``: the state trajectory (a state repeated in a row counts once);
- ``events``: the sequence of event kinds, the text chunks of an artifact collapsed into one entry
  (chunk boundaries never diverge);
- ``artifacts``: each artifact, in order of first appearance: its name, its channel, and its id when
  the id is not one the agent makes per task (one that holds the task's or context's id, or a
  UUID, is compared by position, not value);
- ``closure``: how each artifact was closed: ``lastChunk``, a final snapshot, updates after its
  ``lastChunk`` (the answer sent again); whether it came in appends or whole is a matter of chunk
  boundaries, never compared;
- ``tool-calls``: each tool call's name and status, in order;
- ``errors``: the error code of each error, with its binding (and HTTP status on HTTP+JSON);
- ``doctor``: an error-level finding of doctor's (:mod:`inspection.doctor`) the recording has not;
- ``first-event`` / ``total-time``: only with a factor (``slower``), against the recorded times;
- ``text``: only when asked (``exact``, or ``similar``: a similarity ratio of :data:`SIMILAR` or more).

Ids, timestamps, JSON-RPC ids and chunk boundaries never diverge. Events of a2a-tape's own (origin
``local``: notes, a synthetic FAILED) are the recorder's, not the agent's: left out.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import Final, Literal

import msgspec

from a2a_tape.inspection.run_contract import ArtifactFacts, Contract, Entry, label

TextRule = Literal["exact", "similar", "ignore"]
SIMILAR: Final = 0.8
"""``--text similar``: the least :class:`difflib.SequenceMatcher` ratio of two texts that match."""
SLOWER_GRACE: Final = 0.25
"""Seconds a live time may exceed the recorded one before ``--slower`` counts (jitter on fast runs)."""

RULES: Final = (
    "states",
    "artifacts",
    "closure",
    "tool-calls",
    "errors",
    "events",
    "doctor",
    "text",
    "first-event",
    "total-time",
)
"""Every rule, in the order a tie at one position is reported in (the specific ones before
``events``, which any change of the others also changes)."""


class Point(msgspec.Struct, frozen=True):
    """Where a divergence is, on one side: the run, the event's position and kind, what it says."""

    run: str
    position: int | None
    kind: str | None
    what: str


class Divergence(msgspec.Struct, frozen=True):
    """One rule that does not hold between the recorded run and the live one."""

    rule: str
    message: str
    recorded: Point
    live: Point


class Rules(msgspec.Struct, frozen=True):
    """What is compared beyond the contract: text (default ignore) and times (default off)."""

    text: TextRule = "ignore"
    slower: float | None = None


# -- the comparison -------------------------------------------------------------------------------


def compare(recorded: Contract, live: Contract, rules: Rules = Rules()) -> list[Divergence]:
    """Every rule that does not hold, at most one divergence each, the first one first (by the
    recorded position, then by the order of :data:`RULES`)."""
    found = [
        d
        for d in (
            _sequence("states", "the state trajectory", recorded, live, recorded.states, live.states),
            _sequence("events", "the sequence of event kinds", recorded, live, recorded.events, live.events),
            _artifact_rule(recorded, live),
            _closure_rule(recorded, live),
            _sequence("tool-calls", "the tool calls", recorded, live, recorded.tools, live.tools),
            _errors_rule(recorded, live),
            _doctor_rule(recorded, live),
            _text_rule(recorded, live, rules.text),
            *_time_rules(recorded, live, rules.slower),
        )
        if d is not None
    ]
    end = 1 << 62
    found.sort(key=lambda d: (d.recorded.position if d.recorded.position is not None else end, RULES.index(d.rule)))
    return found


def _point(c: Contract, entry: Entry | None, missing: str = "(nothing)") -> Point:
    if entry is None:
        return Point(c.run, None, None, missing)
    return Point(c.run, entry.position, entry.kind, entry.what)


def _end_point(c: Contract, entries: Sequence[Entry]) -> Point:
    """Where a side that ran out of entries ended: after its last one."""
    last = entries[-1] if entries else None
    return Point(c.run, last.position if last else c.first_position, last.kind if last else None, "(nothing more)")


def _sequence(
    rule: str, what: str, rec: Contract, live: Contract, a: Sequence[Entry], b: Sequence[Entry]
) -> Divergence | None:
    for k in range(max(len(a), len(b))):
        ea = a[k] if k < len(a) else None
        eb = b[k] if k < len(b) else None
        if ea is not None and eb is not None and ea.what == eb.what:
            continue
        ra = _point(rec, ea) if ea is not None else _end_point(rec, a)
        lb = _point(live, eb) if eb is not None else _end_point(live, b)
        return Divergence(rule, f"{what} differs at entry {k + 1}: {ra.what} -> {lb.what}", ra, lb)
    return None


def _errors_rule(rec: Contract, live: Contract) -> Divergence | None:
    """The errors, code by code in one binding; across bindings (a recording sent over another),
    by what A2A names them: the same error in each binding's own shape."""
    if rec.binding != live.binding and rec.binding is not None and live.binding is not None:
        return _sequence("errors", "the errors (across bindings)", rec, live, rec.meanings, live.meanings)
    return _sequence("errors", "the errors", rec, live, rec.errors, live.errors)


def _facts_point(c: Contract, art: ArtifactFacts | None, number: int) -> Point:
    if art is None:
        return Point(c.run, None, None, f"(no artifact #{number})")
    return Point(c.run, art.position, "artifact", label(art, number))


def _artifact_rule(rec: Contract, live: Contract) -> Divergence | None:
    a, b = rec.artifacts, live.artifacts
    for k in range(max(len(a), len(b))):
        x = a[k] if k < len(a) else None
        y = b[k] if k < len(b) else None
        why = _artifact_change(x, y)
        if why is not None:
            return Divergence(
                "artifacts", f"artifact #{k + 1}: {why}", _facts_point(rec, x, k + 1), _facts_point(live, y, k + 1)
            )
    return None


def _artifact_change(x: ArtifactFacts | None, y: ArtifactFacts | None) -> str | None:
    if x is None or y is None:
        return "not in the recording" if x is None else "missing"
    if x.name != y.name:
        return f"renamed {x.name!r} -> {y.name!r}"
    if x.channel != y.channel:
        return f"channel {x.channel} -> {y.channel}"
    if x.key != y.key:
        return f"id {x.key or '(made per task)'} -> {y.key or '(made per task)'}"
    return None


def _closure(art: ArtifactFacts) -> str:
    parts = ["lastChunk" if art.last_chunk else "no lastChunk"]  # appends or whole: chunk boundaries, never compared
    if art.snapshot:
        parts.append("final snapshot")
    if art.after_last:
        parts.append("more after lastChunk")
    return ", ".join(parts)


def _closure_rule(rec: Contract, live: Contract) -> Divergence | None:
    for k, (x, y) in enumerate(zip(rec.artifacts, live.artifacts, strict=False)):
        if _closure(x) != _closure(y):
            ra, lb = _facts_point(rec, x, k + 1), _facts_point(live, y, k + 1)
            msg = f"artifact #{k + 1} closed otherwise: {_closure(x)} -> {_closure(y)}"
            return Divergence(
                "closure",
                msg,
                msgspec.structs.replace(ra, what=_closure(x)),
                msgspec.structs.replace(lb, what=_closure(y)),
            )
    return None


def _doctor_rule(rec: Contract, live: Contract) -> Divergence | None:
    known = {e.what for e in rec.doctor}
    new = next((e for e in live.doctor if e.what not in known), None)
    if new is None:
        return None
    recorded = Point(rec.run, None, None, "(no such finding)")
    return Divergence("doctor", f"a new error-level finding: {new.what}", recorded, _point(live, new))


def similar(a: str, b: str) -> bool:
    """``--text similar``: equal, or a ratio of :data:`SIMILAR` or more."""
    return a == b or difflib.SequenceMatcher(None, a, b, autojunk=False).ratio() >= SIMILAR


def _text_rule(rec: Contract, live: Contract, how: TextRule) -> Divergence | None:
    if how == "ignore":
        return None
    same = (lambda a, b: a == b) if how == "exact" else similar
    for k, (x, y) in enumerate(zip(rec.artifacts, live.artifacts, strict=False)):
        if not same(x.text, y.text):
            ra = msgspec.structs.replace(_facts_point(rec, x, k + 1), what=_clip(x.text))
            lb = msgspec.structs.replace(_facts_point(live, y, k + 1), what=_clip(y.text))
            return Divergence("text", f"the text of artifact #{k + 1} differs ({how})", ra, lb)
    return None


def _clip(text: str, n: int = 60) -> str:
    return repr(text if len(text) <= n else text[: n - 1] + "…")


def _time_rules(rec: Contract, live: Contract, factor: float | None) -> list[Divergence | None]:
    if factor is None:
        return []
    out: list[Divergence | None] = []
    for rule, a, b in (("first-event", rec.first_event, live.first_event), ("total-time", rec.total, live.total)):
        if a is None or b is None or b <= max(a * factor, a + SLOWER_GRACE):
            out.append(None)
            continue
        what = "time to first event" if rule == "first-event" else "total time"
        msg = f"{what} {b:.3f} s, more than {factor:g}x the recorded {a:.3f} s"
        out.append(
            Divergence(
                rule,
                msg,
                Point(rec.run, rec.first_position, None, f"{a:.3f} s"),
                Point(live.run, live.first_position, None, f"{b:.3f} s"),
            )
        )
    return out


# -- what a passing run changed ------------------------------------------------------------------


def changes(recorded: Contract, live: Contract) -> list[str]:
    """What differs between two runs that match by the rules (``verify --update``'s summary): each
    artifact's text, the times (by more than :data:`SLOWER_GRACE`). Empty: nothing a report shows."""
    out = []
    for k, (x, y) in enumerate(zip(recorded.artifacts, live.artifacts, strict=False)):
        if x.text != y.text:
            out.append(f"{label(x, k + 1)}: text {_clip(x.text)} -> {_clip(y.text)}")
    for what, a, b in (
        ("time to first event", recorded.first_event, live.first_event),
        ("total time", recorded.total, live.total),
    ):
        if a is not None and b is not None and abs(b - a) > SLOWER_GRACE:
            out.append(f"{what}: {a:.3f} s -> {b:.3f} s")
    return out
