"""The fold: one task's state and channel buffers, rebuilt from its events. The only one.

A :class:`TaskFold` is the mutable state of one task. Events enter it one way: :func:`route`
says which task an event is for and whether it is the hot case (a plain text chunk, folded by
``apply_text`` without the full decode), then ``TaskFold.fold`` folds it (``apply`` for a stored
event). ``view`` renders a :class:`TaskView`, the shape ``a2a-tape channels --json`` prints; a
fold made with ``document=True`` also keeps the Task as the agent's task store holds it, from the
recorded JSON (``task()``, what replay answers a GetTask with; rules in :class:`TaskDocument`).
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

Task state follows the log (the latest state reported wins, our own synthetic FAILED included).
The faults of the agent's lifecycle (``terminal-changed``, ``events-after-terminal``,
``closed-while-working``) are judged by :mod:`fold.lifecycle`; the fold notes these others there too:

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

from a2a_tape.fold.channel_view import view_of
from a2a_tape.fold.lifecycle import after_terminal, judge_lifecycle, note_fault
from a2a_tape.fold.profiles import (
    _GENERIC_APPEND,
    _GENERIC_REPLACE,
    ARTIFACT,
    FINAL_ANSWER,
    GENERIC,
    PROFILE_RANK,
    TOOL_CALL,
    classify,
    classify_artifact,
    tool_state,
)
from a2a_tape.fold.stored_copy import stored_copy_differences
from a2a_tape.fold.task_document import TaskDocument
from a2a_tape.fold.task_state import (
    MAX_CHANGES,
    STATE_DECODER,
    STATE_ENCODER,
    Buffer,
    BufferTool,
    StateChange,
    StreamSeen,
    TaskState,
    json_bytes,
)
from a2a_tape.fold.views import IgnoredEvent, RecordedTask, TaskView
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
from a2a_tape.store.decode import TextChunk, peek_text_chunk
from a2a_tape.store.events import Artifact, Body
from a2a_tape.wire.push_configs import PUSH


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
        self.doc = TaskDocument() if document else None

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
        return STATE_ENCODER.encode(self.s)

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
            streams[key] = StreamSeen(pos, at, self.s.state)

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
            s.streams[exchange_id or 0] = StreamSeen(pos, at, s.state)
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
            buf = s.buffers[aid] = Buffer(aid, ARTIFACT, GENERIC, [], False, 0)
        else:
            buf.channel = ARTIFACT
            if buf.closed and replace is False:
                note_fault(s, "after-last-chunk", "warning", pos, f"artifact {aid} got text after lastChunk")
        if s.terminal is not None and (exchange_id or 0) not in s.catching_up:
            after_terminal(s, pos, "an artifact update")
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
            judge_lifecycle(s, pos, exchange_id, body)
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
            note_fault(s, "rpc-error", level, pos, f"JSON-RPC error {s.error}")
        elif type(body) is Undecodable:
            s.undecodable += 1
            note_fault(s, "undecodable", "warning", pos, f"payload is not an A2A item ({body.reason[:80]})")
        elif type(body) is Note and local and body.action == PUSH:
            self._pushed(body)
        # other notes / Other: counted as events, nothing to fold

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
            if len(changes) >= MAX_CHANGES:
                del changes[0]
            changes.append(StateChange(s.last_at, new))
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
        buffers: dict[str, Buffer] = {}
        for art in body.artifacts:
            chunk = classify_artifact(s.task_id, art, False)
            if chunk.ignore is not None:
                continue
            self._profile(chunk.profile)
            s.tick += 1
            buf = Buffer(art.artifact_id, chunk.channel, chunk.profile, [], closed, s.tick)
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
        note_fault(s, "stored-copy-differs", "warning", pos, message, s.terminal_position)
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
            buf = Buffer(aid, chunk.channel, chunk.profile, [], False, 0)
            s.buffers[aid] = buf
        else:
            buf.channel = chunk.channel
            if buf.closed and not chunk.replace:
                note_fault(s, "after-last-chunk", "warning", pos, f"artifact {aid} got text after lastChunk")
        s.tick += 1
        buf.updated = s.tick
        self._fill(buf, art, chunk.replace)
        if chunk.replace:
            buf.closed = body.last_chunk
        elif body.last_chunk:
            buf.closed = True

    def _fill(self, buf: Buffer, art: Artifact, replace: bool) -> None:
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
                    buf.tools[key] = BufferTool(
                        st.call_id,
                        st.tool,
                        st.status,
                        st.title,
                        json_bytes(st.input),
                        json_bytes(st.output),
                        json_bytes(st.error),
                    )

    def view(self, closed: Mapping[int, float] | None = None) -> TaskView:
        """The task's channels and faults (:func:`fold.channel_view.view_of`); ``closed``: exchange
        id -> when it ended (:func:`fold.lifecycle.closed_streams`)."""
        return view_of(self.s, closed)


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
