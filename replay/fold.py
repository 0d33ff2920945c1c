"""The fold: one task's state and channel buffers, rebuilt from its events.

A :class:`TaskFold` is the mutable state of one task; ``apply`` takes one stored event and its
decoded item (decoded once, by the caller) and ``view`` renders a :class:`TaskView`, the
shape ``a2a-tape channels --json`` prints. :func:`fold_events` folds a list in memory;
:class:`Projector` keeps the states in the store (``projection_*``), with the cursor committed
in the same transaction as the rows, and an LRU of live folds so memory does not grow with the log.

Rules (DESIGN section 4; profiles in :mod:`replay.profiles`):

- one buffer per ``(task_id, artifact_id)``; ``append`` true appends, false/absent replaces;
  ``lastChunk`` closes; a final snapshot replaces whatever ``append`` says;
- a Task snapshot (first item of a stream, a resubscribe snapshot, a GetTask result) REPLACES
  the artifacts: the buffers become exactly the snapshot's artifacts;
- dedup keys (``event_id``, else ``sequence``) drop re-sent events; visible text never does;
- ignored events (no ``message_id`` under opencode channels, a user echo, a duplicate) stay
  in the log, are counted in ``ignored_events`` and listed in ``ignored``;
- final answer: the ``final_answer`` buffer updated last **by log position**; for a task with no
  final-answer channel (generic A2A), the generic artifact updated last; with no artifact at
  all, the last agent Message (a message-only reply). Never text joined across artifacts.
  ``reasoning`` is the reasoning buffers (one per artifact, joined by a blank line when several).

Task state follows the log (the latest state reported wins) and lifecycle faults are noted:

- ``after-terminal``: an artifact update or message after the task reached a terminal state;
- ``terminal-changed``: a terminal state replaced by another terminal state (completed -> failed);
- ``terminal-reopened``: a finished task that goes back to an active or interrupted state;
- ``stream-closed-active``: an exchange that delivered stream updates ended (the task's next
  event came on another exchange, e.g. a resubscribe, a poll or a local FAILED) while the task
  was still submitted/working;
- ``ended-active``: the log ends with the task submitted/working (the stream closed while
  working, or the recording is still going on);
- ``rpc-error``: a JSON-RPC error on the task's stream (``event: error`` in v1.0, a plain
  ``{"error": ...}`` in v0.3); ``undecodable``: payload bytes that are not an A2A item;
- ``after-last-chunk``: text appended to an artifact that ``lastChunk`` had closed.

Synthetic FAILED events (origin ``local``) fold like any status update.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable
from typing import Any

import msgspec

from a2a_tape.store import (
    TERMINAL_STATES,
    ArtifactUpdate,
    ErrorItem,
    Item,
    MessageItem,
    StatusUpdate,
    StoredEvent,
    TaskSnapshot,
    Undecodable,
    decode_item,
)
from a2a_tape.store.decode import TextChunk, peek_text_chunk
from a2a_tape.store.events import Artifact

from .profiles import (
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
from .views import ArtifactView, Fault, IgnoredEvent, TaskView, ToolCall

_ACTIVE = frozenset({"submitted", "working"})
_MAX_POSITIONS = 50  # positions kept per fault (the count stays exact)


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
    terminal: str | None = None
    exchange_id: int | None = None
    exchange_streamed: bool = False
    exchange_last: int = 0
    undecodable: int = 0


STATE_VERSION = "1"
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
    return None if raw is None else msgspec.json.decode(raw)


class TaskFold:
    """The mutable projection of one task: ``apply`` stored events in log order, then ``view``."""

    __slots__ = ("s",)

    def __init__(self, task_id: str | TaskState) -> None:
        self.s = task_id if isinstance(task_id, TaskState) else TaskState(task_id=task_id)

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

    def apply(self, ev: StoredEvent, item: Item) -> None:
        self._apply(ev.position, ev.seq, ev.exchange_id, ev.received_at, item)

    def _arrived(self, pos: int, exchange_id: int | None, at: float) -> None:
        """Counters and the exchange bookkeeping every event goes through."""
        s = self.s
        if s.events == 0:
            s.first_position = pos
            s.first_at = at
        s.events += 1
        s.last_position = pos
        s.last_at = at
        if exchange_id != s.exchange_id:
            if s.exchange_streamed and s.state in _ACTIVE:
                self._fault(
                    "stream-closed-active",
                    "warning",
                    s.exchange_last,
                    f"a stream ended while the task was {s.state}",
                )
            s.exchange_id = exchange_id
            s.exchange_streamed = False
        s.exchange_last = pos

    def apply_text(self, pos: int, exchange_id: int | None, at: float, chunk: TextChunk) -> bool:
        """Fold a plain text chunk (:func:`store.decode.peek_text_chunk`) without a full decode.

        The same steps as ``apply`` for an :class:`ArtifactUpdate` without metadata under the
        generic profile, written out flat (this is the hot path of a rebuild). Returns False,
        having changed nothing, when the artifact id may name an opencode lane (it starts with
        the task id): the caller then decodes the payload and calls ``apply``, which classifies it.
        """
        s = self.s
        art = chunk.artifact
        aid = art.artifactId or ""
        if aid.startswith(s.task_id):
            return False
        # _arrived, inlined
        n = s.events
        if n == 0:
            s.first_position = pos
            s.first_at = at
        s.events = n + 1
        s.last_position = pos
        s.last_at = at
        if exchange_id != s.exchange_id:
            if s.exchange_streamed and s.state in _ACTIVE:
                self._fault(
                    "stream-closed-active",
                    "warning",
                    s.exchange_last,
                    f"a stream ended while the task was {s.state}",
                )
            s.exchange_id = exchange_id
        s.exchange_last = pos
        s.exchange_streamed = True
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
        if s.state in TERMINAL_STATES:
            self._fault("after-terminal", "warning", pos, f"an artifact update arrived after the task was {s.state}")
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

    def _apply(self, pos: int, seq: int, exchange_id: int | None, at: float, item: Item) -> None:
        s = self.s
        self._arrived(pos, exchange_id, at)

        body = item.body
        kind = type(body)
        if kind is ArtifactUpdate:
            s.exchange_streamed = True
            if s.context_id is None:
                s.context_id = body.context_id
            self._artifact(pos, seq, body)
        elif kind is StatusUpdate:
            s.exchange_streamed = True
            if s.context_id is None:
                s.context_id = body.context_id
            if body.message is not None:
                text = body.message.text
                s.status_message = text or s.status_message
            self._state(pos, body.state)
        elif kind is TaskSnapshot:
            if s.context_id is None:
                s.context_id = body.context_id
            self._snapshot(body)
        elif kind is MessageItem:
            msg = body.message
            if s.context_id is None:
                s.context_id = msg.context_id
            if msg.role == "user":
                s.user_texts.append(msg.text)
            else:
                if s.terminal is not None and s.state in TERMINAL_STATES:
                    self._fault("after-terminal", "warning", pos, f"a message arrived after the task was {s.state}")
                s.agent_message = msg.text
        elif kind is ErrorItem:
            code = "" if body.code is None else f"{body.code} "
            s.error = f"{code}{body.message}".strip()
            level = "warning" if s.state in TERMINAL_STATES else "error"
            self._fault("rpc-error", level, pos, f"JSON-RPC error {s.error}")
        elif kind is Undecodable:
            s.undecodable += 1
            self._fault("undecodable", "warning", pos, f"payload is not an A2A item ({body.reason[:80]})")
        # Note / Other: counted as events, nothing to fold

    def _fault(self, code: str, level: str, pos: int, message: str) -> None:
        faults = self.s.faults
        f = faults.get(code)
        if f is None:
            faults[code] = _Fault(code, level, message, [pos], 1)
            return
        f.count += 1
        f.message = message
        if level == "error":
            f.level = "error"
        if len(f.positions) < _MAX_POSITIONS:
            f.positions.append(pos)

    def _state(self, pos: int, new: str) -> None:
        s = self.s
        if new == "unknown":
            return
        term = s.terminal
        if term is not None and new != s.state:
            if new in TERMINAL_STATES:
                if new != term:
                    self._fault("terminal-changed", "error", pos, f"terminal state changed: {s.state} -> {new}")
                s.terminal = new
            elif s.state in TERMINAL_STATES:
                self._fault("terminal-reopened", "error", pos, f"a finished task went back: {s.state} -> {new}")
        elif term is None and new in TERMINAL_STATES:
            s.terminal = new
        s.state = new

    def _snapshot(self, body: TaskSnapshot) -> None:
        s = self.s
        for msg in body.history:
            if msg.role == "user":
                text = msg.text
                if text and text not in s.user_texts:
                    s.user_texts.append(text)
        if body.status_message is not None and body.status_message.text:
            s.status_message = body.status_message.text
        self._state(s.last_position, body.state)
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
        if s.state in TERMINAL_STATES:
            self._fault("after-terminal", "warning", pos, f"an artifact update arrived after the task was {s.state}")
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

    def view(self) -> TaskView:
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
        faults = [Fault(f.code, f.level, f.message, list(f.positions), f.count) for f in s.faults.values()]
        if s.state in _ACTIVE and s.events:
            faults.append(
                Fault("ended-active", "warning", f"the log ends with the task {s.state}", [s.last_position], 1)
            )
        return TaskView(
            task_id=s.task_id,
            context_id=s.context_id,
            state=s.state,
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


def _last_text(bufs: list[_Buf], channel: str) -> str | None:
    best: _Buf | None = None
    for b in bufs:
        if b.channel == channel and (best is None or b.updated > best.updated):
            best = b
    return None if best is None else "".join(best.chunks)


def event_task_id(ev: StoredEvent, item: Item) -> str | None:
    """The task an event belongs to: its stored key, else the id the item names."""
    return ev.task_id if ev.task_id is not None else item.task_id


def fold_events(events: Iterable[StoredEvent]) -> dict[str, TaskView]:
    """Fold events (in log order) in memory; one view per task, in order of first appearance."""
    folds: dict[str, TaskFold] = {}
    gc_was_on = gc.isenabled()
    gc.disable()  # no cycles are made here; see Projector._catch_up
    try:
        for ev in events:
            payload = ev.payload
            chunk = peek_text_chunk(payload)  # the hot case without the full decode
            if chunk is not None:
                item = None
                tid = ev.task_id if ev.task_id is not None else chunk.taskId
            else:
                item = decode_item(payload)
                tid = ev.task_id if ev.task_id is not None else item.task_id
            if tid is None:
                continue  # an item before any task id was known (kept in the log, shown by `show`)
            fold = folds.get(tid)
            if fold is None:
                fold = folds[tid] = TaskFold(tid)
            if item is None:
                if fold.apply_text(ev.position, ev.exchange_id, ev.received_at, chunk):
                    continue
                item = decode_item(payload)  # maybe an opencode lane: the general path classifies
            fold._apply(ev.position, ev.seq, ev.exchange_id, ev.received_at, item)
        return {tid: f.view() for tid, f in folds.items()}
    finally:
        if gc_was_on:
            gc.enable()
