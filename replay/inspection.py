"""One task's events, decoded once, with the small facts every inspection view needs.

Doctor, diff, grep and the exports all walk the same thing: the stored events of a task in log
order, each decoded with :func:`store.decode_item`, and the channel an artifact belongs to. This
module holds that walk so the views agree on it. The channel rules follow DESIGN section 4
(opencode channels, blocks and lanes, else a generic artifact).

:func:`channel_views` is a deliberately small fold (per-artifact buffers, append/replace,
``final_snapshot`` replaces). When ``replay.projection`` is installed the views prefer its
``fold_events`` (the one that knows every contract rule); this fold is the fallback and the
"what a careful client would show" baseline that doctor compares a naive client against.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import msgspec

from a2a_tape.store import (
    INTERRUPTED_STATES,
    TERMINAL_STATES,
    Artifact,
    ArtifactUpdate,
    ErrorItem,
    Item,
    MessageItem,
    StatusUpdate,
    StoredEvent,
    TaskSnapshot,
    decode_item,
)

FINAL = "final_answer"
REASONING = "reasoning"
TOOL = "tool_call"
ERROR = "error"
GENERIC = "artifact"


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


def channel_of(artifact: Artifact) -> str:
    """final_answer / reasoning / tool_call / error / artifact, from metadata, else from the id."""
    meta = artifact.meta
    if meta.channel in (FINAL, REASONING, TOOL):
        return meta.channel  # type: ignore[return-value]
    if meta.block_type:
        return {"text": FINAL, "reasoning": REASONING, "tool_call": TOOL}.get(meta.block_type, GENERIC)
    aid = artifact.artifact_id
    if aid.endswith(":stream:reasoning"):
        return REASONING
    if ":stream:tool" in aid:
        return TOOL
    if aid.endswith(":stream:text") or aid.endswith(":stream"):
        return FINAL
    if aid.endswith(":error"):
        return ERROR
    return GENERIC


def id_channel(artifact_id: str) -> str | None:
    """The channel an artifact id names by itself (opencode ids), or None for free-form ids."""
    if artifact_id.endswith(":stream:reasoning"):
        return REASONING
    if ":stream:tool" in artifact_id:
        return TOOL
    if artifact_id.endswith(":stream:text") or artifact_id.endswith(":stream"):
        return FINAL
    return None


def is_answer_channel(channel: str) -> bool:
    """What a user reads as the answer: the final answer, or a generic artifact's text."""
    return channel in (FINAL, GENERIC)


def state_of(step: Step) -> str | None:
    body = step.item.body
    if isinstance(body, (StatusUpdate, TaskSnapshot)):
        return body.state
    return None


def is_terminal(state: str | None) -> bool:
    return state in TERMINAL_STATES


def is_interrupted(state: str | None) -> bool:
    return state in INTERRUPTED_STATES


class ArtifactBuffer(msgspec.Struct):
    artifact_id: str
    channel: str
    text: str = ""
    closed: bool = False
    last_position: int = 0
    data: list[Any] = []  # tool-call data parts, last state per call wins


class ChannelView(msgspec.Struct):
    """The rebuilt channels of one task (the fallback fold; see the module docstring)."""

    task_id: str
    state: str = "unknown"
    final_answer: str | None = None
    reasoning: str = ""
    tool_calls: list[Any] = []
    artifacts: list[ArtifactBuffer] = []
    status_message: str | None = None  # the last status message's text (a question, a failure reason)
    error: str | None = None  # the last JSON-RPC error on the task's streams


def _data_key(value: Any, fallback: int) -> Any:
    if isinstance(value, dict):
        return value.get("call_id") or value.get("id") or fallback
    return fallback


def channel_views(task_id: str, steps: Sequence[Step]) -> ChannelView:
    """Per-artifact buffers: append appends, otherwise replace; ``final_snapshot`` replaces.

    A Task snapshot replaces every artifact it carries (a resubscribe snapshot is the state so
    far, not new chunks). Events without ``message_id`` under the opencode channels contract are
    skipped, as DESIGN section 4 asks.
    """
    buffers: dict[str, ArtifactBuffer] = {}
    state = "unknown"
    status_message: str | None = None
    error: str | None = None
    agent_message: str | None = None

    def apply(art: Artifact, replace: bool, last: bool, pos: int) -> None:
        buf = buffers.get(art.artifact_id)
        if buf is None:
            buf = buffers[art.artifact_id] = ArtifactBuffer(art.artifact_id, channel_of(art))
        text = art.text
        if replace or art.meta.source == "final_snapshot":
            buf.text = text
        else:
            buf.text += text
        datas = [p.data for p in art.parts if p.kind == "data"]
        if datas:
            calls = {_data_key(d, i): d for i, d in enumerate(buf.data)}
            for i, d in enumerate(datas):
                calls[_data_key(d, len(calls) + i)] = d
            buf.data = list(calls.values())
        buf.closed = buf.closed or last
        buf.last_position = pos

    for step in steps:
        body = step.item.body
        if isinstance(body, ArtifactUpdate):
            meta = body.artifact.meta
            if meta.has_opencode and not meta.has_blocks and meta.message_id is None:
                continue  # ignored under the channels contract
            if meta.role == "user":
                continue
            apply(body.artifact, not body.append, body.last_chunk, step.position)
        elif isinstance(body, TaskSnapshot):
            state = body.state
            if body.status_message is not None and body.status_message.text:
                status_message = body.status_message.text
            for art in body.artifacts:
                apply(art, True, False, step.position)
        elif isinstance(body, StatusUpdate):
            state = body.state
            if body.message is not None and body.message.text:
                status_message = body.message.text
        elif isinstance(body, MessageItem) and body.message.role != "user":
            agent_message = body.message.text
        elif isinstance(body, ErrorItem):
            error = f"{'' if body.code is None else body.code} {body.message}".strip()
    arts = sorted(buffers.values(), key=lambda b: b.last_position)
    finals = [b for b in arts if b.channel == FINAL] or [b for b in arts if b.channel == GENERIC]
    tool_calls: list[Any] = []
    for b in arts:
        if b.channel == TOOL:
            tool_calls.extend(
                b.data if b.data else ([{"artifact_id": b.artifact_id, "text": b.text}] if b.text else [])
            )
    return ChannelView(
        task_id=task_id,
        state=state,
        final_answer=finals[-1].text if finals else agent_message,
        reasoning="".join(b.text for b in arts if b.channel == REASONING),
        tool_calls=tool_calls,
        artifacts=arts,
        status_message=status_message,
        error=error,
    )


def projected(task_id: str, events: Sequence[StoredEvent]):
    """The projection's view of one task (``replay.projection.fold_events``), or None."""
    try:
        from a2a_tape.replay.projection import fold_events
    except ImportError:  # pragma: no cover - the projection ships with replay
        return None
    try:
        return fold_events(events).get(task_id)
    except Exception:  # noqa: BLE001 - another module's bug must not break a post-mortem
        return None


_UNSET: Any = object()


def best_view(task_id: str, events: Sequence[StoredEvent], steps: Sequence[Step], view: Any = _UNSET) -> ChannelView:
    """The projection's view (folded here unless given), else :func:`channel_views`."""
    if view is _UNSET:
        view = projected(task_id, events)
    if view is None:
        return channel_views(task_id, steps)
    fallback = channel_views(task_id, steps)
    arts = []
    for a in getattr(view, "artifacts", ()) or ():
        arts.append(
            ArtifactBuffer(
                artifact_id=a.artifact_id,
                channel=a.channel,
                text=a.text or "",
                closed=bool(getattr(a, "closed", False)),
            )
        )
    calls = [msgspec.to_builtins(c) for c in (getattr(view, "tool_calls", ()) or ())]
    return ChannelView(
        task_id=task_id,
        state=getattr(view, "state", fallback.state) or fallback.state,
        final_answer=getattr(view, "final_answer", fallback.final_answer),
        reasoning=getattr(view, "reasoning", fallback.reasoning) or "",
        tool_calls=calls,
        artifacts=arts or fallback.artifacts,
        status_message=getattr(view, "status_message", fallback.status_message),
        error=getattr(view, "error", fallback.error),
    )


def _short_json(value: Any, limit: int = 120) -> str:
    text = msgspec.json.encode(value).decode()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def summary(item: Item) -> str:
    """One short line saying what an item is (timeline, Mermaid, HAR comments)."""
    b = item.body
    if isinstance(b, ArtifactUpdate):
        art = b.artifact
        mode = "append" if b.append else "replace"
        if art.meta.source == "final_snapshot":
            mode += " (final snapshot)"
        data = " ".join(_short_json(p.data) for p in art.parts if p.kind == "data")
        text = " ".join(x for x in (art.text, data) if x)
        return f"{art.artifact_id} [{channel_of(art)}] {mode}{' last' if b.last_chunk else ''}: {text}"
    if isinstance(b, (StatusUpdate, TaskSnapshot)):
        msg = b.message if isinstance(b, StatusUpdate) else b.status_message
        return b.state + (f": {msg.text}" if msg is not None and msg.text else "")
    if isinstance(b, MessageItem):
        return f"{b.message.role or 'message'}: {b.message.text}"
    kind = item.kind
    if kind == "error":
        return f"error {b.code}: {b.message}"  # type: ignore[union-attr]
    if kind == "note":
        return f"{b.action}: {b.detail}"  # type: ignore[union-attr]
    if kind == "undecodable":
        return b.reason  # type: ignore[union-attr]
    return getattr(b, "summary", kind)
