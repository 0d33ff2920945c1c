"""Convert stored items between the v0.3 and v1.0 wire shapes, and fold a task's snapshot.

A recording is served byte for byte when the request speaks its dialect. When it speaks the
other one, the item is decoded into the typed model (:mod:`store.events`), rebuilt in the wire
Structs of :mod:`store.wire` for the requested dialect and encoded with msgspec. What the typed
model does not keep (free-form metadata beyond the stream hints, file bytes) is not carried over.

:func:`fold_task` builds a Task snapshot from a task's items (GetTask, resubscribe, ListTasks):
a Task replaces the artifacts, ``append`` extends an artifact's parts, a status update moves
the state.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from a2a_tape.store import (
    TERMINAL_STATES,
    Artifact,
    ArtifactUpdate,
    ErrorItem,
    Item,
    Message,
    MessageItem,
    Part,
    StatusUpdate,
    StreamMeta,
    TaskSnapshot,
)
from a2a_tape.store.wire import (
    Metadata,
    OpencodeMeta,
    SharedMeta,
    StreamHints,
    WireArtifact,
    WireArtifactUpdate,
    WireError,
    WireFrame,
    WireMessage,
    WirePart,
    WireResult,
    WireStatus,
    WireStatusUpdate,
    WireTask,
)

_encoder = msgspec.json.Encoder()

_V1_STATE = {
    "submitted": "TASK_STATE_SUBMITTED",
    "working": "TASK_STATE_WORKING",
    "input-required": "TASK_STATE_INPUT_REQUIRED",
    "auth-required": "TASK_STATE_AUTH_REQUIRED",
    "completed": "TASK_STATE_COMPLETED",
    "failed": "TASK_STATE_FAILED",
    "canceled": "TASK_STATE_CANCELED",
    "rejected": "TASK_STATE_REJECTED",
    "unknown": "TASK_STATE_UNSPECIFIED",
}


def _state(state: str, dialect: str) -> str:
    return _V1_STATE.get(state, "TASK_STATE_UNSPECIFIED") if dialect == "1.0" else state


def _role(role: str | None, dialect: str) -> str | None:
    if role is None:
        return None
    return f"ROLE_{role.upper()}" if dialect == "1.0" else role


def _part(p: Part, dialect: str) -> WirePart:
    v03 = dialect != "1.0"
    if p.kind == "text":
        return WirePart(kind="text" if v03 else None, text=p.text or "")
    if p.kind == "data":
        return WirePart(kind="data" if v03 else None, data=p.data)
    if p.kind == "file":
        return WirePart(
            kind="file" if v03 else None, filename=None if v03 else p.file_name, mediaType=None if v03 else p.media_type
        )
    return WirePart(kind="text" if v03 else None, text="")


def _message(m: Message | None, dialect: str) -> WireMessage | None:
    if m is None:
        return None
    return WireMessage(
        messageId=m.message_id or "",
        role=_role(m.role, dialect),
        parts=[_part(p, dialect) for p in m.parts],
        contextId=m.context_id,
        taskId=m.task_id,
        kind="message" if dialect != "1.0" else None,
    )


def _metadata(meta: StreamMeta) -> Metadata | None:
    """The stream hints the typed model kept (opencode channels / blocks), as artifact metadata."""
    if not (meta.has_opencode or meta.has_blocks):
        return None
    opencode = None
    if meta.has_opencode:
        opencode = OpencodeMeta(channel=meta.channel, source=meta.source, message_id=meta.message_id, role=meta.role)
    shared = None
    if meta.has_blocks:
        shared = SharedMeta(
            stream=StreamHints(
                block_type=meta.block_type,
                source=meta.source,
                message_id=meta.message_id,
                event_id=meta.event_id,
                sequence=meta.sequence,
                role=meta.role,
            )
        )
    return Metadata(opencode=opencode, shared=shared)


def _artifact(a: Artifact, dialect: str) -> WireArtifact:
    return WireArtifact(
        artifactId=a.artifact_id, name=a.name, parts=[_part(p, dialect) for p in a.parts], metadata=_metadata(a.meta)
    )


def _status(state: str, message: Message | None, timestamp: str | None, dialect: str) -> WireStatus:
    return WireStatus(state=_state(state, dialect), message=_message(message, dialect), timestamp=timestamp)


def wire_task(t: TaskSnapshot, dialect: str, *, timestamp: str | None = None) -> WireTask:
    return WireTask(
        id=t.task_id,
        contextId=t.context_id,
        status=_status(t.state, t.status_message, timestamp, dialect),
        artifacts=[_artifact(a, dialect) for a in t.artifacts],
        history=[m for m in (_message(h, dialect) for h in t.history) if m is not None],
        kind="task" if dialect != "1.0" else None,
    )


def _result(body: Any, dialect: str) -> WireResult | None:
    v1 = dialect == "1.0"
    if isinstance(body, TaskSnapshot):
        t = wire_task(body, dialect)
        if v1:
            return WireResult(task=t)
        return WireResult(
            kind="task", id=t.id, contextId=t.contextId, status=t.status, artifacts=t.artifacts, history=t.history
        )
    if isinstance(body, StatusUpdate):
        status = _status(body.state, body.message, body.timestamp, dialect)
        if v1:
            return WireResult(
                statusUpdate=WireStatusUpdate(taskId=body.task_id, contextId=body.context_id, status=status)
            )
        return WireResult(
            kind="status-update",
            taskId=body.task_id,
            contextId=body.context_id,
            status=status,
            final=body.state in TERMINAL_STATES,
        )
    if isinstance(body, ArtifactUpdate):
        art = _artifact(body.artifact, dialect)
        if v1:
            return WireResult(
                artifactUpdate=WireArtifactUpdate(
                    taskId=body.task_id,
                    contextId=body.context_id,
                    artifact=art,
                    append=True if body.append else None,
                    lastChunk=True if body.last_chunk else None,
                )
            )
        return WireResult(
            kind="artifact-update",
            taskId=body.task_id,
            contextId=body.context_id,
            artifact=art,
            append=body.append,
            lastChunk=body.last_chunk,
        )
    if isinstance(body, MessageItem):
        m = _message(body.message, dialect)
        if m is None:
            return None
        if v1:
            return WireResult(message=m)
        return WireResult(
            kind="message", messageId=m.messageId, role=m.role, parts=m.parts, contextId=m.contextId, taskId=m.taskId
        )
    return None


def encode_item(item: Item, dialect: str, rpc_id: Any) -> bytes | None:
    """The item as a JSON-RPC response in ``dialect``; None when it cannot be converted."""
    body = item.body
    if isinstance(body, ErrorItem):
        return _encoder.encode(
            WireFrame(jsonrpc="2.0", id=rpc_id, error=WireError(code=body.code, message=body.message, data=body.data))
        )
    result = _result(body, dialect)
    if result is None:
        return None
    return _encoder.encode(WireFrame(jsonrpc="2.0", id=rpc_id, result=result))


def encode_task(task: TaskSnapshot, dialect: str, rpc_id: Any) -> bytes:
    """A bare Task as the result of GetTask / CancelTask (no v1.0 wrapper, as agents answer)."""
    t = wire_task(task, dialect)
    return _encoder.encode(
        WireFrame(
            jsonrpc="2.0",
            id=rpc_id,
            result=WireResult(
                kind=t.kind, id=t.id, contextId=t.contextId, status=t.status, artifacts=t.artifacts, history=t.history
            ),
        )
    )


def encode_snapshot_item(task: TaskSnapshot, dialect: str, rpc_id: Any) -> bytes:
    """A Task as a stream item (the first item of a resubscribe)."""
    return encode_item(Item(task), dialect, rpc_id) or b""


# ---------------------------------------------------------------- folding a task


class _Fold:
    __slots__ = ("task_id", "context_id", "state", "status_message", "artifacts", "history")

    def __init__(self, task_id: str) -> None:
        self.task_id = task_id
        self.context_id: str | None = None
        self.state = "submitted"
        self.status_message: Message | None = None
        self.artifacts: dict[str, Artifact] = {}
        self.history: list[Message] = []

    def apply(self, body: Any) -> None:
        if isinstance(body, TaskSnapshot):
            self.context_id = body.context_id or self.context_id
            self.state = body.state
            self.status_message = body.status_message
            self.artifacts = {a.artifact_id: a for a in body.artifacts}
            if body.history:
                self.history = list(body.history)
        elif isinstance(body, StatusUpdate):
            self.context_id = body.context_id or self.context_id
            self.state = body.state
            self.status_message = body.message
        elif isinstance(body, ArtifactUpdate):
            self.context_id = body.context_id or self.context_id
            art = body.artifact
            old = self.artifacts.get(art.artifact_id)
            if body.append and old is not None:
                art = msgspec.structs.replace(old, parts=old.parts + art.parts)
            self.artifacts[art.artifact_id] = art

    def snapshot(self) -> TaskSnapshot:
        return TaskSnapshot(
            task_id=self.task_id,
            context_id=self.context_id,
            state=self.state,
            status_message=self.status_message,
            artifacts=tuple(self.artifacts.values()),
            history=tuple(self.history),
        )


def fold_task(task_id: str, items: Iterable[Item]) -> TaskSnapshot | None:
    """The task as its items leave it; None when none of them is about the task."""
    fold = _Fold(task_id)
    seen = False
    for item in items:
        if item.task_id != task_id:
            continue
        seen = True
        fold.apply(item.body)
    return fold.snapshot() if seen else None


def with_state(task: TaskSnapshot, state: str) -> TaskSnapshot:
    return msgspec.structs.replace(task, state=state, status_message=None)
