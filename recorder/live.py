"""What the recorder shows while a task runs: the one fold (:class:`fold.fold.TaskFold`),
applied event by event as they are recorded, and its rich rendering.

Using the same ``TaskFold`` as ``a2a-tape channels`` means the live view and the post-mortem
agree by construction (snapshots replace, final snapshots overwrite, ignored events are
counted). The only thing added here is the task-less case: a lone agent Message answering
the request before any task exists.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from a2a_tape.fold.projection import TaskFold, TaskView
from a2a_tape.store import Item, MessageItem, StoredEvent
from a2a_tape.store.decode import TextChunk


class LiveFold:
    """The channels of one recorded task (or of a task-less reply)."""

    def __init__(self) -> None:
        self.task: TaskFold | None = None
        self.reply: str | None = None
        self.reply_id: str | None = None  # the message id of a task-less reply
        self.reply_context: str | None = None
        self._state: str | None = None  # set by the recorder for a task-less answer
        self._view: TaskView | None = None

    def apply(self, ev: StoredEvent, item: Item) -> None:
        tid = ev.task_id if ev.task_id is not None else item.task_id
        if tid is None:
            body = item.body
            if isinstance(body, MessageItem) and body.message.role != "user":
                self.reply = body.message.text
                self.reply_id = body.message.message_id
                self.reply_context = body.message.context_id
            return
        if self.task is None:
            self.task = TaskFold(tid)
        elif self.task.s.task_id != tid:
            return  # an item of another task: the log keeps it under that task; this view is of ours
        self.task.apply(ev, item)
        self._view = None
        if isinstance(item.body, MessageItem) and item.body.message.role != "user":
            self.reply = item.body.message.text

    def apply_text(self, ev: StoredEvent, chunk: TextChunk) -> None:
        """A plain text chunk (:func:`store.decode.peek_text_chunk`) without the full decode."""
        tid = ev.task_id if ev.task_id is not None else chunk.taskId
        if tid is None:
            return  # an artifact update naming no task folds into nothing (as ``apply`` does)
        if self.task is None:
            self.task = TaskFold(tid)
        elif self.task.s.task_id != tid:
            return  # another task's chunk (see ``apply``)
        self.task.fold(ev.position, ev.seq, ev.exchange_id, ev.received_at, ev.payload, chunk)
        self._view = None

    def apply_texts(self, evs: Sequence[StoredEvent], chunks: Sequence[TextChunk]) -> None:
        """:meth:`apply_text` of each, in order; a batch of this task's chunks in one step
        (:meth:`fold.fold.TaskFold.apply_texts`)."""
        task = self.task
        if task is not None:
            tid = task.s.task_id
            if [ev.task_id for ev in evs].count(tid) == len(evs):
                self._view = None
                task.apply_texts(evs, chunks)
                return
        for ev, chunk in zip(evs, chunks):
            self.apply_text(ev, chunk)

    @property
    def lone_message(self) -> bool:
        """The request was answered by a Message that names no task (there is no task state)."""
        return self.task is None and self.reply is not None

    @property
    def state(self) -> str:
        if self._state is not None:
            return self._state
        return self.task.s.state if self.task is not None else "unknown"

    @state.setter
    def state(self, value: str) -> None:
        self._state = value

    def view(self) -> TaskView | None:
        if self.task is None:
            return None
        if self._view is None:
            self._view = self.task.view()
        return self._view

    @property
    def final_answer(self) -> str | None:
        v = self.view()
        if v is not None and v.final_answer is not None:
            return v.final_answer
        return self.reply

    def signature(self) -> tuple[object, ...]:
        """What a poll or a snapshot must change to count as progress."""
        v = self.view()
        if v is None:
            return (self.state, self.reply)
        return (v.state, tuple((a.artifact_id, a.text) for a in v.artifacts), tuple(repr(t) for t in v.tool_calls))


def render(fold: LiveFold, *, title: str = "", done: bool = False, plain: bool = False) -> RenderableType:
    """The live view: the answer as the main panel, reasoning dimmed, tool calls as a table.

    ``plain``: for an output that is not a terminal (a pipe, a log file), the answer is a heading
    and its text as it came, no panel: a long answer is not wrapped line by line for a box (that
    took more time than recording it), and a log keeps the agent's own lines. Print it with
    ``soft_wrap=True``."""
    parts: list[RenderableType] = []
    v = fold.view()
    if v is not None and v.reasoning:
        shown = v.reasoning if len(v.reasoning) < 400 else "…" + v.reasoning[-400:]
        parts.append(Text(f"reasoning: {shown}", style="dim italic"))
    if v is not None and v.tool_calls:
        from a2a_tape.fold import tool_calls  # one rendering of a tool call (channels shows it so)

        table = Table(title="tool calls", title_justify="left", show_edge=False)
        for col in tool_calls.COLUMNS:
            table.add_column(col)
        for c in v.tool_calls:
            table.add_row(*tool_calls.cells(c))
        parts.append(table)
    answer = fold.final_answer
    body = Text(answer if answer else ("(waiting for the answer…)" if not done else "(no answer)"))
    status = v.status_message if v is not None else None
    said = "a lone message, no task" if fold.lone_message else fold.state  # no task: no task state
    subtitle = said if not status else f"{said}: {status[:80]}"
    if plain:
        parts += [Text(f"{title or 'answer'} ({subtitle}):", style="bold"), body]
    else:
        parts.append(
            Panel(body, title=title or "answer", subtitle=subtitle, title_align="left", subtitle_align="right")
        )
    return Group(*parts)
