"""What the recorder shows while a task runs: a small channel fold and its rich rendering.

The fold follows DESIGN section 4 for the two things a live view needs (which buffer a chunk
goes to, append or replace) and section 5 for snapshots (a Task item replaces the artifacts,
never appends). The offline projections of ``replay`` are the reference; this fold only has
to be right for the live view and the ``record --json`` summary.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from store import ArtifactUpdate, Item, MessageItem, StatusUpdate, TaskSnapshot
from store.events import Artifact


@dataclass
class Buffer:
    artifact_id: str
    channel: str
    text: str = ""
    data: object = None
    last_position: int = 0


@dataclass
class LiveFold:
    """Channel buffers of one session, applied in log order."""

    state: str = "unknown"
    buffers: dict[str, Buffer] = field(default_factory=dict)
    reply: str | None = None  # a lone agent Message (no task)
    status_text: str | None = None  # the text of the last status message (input-required asks)
    ignored: int = 0
    user_text: str | None = None

    def apply(self, item: Item, position: int = 0) -> None:
        body = item.body
        if isinstance(body, ArtifactUpdate):
            self._artifact(body.artifact, body.append, position)
        elif isinstance(body, StatusUpdate):
            if body.state != "unknown":
                self.state = body.state
            if body.message is not None and body.message.role != "user" and body.message.text:
                self.status_text = body.message.text
        elif isinstance(body, TaskSnapshot):
            if body.state != "unknown":
                self.state = body.state
            # a snapshot replaces what we hold: artifacts folded so far on the agent side
            self.buffers = {}
            for art in body.artifacts:
                self._artifact(art, False, position, snapshot=True)
            if body.status_message is not None and body.status_message.role != "user" and body.status_message.text:
                self.status_text = body.status_message.text
        elif isinstance(body, MessageItem):
            if body.message.role != "user":
                self.reply = body.message.text

    def _artifact(self, art: Artifact, append: bool, position: int, snapshot: bool = False) -> None:
        meta = art.meta
        if meta.has_opencode and not meta.message_id and not snapshot:
            self.ignored += 1
            return
        if meta.role == "user":
            return
        channel = _channel(art)
        buf = self.buffers.get(art.artifact_id)
        if buf is None:
            buf = self.buffers[art.artifact_id] = Buffer(art.artifact_id, channel)
        text = art.text
        if meta.source == "final_snapshot" or not append:
            buf.text = text
        else:
            buf.text += text
        datas = [p.data for p in art.parts if p.kind == "data"]
        if datas:
            buf.data = datas[-1]
        buf.last_position = position

    def by_channel(self, channel: str) -> list[Buffer]:
        return [b for b in self.buffers.values() if b.channel == channel]

    @property
    def final_answer(self) -> str | None:
        answers = self.by_channel("final_answer")
        if answers:
            return max(answers, key=lambda b: b.last_position).text
        generic = self.by_channel("artifact")
        if generic:
            return max(generic, key=lambda b: b.last_position).text
        if self.reply is not None:
            return self.reply
        return None

    @property
    def reasoning(self) -> str:
        return "".join(b.text for b in self.by_channel("reasoning"))

    @property
    def tool_calls(self) -> list[Buffer]:
        return self.by_channel("tool_call")


def _channel(art: Artifact) -> str:
    meta = art.meta
    if meta.channel in ("reasoning", "tool_call", "final_answer"):
        return meta.channel
    bt = meta.block_type
    if bt == "reasoning":
        return "reasoning"
    if bt == "tool_call":
        return "tool_call"
    aid = art.artifact_id
    if aid.endswith(":stream:reasoning"):
        return "reasoning"
    if aid.endswith(":stream:tool_call") or ":stream:tool:" in aid:
        return "tool_call"
    if aid.endswith(":stream") or aid.endswith(":stream:text") or bt == "text":
        return "final_answer"
    return "artifact"


def render(fold: LiveFold, *, title: str = "", done: bool = False) -> RenderableType:
    """The live view: the answer as the main panel, reasoning dimmed, tool calls as a table."""
    parts: list[RenderableType] = []
    reasoning = fold.reasoning
    if reasoning:
        shown = reasoning if len(reasoning) < 400 else "…" + reasoning[-400:]
        parts.append(Text(f"reasoning: {shown}", style="dim italic"))
    calls = fold.tool_calls
    if calls:
        table = Table(title="tool calls", title_justify="left", show_edge=False)
        table.add_column("artifact")
        table.add_column("call")
        for c in calls:
            table.add_row(c.artifact_id.rsplit(":", 1)[-1], (c.text or (str(c.data) if c.data is not None else ""))[:120])
        parts.append(table)
    answer = fold.final_answer
    body = Text(answer if answer else ("(waiting for the answer…)" if not done else "(no answer)"))
    subtitle = fold.state if not fold.status_text else f"{fold.state}: {fold.status_text[:80]}"
    parts.append(Panel(body, title=title or "answer", subtitle=subtitle, title_align="left", subtitle_align="right"))
    return Group(*parts)
