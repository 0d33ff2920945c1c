"""A hand-built opencode-blocks recording with every channel (the HTML report and grep tests use it).

A real a2a-sdk agent streams plain artifacts only; the opencode contract (reasoning, structured
tool calls, a final snapshot sent with ``append: true`` and the FULL text) has to be written by
hand, in the wire shape docs/design.md section 4 describes.
"""

from __future__ import annotations

from tests.replay.inspect.builders import Tape, items

ANSWER = "The answer is <script>alert(1)</script> 42 & counting."
REASONING = "Let me think <b>carefully</b> about 6*7."
USER_TEXT = "what is 6*7?"


def _hint(block_type: str, seq: int, *, source: str | None = None) -> dict:
    stream = {"block_type": block_type, "sequence": seq, "event_id": f"ev-{seq}", "message_id": "msg-agent-1"}
    if source:
        stream["source"] = source
    return {"shared": {"stream": stream}}


def build_opencode(tape: Tape, dialect: str = "1.0", task_id: str = "task-opencode-0001") -> str:
    it = items(dialect, task_id)
    text_id, reasoning_id, tool_id = f"{task_id}:stream", f"{task_id}:stream:reasoning", f"{task_id}:stream:tool_call"
    call = {"call_id": "call-1", "tool": "calculator", "input": {"expr": "6*7"}}
    half = len(ANSWER) // 2
    tape.stream(
        it,
        [
            it.task("submitted", user_text=USER_TEXT),
            it.status("working"),
            it.artifact(reasoning_id, REASONING[:20], metadata=_hint("reasoning", 1)),
            it.artifact(reasoning_id, REASONING[20:], append=True, last=True, metadata=_hint("reasoning", 2)),
            it.artifact(tool_id, data={**call, "status": "running"}, metadata=_hint("tool_call", 3)),
            it.artifact(
                tool_id,
                data={**call, "status": "completed", "output": "42"},
                append=True,
                last=True,
                metadata=_hint("tool_call", 4),
            ),
            it.artifact(text_id, ANSWER[:half], metadata=_hint("text", 5)),
            it.artifact(text_id, ANSWER[half:], append=True, metadata=_hint("text", 6)),
            # the trap: the final snapshot arrives with append=true and the FULL text
            it.artifact(text_id, ANSWER, append=True, last=True, metadata=_hint("text", 7, source="final_snapshot")),
            it.status("completed"),
        ],
    )
    return task_id
