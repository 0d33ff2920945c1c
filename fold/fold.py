"""The fold: one task's state and channel buffers, rebuilt from its events. The only one.

A :class:`TaskFold` is the mutable state of one task. Events enter it one way: :func:`route`
says which task an event is for and whether it is the hot case (a plain text chunk, folded by
``apply_text`` without the full decode), then ``TaskFold.fold`` folds it (``apply`` for a stored
event). ``view`` renders a :class:`TaskView`, the shape ``a2a-tape channels --json`` prints; a
fold made with ``document=True`` also keeps the Task as the agent's task store holds it, from the
recorded JSON (``task()``, what replay answers a GetTask with; rules in :class:`_Document`).
:func:`fold_events` folds a list in memory; :class:`Projector` keeps the states in the store
(``projection_*``), with the cursor committed in the same transaction as the rows, and an LRU of
live folds so memory does not grow with the log. Channels, replayed answers, recovery, doctor,
diff, the exports and the live view all read this fold.

Rules (docs/design.md section 4; profiles in :mod:`fold.profiles`):

- one buffer per ``(task_id, artifact_id)``; ``append`` true appends, false/absent replaces;
  ``lastChunk`` closes; a final snapshot replaces whatever ``append`` says;
- a Task snapshot (first item of a stream, a resubscribe snapshot, a GetTask result) REPLACES
  the artifacts: the buffers become exactly the snapshot's artifacts; except the agent's stored
  copy: a snapshot on another exchange after the agent ended the task (record's own GetTask, a
  client's) is evidence, never folded: compared with what was streamed (``stored-copy-differs``),
  the state and channels stay the stream's (a second side never rewrites the first). A snapshot
  that is the only source (a polled task, a dropped stream recovered by GetTask) still replaces;
- dedup keys (``event_id``, else ``sequence``) drop re-sent events; visible text never does;
- ignored events (no ``message_id`` under opencode channels, a user echo, a duplicate) stay
  in the log, are counted in ``ignored_events`` and listed in ``ignored``;
- final answer: the ``final_answer`` buffer updated last **by log position**; for a task with no
  final-answer channel (generic A2A), the generic artifact updated last; with no artifact at
  all, the last agent Message (a message-only reply). Never text joined across artifacts.
  ``reasoning`` is the reasoning buffers (one per artifact, joined by a blank line when several).

Task state follows the log (the latest state reported wins, our own synthetic FAILED included) and
lifecycle faults are noted. The faults of the agent's lifecycle are judged on the agent's events
only (origin ``local`` events, ours, never make one), from the first terminal state it reported;
doctor reports these as they are, and adds only what a fold cannot see. Their codes are doctor's
(:mod:`fold.codes`, the one table):

- ``terminal-changed``: a terminal state replaced by another terminal state (completed -> failed;
  the new one is the reference from then on), or a finished task that goes back to an active or
  interrupted state;
- ``events-after-terminal``: an artifact update, a message, or a status update on the stream that
  ended the task, after the task reached a terminal state (the same state repeated by another
  exchange, a GetTask or a resubscribe, is fine). Each starts its positions with the terminal's.
  A stream that was open beside the one that ended the task (a resubscribe while a proxy reads the
  dropped stream to its end) delivers the same updates at its own pace: nothing on it is judged
  until it delivers the terminal state itself;
- ``closed-while-working`` (a warning here; doctor judges its level): an exchange that delivered
  stream updates ended while the task was still submitted/working. A stream ends when its exchange
  ends (the exchange's ended row, passed to ``view``); with the log alone, when the task's later
  events all came on other exchanges. Either way the state that counts is the task's when that
  stream ended, so a resubscribe opened beside a stream that is still open is not the first stream
  ending. Also when the log ends with the task submitted/working (the stream closed while working,
  or the recording is still going on);
- ``rpc-error``: a JSON-RPC error on the task's stream (``event: error`` in v1.0, a plain
  ``{"error": ...}`` in v0.3); ``undecodable``: payload bytes that are not an A2A item;
- ``after-last-chunk``: text appended to an artifact that ``lastChunk`` had closed.

Synthetic FAILED events (origin ``local``) fold like any status update. A push's note (action
``push``, :func:`capture.notes.push_event`) is never an update: it keeps the state the push carried,
which a view shows only for a run whose events never gave a state (a task known by its pushes alone).
"""

from __future__ import annotations

import gc
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import msgspec

from a2a_tape.fold.codes import CLOSED_WHILE_WORKING, EVENTS_AFTER_TERMINAL, TERMINAL_CHANGED
from a2a_tape.fold.profiles import (
    _GENERIC_APPEND,
    _GENERIC_REPLACE,
    ARTIFACT,
    ERROR,
    FINAL_ANSWER,
    GENERIC,
    PROFILE_RANK,
    REASONING,
    TOOL_CALL,
    classify,
    classify_artifact,
    tool_state,
)
from a2a_tape.fold.views import ArtifactView, Fault, IgnoredEvent, RecordedTask, TaskView, ToolCall
from a2a_tape.store import (
    TERMINAL_STATES,
    ArtifactUpdate,
    ErrorItem,
    Item,
    MessageItem,
    Note,
    StatusUpdate,
    StoredEvent,
    TaskSnapshot,
    Undecodable,
    decode_item,
)
from a2a_tape.store.decode import TextChunk, normalise_state, peek_text_chunk
from a2a_tape.store.events import ACTIVE_STATES, Artifact, Body, is_active
from a2a_tape.store.json_values import decode_json
from a2a_tape.wire.dialects import Json, item_in, recorded_object
from a2a_tape.wire.push_configs import PUSH

_ACTIVE = ACTIVE_STATES
_AFTER_TERMINAL: dict[type, str] = {
    ArtifactUpdate: "an artifact update",
    MessageItem: "a message",
    StatusUpdate: "a status update",
}
"""What an event after the terminal state is called in the ``events-after-terminal`` fault."""
_MAX_POSITIONS = 50  # positions kept per fault (the count stays exact)
_CODE = {"terminal-reopened": TERMINAL_CHANGED, "after-terminal": EVENTS_AFTER_TERMINAL}
"""A fault's code (:mod:`fold.codes`, doctor's) by the key the folded state keeps it under: the
state keeps its own keys (a persisted projection reads on), a view names them by the one table."""


# -- the persisted state of one task --------------------------------------------------------


class _Tool(msgspec.Struct, array_like=True):
    call_id: str | None
    tool: str | None
    status: str | None
    title: str | None
    input: bytes | None  # JSON bytes: the same value whether folded now or loaded from a row
    output: bytes | None
    error: bytes | None


class _Buf(msgspec.Struct, array_like=True):
    artifact_id: str
    channel: str
    profile: str
    chunks: list[str]
    closed: bool
    updated: int
    tools: dict[str, _Tool] = {}


class _Fault(msgspec.Struct, array_like=True):
    code: str
    level: str
    message: str
    positions: list[int]
    count: int


class _Stream(msgspec.Struct, array_like=True):
    last: int  # position of the exchange's last event
    at: float  # when it arrived
    state: str  # the task's state once that event was folded


class _Change(msgspec.Struct, array_like=True):
    at: float
    state: str


_MAX_CHANGES = 256  # state changes remembered per task (a flapping agent must not grow a row forever)


class RunRef(msgspec.Struct, array_like=True):
    """One run of a task, as the projection row of its latest run lists them (:mod:`fold.runs`)."""

    observer: str | None  # None: not known yet (the run's first events came on no observer's exchange)
    source: str | None
    first_position: int


class TaskState(msgspec.Struct, array_like=True):
    """Everything a fold needs to go on; what a projection row holds (msgpack)."""

    task_id: str
    context_id: str | None = None
    state: str = "unknown"
    profile: str = GENERIC
    events: int = 0
    first_position: int = 0
    last_position: int = 0
    first_at: float = 0.0
    last_at: float = 0.0
    tick: int = 0
    buffers: dict[str, _Buf] = {}
    ignored: list[IgnoredEvent] = []
    seen: set[str] = set()
    user_texts: list[str] = []
    status_message: str | None = None
    agent_message: str | None = None
    error: str | None = None
    faults: dict[str, _Fault] = {}
    terminal: str | None = None  # the agent's terminal state, once it reported one (lifecycle faults)
    undecodable: int = 0
    dialect: str | None = None  # the wire dialect of the first upstream item ("0.3" / "1.0")
    streams: dict[int, _Stream] = {}  # exchanges that delivered stream updates (key 0: unknown exchange)
    changes: list[_Change] = []  # when the state changed (wall clock), to know it when a stream closed
    terminal_position: int = 0  # where the agent reported ``terminal``
    terminal_exchange: int | None = None  # on which exchange
    runs: list[RunRef] = []  # the task's runs so far, in order; this state folds the last (fold.runs)
    before_end: list[int] = []  # the exchanges that delivered the agent's events before its terminal state
    catching_up: list[int] = []  # of them, those still open beside the one that ended the task (until they end it too)
    pushed: str | None = None  # the last state a push carried (its ``push`` note): see :func:`shown_state`


def known_by_pushes(s: TaskState) -> bool:
    """The run's events gave no state and its pushes did (a task the log knows by its pushes alone)."""
    return s.state == "unknown" and s.pushed is not None


def shown_state(s: TaskState) -> str:
    """The state a view and the task index show: the agent's, as streamed or stored; for a run whose
    events never gave one (:func:`known_by_pushes`), the last state a push carried."""
    return s.pushed if known_by_pushes(s) and s.pushed is not None else s.state


STATE_VERSION = "6"
"""Bump when the fold's rules or :class:`TaskState` change: stored rows are then rebuilt."""

_state_encoder = msgspec.msgpack.Encoder()
STATE_DECODER = msgspec.msgpack.Decoder(TaskState)
_json_encoder = msgspec.json.Encoder()


def _json_bytes(value: Any) -> bytes | None:
    if value is None:
        return None
    try:
        return _json_encoder.encode(value)
    except (TypeError, ValueError, OverflowError):  # pragma: no cover - decoded JSON always encodes
        return None


def _json_value(raw: bytes | None) -> Any:
    return None if raw is None else decode_json(raw)


class _Document:
    """The task as the agent's own task manager keeps it, folded from the recorded JSON.

    Kept in the dialect of the first item that shaped it (items of the other dialect are
    converted on arrival, :mod:`wire.dialects`), as JSON values so that fields we do not model
    survive. The rules are those of an A2A task store:

    - a Task replaces everything (status, artifacts, history, metadata, the fields we do not know);
    - a status update first moves the current status message, if any, to the end of the history,
      then merges the event's metadata into the task's (top-level keys, the event's win) and
      takes the event's status whole (a status without a message or timestamp has none);
    - an artifact update with ``append`` false/absent replaces the artifact of that id in place,
      or adds it at the end; with ``append`` true it extends the parts of the artifact of that id
      and merges its metadata (top-level keys); an append for an id never seen adds the artifact
      (a task store would refuse it; the recording holds it, so it is shown);
    - ``lastChunk`` changes nothing of the task; Messages are not part of it.
    """

    __slots__ = ("dialect", "context_id", "status", "artifacts", "history", "metadata", "extra", "seen")

    def __init__(self) -> None:
        self.dialect: str | None = None
        self.context_id: str | None = None
        self.status: Json | None = None
        self.artifacts: list[Json] = []
        self.history: list[Any] = []
        self.metadata: Json | None = None
        self.extra: Json = {}
        self.seen = False

    def fold(self, payload: bytes, item: Item) -> None:
        kind = item.kind
        if kind not in ("task", "status", "artifact"):
            return
        try:
            frame = decode_json(payload)
        except msgspec.DecodeError:  # pragma: no cover - decode_item made an item of it
            return
        found = recorded_object(frame, kind)
        if found is None:
            return
        dialect, obj = found
        if self.dialect is None:
            self.dialect = dialect
        elif dialect != self.dialect:
            obj = item_in(kind, obj, self.dialect)
        self.seen = True
        ctx = obj.get("contextId")
        if kind == "task":
            self.context_id = ctx if isinstance(ctx, str) else self.context_id
            status = obj.get("status")
            self.status = status if isinstance(status, dict) else None
            arts = obj.get("artifacts")
            self.artifacts = [a for a in arts if isinstance(a, dict)] if isinstance(arts, list) else []
            hist = obj.get("history")
            self.history = list(hist) if isinstance(hist, list) else []
            md = obj.get("metadata")
            self.metadata = md if isinstance(md, dict) else None
            self.extra = {k: v for k, v in obj.items() if k not in _TASK_FIELDS}
            return
        if self.context_id is None and isinstance(ctx, str):
            self.context_id = ctx
        if kind == "status":
            prev = self.status
            if prev is not None and prev.get("message") is not None:
                self.history.append(prev["message"])
            md = obj.get("metadata")
            if isinstance(md, dict) and md:
                self.metadata = {**(self.metadata or {}), **md}
            status = obj.get("status")
            self.status = status if isinstance(status, dict) else None
            return
        art = obj.get("artifact")
        if not isinstance(art, dict):
            return
        aid = art.get("artifactId")
        index = next((i for i, a in enumerate(self.artifacts) if a.get("artifactId") == aid), None)
        if obj.get("append") is not True or index is None:
            if index is None:
                self.artifacts.append(art)
            else:
                self.artifacts[index] = art
            return
        old = self.artifacts[index]
        merged = dict(old)
        new_parts = art.get("parts")
        merged["parts"] = list(old.get("parts") or []) + (list(new_parts) if isinstance(new_parts, list) else [])
        md = art.get("metadata")
        if isinstance(md, dict) and md:
            merged["metadata"] = {**(old.get("metadata") or {}), **md}
        self.artifacts[index] = merged

    def task(self, task_id: str) -> RecordedTask | None:
        if not self.seen:
            return None
        status = self.status or {}
        return RecordedTask(
            task_id=task_id,
            context_id=self.context_id,
            state=normalise_state(status.get("state") if isinstance(status.get("state"), str) else None),
            dialect=self.dialect or "0.3",
            status=dict(status),
            artifacts=tuple(self.artifacts),
            history=tuple(self.history),
            metadata=self.metadata,
            extra=dict(self.extra),
        )


_TASK_FIELDS = frozenset({"id", "contextId", "status", "artifacts", "history", "metadata", "kind"})


def route(row_task: str | None, payload: bytes) -> tuple[str | None, TextChunk | None, Item | None]:
    """Which task an event folds into, and how: ``(task id, plain text chunk, None)`` for the hot
    case (:func:`store.decode.peek_text_chunk`, no full decode), else ``(task id, None, item)``.
    The stored task id wins; else the id the payload names (None: no task yet)."""
    chunk = peek_text_chunk(payload)
    if chunk is not None:
        return (row_task if row_task is not None else chunk.taskId), chunk, None
    item = decode_item(payload)
    return (row_task if row_task is not None else item.task_id), None, item


class TaskFold:
    """The one fold of task state: ``fold``/``apply`` stored events in log order, then ``view``
    (channels, faults) or, when made with ``document=True``, ``task()`` (the Task as the agent
    holds it, for replay answers)."""

    __slots__ = ("s", "doc")

    def __init__(self, task_id: str | TaskState, *, document: bool = False) -> None:
        self.s = task_id if isinstance(task_id, TaskState) else TaskState(task_id=task_id)
        self.doc = _Document() if document else None

    def fold(
        self,
        pos: int,
        seq: int,
        exchange_id: int | None,
        at: float,
        payload: bytes,
        chunk: TextChunk | None = None,
        item: Item | None = None,
        *,
        local: bool = False,
    ) -> None:
        """Fold one event (as :func:`route` found it): a plain text chunk without the full decode
        when it can, else the decoded item. The only way events enter a fold (a rebuild's hot loop
        calls :meth:`apply_text` first itself, then this when it declines)."""
        if chunk is not None and self.apply_text(pos, exchange_id, at, chunk, local):
            return
        if item is None:
            item = decode_item(payload)
        self._apply(pos, seq, exchange_id, at, item, local=local)
        if self.doc is not None and not local:
            self.doc.fold(payload, item)

    def task(self) -> RecordedTask | None:
        """The Task folded from the recorded JSON (a fold made with ``document=True``), else None."""
        return None if self.doc is None else self.doc.task(self.s.task_id)

    # -- persistence --

    def dump(self) -> bytes:
        for buf in self.s.buffers.values():
            if len(buf.chunks) > 1:
                buf.chunks[:] = ["".join(buf.chunks)]
        return _state_encoder.encode(self.s)

    @classmethod
    def load(cls, data: bytes) -> TaskFold:
        return cls(STATE_DECODER.decode(data))

    # -- folding --

    def apply(self, ev: StoredEvent, item: Item | None = None) -> None:
        """Fold one stored event (``item``: its payload decoded already, if the caller has it)."""
        self.fold(
            ev.position, ev.seq, ev.exchange_id, ev.received_at, ev.payload, None, item, local=ev.origin == "local"
        )

    def _arrived(self, pos: int, at: float) -> None:
        """The counters every event goes through."""
        s = self.s
        if s.events == 0:
            s.first_position = pos
            s.first_at = at
        s.events += 1
        s.last_position = pos
        s.last_at = at

    def _before_end(self, exchange_id: int | None) -> None:
        """An agent's event before its terminal state came on this exchange (see ``catching_up``)."""
        if exchange_id and exchange_id not in self.s.before_end:
            self.s.before_end.append(exchange_id)

    def _on_stream(self, pos: int, exchange_id: int | None, at: float, streamed: bool) -> None:
        """After an event is folded: the exchange's stream bookkeeping (see :meth:`view`)."""
        key = exchange_id or 0
        if self.s.terminal is None:
            self._before_end(exchange_id)
        streams = self.s.streams
        st = streams.get(key)
        if st is not None:
            st.last = pos
            st.at = at
            st.state = self.s.state
        elif streamed:
            streams[key] = _Stream(pos, at, self.s.state)

    def apply_text(self, pos: int, exchange_id: int | None, at: float, chunk: TextChunk, local: bool = False) -> bool:
        """Fold a plain text chunk (:func:`store.decode.peek_text_chunk`) without a full decode.

        The same steps as ``apply`` for an :class:`ArtifactUpdate` without metadata under the
        generic profile, written out flat (this is the hot path of a rebuild). Returns False,
        having changed nothing, when the chunk is not that case here: our own event (``local``),
        a fold that keeps the document (``document=True``), or an artifact id that may name an
        opencode lane (it starts with the task id); the caller then decodes the payload and calls
        :meth:`fold`, which classifies it.
        """
        if local or self.doc is not None:
            return False
        s = self.s
        art = chunk.artifact
        if art is None:  # a PeekResult declares it optional; peek_text_chunk returns none without one
            return False
        aid = art.artifactId or ""
        if aid.startswith(s.task_id):
            return False
        # _arrived and _on_stream, inlined
        n = s.events
        if n == 0:
            s.first_position = pos
            s.first_at = at
        s.events = n + 1
        s.last_position = pos
        s.last_at = at
        st = s.streams.get(exchange_id or 0)
        if st is None:
            s.streams[exchange_id or 0] = _Stream(pos, at, s.state)
        else:
            st.last = pos
            st.at = at
        if s.terminal is None and exchange_id and exchange_id not in s.before_end:
            s.before_end.append(exchange_id)  # _before_end, inlined
        if s.context_id is None:
            s.context_id = chunk.contextId
        replace = chunk.append is not True
        buf = s.buffers.get(aid)
        if buf is None:
            buf = s.buffers[aid] = _Buf(aid, ARTIFACT, GENERIC, [], False, 0)
        else:
            buf.channel = ARTIFACT
            if buf.closed and replace is False:
                self._fault("after-last-chunk", "warning", pos, f"artifact {aid} got text after lastChunk")
        if s.terminal is not None and (exchange_id or 0) not in s.catching_up:
            self._after_terminal(pos, "an artifact update")
        buf.updated = s.tick = s.tick + 1
        parts = art.parts
        if replace:
            buf.chunks = [p.text for p in parts]
            buf.closed = chunk.lastChunk is True
        else:
            if len(parts) == 1:
                buf.chunks.append(parts[0].text)
            else:
                buf.chunks.extend([p.text for p in parts])
            if chunk.lastChunk is True:
                buf.closed = True
        return True

    def apply_texts(self, events: Sequence[StoredEvent], chunks: Sequence[TextChunk]) -> None:
        """:meth:`fold` each stored event with its plain text chunk, in order (a stream's batch,
        every event this task's): the same state as one ``fold`` per event. After an event, the
        appends that follow it to the same open artifact (one text part each, the same exchange,
        no ``lastChunk``) while nothing can raise a fault are folded as one step: their texts
        added, the counters and positions moved to the last of them."""
        s = self.s
        n = len(events)
        i = 0
        while i < n:
            ev = events[i]
            chunk = chunks[i]
            self.fold(ev.position, ev.seq, ev.exchange_id, ev.received_at, ev.payload, chunk)
            i += 1
            art = chunk.artifact
            if (
                i == n
                or art is None
                or self.doc is not None
                or s.context_id is None
                or s.terminal is not None
                or s.state in TERMINAL_STATES
            ):
                continue
            aid = art.artifactId or ""
            buf = s.buffers.get(aid)
            if buf is None or buf.closed or buf.channel != ARTIFACT or aid.startswith(s.task_id):
                continue
            ex = ev.exchange_id
            texts = buf.chunks
            j = i
            while j < n:
                c = chunks[j]
                a = c.artifact
                if (
                    c.append is not True
                    or c.lastChunk is True
                    or a is None
                    or (a.artifactId or "") != aid
                    or len(a.parts) != 1
                    or events[j].exchange_id != ex
                ):
                    break
                texts.append(a.parts[0].text)
                j += 1
            if j == i:
                continue
            last = events[j - 1]
            s.events += j - i
            s.last_position = last.position
            s.last_at = last.received_at
            st = s.streams[ex or 0]
            st.last = last.position
            st.at = last.received_at
            buf.updated = s.tick = s.tick + (j - i)
            i = j

    def _apply(
        self, pos: int, seq: int, exchange_id: int | None, at: float, item: Item, *, local: bool = False
    ) -> None:
        s = self.s
        self._arrived(pos, at)
        if s.dialect is None and not local and item.dialect in ("0.3", "1.0"):
            s.dialect = item.dialect

        body = item.body
        # exact-type checks, not isinstance: isinstance on a Struct class costs several times more,
        # and this dispatch runs once per event of a rebuild (mypy narrows `type(x) is C` alike)
        if type(body) is TaskSnapshot and self._stored_copy(pos, exchange_id, at, body, local):
            return
        if not local and (s.terminal is not None or type(body) is StatusUpdate or type(body) is TaskSnapshot):
            self._lifecycle(pos, exchange_id, body)
        streamed = False
        if type(body) is ArtifactUpdate:
            streamed = True
            if s.context_id is None:
                s.context_id = body.context_id
            self._artifact(pos, seq, body)
        elif type(body) is StatusUpdate:
            streamed = True
            if s.context_id is None:
                s.context_id = body.context_id
            # the status message follows the last status: one without a message clears it
            s.status_message = (body.message.text or None) if body.message is not None else None
            self._state(body.state)
        elif type(body) is TaskSnapshot:
            if s.context_id is None:
                s.context_id = body.context_id
            self._snapshot(body)
        elif type(body) is MessageItem:
            msg = body.message
            if s.context_id is None:
                s.context_id = msg.context_id
            if msg.role == "user":
                s.user_texts.append(msg.text)
            else:
                s.agent_message = msg.text
        else:
            self._other(pos, body, local)
        self._on_stream(pos, exchange_id, at, streamed)

    def _other(self, pos: int, body: Body, local: bool) -> None:
        """An item that is no update of the task: an error, bytes that are not A2A, a note of ours."""
        s = self.s
        if type(body) is ErrorItem:
            code = "" if body.code is None else f"{body.code} "
            s.error = f"{code}{body.message}".strip()
            level = "warning" if s.state in TERMINAL_STATES else "error"
            self._fault("rpc-error", level, pos, f"JSON-RPC error {s.error}")
        elif type(body) is Undecodable:
            s.undecodable += 1
            self._fault("undecodable", "warning", pos, f"payload is not an A2A item ({body.reason[:80]})")
        elif type(body) is Note and local and body.action == PUSH:
            self._pushed(body)
        # other notes / Other: counted as events, nothing to fold

    def _fault(self, code: str, level: str, pos: int, message: str, since: int | None = None) -> None:
        """Note a fault at ``pos`` (``since``: the position it follows from, kept first)."""
        faults = self.s.faults
        f = faults.get(code)
        if f is None:
            faults[code] = _Fault(code, level, message, [pos] if since is None or since == pos else [since, pos], 1)
            return
        f.count += 1
        f.message = message
        if level == "error":
            f.level = "error"
        if len(f.positions) < _MAX_POSITIONS:
            f.positions.append(pos)

    def _lifecycle(self, pos: int, exchange_id: int | None, body: object) -> None:
        """The agent's lifecycle faults (module docstring): called for the agent's events that
        report a state, and for all of them once it reported a terminal one."""
        s = self.s
        kind = type(body)
        state = body.state if isinstance(body, (StatusUpdate, TaskSnapshot)) else None
        if s.terminal is None:
            if state in TERMINAL_STATES:
                s.terminal, s.terminal_position, s.terminal_exchange = state, pos, exchange_id
                # the other streams of the task open now (a resubscribe beside a stream a proxy reads
                # to its end) deliver the same updates at their own pace: not after the end, until
                # each delivers the end itself
                s.catching_up = [k for k in s.before_end if k != exchange_id]
            return
        key = exchange_id or 0
        if key in s.catching_up:
            if state not in TERMINAL_STATES:
                return  # still catching up
            s.catching_up.remove(key)  # it has caught up: what follows on it is after the end
            if state == s.terminal:
                return  # (another terminal state is judged below)
        if state is not None and state not in ("unknown", s.terminal):
            was, since = s.terminal, s.terminal_position
            if state in TERMINAL_STATES:
                self._fault("terminal-changed", "error", pos, f"terminal state changed: {was} -> {state}", since)
                s.terminal, s.terminal_position, s.terminal_exchange = state, pos, exchange_id
            else:
                self._fault("terminal-reopened", "error", pos, f"a finished task went back: {was} -> {state}", since)
            return
        if state == s.terminal and exchange_id != s.terminal_exchange:
            return  # a GetTask / resubscribe answer repeating the final state
        what = _AFTER_TERMINAL.get(kind)
        if what is not None:
            self._after_terminal(pos, what)

    def _after_terminal(self, pos: int, what: str) -> None:
        s = self.s
        self._fault(
            "after-terminal", "error", pos, f"{what} arrived after the task was {s.terminal}", s.terminal_position
        )

    def _pushed(self, note: Note) -> None:
        """A push's note: the state and context the push carried, never folded as an update (the
        stream's or the stored copy's items are the task's; :func:`shown_state`)."""
        s = self.s
        if note.state is not None and note.state != "unknown":
            s.pushed = note.state
        if s.context_id is None and note.context_id:
            s.context_id = note.context_id

    def _state(self, new: str) -> None:
        s = self.s
        if new == "unknown":
            return
        if new != s.state:
            changes = s.changes
            if len(changes) >= _MAX_CHANGES:
                del changes[0]
            changes.append(_Change(s.last_at, new))
        s.state = new

    def _snapshot(self, body: TaskSnapshot) -> None:
        s = self.s
        for msg in body.history:
            if msg.role == "user":
                text = msg.text
                if text and text not in s.user_texts:
                    s.user_texts.append(text)
        s.status_message = (body.status_message.text or None) if body.status_message is not None else None
        self._state(body.state)
        closed = s.state in TERMINAL_STATES
        buffers: dict[str, _Buf] = {}
        for art in body.artifacts:
            chunk = classify_artifact(s.task_id, art, False)
            if chunk.ignore is not None:
                continue
            self._profile(chunk.profile)
            s.tick += 1
            buf = _Buf(art.artifact_id, chunk.channel, chunk.profile, [], closed, s.tick)
            self._fill(buf, art, True)
            buffers[art.artifact_id] = buf
        s.buffers = buffers

    def takes_as_stored_copy(self, exchange_id: int | None, *, local: bool = False) -> bool:
        """Whether a Task snapshot on ``exchange_id`` folded next is the agent's stored copy (evidence,
        not folded into the channels): the agent ended the task already, on another exchange."""
        s = self.s
        return not local and s.terminal is not None and exchange_id != s.terminal_exchange

    def _stored_copy(self, pos: int, exchange_id: int | None, at: float, body: TaskSnapshot, local: bool) -> bool:
        """A Task snapshot (a GetTask or resubscribe answer) after the agent ended the task on
        another exchange is the agent's stored copy: evidence (returns True, having folded it).
        A second side never rewrites the first: the state and channels stay what was streamed,
        and each way the copy differs is noted (``stored-copy-differs``, from where the stream
        ended the task to the copy)."""
        s = self.s
        if not self.takes_as_stored_copy(exchange_id, local=local):
            return False
        if s.context_id is None:
            s.context_id = body.context_id
        self._on_stream(pos, exchange_id, at, False)
        found = stored_copy_differences(s, body)
        if not found:
            return True
        more = f" (+{len(found) - 3} more)" if len(found) > 3 else ""
        message = "the agent's stored task differs from what it streamed: " + "; ".join(found[:3]) + more
        self._fault("stored-copy-differs", "warning", pos, message, s.terminal_position)
        return True

    def _profile(self, profile: str) -> None:
        if profile != GENERIC and PROFILE_RANK[profile] > PROFILE_RANK[self.s.profile]:
            self.s.profile = profile

    def _artifact(self, pos: int, seq: int, body: ArtifactUpdate) -> None:
        s = self.s
        art = body.artifact
        meta = art.meta
        if meta.has_opencode or meta.has_blocks or art.artifact_id.startswith(s.task_id):
            chunk = classify(s.task_id, body)
        else:  # the common generic case, without a call
            chunk = _GENERIC_APPEND if body.append else _GENERIC_REPLACE
        if chunk.profile != GENERIC:
            self._profile(chunk.profile)
        if chunk.ignore is not None:
            s.ignored.append(IgnoredEvent(pos, seq, chunk.ignore))
            return
        if chunk.dedup is not None:
            if chunk.dedup in s.seen:
                s.ignored.append(IgnoredEvent(pos, seq, "duplicate (same event id / sequence)"))
                return
            s.seen.add(chunk.dedup)
        aid = art.artifact_id
        buf = s.buffers.get(aid)
        if buf is None:
            if (
                chunk.profile != GENERIC
                and chunk.channel == FINAL_ANSWER
                and art.meta.role is None
                and s.user_texts
                and art.text.strip() in (t.strip() for t in s.user_texts)
            ):
                s.ignored.append(IgnoredEvent(pos, seq, "user echo (the user's own text)"))
                return
            buf = _Buf(aid, chunk.channel, chunk.profile, [], False, 0)
            s.buffers[aid] = buf
        else:
            buf.channel = chunk.channel
            if buf.closed and not chunk.replace:
                self._fault("after-last-chunk", "warning", pos, f"artifact {aid} got text after lastChunk")
        s.tick += 1
        buf.updated = s.tick
        self._fill(buf, art, chunk.replace)
        if chunk.replace:
            buf.closed = body.last_chunk
        elif body.last_chunk:
            buf.closed = True

    def _fill(self, buf: _Buf, art: Artifact, replace: bool) -> None:
        parts = art.parts
        if replace:
            buf.chunks = [p.text for p in parts if p.text is not None]
        elif len(parts) == 1:
            text = parts[0].text
            if text is not None:
                buf.chunks.append(text)
        else:
            buf.chunks.extend(p.text for p in parts if p.text is not None)
        if buf.channel == TOOL_CALL:
            for p in art.parts:
                if p.kind == "data":
                    st = tool_state(p.data)
                    if st is None:
                        continue
                    key = st.call_id or ""
                    # every update carries the whole state: the last one wins, never concatenated
                    buf.tools[key] = _Tool(
                        st.call_id,
                        st.tool,
                        st.status,
                        st.title,
                        _json_bytes(st.input),
                        _json_bytes(st.output),
                        _json_bytes(st.error),
                    )

    # -- the view --

    def _state_at(self, at: float, fallback: str) -> str:
        state = None
        for c in self.s.changes:
            if c.at > at:
                break
            state = c.state
        return fallback if state is None else state

    def _closed_streams(self, closed: Mapping[int, float] | None) -> list[Fault]:
        """``closed-while-working``: a stream ended while the task was submitted/working.

        A stream ends when its exchange ends: ``closed`` maps the exchanges that ended (their
        ended row) to when. Without it (a log alone), a stream counts as ended once a later event
        of the task came on another exchange; the state that matters is the task's at the end of
        that stream, never when another exchange's item arrives (a resubscribe opened beside a
        still open stream is not the first stream ending).
        """
        s = self.s
        out: list[Fault] = []
        last = s.last_position
        for key, st in s.streams.items():
            if st.last == last and is_active(s.state):
                continue  # the log ends on this stream with the task active: the log's end says it
            if closed is None:
                if st.last == last:
                    continue  # the log ends on this stream (it may still be open)
                state = st.state
            else:
                ended = closed.get(key)
                if ended is None:
                    continue  # still open (or never recorded as ended)
                state = self._state_at(max(ended, st.at), st.state)
            if is_active(state):
                out.append(
                    Fault(CLOSED_WHILE_WORKING, "warning", f"a stream ended while the task was {state}", [st.last], 1)
                )
        if len(out) > 1:
            positions = sorted(p for f in out for p in f.positions)
            return [Fault(CLOSED_WHILE_WORKING, "warning", out[-1].message, positions[:_MAX_POSITIONS], len(out))]
        return out

    def view(self, closed: Mapping[int, float] | None = None) -> TaskView:
        """The task's channels and faults; ``closed``: exchange id -> when it ended (see
        :meth:`_closed_streams`)."""
        s = self.s
        bufs = list(s.buffers.values())
        final = _last_text(bufs, FINAL_ANSWER)
        if final is None:
            final = _last_text(bufs, ARTIFACT)
        if final is None:
            final = s.agent_message
        reasoning = "\n\n".join(t for t in ("".join(b.chunks) for b in bufs if b.channel == REASONING) if t)
        tools: list[ToolCall] = []
        artifacts: list[ArtifactView] = []
        for b in bufs:
            text = "".join(b.chunks)
            artifacts.append(ArtifactView(b.artifact_id, b.channel, text, b.closed, b.profile))
            if b.channel != TOOL_CALL:
                continue
            if not b.tools:
                tools.append(ToolCall(b.artifact_id, None, None, None, None, None, None, None, text))
            for t in b.tools.values():
                tools.append(
                    ToolCall(
                        b.artifact_id,
                        t.call_id,
                        t.tool,
                        t.status,
                        t.title,
                        _json_value(t.input),
                        _json_value(t.output),
                        _json_value(t.error),
                        text,
                    )
                )
        faults = [
            Fault(_CODE.get(f.code, f.code), f.level, f.message, list(f.positions), f.count) for f in s.faults.values()
        ]
        faults.extend(self._closed_streams(closed))
        if s.state in _ACTIVE and s.events:
            faults.append(
                Fault(CLOSED_WHILE_WORKING, "warning", f"the log ends with the task {s.state}", [s.last_position], 1)
            )
        return TaskView(
            task_id=s.task_id,
            context_id=s.context_id,
            state=shown_state(s),
            final_answer=final,
            reasoning=reasoning,
            tool_calls=tools,
            artifacts=artifacts,
            ignored_events=len(s.ignored),
            events=s.events,
            first_position=s.first_position,
            last_position=s.last_position,
            first_at=s.first_at,
            last_at=s.last_at,
            faults=faults,
            profile=s.profile,
            status_message=s.status_message,
            error=s.error if s.error is not None else _last_text(bufs, ERROR),
            undecodable=s.undecodable,
            ignored=list(s.ignored),
        )


def _quoted(text: str, limit: int = 40) -> str:
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


def stored_copy_differences(s: TaskState, body: TaskSnapshot) -> list[str]:
    """How the agent's stored task (``body``) differs from what the task's streams said (``s``):
    a different state or status message, an artifact whose text is the streamed text twice, the
    user's text kept before the answer, other text, text the stream never showed. (A copy without
    an artifact the stream sent is not one: agents may keep a task's artifacts elsewhere.)"""
    out: list[str] = []
    if body.state not in ("unknown", s.state):
        out.append(f"its state is {body.state}, the stream ended it {s.state}")
    streamed = {aid: "".join(b.chunks) for aid, b in s.buffers.items()}
    for art in body.artifacts:
        aid = art.artifact_id
        text = art.text
        sent = streamed.get(aid)
        if sent is None:
            if text:
                out.append(f"artifact {aid} holds text the stream's channels never showed ({_quoted(text)})")
        elif text == sent:
            continue
        elif sent and text == sent + sent:
            out.append(f"artifact {aid} holds the streamed text twice ({_quoted(sent)})")
        elif sent and any(u and text == u + sent for u in s.user_texts):
            out.append(f"artifact {aid} holds the user's own text before the answer ({_quoted(text)})")
        else:
            out.append(f"artifact {aid} holds {_quoted(text)} where the stream said {_quoted(sent)}")
    stored_message = (body.status_message.text or None) if body.status_message is not None else None
    if stored_message is not None and stored_message != s.status_message:
        out.append(
            f"its status message is {_quoted(stored_message)}, the stream's was {_quoted(s.status_message or '')}"
        )
    return out


def _last_text(bufs: list[_Buf], channel: str) -> str | None:
    best: _Buf | None = None
    for b in bufs:
        if b.channel == channel and (best is None or b.updated > best.updated):
            best = b
    return None if best is None else "".join(best.chunks)


def event_task_id(ev: StoredEvent, item: Item) -> str | None:
    """The task an event belongs to: its stored key, else the id the item names."""
    return ev.task_id if ev.task_id is not None else item.task_id


def fold_events(events: Iterable[StoredEvent], closed: Mapping[int, float] | None = None) -> dict[str, TaskView]:
    """Fold events (in log order) in memory; one view per task, in order of first appearance."""
    folds = fold_stored(events)
    return {tid: f.view(closed) for tid, f in folds.items()}


def fold_stored(events: Iterable[StoredEvent], *, document: bool = False) -> dict[str, TaskFold]:
    """Fold stored events (in log order) in memory: one fold per task, in order of first appearance."""
    folds: dict[str, TaskFold] = {}
    gc_was_on = gc.isenabled()
    gc.disable()  # no cycles are made here; see Projector._catch_up
    try:
        for ev in events:
            payload = ev.payload
            tid, chunk, item = route(ev.task_id, payload)
            if tid is None:
                continue  # an item before any task id was known (kept in the log, shown by `show`)
            fold = folds.get(tid)
            if fold is None:
                fold = folds[tid] = TaskFold(tid, document=document)
            fold.fold(
                ev.position, ev.seq, ev.exchange_id, ev.received_at, payload, chunk, item, local=ev.origin == "local"
            )
        return folds
    finally:
        if gc_was_on:
            gc.enable()


def fold_task_events(task_id: str, events: Iterable[StoredEvent], *, document: bool = False) -> TaskFold:
    """One task's fold from its stored events (every event is taken as the task's)."""
    fold = TaskFold(task_id, document=document)
    for ev in events:
        fold.apply(ev)
    return fold
