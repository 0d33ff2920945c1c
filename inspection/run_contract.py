"""A run's contract: what ``verify`` compares of one run (docs/verify.md, "What is compared").

One :class:`ContractBuilder` reads a run's events as they come, in log order, in batches: a live
run's as its stream is recorded (verify's sink hands it each batch once it is in the log, the
plain text chunks as they were peeked: :func:`store.decode.peek_text_chunk`), a recorded run's
from the log (:func:`contract`). Each event is decoded once and folded once (the one fold,
:class:`fold.fold.TaskFold`, with the recorder's fast path for text chunks), and the facts the
rules read are kept as it goes; :meth:`ContractBuilder.contract` then makes the
:class:`Contract`. Doctor's findings (:mod:`inspection.doctor`) are the only part that needs each
event in the general model: a text chunk is made into its :class:`store.ArtifactUpdate` for them
(:func:`store.decode.chunk_update`, no second decode), and only when they are asked for.

What is kept of a run (the rules are :mod:`inspection.verify_rules`'):

- the state trajectory (a state repeated in a row counts once);
- the sequence of event kinds, an artifact's updates in a row counted once;
- each artifact in order of first appearance: its name, its channel (the fold's), its id when the
  agent does not make it per task, how it was closed;
- the tool calls (the fold's), each error with its binding, doctor's error-level findings, the
  time to the first event of the first send and the sends' durations.

Events of a2a-tape's own (origin ``local``) are the recorder's, not the agent's: left out.

The builder makes no reference cycles: while it reads a batch and while it makes the contract, the
cyclic garbage collector is paused (:func:`_no_cycles`), as the fold's rebuilds pause it. A run's
events and items stay alive until the contract is made, and doctor's steps are some 100,000 small
objects for 20,000 events: each collection the allocations set off would walk them all again for
nothing (a fifth of verify's CPU per event, docs/performance.md section 29).
"""

from __future__ import annotations

import contextlib
import gc
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Final, cast

import msgspec

from a2a_tape.fold.fold import TaskFold
from a2a_tape.fold.views import TaskView, ToolCall
from a2a_tape.inspection.doctor import findings
from a2a_tape.inspection.steps import Step, closed_exchanges
from a2a_tape.store import (
    Artifact,
    ArtifactUpdate,
    ErrorItem,
    Exchange,
    Item,
    MessageItem,
    StatusUpdate,
    StoredEvent,
    TaskSnapshot,
)
from a2a_tape.store.decode import TextChunk, chunk_update, decode_item, peek_text_chunk
from a2a_tape.store.methods import GRPC, HTTP_JSON, SEND_METHODS
from a2a_tape.wire.grpc import STATUS_NAMES

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
    context_id: str | None = None  # the first context id its events name


class _Art:
    """An artifact's facts while its run is read (:class:`ArtifactFacts` once it is)."""

    __slots__ = ("position", "name", "text", "appended", "last_chunk", "snapshot", "after_last")

    def __init__(self, position: int, name: str | None, text: str) -> None:
        self.position, self.name, self.text = position, name, text
        self.appended = self.last_chunk = self.snapshot = self.after_last = False


Taken = Item | TextChunk
"""An event as the builder takes it: decoded, or a plain text chunk as it was peeked."""


class ContractBuilder:
    """The contract of one run, from its events as they come (:meth:`take`, in log order).

    ``task_id``: the task the run is filed under; the task its agent named (the first event that
    names one) is the one folded, as the agent's own ids are read (opencode's ``{task}:stream``
    lanes). Until an event names it, the events wait (a first error, a lone message)."""

    def __init__(self, task_id: str) -> None:
        self.filed = task_id
        self.named: str | None = None
        self.context_id: str | None = None
        self.fold: TaskFold | None = None
        self.state: str | None = None  # the last state its events said
        self.states_seen = 0  # how many of its events said a state
        self.last_error = False  # its last event is an error
        self.events: list[StoredEvent] = []  # the agent's, in order
        self._taken: list[Taken] = []
        self._states: list[Entry] = []
        self._kinds: list[tuple[int, str | None, str]] = []  # (position, kind, what); kind None: artifact id
        self._row: set[str] = set()  # artifacts of the current row of artifact updates
        self._arts: dict[str, _Art] = {}
        self._contexts: dict[str, None] = {}
        self._errors: list[tuple[StoredEvent, ErrorItem]] = []
        self._first_mono: dict[int | None, float] = {}
        self._view: TaskView | None = None

    # -- reading --------------------------------------------------------------------------------

    def take(self, stored: Sequence[StoredEvent], items: Sequence[Taken]) -> None:
        """A batch of the run's events, each with its item (or peeked text chunk), in log order."""
        if any(ev.origin == "local" for ev in stored):
            kept = [(ev, it) for ev, it in zip(stored, items) if ev.origin != "local"]
            stored, items = [ev for ev, _ in kept], [it for _, it in kept]
        if not stored:
            return
        with _no_cycles():
            self._take(stored, items)

    def _take(self, stored: Sequence[StoredEvent], items: Sequence[Taken]) -> None:
        self._view = None
        start = len(self.events)
        self.events += stored
        self._taken += items
        self._facts(stored, items)
        if self.fold is None:
            if self.named is None:
                return  # (the events wait for an event that names the task)
            self.fold = TaskFold(self.named)
            start = 0  # the events that waited for the task's name, then these
        self._fold(self.events[start:], self._taken[start:])

    def take_events(self, events: Iterable[StoredEvent]) -> None:
        """A run read from the log: each event decoded once (a plain text chunk only peeked)."""
        stored: list[StoredEvent] = []
        items: list[Taken] = []
        with _no_cycles():
            for ev in events:
                if ev.origin == "local":
                    continue
                payload = bytes(ev.payload)
                chunk = peek_text_chunk(payload)
                stored.append(ev)
                items.append(chunk if chunk is not None else decode_item(payload))
            if stored:
                self._take(stored, items)

    def _fold(self, stored: Sequence[StoredEvent], items: Sequence[Taken]) -> None:
        """Into the one fold, as the recorder folds a batch: runs of text chunks in one step."""
        fold = self.fold
        assert fold is not None
        run = 0  # where the text chunks since the last decoded item begin
        for k, item in enumerate(items):
            if type(item) is not Item:
                continue
            if run < k:
                fold.apply_texts(stored[run:k], cast("Sequence[TextChunk]", items[run:k]))
            run = k + 1
            fold.apply(stored[k], item)
        if run < len(items):
            fold.apply_texts(stored[run:], cast("Sequence[TextChunk]", items[run:]))

    def _facts(self, stored: Sequence[StoredEvent], items: Sequence[Taken]) -> None:
        arts, row, contexts, kinds, first_mono = self._arts, self._row, self._contexts, self._kinds, self._first_mono
        for ev, it in zip(stored, items):
            if ev.exchange_id not in first_mono and ev.mono is not None:
                first_mono[ev.exchange_id] = ev.mono
            if type(it) is Item:
                self._item(ev, it)
                continue
            # a plain text chunk: an artifact update without metadata (the bulk of a stream)
            pos = ev.position
            art = it.artifact
            aid = (art.artifactId or "") if art is not None else ""
            if self.named is None and it.taskId:
                self.named = it.taskId
            ctx = it.contextId
            if ctx:
                if self.context_id is None:
                    self.context_id = ctx
                contexts[ctx] = None
            if aid not in row:
                row.add(aid)
                kinds.append((pos, None, aid))
            a = arts.get(aid)
            if a is None:
                text = "".join([p.text for p in art.parts]) if art is not None else ""
                a = arts[aid] = _Art(pos, art.name if art is not None else None, text)
            a.after_last = a.after_last or a.last_chunk
            a.appended = a.appended or it.append is True
            a.last_chunk = a.last_chunk or it.lastChunk is True
            self.last_error = False

    def _item(self, ev: StoredEvent, item: Item) -> None:
        pos, body = ev.position, item.body
        if self.named is None and item.task_id:
            self.named = item.task_id
        ctx = item.context_id
        if ctx:
            if self.context_id is None:
                self.context_id = ctx
            self._contexts[ctx] = None
        self.last_error = isinstance(body, ErrorItem)
        if isinstance(body, (StatusUpdate, TaskSnapshot)):
            self.state = body.state
            self.states_seen += 1
            if not self._states or self._states[-1].what != body.state:
                self._states.append(Entry(pos, item.kind, body.state))
        if isinstance(body, ArtifactUpdate):
            aid = body.artifact.artifact_id
            if aid not in self._row:
                self._row.add(aid)
                self._kinds.append((pos, None, aid))
            self._artifact(pos, body.artifact, body.append, body.last_chunk, update=True)
            return
        self._row.clear()
        if isinstance(body, TaskSnapshot):
            for art in body.artifacts:
                self._artifact(pos, art, False, False, update=False)
        if isinstance(body, MessageItem):
            self._kinds.append((pos, "message", f"message from {body.message.role or '?'}"))
        elif isinstance(body, ErrorItem):
            self._kinds.append((pos, "error", "error"))
            self._errors.append((ev, body))
        elif item.kind in ("task", "status"):
            self._kinds.append((pos, item.kind, item.kind))

    def _artifact(self, pos: int, art: Artifact, append: bool, last: bool, *, update: bool) -> None:
        a = self._arts.get(art.artifact_id)
        if a is None:
            a = self._arts[art.artifact_id] = _Art(pos, art.name, art.text)
        a.after_last = a.after_last or (a.last_chunk and update)
        a.appended = a.appended or append
        a.last_chunk = a.last_chunk or last
        a.snapshot = a.snapshot or art.meta.source == "final_snapshot"

    # -- the contract ---------------------------------------------------------------------------

    def view(self, exchanges: Sequence[Exchange]) -> TaskView:
        """The fold's view of the run (the events that waited for a task name folded under the
        task it is filed under when none came)."""
        if self.fold is None:
            self.fold = TaskFold(self.filed)
            self._fold(self.events, self._taken)
        if self._view is None:
            self._view = self.fold.view(closed_exchanges(exchanges) if exchanges else None)
        return self._view

    def contract(self, run: str, exchanges: Sequence[Exchange], *, doctor: bool = True) -> Contract:
        """The contract of the run read so far (``run``: its selector), with its exchanges.
        ``doctor`` False: doctor's findings left out (the ``doctor`` rule reads the recording's
        findings only when a live run has some: they are the costly part of a recorded run's)."""
        with _no_cycles():
            return self._contract(run, exchanges, doctor=doctor)

    def _contract(self, run: str, exchanges: Sequence[Exchange], *, doctor: bool) -> Contract:
        named = self.named or self.filed
        view = self.view(exchanges)
        by_ex = {ex.id: ex for ex in exchanges if ex.id is not None}
        artifacts = self._artifact_facts(named, {a.artifact_id: (a.channel, a.text) for a in view.artifacts})
        numbers = {aid: k + 1 for k, aid in enumerate(artifacts)}
        events = [
            Entry(pos, kind, what)
            if kind is not None
            else Entry(pos, "artifact", label(artifacts[what], numbers[what]))
            for pos, kind, what in self._kinds
        ]
        sends = [ex for ex in exchanges if ex.rpc_method in SEND_METHODS]
        first, total = self._times(sends)
        return Contract(
            run=run,
            task_id=named,
            states=list(self._states),
            events=events,
            artifacts=list(artifacts.values()),
            tools=[
                Entry(artifacts[t.artifact_id].position if t.artifact_id in artifacts else None, "artifact", _tool(t))
                for t in view.tool_calls
            ],
            errors=_errors(self._errors, by_ex),
            doctor=self._doctor(named, exchanges, view) if doctor else [],
            first_position=self.events[0].position if self.events else None,
            first_event=first,
            total=total,
            final_answer=view.final_answer,
            binding=(sends[0].binding or "jsonrpc") if sends else None,
            meanings=_meanings(self._errors, by_ex),
            context_id=self.context_id,
        )

    def _doctor(self, named: str, exchanges: Sequence[Exchange], view: TaskView) -> list[Entry]:
        """Doctor's error-level findings, each event in the general model (a text chunk made into
        its update, not decoded again)."""
        steps = [Step(ev, _general(it)) for ev, it in zip(self.events, self._taken)]
        return [
            Entry(f.positions[0] if f.positions else None, None, f.code)
            for f in findings(named, self.events, exchanges, steps=steps, view=view, errors_only=True)
        ]

    def _artifact_facts(self, named: str, viewed: dict[str, tuple[str, str]]) -> dict[str, ArtifactFacts]:
        """Each artifact by id, in order of first appearance: its id kept only when the agent does
        not make it per task (it holds none of the run's task and context ids, and no UUID)."""
        volatile = [named, *self._contexts]
        out: dict[str, ArtifactFacts] = {}
        for aid, a in self._arts.items():
            channel, text = viewed.get(aid, ("artifact", a.text))
            out[aid] = ArtifactFacts(
                a.position,
                _stable_key(aid, volatile),
                a.name,
                channel,
                a.appended,
                a.last_chunk,
                a.snapshot,
                text,
                a.after_last,
            )
        return out

    def _times(self, sends: Sequence[Exchange]) -> tuple[float | None, float | None]:
        """Seconds from the first send to its first event, and the sends' durations summed."""
        sends = [ex for ex in sends if ex.id is not None]
        if not sends:
            return None, None
        first = self._first_mono.get(sends[0].id)
        total = sum(ex.ended_at - ex.started_at for ex in sends if ex.ended_at is not None)
        return first, total


@contextlib.contextmanager
def _no_cycles() -> Iterator[None]:
    """The cyclic garbage collector paused for a block that makes no reference cycles (its
    objects are freed by their counts as ever; a collection due comes once it is on again)."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def _general(it: Taken) -> Item:
    """An event in the general model: a peeked text chunk made into its update (not decoded again)."""
    return it if isinstance(it, Item) else Item(chunk_update(it))


def contract(
    run: str, task_id: str, events: Sequence[StoredEvent], exchanges: Sequence[Exchange], *, doctor: bool = True
) -> Contract:
    """The contract of one run (``run``: its selector) from its stored events and exchanges."""
    builder = ContractBuilder(task_id)
    builder.take_events(events)
    return builder.contract(run, exchanges, doctor=doctor)


def named_task(task_id: str, events: Iterable[StoredEvent]) -> str:
    """The task id the run's agent named (a verify run is filed under the recorded task's id)."""
    for ev in events:  # decoded one at a time: the first one that names a task ends the search
        if ev.origin == "local":
            continue
        tid = decode_item(bytes(ev.payload)).task_id
        if tid:
            return tid
    return task_id


def _tool(t: ToolCall) -> str:
    return f"tool {t.tool or t.title or '?'}: {t.status or 'no status'}"


def _stable_key(artifact_id: str, volatile: Sequence[str]) -> str | None:
    """The id of an artifact when the agent does not make it per task, else None."""
    for v in volatile:
        if v and v in artifact_id:
            return None
    return None if _UUID.search(artifact_id) else artifact_id


def label(art: ArtifactFacts, number: int) -> str:
    """How a report names an artifact: ``artifact #3 'answer' (final_answer)``."""
    name = f" {art.name!r}" if art.name else ""
    return f"artifact #{number}{name} ({art.channel})"


# -- errors ----------------------------------------------------------------------------------------


def _error_steps(
    errors: Sequence[tuple[StoredEvent, ErrorItem]], by_ex: dict[int, Exchange]
) -> Iterator[tuple[StoredEvent, ErrorItem, Exchange | None, str]]:
    """Each error with its exchange and the binding it came in (JSON-RPC when unknown)."""
    for ev, body in errors:
        ex = by_ex.get(ev.exchange_id) if ev.exchange_id is not None else None
        yield ev, body, ex, (ex.binding if ex is not None else None) or "jsonrpc"


def _errors(errors: Sequence[tuple[StoredEvent, ErrorItem]], by_ex: dict[int, Exchange]) -> list[Entry]:
    out: list[Entry] = []
    for ev, body, ex, binding in _error_steps(errors, by_ex):
        http = f" HTTP {ex.status}" if ex is not None and binding == HTTP_JSON and ex.status else ""
        reason = _reason(ev.payload)
        out.append(Entry(ev.position, "error", f"{binding} error {body.code}{http}{f' {reason}' if reason else ''}"))
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

GRPC_ERRORS: Final = dict(enumerate(STATUS_NAMES))
"""A gRPC error that names no ``ErrorInfo`` reason, by its status code (google.rpc's codes, the same
names as :data:`HTTP_ERRORS`)."""

_TABLES: Final[dict[str, dict[int, str]]] = {"jsonrpc": JSONRPC_ERRORS, HTTP_JSON: HTTP_ERRORS, GRPC: GRPC_ERRORS}


def _meanings(errors: Sequence[tuple[StoredEvent, ErrorItem]], by_ex: dict[int, Exchange]) -> list[Entry]:
    """Each error as A2A names it, in any binding: its ``ErrorInfo`` reason, else what its code
    stands for in its binding (a reason the code contradicts is shown with it)."""
    out: list[Entry] = []
    for ev, body, _ex, binding in _error_steps(errors, by_ex):
        table = _TABLES.get(binding, {})
        coded = table.get(body.code) if body.code is not None else None
        reason = _reason(ev.payload)
        name = reason or coded or f"code {body.code}"
        if reason and binding == "jsonrpc" and coded and coded != reason:
            name = f"{reason} (code {body.code}: {coded})"
        out.append(Entry(ev.position, "error", f"error {name}"))
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
