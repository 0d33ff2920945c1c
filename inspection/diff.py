"""Compare two recordings: channel text and the event sequence, with volatile ids normalised.

Two recordings of the same behaviour differ in every id an agent or client invents (task,
context and message ids, also inside artifact ids such as ``{task_id}:stream``), in JSON-RPC
ids and in timestamps. Each event is turned into one line: its kind, origin and decoded body
(the typed model, never raw JSON) with those ids replaced by placeholders numbered in order
of first appearance (``<task-1>``, ``<context-1>``, ``<message-2>``) and timestamps dropped.
Equal lines and equal channel texts mean "same behaviour".

Tasks of two databases are paired by request: the user's text (from the first Task snapshot's
history or the first message), in log order, so the third "hello" of A meets the third of B.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterator, Sequence

import msgspec

from a2a_tape.fold.runs import Run
from a2a_tape.inspection.steps import Step, decode_events, task_view
from a2a_tape.store import (
    ArtifactUpdate,
    EventLog,
    Message,
    MessageItem,
    StatusUpdate,
    StoredEvent,
    TaskSnapshot,
    decode_item,
)


class Normaliser:
    """Replaces the ids seen in one recording by stable placeholders."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        self.counts: dict[str, int] = {}
        self._rx: re.Pattern[str] | None = None

    def add(self, kind: str, value: str | None) -> None:
        if not value or value in self.names or len(value) < 4:
            return  # very short ids ("1", "art") would rewrite ordinary text
        n = self.counts.get(kind, 0) + 1
        self.counts[kind] = n
        self.names[value] = f"<{kind}-{n}>"
        self._rx = None

    def learn(self, steps: Sequence[Step]) -> None:
        def msg(m: Message | None) -> None:
            if m is not None:
                self.add("task", m.task_id)
                self.add("context", m.context_id)
                self.add("message", m.message_id)

        for s in steps:
            self.add("task", s.event.task_id)
            b = s.item.body
            if isinstance(b, (TaskSnapshot, StatusUpdate, ArtifactUpdate)):
                self.add("task", b.task_id)
                self.add("context", b.context_id)
            if isinstance(b, TaskSnapshot):
                msg(b.status_message)
                for h in b.history:
                    msg(h)
                for a in b.artifacts:
                    self.add("message", a.meta.message_id)
            elif isinstance(b, StatusUpdate):
                msg(b.message)
            elif isinstance(b, ArtifactUpdate):
                self.add("message", b.artifact.meta.message_id)
                self.add("event", b.artifact.meta.event_id)
            elif isinstance(b, MessageItem):
                msg(b.message)

    def apply(self, text: str) -> str:
        if not self.names:
            return text
        if self._rx is None:
            keys = sorted(self.names, key=len, reverse=True)
            self._rx = re.compile("|".join(re.escape(k) for k in keys))
        return self._rx.sub(lambda m: self.names[m.group(0)], text)


def _body_line(step: Step) -> str:
    body = step.item.body
    if isinstance(body, StatusUpdate) and body.timestamp is not None:
        body = msgspec.structs.replace(body, timestamp=None)
    data = msgspec.json.encode(body).decode()
    origin = " LOCAL" if step.local else ""
    sse = f" event={step.event.sse_event}" if step.event.sse_event else ""
    return f"{step.item.kind}{origin}{sse} {data}"


class TaskSide(msgspec.Struct):
    task_id: str
    events: list[str]
    channels: dict[str, str]


def normalised(task_id: str, events: Sequence[StoredEvent]) -> TaskSide:
    steps = decode_events(events)
    norm = Normaliser()
    norm.add("task", task_id)
    norm.learn(steps)
    view = task_view(task_id, events)
    channels: dict[str, str] = {
        "state": view.state,
        "final_answer": view.final_answer or "",
        "reasoning": view.reasoning,
    }
    channels["tool_calls"] = msgspec.json.encode(view.tool_calls).decode()
    for a in view.artifacts:
        channels[f"artifact {a.artifact_id}"] = a.text
    return TaskSide(
        task_id=task_id,
        events=[norm.apply(_body_line(s)) for s in steps],
        channels={norm.apply(k): norm.apply(v) for k, v in channels.items()},
    )


class PairDiff(msgspec.Struct):
    a: str | None
    b: str | None
    equal: bool
    channels: dict[str, list[str]]  # channel -> unified diff lines (only the ones that differ)
    events: list[str]  # unified diff of the normalised event lines


class DiffResult(msgspec.Struct):
    equal: bool
    pairs: list[PairDiff]


def _udiff(a: Sequence[str], b: Sequence[str], name_a: str, name_b: str) -> list[str]:
    return [line.rstrip("\n") for line in difflib.unified_diff(list(a), list(b), name_a, name_b, lineterm="", n=2)]


def diff_sides(a: TaskSide | None, b: TaskSide | None) -> PairDiff:
    if a is None or b is None:
        present = a or b
        return PairDiff(
            a=a.task_id if a else None,
            b=b.task_id if b else None,
            equal=False,
            channels={},
            events=[f"only in {'A' if a else 'B'}: task {present.task_id if present else '?'}"],
        )
    channels: dict[str, list[str]] = {}
    for name in dict.fromkeys([*a.channels, *b.channels]):
        ta, tb = a.channels.get(name), b.channels.get(name)
        if ta != tb:
            channels[name] = _udiff(
                (ta or "").splitlines() or [""], (tb or "").splitlines() or [""], f"A {name}", f"B {name}"
            ) or [f"-{ta!r}", f"+{tb!r}"]
    events = _udiff(a.events, b.events, f"A {a.task_id}", f"B {b.task_id}")
    return PairDiff(a=a.task_id, b=b.task_id, equal=not channels and not events, channels=channels, events=events)


def diff_tasks(store_a: EventLog, task_a: str, store_b: EventLog, task_b: str) -> DiffResult:
    pair = diff_sides(normalised(task_a, store_a.read_task(task_a)), normalised(task_b, store_b.read_task(task_b)))
    return DiffResult(equal=pair.equal, pairs=[pair])


def diff_runs(a: Run, b: Run) -> DiffResult:
    """Two runs of one task compared as two tasks are, on what the agent sent: the notes an
    observer writes of its own (origin ``local``: record's GetTask note, a proxy's decision)
    differ by observer by construction, so they are left out. Two observers of one stream (a
    transparent proxy and the client recording through it) are then equal, and so are a recording and
    its verify run when the agent did the same (each normalised by the task id its agent named)."""
    side_a, side_b = run_sides(a, b)
    pair = diff_sides(side_a, side_b)
    pair.a, pair.b = a.selector, b.selector
    return DiffResult(equal=pair.equal, pairs=[pair])


def run_sides(a: Run, b: Run) -> tuple[TaskSide, TaskSide]:
    """The two sides :func:`diff_runs` compares (what the agent sent in each run, normalised), for
    a view that shows them (the UI's diff)."""
    from a2a_tape.inspection.run_contract import (
        named_task,  # a verify run is filed under the recorded task, its agent named another
    )

    upstream = [[ev for ev in r.events if ev.origin != "local"] for r in (a, b)]
    side_a, side_b = (normalised(named_task(r.task_id, evs), evs) for r, evs in zip((a, b), upstream, strict=True))
    return side_a, side_b


def request_key(events: Sequence[StoredEvent]) -> str:
    """What the task was asked: the user's text of its first Task snapshot or message."""
    for ev in events:  # decoded one at a time: the key is near the start
        b = decode_item(bytes(ev.payload)).body
        if isinstance(b, TaskSnapshot):
            for h in b.history:
                if h.role == "user":
                    return h.text
        if isinstance(b, MessageItem) and b.message.role == "user":
            return b.message.text
    return ""


def iter_store_pairs(
    store_a: EventLog, store_b: EventLog, *, progress: Callable[[int, int], None] | None = None
) -> Iterator[PairDiff]:
    """Pair the tasks of two databases by request (in log order) and diff each pair, a pair at
    a time: memory holds the two request maps (a key and a task id per task) and one pair,
    however long the logs are. ``progress(done, total)``: pairs so far, of at most ``total``."""

    def keyed(st: EventLog) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for t in st.task_events():
            out.setdefault(request_key(st.read_task(t.task_id)), []).append(t.task_id)
        return out

    ka, kb = keyed(store_a), keyed(store_b)
    total = sum(max(len(ka.get(k, ())), len(kb.get(k, ()))) for k in dict.fromkeys([*ka, *kb]))
    done = 0
    for key in dict.fromkeys([*ka, *kb]):
        la, lb = ka.get(key, []), kb.get(key, [])
        for i in range(max(len(la), len(lb))):
            side_a = normalised(la[i], store_a.read_task(la[i])) if i < len(la) else None
            side_b = normalised(lb[i], store_b.read_task(lb[i])) if i < len(lb) else None
            yield diff_sides(side_a, side_b)
            done += 1
            if progress is not None and (done % 100 == 0 or done == total):
                progress(done, total)
