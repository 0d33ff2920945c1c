"""What ``a2a-tape verify`` compares: two runs of one task, at contract level (docs/verify.md).

Pure: a run's stored events and exchanges in, its :class:`Contract` out (:func:`contract`); two
contracts in, the divergences out (:func:`compare`), the first one first. What a client relies on is
compared, never bytes:

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
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Final, Literal

import msgspec

from a2a_tape.fold.fold import TaskFold
from a2a_tape.fold.views import ToolCall
from a2a_tape.inspection.doctor import findings
from a2a_tape.inspection.steps import Step, closed_exchanges, decode_events
from a2a_tape.store import (
    ArtifactUpdate,
    ErrorItem,
    Exchange,
    MessageItem,
    StatusUpdate,
    StoredEvent,
    TaskSnapshot,
)
from a2a_tape.store.decode import decode_item
from a2a_tape.store.methods import HTTP_JSON, SEND_METHODS

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

_UUID = re.compile(r"[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}|[0-9a-fA-F]{16,}")


class Entry(msgspec.Struct, frozen=True):
    """One point of a run's contract: the event it comes from and what it says."""

    position: int | None
    kind: str | None  # the event's kind (task, status, artifact, message, error), None: not an event
    what: str


class ArtifactFacts(msgspec.Struct, frozen=True):
    """One artifact of a run, as a client meets it."""

    position: int  # its first event
    key: str | None  # its id when stable (not made per task), else None
    name: str | None
    channel: str
    appended: bool
    last_chunk: bool
    snapshot: bool  # a final snapshot replaced it (opencode ``source: final_snapshot``)
    text: str
    after_last: bool = False  # an update came after its lastChunk (the answer sent again)


class Contract(msgspec.Struct):
    """What verify compares of one run."""

    run: str  # TASK@N
    task_id: str  # the task id its agent named
    states: list[Entry]
    events: list[Entry]
    artifacts: list[ArtifactFacts]
    tools: list[Entry]
    errors: list[Entry]
    doctor: list[Entry]  # error-level findings, ``what`` is the code
    first_position: int | None
    first_event: float | None  # seconds from the first send to its first event
    total: float | None  # seconds the sends took, summed
    final_answer: str | None
    binding: str | None = None  # of its first send (jsonrpc, http+json, grpc)
    meanings: list[Entry] = []  # each error as A2A names it, whatever the binding (errors across bindings)


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


# -- a run's contract ----------------------------------------------------------------------------


def named_task(task_id: str, events: Iterable[StoredEvent]) -> str:
    """The task id the run's agent named (a verify run is filed under the recorded task's id)."""
    for ev in events:  # decoded one at a time: the first one that names a task ends the search
        if ev.origin == "local":
            continue
        tid = decode_item(bytes(ev.payload)).task_id
        if tid:
            return tid
    return task_id


def contract(
    run: str, task_id: str, events: Sequence[StoredEvent], exchanges: Sequence[Exchange], *, doctor: bool = True
) -> Contract:
    """The contract of one run (``run``: its selector) from its events and exchanges. ``doctor``
    False: doctor's findings left out (the ``doctor`` rule reads the recording's findings only when
    the live run has any: a recorded run's are not needed otherwise, and they are half its cost)."""
    upstream = [ev for ev in events if ev.origin != "local"]
    named = named_task(task_id, upstream)
    steps = decode_events(upstream)
    fold = TaskFold(named)  # over the steps decoded above (doctor takes its view: no second fold)
    for step in steps:
        fold.apply(step.event, step.item)
    view = fold.view(closed_exchanges(exchanges) if exchanges else None)
    by_ex = {ex.id: ex for ex in exchanges if ex.id is not None}
    artifacts = _artifacts(named, steps, {a.artifact_id: (a.channel, a.text) for a in view.artifacts}, upstream)
    first, total = _times(upstream, exchanges)
    errors = _errors(steps, by_ex)
    sends = [ex for ex in exchanges if ex.rpc_method in SEND_METHODS]
    return Contract(
        run=run,
        task_id=named,
        states=_states(steps),
        events=_events(steps, artifacts),
        artifacts=list(artifacts.values()),
        tools=[
            Entry(artifacts[t.artifact_id].position if t.artifact_id in artifacts else None, "artifact", _tool(t))
            for t in view.tool_calls
        ],
        errors=errors,
        doctor=[
            Entry(f.positions[0] if f.positions else None, None, f.code)
            for f in (findings(named, upstream, exchanges, steps=steps, view=view) if doctor else ())
            if f.level == "error"
        ],
        first_position=upstream[0].position if upstream else None,
        first_event=first,
        total=total,
        final_answer=view.final_answer,
        binding=(sends[0].binding or "jsonrpc") if sends else None,
        meanings=_meanings(steps, by_ex),
    )


def _tool(t: ToolCall) -> str:
    return f"tool {t.tool or t.title or '?'}: {t.status or 'no status'}"


def _states(steps: Sequence[Step]) -> list[Entry]:
    out: list[Entry] = []
    for s in steps:
        body = s.item.body
        if isinstance(body, (StatusUpdate, TaskSnapshot)) and (not out or out[-1].what != body.state):
            out.append(Entry(s.position, s.item.kind, body.state))
    return out


def _stable_key(artifact_id: str, volatile: Sequence[str]) -> str | None:
    """The id of an artifact when the agent does not make it per task, else None."""
    for v in volatile:
        if v and v in artifact_id:
            return None
    return None if _UUID.search(artifact_id) else artifact_id


def _artifacts(
    task_id: str, steps: Sequence[Step], viewed: dict[str, tuple[str, str]], events: Sequence[StoredEvent]
) -> dict[str, ArtifactFacts]:
    """Each artifact by id, in order of first appearance (updates and snapshots alike)."""
    contexts = [s.item.context_id or "" for s in steps]
    volatile = [task_id, *dict.fromkeys(c for c in contexts if c)]
    out: dict[str, ArtifactFacts] = {}
    for s in steps:
        body = s.item.body
        arts = (
            [(body.artifact, body.append, body.last_chunk)]
            if isinstance(body, ArtifactUpdate)
            else [(a, False, False) for a in body.artifacts]
            if isinstance(body, TaskSnapshot)
            else []
        )
        for art, append, last in arts:
            aid = art.artifact_id
            old = out.get(aid)
            channel, text = viewed.get(aid, ("artifact", art.text))
            if old is None:
                old = ArtifactFacts(
                    s.position, _stable_key(aid, volatile), art.name, channel, False, False, False, text
                )
            out[aid] = msgspec.structs.replace(
                old,
                after_last=old.after_last or (old.last_chunk and isinstance(body, ArtifactUpdate)),
                appended=old.appended or append,
                last_chunk=old.last_chunk or last,
                snapshot=old.snapshot or art.meta.source == "final_snapshot",
            )
    return out


def _label(art: ArtifactFacts, number: int) -> str:
    name = f" {art.name!r}" if art.name else ""
    return f"artifact #{number}{name} ({art.channel})"


def _events(steps: Sequence[Step], artifacts: dict[str, ArtifactFacts]) -> list[Entry]:
    """The kinds in order; an artifact's updates in a row of artifact updates count once."""
    numbers = {aid: k + 1 for k, aid in enumerate(artifacts)}
    out: list[Entry] = []
    seen: set[str] = set()  # artifacts of the current row of artifact updates
    for s in steps:
        body = s.item.body
        if isinstance(body, ArtifactUpdate):
            aid = body.artifact.artifact_id
            if aid not in seen:
                seen.add(aid)
                out.append(Entry(s.position, "artifact", _label(artifacts[aid], numbers[aid])))
            continue
        seen.clear()
        if isinstance(body, MessageItem):
            out.append(Entry(s.position, "message", f"message from {body.message.role or '?'}"))
        elif isinstance(body, ErrorItem):
            out.append(Entry(s.position, "error", "error"))
        elif s.item.kind in ("task", "status"):
            out.append(Entry(s.position, s.item.kind, s.item.kind))
    return out


def _error_steps(
    steps: Sequence[Step], by_ex: dict[int, Exchange]
) -> Iterator[tuple[Step, ErrorItem, Exchange | None, str]]:
    """Each error among ``steps``, with its exchange and the binding it came in (JSON-RPC when unknown)."""
    for s in steps:
        body = s.item.body
        if isinstance(body, ErrorItem):
            ex = by_ex.get(s.event.exchange_id) if s.event.exchange_id is not None else None
            yield s, body, ex, (ex.binding if ex is not None else None) or "jsonrpc"


def _errors(steps: Sequence[Step], by_ex: dict[int, Exchange]) -> list[Entry]:
    out: list[Entry] = []
    for s, body, ex, binding in _error_steps(steps, by_ex):
        http = f" HTTP {ex.status}" if ex is not None and binding == HTTP_JSON and ex.status else ""
        reason = _reason(s.event.payload)
        out.append(Entry(s.position, "error", f"{binding} error {body.code}{http}{f' {reason}' if reason else ''}"))
    return out


JSONRPC_ERRORS: Final = {
    -32700: "PARSE_ERROR",
    -32600: "INVALID_REQUEST",
    -32601: "METHOD_NOT_FOUND",
    -32602: "INVALID_PARAMS",
    -32603: "INTERNAL",
    -32001: "TASK_NOT_FOUND",
    -32002: "TASK_NOT_CANCELABLE",
    -32003: "PUSH_NOTIFICATION_NOT_SUPPORTED",
    -32004: "UNSUPPORTED_OPERATION",
    -32005: "CONTENT_TYPE_NOT_SUPPORTED",
    -32006: "INVALID_AGENT_RESPONSE",
    -32007: "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
    -32008: "EXTENSION_SUPPORT_REQUIRED",
    -32009: "VERSION_NOT_SUPPORTED",
}
"""The A2A error each JSON-RPC code stands for (A2A 1.0, section 5.4; the reason an ``ErrorInfo`` names)."""

HTTP_ERRORS: Final = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "FAILED_PRECONDITION",
    415: "UNSUPPORTED_MEDIA_TYPE",
    500: "INTERNAL",
    501: "UNIMPLEMENTED",
    503: "UNAVAILABLE",
}
"""An HTTP+JSON error that names no ``ErrorInfo`` reason, by its code (google.rpc's, as HTTP statuses)."""


def _meanings(steps: Sequence[Step], by_ex: dict[int, Exchange]) -> list[Entry]:
    """Each error as A2A names it, in any binding: its ``ErrorInfo`` reason, else what its code
    stands for in its binding (a reason the code contradicts is shown with it)."""
    out: list[Entry] = []
    for s, body, _ex, binding in _error_steps(steps, by_ex):
        table: dict[int, str] = JSONRPC_ERRORS if binding == "jsonrpc" else HTTP_ERRORS if binding == HTTP_JSON else {}
        coded = table.get(body.code) if body.code is not None else None
        reason = _reason(s.event.payload)
        name = reason or coded or f"code {body.code}"
        if reason and binding == "jsonrpc" and coded and coded != reason:
            name = f"{reason} (code {body.code}: {coded})"
        out.append(Entry(s.position, "error", f"error {name}"))
    return out


def _reason(payload: bytes) -> str | None:
    """The ``ErrorInfo`` reason of an error (JSON-RPC ``data``, HTTP+JSON ``details``), if any."""
    try:
        doc = msgspec.json.decode(payload)
    except msgspec.DecodeError:
        return None
    err = doc.get("error") if isinstance(doc, dict) else None
    if not isinstance(err, dict):
        return None
    details = err.get("details", err.get("data"))
    for d in details if isinstance(details, list) else []:
        if isinstance(d, dict) and isinstance(d.get("reason"), str):
            return str(d["reason"])
    return None


def _times(events: Sequence[StoredEvent], exchanges: Sequence[Exchange]) -> tuple[float | None, float | None]:
    """Seconds from the first send to its first event, and the sends' durations summed."""
    sends = [ex for ex in exchanges if ex.rpc_method in SEND_METHODS and ex.id is not None]
    if not sends:
        return None, None
    first_ex = sends[0].id
    first = next((ev.mono for ev in events if ev.exchange_id == first_ex and ev.mono is not None), None)
    total = sum(ex.ended_at - ex.started_at for ex in sends if ex.ended_at is not None)
    return first, total


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
    return Point(c.run, art.position, "artifact", _label(art, number))


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
            out.append(f"{_label(x, k + 1)}: text {_clip(x.text)} -> {_clip(y.text)}")
    for what, a, b in (
        ("time to first event", recorded.first_event, live.first_event),
        ("total time", recorded.total, live.total),
    ):
        if a is not None and b is not None and abs(b - a) > SLOWER_GRACE:
            out.append(f"{what}: {a:.3f} s -> {b:.3f} s")
    return out
