"""What a fold shows: its kept state (:class:`fold.task_state.TaskState`) as the view ``a2a-tape
channels --json`` prints (:class:`fold.views.TaskView`), by the answer rule of :mod:`fold.fold`:
the final answer is the ``final_answer`` buffer updated last by log position, else the generic
artifact updated last, else the last agent Message; never text joined across artifacts."""

from __future__ import annotations

from collections.abc import Mapping

from a2a_tape.fold.codes import CLOSED_WHILE_WORKING
from a2a_tape.fold.lifecycle import CODE, closed_streams
from a2a_tape.fold.profiles import ARTIFACT, ERROR, FINAL_ANSWER, REASONING, TOOL_CALL
from a2a_tape.fold.task_state import Buffer, TaskState, json_value, shown_state
from a2a_tape.fold.views import ArtifactView, Fault, TaskView, ToolCall
from a2a_tape.store.events import ACTIVE_STATES


def view_of(s: TaskState, closed: Mapping[int, float] | None = None) -> TaskView:
    """The task's channels and faults; ``closed``: exchange id -> when it ended (see
    :func:`fold.lifecycle.closed_streams`)."""
    bufs = list(s.buffers.values())
    final = _last_text(bufs, FINAL_ANSWER)
    if final is None:
        final = _last_text(bufs, ARTIFACT)
    if final is None:
        final = s.agent_message
    reasoning = "\n\n".join(t for t in ("".join(b.chunks) for b in bufs if b.channel == REASONING) if t)
    tools: list[ToolCall] = []
    artifacts: list[ArtifactView] = []
    for b in bufs:
        text = "".join(b.chunks)
        artifacts.append(ArtifactView(b.artifact_id, b.channel, text, b.closed, b.profile))
        if b.channel != TOOL_CALL:
            continue
        if not b.tools:
            tools.append(ToolCall(b.artifact_id, None, None, None, None, None, None, None, text))
        for t in b.tools.values():
            tools.append(
                ToolCall(
                    b.artifact_id,
                    t.call_id,
                    t.tool,
                    t.status,
                    t.title,
                    json_value(t.input),
                    json_value(t.output),
                    json_value(t.error),
                    text,
                )
            )
    faults = [
        Fault(CODE.get(f.code, f.code), f.level, f.message, list(f.positions), f.count) for f in s.faults.values()
    ]
    faults.extend(closed_streams(s, closed))
    if s.state in ACTIVE_STATES and s.events:
        faults.append(
            Fault(CLOSED_WHILE_WORKING, "warning", f"the log ends with the task {s.state}", [s.last_position], 1)
        )
    return TaskView(
        task_id=s.task_id,
        context_id=s.context_id,
        state=shown_state(s),
        final_answer=final,
        reasoning=reasoning,
        tool_calls=tools,
        artifacts=artifacts,
        ignored_events=len(s.ignored),
        events=s.events,
        first_position=s.first_position,
        last_position=s.last_position,
        first_at=s.first_at,
        last_at=s.last_at,
        faults=faults,
        profile=s.profile,
        status_message=s.status_message,
        error=s.error if s.error is not None else _last_text(bufs, ERROR),
        undecodable=s.undecodable,
        ignored=list(s.ignored),
    )


def _last_text(bufs: list[Buffer], channel: str) -> str | None:
    best: Buffer | None = None
    for b in bufs:
        if b.channel == channel and (best is None or b.updated > best.updated):
            best = b
    return None if best is None else "".join(best.chunks)
