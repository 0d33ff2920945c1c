"""The agent's stored copy of a task (a GetTask or resubscribe answer after the agent ended it on
another exchange): evidence, never folded (a second side never rewrites the first); how it differs
from what the task's streams said is a finding (``stored-copy-differs``)."""

from __future__ import annotations

from a2a_tape.fold.task_state import TaskState
from a2a_tape.store import TaskSnapshot


def _quoted(text: str, limit: int = 40) -> str:
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


def stored_copy_differences(s: TaskState, body: TaskSnapshot) -> list[str]:
    """How the agent's stored task (``body``) differs from what the task's streams said (``s``):
    a different state or status message, an artifact whose text is the streamed text twice, the
    user's text kept before the answer, other text, text the stream never showed. (A copy without
    an artifact the stream sent is not one: agents may keep a task's artifacts elsewhere.)"""
    out: list[str] = []
    if body.state not in ("unknown", s.state):
        out.append(f"its state is {body.state}, the stream ended it {s.state}")
    streamed = {aid: "".join(b.chunks) for aid, b in s.buffers.items()}
    for art in body.artifacts:
        aid = art.artifact_id
        text = art.text
        sent = streamed.get(aid)
        if sent is None:
            if text:
                out.append(f"artifact {aid} holds text the stream's channels never showed ({_quoted(text)})")
        elif text == sent:
            continue
        elif sent and text == sent + sent:
            out.append(f"artifact {aid} holds the streamed text twice ({_quoted(sent)})")
        elif sent and any(u and text == u + sent for u in s.user_texts):
            out.append(f"artifact {aid} holds the user's own text before the answer ({_quoted(text)})")
        else:
            out.append(f"artifact {aid} holds {_quoted(text)} where the stream said {_quoted(sent)}")
    stored_message = (body.status_message.text or None) if body.status_message is not None else None
    if stored_message is not None and stored_message != s.status_message:
        out.append(
            f"its status message is {_quoted(stored_message)}, the stream's was {_quoted(s.status_message or '')}"
        )
    return out
