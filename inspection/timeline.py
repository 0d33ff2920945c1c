"""One task's timeline: its raw events in log order, each with what a person needs to read it
(``a2a-tape show``): the row ``show --json`` prints (with its exchange's binding and version), the
artifact and the channel the contract profile puts it in (or why it is ignored), and a preview of
what it says.

:func:`follow` goes on with the events other writers commit, until the task ends.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Protocol

import msgspec

from a2a_tape.fold.fold import TaskFold
from a2a_tape.fold.profiles import classify
from a2a_tape.inspection.words import count
from a2a_tape.store import (
    ArtifactUpdate,
    ErrorItem,
    EventLog,
    ExchangeLog,
    Following,
    Item,
    MessageItem,
    Note,
    StatusUpdate,
    StoredEvent,
    TaskSnapshot,
    Undecodable,
    decode_item,
)
from a2a_tape.store.events import is_terminal
from a2a_tape.store.methods import binding_and_version, binding_label
from a2a_tape.wire.push_configs import PUSH


class FollowedLog(EventLog, Following, Protocol):
    """What :func:`follow` reads: the log, and a wait for what other writers commit."""


class ShowRow(msgspec.Struct):
    """One event as ``show --json`` prints it."""

    seq: int
    position: int
    kind: str
    received_at: float
    origin: str
    sse_event: str | None
    exchange_id: int | None
    data: Any  # the payload as received: msgspec.Raw when it is JSON, else None (see ``raw``)
    raw: str | None = None  # the payload text when it is not JSON
    binding: str | None = None  # the exchange's: jsonrpc / http+json / grpc (store.methods)
    version: str | None = None  # its protocol version: 0.3 / 1.0


Wire = tuple[str | None, str | None]
"""An exchange's (binding, protocol version) (:func:`store.methods.binding_and_version`)."""


class Entry(msgspec.Struct, frozen=True):
    """One event of the timeline: the stored event, its JSON row, and its two human cells."""

    event: StoredEvent
    row: ShowRow
    where: str  # the artifact and its channel (or why the profile ignores it); "" for other items
    what: str  # a one-line preview of what the event says

    @property
    def local(self) -> bool:
        return self.event.origin == "local"

    @property
    def pushed(self) -> bool:
        """A POST the agent made to a client's webhook (:func:`pushes`): an exchange row, shown at its note's place."""
        return self.row.origin == PUSH


def wires(st: ExchangeLog, task_id: str | None, events: Iterable[StoredEvent]) -> dict[int, Wire]:
    """(binding, version) of each exchange the events came in (``task_id``: theirs, if they have one)."""
    wanted = {ev.exchange_id for ev in events if ev.exchange_id is not None}
    found = st.exchanges(task_id) if task_id is not None else [e for i in wanted if (e := st.get_exchange(i))]
    return {ex.id: binding_and_version(ex.binding, ex.dialect) for ex in found if ex.id in wanted}


def labels(by_exchange: Mapping[int, Wire]) -> list[str]:
    """The bindings the timeline went through, as people read them (``HTTP+JSON 1.0``), sorted."""
    return sorted({label for w in by_exchange.values() if (label := binding_label(*w))})


def entry(task_id: str, ev: StoredEvent, wire: Wire | None = None) -> Entry:
    """The timeline's entry for one stored event of task ``task_id`` (its payload decoded once)."""
    payload = bytes(ev.payload)
    item = decode_item(payload)
    body = item.body
    is_json = not isinstance(body, Undecodable) or not body.reason.startswith(("invalid JSON", "undecodable"))
    row = ShowRow(
        seq=ev.seq,
        position=ev.position,
        kind=item.kind,
        received_at=ev.received_at,
        origin=ev.origin,
        sse_event=ev.sse_event,
        exchange_id=ev.exchange_id,
        data=msgspec.Raw(payload) if is_json else None,
        raw=None if is_json else payload.decode("utf-8", "replace"),
        binding=wire[0] if wire else None,
        version=wire[1] if wire else None,
    )
    return Entry(ev, row, where(task_id, item), preview(item, payload))


def entries(task_id: str, events: Iterable[StoredEvent], by_exchange: Mapping[int, Wire]) -> Iterator[Entry]:
    return (entry(task_id, ev, by_exchange.get(ev.exchange_id or 0)) for ev in events)


def pushes(st: ExchangeLog, task_id: str) -> list[Entry]:
    """The task's pushes (the POSTs its agent made to a client's webhook, each an exchange row of
    its own), as timeline entries: origin ``push``, the agent's bytes as the payload, what the
    webhook answered in the preview; no position or seq until :func:`with_pushes` gives each the
    place of its note."""
    found = []
    for ex in st.exchanges(task_id):
        if ex.role != PUSH or ex.id is None:
            continue
        ev = StoredEvent(0, task_id, 0, ex.id, None, ex.request_body, ex.started_at, None, "upstream")
        e = entry(task_id, ev, (None, ex.dialect))
        e.row.origin = PUSH
        delivered = f"webhook {ex.status}" if ex.status is not None else f"webhook {ex.outcome or 'pending'}"
        found.append(Entry(ev, e.row, e.where, f"{e.what} -> {delivered}"))
    return found


def push_note(e: Entry) -> bool:
    """``e`` is the note that gives a push its place in the task's log (:func:`capture.notes.push_event`)."""
    if not e.local or e.row.kind != "note":
        return False
    body = decode_item(bytes(e.event.payload)).body
    return isinstance(body, Note) and body.action == PUSH


def with_pushes(events: list[Entry], pushed: list[Entry]) -> list[Entry]:
    """The events in log order, each push at the place of its note (its seq and position; the note
    itself is the push's row, shown once); a push without one (recorded before pushes had notes)
    by its arrival time, beside the stream."""
    if not pushed:
        return events
    by_exchange = {e.event.exchange_id: e for e in pushed}
    out: list[Entry] = []
    placed: list[Entry] = []
    for e in events:
        push = by_exchange.pop(e.event.exchange_id, None) if push_note(e) else None
        if push is None:
            placed.append(e)
            continue
        row = msgspec.structs.replace(push.row, seq=e.row.seq, position=e.row.position)
        ev = msgspec.structs.replace(push.event, position=e.event.position, seq=e.event.seq)
        placed.append(Entry(ev, row, push.where, push.what))
    rest = sorted(by_exchange.values(), key=lambda e: e.row.received_at)
    for e in placed:
        while rest and rest[0].row.received_at <= e.row.received_at:
            out.append(rest.pop(0))
        out.append(e)
    return out + rest


def short_id(task_id: str, artifact_id: str) -> str:
    """``{task_id}:stream:reasoning`` -> ``…:stream:reasoning`` (the task id is said once, above)."""
    if task_id and artifact_id.startswith(task_id) and len(artifact_id) > len(task_id):
        return "…" + artifact_id[len(task_id) :]
    return artifact_id


def where(task_id: str, item: Item) -> str:
    """The artifact and the channel the contract profile puts it in (or why it is ignored)."""
    body = item.body
    if not isinstance(body, ArtifactUpdate):
        return ""
    chunk = classify(task_id, body)
    text = f"{short_id(task_id, body.artifact.artifact_id)} [{chunk.channel}]"
    return text + (f" ignored: {chunk.ignore}" if chunk.ignore else "")


def _clip(text: str, limit: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _clip_quoted(text: str, limit: int = 60) -> str:
    """A chunk's text for a quoted preview: the whitespace at either end kept as it is (a chunk of
    a stream often begins with the space between two words; the quotes show it, and newlines
    there come out escaped), only the runs inside it made one space."""
    body = text.strip()
    if not body:
        return text[:limit]
    start = len(text) - len(text.lstrip())
    lead, trail = text[:start], text[start + len(body) :]
    kept = lead + " ".join(body.split()) + trail
    return kept if len(kept) <= limit else kept[: limit - 1] + "…"


def preview(item: Item, payload: bytes = b"") -> str:
    """What an item says, in one short line."""
    b = item.body
    if isinstance(b, ArtifactUpdate):
        mode = "append" if b.append else "replace"
        if b.artifact.meta.source == "final_snapshot":
            mode += " (final snapshot)"
        data = sum(1 for p in b.artifact.parts if p.kind == "data")
        extra = f" +{count(data, 'data part')}" if data else ""
        return f"{mode}{', last chunk' if b.last_chunk else ''}: {_clip_quoted(b.artifact.text)!r}{extra}"
    if isinstance(b, StatusUpdate):
        msg = b.message
        return b.state + (f": {_clip(msg.text)}" if msg is not None and msg.text else "")
    if isinstance(b, TaskSnapshot):
        msg = b.status_message
        arts = f", {count(len(b.artifacts), 'artifact')}" if b.artifacts else ""
        return b.state + arts + (f": {_clip(msg.text)}" if msg is not None and msg.text else "")
    if isinstance(b, MessageItem):
        return f"{b.message.role}: {_clip(b.message.text)}"
    if isinstance(b, ErrorItem):
        return f"error {b.code}: {_clip(b.message)}"
    if isinstance(b, Note):
        return f"{b.action}: {_clip(b.detail)}"
    if isinstance(b, Undecodable):
        return f"{b.reason[:50]}; raw: {payload[:60]!r}"
    return b.summary


def follow(st: FollowedLog, task_id: str, events: list[StoredEvent], *, idle: float | None) -> Iterator[StoredEvent]:
    """``events`` (the task's so far), then each new event of the task as it is committed.

    Waits on the store (LISTEN/NOTIFY on PostgreSQL; SQLite's data version with a short
    back-off) and catches up with a read from the last position seen: nothing is skipped.
    Ends when the task reaches a terminal state (as the one fold has it), or after ``idle``
    seconds without a new event of the task.
    """
    fold = TaskFold(task_id)
    for ev in events:
        fold.apply(ev)
        yield ev
    # go on from the last event given, not from the log's end now: what another writer committed
    # while those were read or printed is read, not skipped
    cursor = events[-1].position if events else st.last_position()
    quiet_since = time.monotonic()
    while not is_terminal(fold.s.state):
        wait = 1.0 if idle is None else max(0.0, min(1.0, idle - (time.monotonic() - quiet_since)))
        if st.wait_for_events(cursor, timeout=wait):
            for ev in st.read_from(cursor):
                cursor = ev.position
                if ev.task_id == task_id:
                    fold.apply(ev)
                    yield ev
                    quiet_since = time.monotonic()
        elif idle is not None and time.monotonic() - quiet_since >= idle:
            return
