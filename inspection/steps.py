"""One task's events, decoded once, with the small facts every inspection view needs.

Doctor, diff, grep and the exports all walk the same thing: the stored events of a task in log
order, each decoded with :func:`store.decode_item`, and the channel an artifact belongs to. This
module holds that walk so the views agree on it. Which channel an artifact is in is the fold's
own classifier (:func:`fold.profiles.channel_of`), never a second copy here.

What a task *shows* (final answer, reasoning, tool calls, artifacts, state, the last status
message) is never folded here: :func:`task_view` is the view of the one fold,
:class:`fold.fold.TaskFold`, the same one ``channels``, the projection and the live view read.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import msgspec

from a2a_tape.fold.fold import fold_task_events
from a2a_tape.fold.profiles import channel_of
from a2a_tape.fold.views import TaskView
from a2a_tape.store import (
    ArtifactUpdate,
    ErrorItem,
    Exchange,
    Item,
    MessageItem,
    Note,
    StatusUpdate,
    StoredEvent,
    TaskSnapshot,
    Undecodable,
    decode_item,
)
from a2a_tape.store.events import is_interrupted, is_terminal

__all__ = [
    "Step",
    "closed_exchanges",
    "decode_events",
    "is_interrupted",
    "is_terminal",
    "state_of",
    "summary",
    "task_view",
]


class Step(msgspec.Struct, frozen=True):
    """One stored event and its decoded item."""

    event: StoredEvent
    item: Item

    @property
    def position(self) -> int:
        return self.event.position

    @property
    def local(self) -> bool:
        return self.event.origin == "local"


def decode_events(events: Iterable[StoredEvent]) -> list[Step]:
    return [Step(ev, decode_item(bytes(ev.payload))) for ev in events]


def state_of(step: Step) -> str | None:
    body = step.item.body
    if isinstance(body, (StatusUpdate, TaskSnapshot)):
        return body.state
    return None


def closed_exchanges(exchanges: Iterable[Exchange]) -> dict[int, float]:
    """The exchanges that ended, by id: when each ended (its ended row; an exchange with an
    outcome but no end time counts as ended with its last event, 0.0)."""
    return {
        ex.id: ex.ended_at if ex.ended_at is not None else 0.0
        for ex in exchanges
        if ex.id is not None and (ex.ended_at is not None or ex.outcome is not None)
    }


def task_view(task_id: str, events: Sequence[StoredEvent], exchanges: Iterable[Exchange] | None = None) -> TaskView:
    """The task as ``channels`` shows it: the view of :class:`fold.fold.TaskFold` over its events.

    ``exchanges``: the task's exchanges, when known, so that a stream ends when its exchange
    ended (not when another exchange's item arrives)."""
    closed = closed_exchanges(exchanges) if exchanges is not None else None
    return fold_task_events(task_id, events).view(closed)


def _short_json(value: Any, limit: int = 120) -> str:
    text = msgspec.json.encode(value).decode()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def summary(item: Item, task_id: str | None) -> str:
    """One short line saying what an item of task ``task_id`` is (timeline, Mermaid, HAR comments)."""
    b = item.body
    if isinstance(b, ArtifactUpdate):
        art = b.artifact
        mode = "append" if b.append else "replace"
        if art.meta.source == "final_snapshot":
            mode += " (final snapshot)"
        data = " ".join(_short_json(p.data) for p in art.parts if p.kind == "data")
        text = " ".join(x for x in (art.text, data) if x)
        return f"{art.artifact_id} [{channel_of(task_id, art)}] {mode}{' last' if b.last_chunk else ''}: {text}"
    if isinstance(b, (StatusUpdate, TaskSnapshot)):
        msg = b.message if isinstance(b, StatusUpdate) else b.status_message
        return b.state + (f": {msg.text}" if msg is not None and msg.text else "")
    if isinstance(b, MessageItem):
        return f"{b.message.role or 'message'}: {b.message.text}"
    if isinstance(b, ErrorItem):
        return f"error {b.code}: {b.message}"
    if isinstance(b, Note):
        return f"{b.action}: {b.detail}"
    if isinstance(b, Undecodable):
        return b.reason
    return b.summary
