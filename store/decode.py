"""Decode raw payload bytes into the internal model (:mod:`store.events`).

``decode_item`` never raises: bytes that are not a JSON A2A item become
:class:`~store.events.Undecodable` with a short reason. One module-level Decoder is reused.
"""

from __future__ import annotations

from typing import Any

import msgspec

from a2a_tape.store.a2a_structs import (
    FRAME_DECODER,
    PEEK_DECODER,
    Metadata,
    PeekArtifactUpdate,
    PeekResult,
    WireArtifact,
    WireArtifactUpdate,
    WireFrame,
    WireMessage,
    WirePart,
    WireResult,
    WireStatus,
    WireStatusUpdate,
    WireTask,
)
from a2a_tape.store.events import (
    A2A_STATES,
    ALL_STATES,
    Artifact,
    ArtifactUpdate,
    Body,
    Dialect,
    ErrorItem,
    Item,
    Message,
    MessageItem,
    Note,
    Other,
    Part,
    StatusUpdate,
    StreamMeta,
    TaskSnapshot,
    Undecodable,
)
from a2a_tape.store.json_values import TOO_DEEP

V1_STATE_NAMES = {state: "TASK_STATE_" + state.upper().replace("-", "_") for state in A2A_STATES}
V1_STATE_NAMES["unknown"] = "TASK_STATE_UNSPECIFIED"
"""The v1.0 spelling of each state of the internal model (the inverse of :func:`normalise_state`):
``input-required`` is ``TASK_STATE_INPUT_REQUIRED``, our ``unknown`` is ``TASK_STATE_UNSPECIFIED``."""

_V1_STATES = {name: state for state, name in V1_STATE_NAMES.items()} | {"TASK_STATE_CANCELLED": "canceled"}


def state_in(state: str, dialect: str) -> str:
    """A state of the internal model as ``dialect`` spells it (v1.0 enums, else the v0.3 words)."""
    return V1_STATE_NAMES.get(state, "TASK_STATE_UNSPECIFIED") if dialect == "1.0" else state


_V03_STATES = frozenset(ALL_STATES)


def normalise_state(state: str | None) -> str:
    """``TASK_STATE_INPUT_REQUIRED`` / ``input-required`` / ``input_required`` -> ``input-required``."""
    if not state:
        return "unknown"
    if state in _V03_STATES:
        return state
    mapped = _V1_STATES.get(state)
    if mapped:
        return mapped
    low = state.lower().replace("_", "-")
    if low == "cancelled":
        return "canceled"
    return low if low in _V03_STATES else "unknown"


def normalise_role(role: str | None) -> str | None:
    if role is None:
        return None
    low = role.lower()
    if low.startswith("role_"):
        low = low[5:]
    return low


def _int_or_none(value: int | float | None) -> int | None:
    if value is None:
        return None
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return None
        return int(value)
    return value


def _meta(md: Metadata | None) -> StreamMeta:
    if md is None:
        return _EMPTY_META
    oc = md.opencode
    hints = md.shared.stream if md.shared is not None else None
    if oc is None and hints is None:
        return _EMPTY_META
    return StreamMeta(
        channel=oc.channel if oc else None,
        source=(oc.source if oc and oc.source else (hints.source if hints else None)),
        message_id=(oc.message_id if oc and oc.message_id else (hints.message_id if hints else None)),
        role=(oc.role if oc and oc.role else (hints.role if hints else None)),
        block_type=hints.block_type if hints else None,
        event_id=hints.event_id if hints else None,
        sequence=_int_or_none(hints.sequence) if hints else None,
        has_opencode=oc is not None,
        has_blocks=hints is not None,
    )


_EMPTY_META = StreamMeta()


def _part(p: WirePart) -> Part:
    text = p.text
    if text is not None and (p.kind is None or p.kind == "text"):  # the hot case: a text chunk
        return Part("text", text)
    if p.kind == "data" or (p.kind is None and p.data is not None):
        return Part(kind="data", data=p.data)
    if p.kind == "file" or p.file is not None or p.url is not None or p.raw is not None:
        name = p.file.name if p.file else p.filename
        mt = p.file.mimeType if p.file else p.mediaType
        return Part(kind="file", file_name=name or None, media_type=mt or None)
    if p.text is not None:
        return Part(kind="text", text=p.text)
    return Part(kind="other")


def _parts(parts: list[WirePart]) -> tuple[Part, ...]:
    if len(parts) == 1:  # most stream chunks carry one part
        return (_part(parts[0]),)
    return tuple([_part(p) for p in parts])


def _message(m: WireMessage | None) -> Message | None:
    if m is None:
        return None
    return Message(
        message_id=m.messageId,
        role=normalise_role(m.role),
        parts=_parts(m.parts),
        context_id=m.contextId,
        task_id=m.taskId,
    )


def _artifact(a: WireArtifact | None) -> Artifact:
    if a is None:
        return Artifact(artifact_id="")
    md = a.metadata
    return Artifact(a.artifactId or "", a.name, _parts(a.parts), _EMPTY_META if md is None else _meta(md))


def _merge_meta(artifact: Artifact, event_md: Metadata | None) -> Artifact:
    """Some agents put the stream hints on the event instead of the artifact."""
    if artifact.meta is not _EMPTY_META or event_md is None:
        return artifact
    meta = _meta(event_md)
    if meta is _EMPTY_META:
        return artifact
    return msgspec.structs.replace(artifact, meta=meta)


def _status(s: WireStatus | None) -> tuple[str, Message | None, str | None]:
    if s is None:
        return "unknown", None, None
    return normalise_state(s.state), _message(s.message), s.timestamp


def _task(t: WireTask) -> TaskSnapshot:
    state, msg, _ = _status(t.status)
    return TaskSnapshot(
        task_id=t.id or "",
        context_id=t.contextId,
        state=state,
        status_message=msg,
        artifacts=tuple(_artifact(a) for a in t.artifacts),
        history=tuple(m for m in (_message(h) for h in t.history) if m is not None),
    )


def _status_update(u: WireStatusUpdate) -> StatusUpdate:
    state, msg, ts = _status(u.status)
    return StatusUpdate(task_id=u.taskId, context_id=u.contextId, state=state, message=msg, final=u.final, timestamp=ts)


def _artifact_update(u: WireArtifactUpdate) -> ArtifactUpdate:
    art = _artifact(u.artifact)
    if u.metadata is not None:
        art = _merge_meta(art, u.metadata)
    return ArtifactUpdate(u.taskId, u.contextId, art, u.append is True, u.lastChunk is True)


def _v1_wrapped(
    task: WireTask | None,
    message: WireMessage | None,
    status_update: WireStatusUpdate | None,
    artifact_update: WireArtifactUpdate | None,
) -> Body | None:
    if artifact_update is not None:
        return _artifact_update(artifact_update)
    if status_update is not None:
        return _status_update(status_update)
    if task is not None:
        return _task(task)
    if message is not None:
        return MessageItem(_message(message))  # type: ignore[arg-type]  # not None: message is not None
    return None


def _v03_result(r: WireResult) -> Body | None:
    kind = r.kind
    if kind == "artifact-update":
        return _artifact_update(
            WireArtifactUpdate(
                taskId=r.taskId,
                contextId=r.contextId,
                artifact=r.artifact,
                append=r.append,
                lastChunk=r.lastChunk,
                metadata=r.metadata,
            )
        )
    if kind == "status-update":
        return _status_update(WireStatusUpdate(taskId=r.taskId, contextId=r.contextId, status=r.status, final=r.final))
    if kind == "task":
        return _task(
            WireTask(id=r.id, contextId=r.contextId, status=r.status, artifacts=r.artifacts, history=r.history)
        )
    if kind == "message":
        return MessageItem(
            _message(
                WireMessage(messageId=r.messageId, role=r.role, parts=r.parts, contextId=r.contextId, taskId=r.taskId)
            )  # type: ignore[arg-type]  # not None: a WireMessage was given
        )
    return None


def _rpc_id(value: Any) -> str | int | None:
    if value is None or isinstance(value, (str, int)) and not isinstance(value, bool):
        return value
    return str(value)


def decode_item(payload: bytes | str) -> Item:
    """Decode one payload. Never raises."""
    frame = _read_frame(payload)
    if isinstance(frame, Item):
        return frame
    rpc_id = frame.id
    if rpc_id is not None and type(rpc_id) is not int and type(rpc_id) is not str:
        rpc_id = _rpc_id(rpc_id)
    if frame.note is not None:
        n = frame.note
        return Item(
            Note(action=n.action, detail=n.detail, task_id=n.task_id, state=n.state, context_id=n.context_id),
            "local",
            rpc_id,
        )
    if frame.error is not None:
        e = frame.error
        dialect: Dialect = "unknown" if frame.jsonrpc else "rest"
        return Item(ErrorItem(code=e.code, message=e.message or e.status or "", data=e.data), dialect, rpc_id)
    if frame.result is not None:
        return _result_item(frame.result, rpc_id)
    return _bare_item(frame, rpc_id)


def _read_frame(payload: bytes | str) -> WireFrame | Item:
    """The payload as a frame, or the :class:`Undecodable` item saying why it is none."""
    try:
        try:
            return _decode_frame(payload)
        except msgspec.ValidationError:  # a number out of a float's range, read as written (or a bad item)
            return FRAME_DECODER.as_written.decode(payload)
    except msgspec.ValidationError as exc:
        return Item(Undecodable(f"not an A2A item: {exc}"))
    except msgspec.DecodeError as exc:
        reason = str(exc)
        if isinstance(payload, (bytes, bytearray)):
            try:
                payload.decode("utf-8")
            except UnicodeDecodeError:
                reason = "not UTF-8"
        return Item(Undecodable(f"invalid JSON: {reason}"))
    except RecursionError:
        return Item(Undecodable(f"invalid JSON: {TOO_DEEP}"))
    except Exception as exc:  # noqa: BLE001 - decode must never crash a reader
        return Item(Undecodable(f"undecodable: {type(exc).__name__}"))


def _result_item(r: WireResult, rpc_id: str | int | None) -> Item:
    """A JSON-RPC result: a v1.0 wrapper, a v0.3 ``kind``, or a bare Task (v1.0 GetTask / CancelTask)."""
    if r.artifactUpdate is not None:  # the hot case: a v1.0 stream chunk
        return Item(_artifact_update(r.artifactUpdate), "1.0", rpc_id)
    body = _v1_wrapped(r.task, r.message, r.statusUpdate, r.artifactUpdate)
    if body is not None:
        return Item(body, "1.0", rpc_id)
    body = _v03_result(r)
    if body is not None:
        return Item(body, "0.3", rpc_id)
    if r.id is not None and r.status is not None:
        # a bare Task without kind: v1.0 GetTask / CancelTask
        t = _task(WireTask(id=r.id, contextId=r.contextId, status=r.status, artifacts=r.artifacts, history=r.history))
        return Item(t, "1.0" if (r.status.state or "").startswith("TASK_STATE") else "0.3", rpc_id)
    return Item(Other("result of another shape"), "unknown", rpc_id)


def _bare_item(frame: WireFrame, rpc_id: str | int | None) -> Item:
    """No JSON-RPC envelope: an HTTP+JSON StreamResponse (``{"task"}``, ``{"statusUpdate"}``, ...)
    or a bare Task (HTTP+JSON GetTask)."""
    body = _v1_wrapped(frame.task, frame.message, frame.statusUpdate, frame.artifactUpdate)
    if body is not None:
        return Item(body, "rest", rpc_id)
    if frame.jsonrpc is None and isinstance(frame.id, str) and frame.status is not None:
        t = _task(
            WireTask(
                id=frame.id,
                contextId=frame.contextId,
                status=frame.status,
                artifacts=frame.artifacts,
                history=frame.history,
            )
        )
        return Item(t, "rest", None)
    return Item(Other("no result, error or item"), "unknown", rpc_id)


TextChunk = PeekArtifactUpdate | PeekResult
"""A plain text artifact chunk: ``taskId``, ``contextId``, ``artifact`` (``artifactId`` and
``parts``, each part's ``text``), ``append``, ``lastChunk`` (the v1.0 ``artifactUpdate`` and a
v0.3 ``artifact-update`` result spell them alike)."""


def peek_text_chunk(payload: bytes | str) -> TextChunk | None:
    """The hot case of a projection, cheaply: a plain text artifact chunk, else None.

    None means "not this case" (a status update, a Task, metadata, a part that is not text,
    an error, undecodable bytes, ...): call :func:`decode_item`. Never raises. A chunk it
    returns says what ``decode_item`` says of the same bytes: an :class:`ArtifactUpdate` with
    task id ``taskId``, context id ``contextId``, artifact id ``artifact.artifactId or ""``, one
    text part per ``artifact.parts`` entry, ``append is True``, ``lastChunk is True`` and no
    contract hints (no metadata anywhere). ``PeekFrame`` forbids every field it does not declare
    and types the ones it declares no wider than ``WireFrame``, so it accepts only payloads the
    full decoder accepts; and this function follows ``decode_item``'s order (the v1.0
    ``artifactUpdate`` wrapper first, then a v0.3 ``kind: artifact-update``; without a result, the
    bare ``artifactUpdate`` HTTP+JSON streams).
    """
    try:
        frame = _peek(payload)
    except Exception:  # noqa: BLE001 - anything unusual goes the general way
        return None
    r = frame.result
    if r is None:  # HTTP+JSON's bare ``artifactUpdate`` (decode_item's "rest" item), else the general way
        return frame.artifactUpdate
    u = r.artifactUpdate
    if u is not None:
        return u
    if r.kind == "artifact-update" and r.artifact is not None:
        return r
    return None


def chunk_update(chunk: TextChunk) -> ArtifactUpdate:
    """The :class:`ArtifactUpdate` :func:`decode_item` makes of the bytes ``chunk`` was peeked from
    (:func:`peek_text_chunk` promises that it is this one), built from the chunk without decoding
    the bytes again: for a reader that took a chunk and later needs the general model (doctor)."""
    art = chunk.artifact
    if art is None:  # a PeekResult declares it optional; peek_text_chunk returns none without one
        return ArtifactUpdate(chunk.taskId, chunk.contextId, Artifact(artifact_id=""))
    parts = tuple([Part("text", p.text) for p in art.parts])
    artifact = Artifact(art.artifactId or "", art.name, parts, _EMPTY_META)
    return ArtifactUpdate(chunk.taskId, chunk.contextId, artifact, chunk.append is True, chunk.lastChunk is True)


_peek = PEEK_DECODER.decode
_decode_frame = FRAME_DECODER.fast.decode  # bound once: decode_item is on every reader's path


def local_note(
    action: str,
    detail: str = "",
    task_id: str | None = None,
    *,
    state: str | None = None,
    context_id: str | None = None,
) -> bytes:
    """The payload bytes of a decision a2a-tape took, to append with origin ``local`` (``state`` and
    ``context_id``: a push's note, what the push carried)."""
    from a2a_tape.store.a2a_structs import LocalNote, WireFrame

    note = LocalNote(action=action, detail=detail, task_id=task_id, state=state, context_id=context_id)
    return msgspec.json.encode(WireFrame(note=note))


def local_failed(task_id: str, context_id: str | None, reason: str) -> bytes:
    """A synthetic FAILED status update (v0.3 shape), to append with origin ``local``."""
    from a2a_tape.store.a2a_structs import WireFrame

    msg = WireMessage(messageId=None, role="agent", parts=[WirePart(kind="text", text=reason)], kind="message")
    return msgspec.json.encode(
        WireFrame(
            jsonrpc="2.0",
            result=WireResult(
                kind="status-update",
                taskId=task_id,
                contextId=context_id,
                status=WireStatus(state="failed", message=msg),
                final=True,
            ),
        )
    )
