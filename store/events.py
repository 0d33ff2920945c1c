"""The internal event model: one shape for both A2A dialects.

Everything above ``store/`` reads these Structs, never raw JSON. States use the lowercase
v0.3 spellings (``working``, ``input-required``, ...), roles are ``user`` / ``agent``.
"""

from __future__ import annotations

from typing import Any, Literal, final

import msgspec

Dialect = Literal["0.3", "1.0", "rest", "local", "unknown"]
Origin = Literal["upstream", "local"]

TERMINAL_STATES = frozenset({"completed", "failed", "canceled", "rejected"})
INTERRUPTED_STATES = frozenset({"input-required", "auth-required"})
ACTIVE_STATES = frozenset({"submitted", "working"})
SETTLED_STATES = TERMINAL_STATES | INTERRUPTED_STATES
"""Where a task's stream ends and a recorder stops waiting: finished for good, or waiting for the user."""
ALL_STATES = (
    "submitted",
    "working",
    "input-required",
    "auth-required",
    "completed",
    "failed",
    "canceled",
    "rejected",
    "unknown",
)
A2A_STATES = ALL_STATES[:-1]
"""The states A2A names, in lifecycle order (:data:`ALL_STATES` without our ``unknown``)."""


def is_terminal(state: str | None) -> bool:
    """Finished for good: completed, failed, canceled, rejected."""
    return state in TERMINAL_STATES


def is_interrupted(state: str | None) -> bool:
    """Waiting for the user (input-required, auth-required): the stream closes, the task waits."""
    return state in INTERRUPTED_STATES


def is_active(state: str | None) -> bool:
    """Submitted or working: an agent is on it."""
    return state in ACTIVE_STATES


class StreamMeta(msgspec.Struct, frozen=True, omit_defaults=True):
    """The contract hints an artifact carries (opencode channels, blocks or lanes)."""

    channel: str | None = None  # opencode channels: reasoning / tool_call / final_answer
    source: str | None = None  # "final_snapshot" means replace
    message_id: str | None = None
    role: str | None = None
    block_type: str | None = None  # opencode blocks: text / reasoning / tool_call
    event_id: str | None = None
    sequence: int | None = None
    has_opencode: bool = False  # metadata.opencode present
    has_blocks: bool = False  # metadata.shared.stream present


class Part(msgspec.Struct, frozen=True, omit_defaults=True):
    kind: Literal["text", "data", "file", "other"] = "text"
    text: str | None = None
    data: Any = None  # a data part's JSON value (free-form by the protocol)
    file_name: str | None = None
    media_type: str | None = None


class Artifact(msgspec.Struct, frozen=True, omit_defaults=True):
    artifact_id: str
    name: str | None = None
    parts: tuple[Part, ...] = ()
    meta: StreamMeta = StreamMeta()

    @property
    def text(self) -> str:
        parts = self.parts
        if len(parts) == 1:  # most chunks carry one part
            return parts[0].text or ""
        return "".join([p.text for p in parts if p.text is not None])


class Message(msgspec.Struct, frozen=True, omit_defaults=True):
    message_id: str | None = None
    role: str | None = None
    parts: tuple[Part, ...] = ()
    context_id: str | None = None
    task_id: str | None = None

    @property
    def text(self) -> str:
        parts = self.parts
        if len(parts) == 1:  # most chunks carry one part
            return parts[0].text or ""
        return "".join([p.text for p in parts if p.text is not None])


class TaskSnapshot(msgspec.Struct, frozen=True, tag="task"):
    task_id: str
    context_id: str | None
    state: str
    status_message: Message | None = None
    artifacts: tuple[Artifact, ...] = ()
    history: tuple[Message, ...] = ()


class StatusUpdate(msgspec.Struct, frozen=True, tag="status"):
    task_id: str | None
    context_id: str | None
    state: str
    message: Message | None = None
    final: bool | None = None
    timestamp: str | None = None


class ArtifactUpdate(msgspec.Struct, frozen=True, tag="artifact"):
    task_id: str | None
    context_id: str | None
    artifact: Artifact
    append: bool = False
    last_chunk: bool = False


class MessageItem(msgspec.Struct, frozen=True, tag="message"):
    message: Message


class ErrorItem(msgspec.Struct, frozen=True, tag="error"):
    code: int | None
    message: str
    data: Any = None


class Note(msgspec.Struct, frozen=True, tag="note"):
    """A decision a2a-tape took (resubscribed, polled, cancelled, gave up)."""

    action: str
    detail: str = ""
    task_id: str | None = None
    state: str | None = None  # a push's note (action ``push``): the task state the push carried, if any
    context_id: str | None = None  # and the context the push named


class Other(msgspec.Struct, frozen=True, tag="other"):
    """Valid JSON that is none of the above (a ListTasks page, an empty result)."""

    summary: str = ""


class Undecodable(msgspec.Struct, frozen=True, tag="undecodable"):
    """Bytes that are not a JSON A2A item. Kept in the log and shown; never fatal."""

    reason: str


Body = TaskSnapshot | StatusUpdate | ArtifactUpdate | MessageItem | ErrorItem | Note | Other | Undecodable


@final  # never subclassed: `type(x) is Item` (the fast check the recorder uses) then narrows both ways
class Item(msgspec.Struct, frozen=True):
    """One decoded log entry: what it is, which dialect it spoke, and its JSON-RPC id."""

    body: Body
    dialect: Dialect = "unknown"
    rpc_id: str | int | None = None

    @property
    def kind(self) -> str:
        return type(self.body).__struct_config__.tag  # type: ignore[return-value]  # every Body class sets a str tag

    @property
    def task_id(self) -> str | None:
        body = self.body
        if isinstance(body, (TaskSnapshot, StatusUpdate, ArtifactUpdate)):
            return body.task_id
        if isinstance(body, MessageItem):
            return body.message.task_id
        if isinstance(body, Note):
            return body.task_id
        return None

    @property
    def context_id(self) -> str | None:
        body = self.body
        if isinstance(body, (TaskSnapshot, StatusUpdate, ArtifactUpdate)):
            return body.context_id
        if isinstance(body, MessageItem):
            return body.message.context_id
        return None
