"""The views of a projected task: what ``a2a-tape channels --json`` prints, and the canonical
bytes that determinism checks compare."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

import msgspec

from a2a_tape.fold.profiles import GENERIC

# -- the views (what the CLI prints) -------------------------------------------------------


class ToolCall(msgspec.Struct):
    """One tool call, structured (a data part's last state), or a tool_call channel's text."""

    artifact_id: str
    call_id: str | None
    tool: str | None
    status: str | None
    title: str | None
    input: Any
    output: Any
    error: Any
    text: str  # text parts, for tool calls sent as text (opencode channels)


class ArtifactView(msgspec.Struct):
    artifact_id: str
    channel: str  # final_answer / reasoning / tool_call / artifact (generic) / error
    text: str
    closed: bool
    profile: str = GENERIC


class Fault(msgspec.Struct):
    code: str
    level: str  # error / warning
    message: str
    positions: list[int]
    count: int = 1


class IgnoredEvent(msgspec.Struct):
    position: int
    seq: int
    reason: str


class TaskView(msgspec.Struct):
    task_id: str
    context_id: str | None
    state: str  # lowercase v0.3 spelling
    final_answer: str | None
    reasoning: str
    tool_calls: list[ToolCall]
    artifacts: list[ArtifactView]
    ignored_events: int
    events: int
    first_position: int
    last_position: int
    first_at: float
    last_at: float
    faults: list[Fault]
    profile: str  # generic / opencode-channels / opencode-blocks / opencode-lanes
    status_message: str | None = None  # the text of the last status message (a question, a failure reason)
    error: str | None = None  # the last JSON-RPC error on the task's streams, else an error lane's text
    undecodable: int = 0
    ignored: list[IgnoredEvent] = []


class RecordedTask(msgspec.Struct, frozen=True):
    """A task as the recorded agent held it (what a replayed GetTask answers), lossless.

    ``status``, ``artifacts``, ``history``, ``metadata`` and ``extra`` (every other top-level
    field the agent sent) are the recorded JSON, spelled in ``dialect``; ``state`` is the
    internal (lowercase v0.3) spelling of ``status.state``. :func:`replay.serve.convert.task_json`
    renders it in either dialect.
    """

    task_id: str
    context_id: str | None
    state: str
    dialect: str  # "0.3" or "1.0": how the JSON below is spelled
    status: Any = None
    artifacts: tuple[Any, ...] = ()
    history: tuple[Any, ...] = ()
    metadata: Any = None
    extra: Any = None


_view_encoder = msgspec.json.Encoder()


def encode_view(view: TaskView) -> bytes:
    """The canonical JSON bytes of a view (what determinism checks compare)."""
    return _view_encoder.encode(view)


def views_digest(views: Iterable[TaskView]) -> str:
    """sha256 over every view's canonical bytes, in task id order (a Temporal-style replay check)."""
    h = hashlib.sha256()
    for v in sorted(views, key=lambda v: v.task_id):
        h.update(encode_view(v))
        h.update(b"\n")
    return h.hexdigest()
