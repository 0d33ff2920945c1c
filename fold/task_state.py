"""The kept state of one task's fold: what a projection row holds (msgpack), what a fold goes on from.

:class:`TaskState` and its parts are the fold's memory (:mod:`fold.fold` moves it, event by event);
:data:`STATE_VERSION` says which rules made a stored row (another: the rows are rebuilt). The state a
view shows for a task known by its pushes alone is decided here (:func:`shown_state`).
"""

from __future__ import annotations

from typing import Any

import msgspec

from a2a_tape.fold.profiles import GENERIC
from a2a_tape.fold.views import IgnoredEvent
from a2a_tape.store.json_values import decode_json


class BufferTool(msgspec.Struct, array_like=True):
    call_id: str | None
    tool: str | None
    status: str | None
    title: str | None
    input: bytes | None  # JSON bytes: the same value whether folded now or loaded from a row
    output: bytes | None
    error: bytes | None


class Buffer(msgspec.Struct, array_like=True):
    artifact_id: str
    channel: str
    profile: str
    chunks: list[str]
    closed: bool
    updated: int
    tools: dict[str, BufferTool] = {}


class NotedFault(msgspec.Struct, array_like=True):
    code: str
    level: str
    message: str
    positions: list[int]
    count: int


class StreamSeen(msgspec.Struct, array_like=True):
    last: int  # position of the exchange's last event
    at: float  # when it arrived
    state: str  # the task's state once that event was folded


class StateChange(msgspec.Struct, array_like=True):
    at: float
    state: str


MAX_CHANGES = 256  # state changes remembered per task (a flapping agent must not grow a row forever)


class RunRef(msgspec.Struct, array_like=True):
    """One run of a task, as the projection row of its latest run lists them (:mod:`fold.runs`)."""

    observer: str | None  # None: not known yet (the run's first events came on no observer's exchange)
    source: str | None
    first_position: int


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
    buffers: dict[str, Buffer] = {}
    ignored: list[IgnoredEvent] = []
    seen: set[str] = set()
    user_texts: list[str] = []
    status_message: str | None = None
    agent_message: str | None = None
    error: str | None = None
    faults: dict[str, NotedFault] = {}
    terminal: str | None = None  # the agent's terminal state, once it reported one (lifecycle faults)
    undecodable: int = 0
    dialect: str | None = None  # the wire dialect of the first upstream item ("0.3" / "1.0")
    streams: dict[int, StreamSeen] = {}  # exchanges that delivered stream updates (key 0: unknown exchange)
    changes: list[StateChange] = []  # when the state changed (wall clock), to know it when a stream closed
    terminal_position: int = 0  # where the agent reported ``terminal``
    terminal_exchange: int | None = None  # on which exchange
    runs: list[RunRef] = []  # the task's runs so far, in order; this state folds the last (fold.runs)
    before_end: list[int] = []  # the exchanges that delivered the agent's events before its terminal state
    catching_up: list[int] = []  # of them, those still open beside the one that ended the task (until they end it too)
    pushed: str | None = None  # the last state a push carried (its ``push`` note): see :func:`shown_state`


def known_by_pushes(s: TaskState) -> bool:
    """The run's events gave no state and its pushes did (a task the log knows by its pushes alone)."""
    return s.state == "unknown" and s.pushed is not None


def shown_state(s: TaskState) -> str:
    """The state a view and the task index show: the agent's, as streamed or stored; for a run whose
    events never gave one (:func:`known_by_pushes`), the last state a push carried."""
    return s.pushed if known_by_pushes(s) and s.pushed is not None else s.state


STATE_VERSION = "6"
"""Bump when the fold's rules or :class:`TaskState` change: stored rows are then rebuilt."""

STATE_ENCODER = msgspec.msgpack.Encoder()
STATE_DECODER = msgspec.msgpack.Decoder(TaskState)
_json_encoder = msgspec.json.Encoder()


def json_bytes(value: Any) -> bytes | None:
    if value is None:
        return None
    try:
        return _json_encoder.encode(value)
    except (TypeError, ValueError, OverflowError):  # pragma: no cover - decoded JSON always encodes
        return None


def json_value(raw: bytes | None) -> Any:
    return None if raw is None else decode_json(raw)
