"""The task as the agent's own task store keeps it, folded from the recorded JSON (a fold made
with ``document=True``: what replay answers a GetTask with)."""

from __future__ import annotations

from typing import Any

import msgspec

from a2a_tape.fold.views import RecordedTask
from a2a_tape.store import Item
from a2a_tape.store.decode import normalise_state
from a2a_tape.store.json_values import decode_json
from a2a_tape.wire.dialects import Json, item_in, recorded_object


class TaskDocument:
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
