"""Contract profiles: how one artifact update becomes a channel chunk (docs/design.md section 4).

The log is contract-agnostic; a profile is chosen per event from what the event carries:

- ``metadata.opencode`` present            -> ``opencode-channels``
- ``metadata.shared.stream`` present       -> ``opencode-blocks``
- an artifact id ``{task}:stream:text``, ``{task}:stream:reasoning``, ``{task}:stream:tool:{part}``
  or ``{task}:error`` and no metadata      -> ``opencode-lanes`` (the id is the only lane marker)
- anything else                            -> ``generic`` (one buffer per artifact, channel ``artifact``)

Profiles are pure functions of one event (plus the task id); the per-task state (buffers,
dedup keys, the user's text for echo detection) lives in :mod:`fold.projection`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import msgspec

from a2a_tape.store import Artifact, ArtifactUpdate

GENERIC: Final = "generic"
CHANNELS: Final = "opencode-channels"
BLOCKS: Final = "opencode-blocks"
LANES: Final = "opencode-lanes"

FINAL_ANSWER: Final = "final_answer"
REASONING: Final = "reasoning"
TOOL_CALL: Final = "tool_call"
ARTIFACT: Final = "artifact"
ERROR: Final = "error"

# how specific a profile is: a task shows the most specific profile it has seen
PROFILE_RANK: Final = {GENERIC: 0, LANES: 1, BLOCKS: 2, CHANNELS: 3}

_OPENCODE_CHANNELS = {FINAL_ANSWER: FINAL_ANSWER, REASONING: REASONING, TOOL_CALL: TOOL_CALL}
_BLOCK_TYPES = {"text": FINAL_ANSWER, REASONING: REASONING, TOOL_CALL: TOOL_CALL, "tool": TOOL_CALL}


class Chunk(msgspec.Struct, frozen=True, gc=False):
    """What a profile makes of one artifact update.

    ``replace`` is the effective mode (``append`` false/absent, or a final snapshot);
    ``ignore`` is a reason to leave the event out of every buffer (it stays in the log);
    ``dedup`` is the key that identifies a re-sent event (``event_id``, else the sequence).
    """

    profile: str
    channel: str
    replace: bool
    snapshot: bool = False
    ignore: str | None = None
    dedup: str | None = None


def lane_of(task_id: str | None, artifact_id: str) -> str | None:
    """The channel an opencode-lanes artifact id names, or None when it names no lane."""
    if not task_id or not artifact_id.startswith(task_id) or len(artifact_id) <= len(task_id):
        return None
    rest = artifact_id[len(task_id) :]
    if rest == ":stream:text":
        return FINAL_ANSWER
    if rest == ":stream:reasoning":
        return REASONING
    if rest.startswith(":stream:tool:") and len(rest) > 13:
        return TOOL_CALL
    if rest == ":error":
        return ERROR
    return None


def id_channel(task_id: str | None, artifact_id: str) -> str | None:
    """The channel an artifact id names by itself, or None for a free-form id: opencode channels
    ids (``{task}:stream`` / ``:stream:reasoning`` / ``:stream:tool_call``) and lanes
    (:func:`lane_of`). Only the task's own ids name a channel: ``other:stream`` is free-form."""
    if task_id and artifact_id.startswith(task_id):
        rest = artifact_id[len(task_id) :]
        if rest == ":stream":
            return FINAL_ANSWER
        if rest == ":stream:reasoning":
            return REASONING
        if rest == ":stream:tool_call":
            return TOOL_CALL
    return lane_of(task_id, artifact_id)


def channel_of(task_id: str | None, artifact: Artifact) -> str:
    """The channel the fold puts this artifact's text in (the one classifier: doctor, the
    timeline and the exports ask it too)."""
    return classify_artifact(task_id, artifact, True).channel


def channels_of(task_id: str | None) -> Callable[[Artifact], str]:
    """:func:`channel_of` for the artifacts of one task, read one after another (doctor's walks
    over a stream): an artifact without contract hints (most updates of a stream) has the channel
    its id names, which is looked up once per id."""
    by_id: dict[str, str] = {}

    def channel(artifact: Artifact) -> str:
        meta = artifact.meta
        if meta.has_opencode or meta.has_blocks:
            return classify_artifact(task_id, artifact, True).channel
        found = by_id.get(artifact.artifact_id)
        if found is None:
            found = by_id[artifact.artifact_id] = classify_artifact(task_id, artifact, True).channel
        return found

    return channel


def crossed_channel(task_id: str | None, artifact: Artifact) -> str | None:
    """The channel an artifact's id names when its metadata puts the text in another one, else
    None (an id alone never crosses: without metadata the id is the channel, or no lane at all)."""
    meta = artifact.meta
    if not (meta.has_opencode or meta.has_blocks):
        return None
    named = id_channel(task_id, artifact.artifact_id)
    return named if named is not None and named != channel_of(task_id, artifact) else None


def is_answer_channel(channel: str) -> bool:
    """What a user reads as the answer: the final answer, or a generic artifact's text."""
    return channel in (FINAL_ANSWER, ARTIFACT)


def classify(task_id: str | None, update: ArtifactUpdate) -> Chunk:
    """Choose the profile of one artifact update and say what it means for its buffer."""
    return classify_artifact(task_id, update.artifact, update.append)


def classify_artifact(task_id: str | None, artifact: Artifact, append: bool) -> Chunk:
    meta = artifact.meta
    if meta.has_opencode:
        channel = _OPENCODE_CHANNELS.get(meta.channel or "") or id_channel(task_id, artifact.artifact_id) or ARTIFACT
        snapshot = meta.source == "final_snapshot"
        ignore = None
        if not meta.message_id:
            ignore = "no message_id"
        elif meta.role == "user":
            ignore = "user echo (role user)"
        return Chunk(
            CHANNELS, channel, replace=snapshot or not append, snapshot=snapshot, ignore=ignore, dedup=_dedup(artifact)
        )
    if meta.has_blocks:
        channel = _BLOCK_TYPES.get(meta.block_type or "") or id_channel(task_id, artifact.artifact_id) or ARTIFACT
        snapshot = meta.source == "final_snapshot"
        ignore = "user echo (role user)" if meta.role == "user" else None
        return Chunk(
            BLOCKS, channel, replace=snapshot or not append, snapshot=snapshot, ignore=ignore, dedup=_dedup(artifact)
        )
    lane = lane_of(task_id, artifact.artifact_id)
    if lane is not None:
        return _LANE_CHUNKS[(lane, not append)]
    return _GENERIC_REPLACE if not append else _GENERIC_APPEND


# the chunks without per-event data are shared constants (the hot path allocates nothing)
_GENERIC_REPLACE = Chunk(GENERIC, ARTIFACT, replace=True)
_GENERIC_APPEND = Chunk(GENERIC, ARTIFACT, replace=False)
_LANE_CHUNKS = {
    (lane, replace): Chunk(LANES, lane, replace=replace)
    for lane in (FINAL_ANSWER, REASONING, TOOL_CALL, ERROR)
    for replace in (True, False)
}


def _dedup(artifact: Artifact) -> str | None:
    meta = artifact.meta
    if meta.event_id:
        return "e:" + meta.event_id
    if meta.sequence is not None:
        # a sequence alone identifies an event within its artifact and message
        return f"s:{artifact.artifact_id}\x1f{meta.message_id or ''}\x1f{meta.sequence}"
    return None


class ToolState(msgspec.Struct, omit_defaults=True):
    """The whole state of one tool call, as a data part carries it (opencode blocks / lanes).

    Every field is loose on purpose (a number where a string was expected must not lose the
    rest of the call); :func:`tool_state` turns the names into strings.
    """

    call_id: Any = None
    tool: Any = None
    status: Any = None
    title: Any = None
    input: Any = None
    output: Any = None
    error: Any = None


def _name(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float, bool)):
        return str(value)
    return None


def tool_state(data: Any) -> ToolState | None:
    """Read a data part as a tool call's state (typed); None when the part is not an object."""
    if not isinstance(data, dict):
        return None
    try:
        state = msgspec.convert(data, ToolState)
    except (msgspec.ValidationError, TypeError, ValueError):  # pragma: no cover - every field is Any
        return ToolState()
    state.call_id = _name(state.call_id)
    state.tool = _name(state.tool)
    state.status = _name(state.status)
    state.title = _name(state.title)
    return state
