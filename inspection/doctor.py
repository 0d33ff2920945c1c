"""Lifecycle and contract faults of recorded tasks, each with the event positions involved.

The question doctor answers is "what went wrong on the wire, and would a user have seen it".
It reads decoded items only (both dialects share one model with lowercase v0.3 states, so a
finished task that goes back to ``working`` is caught in v1.0 exactly as in v0.3, where some
audit tools call such a stream clean). Origin-local events (our own recovery notes and
synthetic FAILED) are context, never faults of the agent.

Levels: ``error`` (the contract was broken, or a user saw something wrong) and ``warning``
(suspicious, or only a naive client would go wrong). ``a2a-tape doctor`` exits 1 on any error.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Literal, NamedTuple

import msgspec

from a2a_tape.fold.codes import CHECKS as _CODES
from a2a_tape.fold.codes import FROM_FOLD
from a2a_tape.fold.fold import TaskFold
from a2a_tape.fold.profiles import channels_of, crossed_channel, is_answer_channel
from a2a_tape.fold.views import TaskView
from a2a_tape.inspection.push_checks import check_pushes
from a2a_tape.inspection.steps import Step, closed_exchanges, decode_events, is_interrupted, is_terminal, state_of
from a2a_tape.inspection.words import count
from a2a_tape.store import (
    ArtifactUpdate,
    ErrorItem,
    Exchange,
    Note,
    Recordings,
    StoredEvent,
    TaskSnapshot,
    Undecodable,
)

Level = Literal["error", "warning"]
Add = Callable[[str, Level, str, Iterable[int]], None]
"""How a check reports a finding: ``add(code, level, message, positions)``."""

CHECKS = _CODES
"""Every fault code with what it means: the one table, :data:`fold.codes.CHECKS`."""


class Finding(msgspec.Struct, frozen=True, omit_defaults=True):
    code: str
    level: Level
    task_id: str | None
    message: str
    positions: list[int]
    run: str | None = None  # TASK@N, when the task has several runs (each is examined alone)


class Report(msgspec.Struct):
    tasks: int
    errors: int
    warnings: int
    findings: list[Finding]

    @property
    def ok(self) -> bool:
        return self.errors == 0


def _streams(steps: Sequence[Step]) -> list[list[Step]]:
    """The task's steps grouped by exchange (one group when exchanges are unknown), in log order."""
    groups: dict[int | None, list[Step]] = {}
    for s in steps:
        groups.setdefault(s.event.exchange_id, []).append(s)
    return sorted(groups.values(), key=lambda g: g[0].position)


def findings(
    task_id: str,
    events: Sequence[StoredEvent],
    exchanges: Iterable[Exchange] = (),
    *,
    steps: Sequence[Step] | None = None,
    view: TaskView | None = None,
    followed: bool = False,
    errors_only: bool = False,
) -> list[Finding]:
    """Every fault of one task, in the order of the first position involved.

    Pure: the task's stored events (and its exchanges, when known) in, the findings out;
    ``steps``: the events already decoded (:func:`inspection.steps.decode_events` of ``events``);
    ``view``: their fold's view already made (over ``steps``, with ``exchanges``' closed ones).
    ``followed``: these are a run of the task that a later run follows (the next turn of a
    conversation, ``record --continue``): a task left waiting for input was followed up.
    ``errors_only``: the error-level findings alone (what ``verify`` compares); the walks that
    find only warnings (a naive client's view of each stream, a wait with no follow-up, an
    undecodable item) are not made."""
    exchanges = list(exchanges)
    steps = decode_events(events) if steps is None else list(steps)
    ex_by_id = {ex.id: ex for ex in exchanges if ex.id is not None}
    found: list[Finding] = []

    def add(code: str, level: Level, message: str, positions: Iterable[int]) -> None:
        found.append(Finding(code, level, task_id, message, sorted(set(positions))))

    upstream = [s for s in steps if not s.local]
    if view is None:
        fold = TaskFold(task_id)  # the one fold, over the steps decoded above
        for step in steps:
            fold.apply(step.event, step.item)
        view = fold.view(closed_exchanges(exchanges) if exchanges else None)
    streams = _streams(upstream)
    if not followed and not errors_only:
        _check_waiting(steps, add)
    _check_streams(streams, steps, ex_by_id, add)
    _check_artifacts(task_id, upstream, steps, add)
    _check_sequences(upstream, add)
    _check_answer(view, streams, ex_by_id, add, naive_clients=not errors_only)
    _fold_faults(view, add)
    check_pushes(steps, exchanges, add)
    for s in upstream if not errors_only else ():
        if isinstance(s.item.body, Undecodable):
            add("undecodable", "warning", f"undecodable item: {s.item.body.reason}", [s.position])
    if errors_only:
        found = [f for f in found if f.level == "error"]
    found.sort(key=lambda f: (f.positions[0] if f.positions else 0, f.code))
    return found


def _check_waiting(steps: Sequence[Step], add: Add) -> None:
    """The task waits for input or auth and nothing followed: not a fault of the fold (a task may
    rightly wait), a question about the recording, asked once it ended."""
    # the last known state, local decisions included (a synthetic FAILED settles a task)
    states = [s for s in steps if state_of(s) is not None]
    if states and is_interrupted(state_of(states[-1])):
        last = states[-1]
        later = [s for s in steps if s.position > last.position and not s.local]
        if not later:
            add(
                "interrupted-no-follow-up",
                "warning",
                f"the task waits ({state_of(last)}) and no follow-up was recorded",
                [last.position],
            )


def _check_streams(streams: list[list[Step]], steps: Sequence[Step], ex_by_id: dict[int, Exchange], add: Add) -> None:
    final_state = next((state_of(s) for s in reversed(steps) if state_of(s) is not None), None)
    for group in streams:
        ex = ex_by_id.get(group[0].event.exchange_id) if group[0].event.exchange_id is not None else None
        streaming = ex.streaming if ex is not None else True
        content = [s for s in group if s.item.kind not in ("error", "undecodable", "note", "other")]
        if streaming and content and content[0].item.kind not in ("task", "message"):
            first = content[0]
            add(
                "first-item",
                "error",
                f"the stream's first item is a {first.item.kind} update, not a Task or a lone Message",
                [first.position],
            )
        if streaming and content and content[0].item.kind == "message" and len(content) > 1:
            add(
                "first-item",
                "error",
                f"the stream began with a lone Message, then sent {count(len(content) - 1, 'more item')}",
                [content[0].position, content[1].position],
            )
        if not streaming or (ex is not None and ex.ended_at is None and ex.outcome is None):
            continue  # (an exchange still open is a stream being recorded: it has not ended)
        states = [s for s in group if state_of(s) is not None]
        if not states or state_of(states[-1]) not in ("submitted", "working"):
            continue
        errored = any(isinstance(s.item.body, ErrorItem) for s in group if s.position > states[-1].position)
        why = "after an error item" if errored else "while the task was " + str(state_of(states[-1]))
        # settled later (by the agent, a resubscribe, a poll, or our own synthetic FAILED): a warning
        level: Level = "error" if final_state in ("submitted", "working", None) else "warning"
        later = "; it was never settled" if level == "error" else f"; later it became {final_state}"
        positions = [states[-1].position, group[-1].position]
        stopped = _stopped_by_user(steps, group[-1].position) if level == "error" else None
        if stopped is not None:  # the user's own Ctrl-C, which our LOCAL note says: not the agent's fault
            level, later = "warning", f"; the user stopped the recording (Ctrl-C, LOCAL note at position {stopped})"
            positions.append(stopped)
        add(
            "closed-while-working",
            level,
            f"the stream ended {why} (last event at position {group[-1].position}){later}",
            positions,
        )


def _stopped_by_user(steps: Sequence[Step], after: int) -> int | None:
    """The position of our LOCAL note that the user interrupted the recording (``record``'s
    Ctrl-C) after position ``after``, if there is one."""
    for s in steps:
        body = s.item.body
        if s.local and s.position > after and isinstance(body, Note) and body.action == "interrupted":
            return s.position
    return None


def _check_artifacts(task_id: str, upstream: Sequence[Step], steps: Sequence[Step], add: Add) -> None:
    channels: dict[str, dict[str, list[int]]] = {}
    closed: dict[str, bool] = {}
    channel = channels_of(task_id)
    for s in upstream:
        body = s.item.body
        if not isinstance(body, ArtifactUpdate):
            continue
        art = body.artifact
        ch = channel(art)
        channels.setdefault(art.artifact_id, {}).setdefault(ch, []).append(s.position)
        named = crossed_channel(task_id, art)
        if named is not None:
            add(
                "text-crosses-channels",
                "error",
                f"artifact {art.artifact_id} is a {named} lane but this update says {ch}",
                [s.position],
            )
        if body.last_chunk:
            closed[art.artifact_id] = True
        else:
            closed.setdefault(art.artifact_id, False)
    for aid, by_channel in channels.items():
        if len(by_channel) > 1:
            add(
                "text-crosses-channels",
                "error",
                f"artifact {aid} carried text of {len(by_channel)} channels: {', '.join(sorted(by_channel))}",
                [p for ps in by_channel.values() for p in ps],
            )
    final_state = next((state_of(s) for s in reversed(steps) if state_of(s) is not None), None)
    # contracts that never send lastChunk (opencode) end artifacts with the task: only flag an open
    # artifact when the task did not finish, or when the agent does close its other artifacts
    uses_last_chunk = any(closed.values())
    for aid, done in closed.items():
        if not done and (uses_last_chunk or not is_terminal(final_state)):
            positions = [p for ps in channels[aid].values() for p in ps]
            add(
                "artifact-not-closed",
                "warning",
                f"artifact {aid} never got lastChunk (task {final_state or 'state unknown'})",
                [positions[-1]],
            )


def _check_sequences(upstream: Sequence[Step], add: Add) -> None:
    last_seq: dict[str, tuple[int, int]] = {}
    seen_ids: dict[str, int] = {}
    for s in upstream:
        body = s.item.body
        if not isinstance(body, ArtifactUpdate):
            continue
        meta = body.artifact.meta
        if meta.event_id is not None:
            if meta.event_id in seen_ids:
                add(
                    "sequence-repeat",
                    "warning",
                    f"event_id {meta.event_id} arrived again (a client must dedup it)",
                    [seen_ids[meta.event_id], s.position],
                )
                continue  # one finding per re-sent event
            else:
                seen_ids[meta.event_id] = s.position
        if meta.sequence is None:
            continue
        scope = meta.message_id or ""
        prev = last_seq.get(scope)
        if prev is not None:
            prev_seq, prev_pos = prev
            if meta.sequence <= prev_seq:
                add(
                    "sequence-repeat",
                    "warning",
                    f"sequence {meta.sequence} after {prev_seq} (repeated or out of order)",
                    [prev_pos, s.position],
                )
            elif meta.sequence > prev_seq + 1:
                add(
                    "sequence-gap",
                    "error",
                    f"sequence jumps from {prev_seq} to {meta.sequence}: {count(meta.sequence - prev_seq - 1, 'event')} missing",
                    [prev_pos, s.position],
                )
        if prev is None or meta.sequence > prev[0]:
            last_seq[scope] = (meta.sequence, s.position)


def _fold_faults(view: TaskView, add: Add) -> None:
    """The faults the fold notes (fold/fold.py holds their rules) that doctor takes as they are
    (:data:`fold.codes.FROM_FOLD`); it finds the others itself."""
    for f in view.faults:
        if f.code in FROM_FOLD:
            add(f.code, "error" if f.level == "error" else "warning", f.message, f.positions)


def naive_client_view(task_id: str, stream: Sequence[Step]) -> tuple[str, list[int]]:
    """What a naive client shows of one stream: every answer chunk's text concatenated, the
    stream's Task snapshots included. (The careful view is the fold's, :class:`TaskView`.)"""
    text: list[str] = []
    positions: list[int] = []
    channel = channels_of(task_id)
    for s in stream:
        body = s.item.body
        arts = []
        if isinstance(body, ArtifactUpdate):
            arts = [body.artifact]
        elif isinstance(body, TaskSnapshot):
            arts = list(body.artifacts)
        for art in arts:
            if is_answer_channel(channel(art)) and (said := art.text):
                text.append(said)
                positions.append(s.position)
    return "".join(text), positions


def _resent_appends(task_id: str, upstream: Sequence[Step]) -> list[Step]:
    """Answer updates that append the whole text streamed so far (built from two chunks or more).

    That is a snapshot sent as a chunk with no ``final_snapshot`` marker: every client, careful
    or not, shows the answer twice. Two equal single chunks ("ha" + "ha") are not that: they are
    both real. Re-sent events (a repeated ``event_id``) are the dedup check's business.
    """
    bufs: dict[str, _Streamed] = {}  # each answer artifact's text so far
    seen: set[str] = set()
    found: list[Step] = []
    channel = channels_of(task_id)
    for s in upstream:
        body = s.item.body
        if isinstance(body, TaskSnapshot):
            bufs = {a.artifact_id: _Streamed(a.text) for a in body.artifacts}
            continue
        if not isinstance(body, ArtifactUpdate) or not is_answer_channel(channel(body.artifact)):
            continue
        art = body.artifact
        if art.meta.event_id is not None:
            if art.meta.event_id in seen:
                continue
            seen.add(art.meta.event_id)
        text = art.text
        if not body.append or art.meta.source == "final_snapshot":
            bufs[art.artifact_id] = _Streamed(text)
            continue
        prev = bufs.get(art.artifact_id)
        if prev is None:
            prev = bufs[art.artifact_id] = _Streamed()
        if prev.chunks >= 2 and prev.repeats(text):
            found.append(s)
        prev.add(text)
    return found


class _Streamed:
    """An artifact's text streamed so far, in pieces (joined only when a chunk could repeat it
    whole: a stream of N chunks is not N growing copies), and how many chunks made it."""

    __slots__ = ("pieces", "size", "chunks")

    def __init__(self, text: str | None = None) -> None:
        self.pieces = [] if text is None else [text]
        self.size = 0 if text is None else len(text)
        self.chunks = 0 if text is None else 1

    def add(self, text: str) -> None:
        self.pieces.append(text)
        self.size += len(text)
        self.chunks += 1

    def repeats(self, text: str) -> bool:
        """``text`` is the whole text so far (and not blank)."""
        if len(text) != self.size or not text.strip():
            return False
        if len(self.pieces) > 1:
            self.pieces[:] = ["".join(self.pieces)]
        return text == self.pieces[0]


def _check_answer(
    view: TaskView, streams: list[list[Step]], ex_by_id: dict[int, Exchange], add: Add, *, naive_clients: bool = True
) -> None:
    """The answer shown twice: by the agent (a resent whole answer), or for a naive client
    (``naive_clients``: looked for; a warning).

    A naive client reads one stream and concatenates what it carries: only streams count, one at a
    time. A resubscribe's snapshot opens its own stream (the text so far, not a second answer);
    a cancel reply and GetTask polls are single answers, not stream items."""
    answer = view.final_answer
    resent = [
        s
        for stream in streams
        for s in _resent_appends(view.task_id, stream)
        if isinstance(s.item.body, ArtifactUpdate)  # what _resent_appends returns
        and answer
        and answer.count(s.item.body.artifact.text) >= 2
    ]
    if resent:
        add(
            "answer-shown-twice",
            "error",
            "an update appended the whole answer again without the final_snapshot marker: the answer shows twice",
            [s.position for s in resent],
        )
        return
    if not naive_clients:
        return
    traps: list[int] = []
    for stream in streams:
        first = stream[0].event.exchange_id
        ex = ex_by_id.get(first) if first is not None else None
        if ex is not None and not ex.streaming:
            continue  # a JSON answer (GetTask, CancelTask, message/send): no chunks to concatenate
        # the trap: a final snapshot marked append=true after streamed chunks; a client that
        # appends it (or concatenates every chunk and snapshot) shows the streamed text twice
        streamed: set[str] = set()
        channel = channels_of(view.task_id)
        for s in stream:
            body = s.item.body
            if not isinstance(body, ArtifactUpdate) or not is_answer_channel(channel(body.artifact)):
                continue
            art = body.artifact
            if art.meta.source == "final_snapshot":
                if body.append and art.artifact_id in streamed and art.text:
                    traps.append(s.position)
            elif art.text:
                streamed.add(art.artifact_id)
        naive, positions = naive_client_view(view.task_id, stream)
        if answer and naive != answer and naive.count(answer) >= 2:
            traps += [
                p
                for s in stream
                if (p := s.position) in positions
                and (
                    isinstance(s.item.body, TaskSnapshot)
                    or (
                        isinstance(s.item.body, ArtifactUpdate) and s.item.body.artifact.meta.source == "final_snapshot"
                    )
                )
            ] or positions[-1:]
    if traps:
        add(
            "answer-shown-twice",
            "warning",
            "a client that concatenates every answer chunk and snapshot would show the answer twice "
            "(a snapshot repeats text already streamed)",
            sorted(set(traps)),
        )


def run_findings(task_id: str, events: Sequence[StoredEvent], exchanges: Iterable[Exchange] = ()) -> list[Finding]:
    """:func:`findings` of each run of the task, examined alone (:mod:`fold.runs`); a task of
    several runs names the run of each finding (``run``: ``TASK@N``)."""
    from a2a_tape.fold.runs import split_runs

    exchanges = list(exchanges)
    runs = split_runs(task_id, events, exchanges)
    if len(runs) <= 1:
        return findings(task_id, events, exchanges)
    found = [
        msgspec.structs.replace(f, run=run.selector, message=f"{run.selector}: {f.message}")
        for run in runs
        for f in findings(task_id, run.events, run.exchanges, followed=run is not runs[-1])
    ]
    found.sort(key=lambda f: (f.positions[0] if f.positions else 0, f.code))
    return found


class FaultCount(NamedTuple):
    """How many findings doctor has for a task or a run, by level: what every list shows as its
    "faults" (``tasks``, ``tasks --runs``, the UI's list), so it is always doctor's count."""

    errors: int = 0
    warnings: int = 0

    @property
    def total(self) -> int:
        return self.errors + self.warnings

    @classmethod
    def of(cls, found: Iterable[Finding]) -> FaultCount:
        levels = [f.level for f in found]
        errors = levels.count("error")
        return cls(errors, len(levels) - errors)


def task_fault_count(store: Recordings, task_id: str, exchanges: Iterable[Exchange] | None = None) -> FaultCount:
    """``doctor TASK``'s counts (every run of the task, each examined alone); ``exchanges``: the
    task's, when the caller has read them already."""
    events = store.read_task(task_id)
    return FaultCount.of(run_findings(task_id, events, store.exchanges(task_id) if exchanges is None else exchanges))


def diagnose(store: Recordings, task_id: str | None = None, run: int | None = None) -> Report:
    """Doctor one task (every run of it, or run ``run``), or every task of the log."""
    if run is not None and task_id is not None:
        from a2a_tape.fold.runs import pick_run, task_runs

        runs = task_runs(store, task_id)
        one = pick_run(runs, task_id, run)
        followed = one.number != runs[-1].number
        found = [
            msgspec.structs.replace(f, run=one.selector)
            for f in findings(task_id, one.events, one.exchanges, followed=followed)
        ]
        errors = sum(1 for f in found if f.level == "error")
        return Report(tasks=1, errors=errors, warnings=len(found) - errors, findings=found)
    ids = [task_id] if task_id is not None else [t.task_id for t in store.task_events()]
    found = []
    for tid in ids:
        found.extend(run_findings(tid, store.read_task(tid), store.exchanges(tid)))
    errors = sum(1 for f in found if f.level == "error")
    return Report(tasks=len(ids), errors=errors, warnings=len(found) - errors, findings=found)
