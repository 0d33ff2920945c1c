"""Replay answers in either dialect: a task folded from its recording, and stream items converted.

A recording is served byte for byte when the request speaks its dialect. When it speaks the
other one, the recorded JSON is converted by :mod:`wire.dialects` (every field both dialects
can carry is kept; ``docs/replay.md`` lists what cannot be).

:func:`fold_task` builds the Task a GetTask, resubscribe or ListTasks answers with: the one fold,
:class:`fold.fold.TaskFold`, made with ``document=True`` (lossless, from the recorded JSON).
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from typing import Any

import msgspec

from a2a_tape.fold.fold import TaskFold
from a2a_tape.fold.views import RecordedTask
from a2a_tape.store import ErrorItem, Item, decode_item
from a2a_tape.store.a2a_structs import WireError, WireFrame
from a2a_tape.store.decode import state_in
from a2a_tape.store.json_values import decode_json
from a2a_tape.wire.dialects import recorded_object, result_in, task_in

_encoder = msgspec.json.Encoder()


def encode_item(item: Item | bytes | RecordedTask, dialect: str, rpc_id: Any) -> bytes | None:
    """One item as a JSON-RPC response in ``dialect``; None when it cannot be converted.

    ``item`` is the recorded payload (converted from its JSON, losslessly: :mod:`wire.dialects`)
    or a :class:`RecordedTask` (a stream's Task item)."""
    if isinstance(item, RecordedTask):
        t = task_json(item, dialect)
        return _encoder.encode({"jsonrpc": "2.0", "id": rpc_id, "result": {"task": t} if dialect == "1.0" else t})
    if isinstance(item, (bytes, bytearray, memoryview)):
        payload = bytes(item)
        decoded = decode_item(payload)
        if decoded.kind in ("task", "status", "artifact", "message"):
            try:
                found = recorded_object(decode_json(payload), decoded.kind)
            except msgspec.DecodeError:  # pragma: no cover - decode_item read it
                found = None
            if found is not None:
                return _encoder.encode(
                    {"jsonrpc": "2.0", "id": rpc_id, "result": result_in(decoded.kind, found[1], dialect)}
                )
        item = decoded
    body = item.body
    if isinstance(body, ErrorItem):
        return _encoder.encode(
            WireFrame(jsonrpc="2.0", id=rpc_id, error=WireError(code=body.code, message=body.message, data=body.data))
        )
    return None  # a decoded item of another kind: nothing to convert (the caller serves it as recorded)


def task_json(task: RecordedTask, dialect: str) -> dict[str, Any]:
    """The Task object (not wrapped) in ``dialect``: every recorded field, converted when the
    recording spoke the other dialect."""
    out: dict[str, Any] = {"id": task.task_id}
    if task.context_id is not None:
        out["contextId"] = task.context_id
    out["status"] = task.status if task.status else {"state": state_in(task.state, task.dialect)}
    if task.artifacts:
        out["artifacts"] = list(task.artifacts)
    if task.history:
        out["history"] = list(task.history)
    if task.metadata:
        out["metadata"] = task.metadata
    for k, v in (task.extra or {}).items():
        out.setdefault(k, v)
    if dialect != task.dialect and dialect in ("0.3", "1.0"):
        converted: dict[str, Any] = task_in(out, dialect)  # a dict in, a dict out
        return converted
    if dialect != "1.0":
        out["kind"] = "task"
    return out


def wire_task(task: RecordedTask, dialect: str) -> Any:
    """The Task object in ``dialect`` as a value to encode (a ListTasks entry)."""
    return task_json(task, dialect)


def encode_task(task: RecordedTask, dialect: str, rpc_id: Any) -> bytes:
    """A bare Task as the result of GetTask / CancelTask (no v1.0 wrapper, as agents answer)."""
    return _encoder.encode({"jsonrpc": "2.0", "id": rpc_id, "result": task_json(task, dialect)})


def encode_snapshot_item(task: RecordedTask, dialect: str, rpc_id: Any) -> bytes:
    """A Task as a stream item (the first item of a resubscribe)."""
    return encode_item(task, dialect, rpc_id) or b""


def fold_task(task_id: str, items: Iterable[Any]) -> RecordedTask | None:
    """The task as its recorded items leave it (the one fold, lossless); None when none of them
    is about the task.

    ``items``: stored events (:class:`store.StoredEvent`), served items (anything with the
    recorded payload as ``recorded``) or payload bytes, in log order. Items that name another
    task are skipped.
    """
    fold = TaskFold(task_id, document=True)
    seen = False
    for n, it in enumerate(items):
        payload = getattr(it, "recorded", None)  # a served item (its ``payload`` is a method)
        if payload is None:
            payload = getattr(it, "payload", it)
        if not isinstance(payload, (bytes, bytearray)):
            raise TypeError(f"fold_task needs recorded payloads, not {type(it).__name__}")
        payload = bytes(payload)
        item = decode_item(payload)
        named = item.task_id
        if named is not None and named != task_id:
            continue
        pos = getattr(it, "position", n)
        seen = seen or named == task_id
        fold.fold(
            pos,
            getattr(it, "seq", 0),
            getattr(it, "exchange_id", None),
            getattr(it, "received_at", 0.0),
            payload,
            None,
            item,
        )
    task = fold.task()
    if task is None and seen:  # only items that name the task (a Message): no status recorded yet
        st = fold.s
        state = st.state if st.state != "unknown" else "submitted"
        dialect = st.dialect or "0.3"
        return RecordedTask(task_id, st.context_id, state, dialect, {"state": state_in(state, dialect)})
    return task


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def with_state(task: RecordedTask, state: str, *, timestamp: str | None = None) -> RecordedTask:
    """The task after a status change with no message (a replayed cancel): as a task store
    does it, the current status message moves to the history first."""
    history = task.history
    status = task.status or {}
    if status.get("message") is not None:
        history = (*history, status["message"])
    new_status = {"state": state_in(state, task.dialect), "timestamp": timestamp or _now()}
    return msgspec.structs.replace(task, state=state, status=new_status, history=history)
