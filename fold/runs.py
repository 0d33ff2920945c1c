"""Runs: the recordings of one task by each of its observers, kept apart (docs/design.md, "Runs").

A task reaches the log from several sides: the proxy and the client's own ``record`` observing
one stream, a ``serve`` replay recorded back into the log it serves from, two hosts on a shared
PostgreSQL log. Each exchange names its observer (:mod:`store.observers`); the *runs* of a task
are its distinct observers, numbered 1..N in the order of their first event in the log. The fold
of a run is the task's events whose exchange belongs to that run, folded alone: a second side
never rewrites the first.

Which run an event is in (:func:`enter_run`, the one rule, for the projection and for a run
read in memory alike):

- an event on an exchange of observer O is in O's run (a new run when O is new to the task);
- an event on no exchange, or on an exchange with no observer (recovery's GetTask or synthetic
  FAILED, a local note of a session), is in the task's latest run at that point of the log;
- a task whose first events had no observer: that run takes the first observer that comes.

A selector names a run: ``TASK@N`` (N from 1), or the task alone for its latest run
(:func:`parse_selector`); ``--run N`` is the same for the commands that take an option.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Final

import msgspec

from a2a_tape.fold.fold import TaskFold, fold_task_events, route
from a2a_tape.fold.stored_copy import stored_copy_differences
from a2a_tape.fold.task_state import RunRef, TaskState
from a2a_tape.fold.views import TaskView
from a2a_tape.store import EventLog, Exchange, Recordings, StoredEvent, TaskSnapshot, decode_item
from a2a_tape.store.errors import A2ATapeError
from a2a_tape.store.events import Note

Seen = tuple[str | None, str | None]
"""An exchange's ``(observer, source)``."""
NO_OBSERVER: Final[Seen] = (None, None)


class BadSelector(A2ATapeError, ValueError):
    """A run selector that names no run (``TASK@x``, ``TASK@9`` of a task with 2 runs)."""


# -- the rule ---------------------------------------------------------------------------------


def enter_run(fold: TaskFold, seen: Seen, pos: int) -> bool:
    """Ready ``fold`` (the task's latest run) for an event at ``pos`` on an exchange of ``seen``:
    a new run starts a fresh state; False when the event is an earlier run's (not this fold's)."""
    runs = fold.s.runs
    observer, source = seen
    if not runs:
        runs.append(RunRef(observer, source, pos))
        return True
    last = runs[-1]
    if observer is None or observer == last.observer:
        return True
    if last.observer is None:  # the first events came on no observer's exchange: they are this one's
        last.observer, last.source = observer, source
        return True
    if any(r.observer == observer for r in runs):
        return False
    fold.s = TaskState(fold.s.task_id, runs=[*runs, RunRef(observer, source, pos)])
    if fold.doc is not None:
        fold.doc = type(fold.doc)()
    return True


def fold_latest(events: Iterable[StoredEvent], observers: Mapping[int, Seen]) -> dict[str, TaskFold]:
    """The latest run of every task, folded in memory from the log (in log order), as the
    projection keeps it; ``observers``: each exchange's (``store.exchange_observers``)."""
    folds: dict[str, TaskFold] = {}
    gc_was_on = gc.isenabled()
    gc.disable()  # no cycles are made here (see replay.fold.fold_stored)
    try:
        for ev in events:
            tid, chunk, item = route(ev.task_id, ev.payload)
            if tid is None:
                continue
            fold = folds.get(tid)
            if fold is None:
                fold = folds[tid] = TaskFold(tid)
            seen = NO_OBSERVER if ev.exchange_id is None else observers.get(ev.exchange_id, NO_OBSERVER)
            if not enter_run(fold, seen, ev.position):
                continue
            fold.fold(
                ev.position, ev.seq, ev.exchange_id, ev.received_at, ev.payload, chunk, item, local=ev.origin == "local"
            )
        return folds
    finally:
        if gc_was_on:
            gc.enable()


# -- runs read whole --------------------------------------------------------------------------


class Run(msgspec.Struct):
    """One run of a task: its events and exchanges, and who recorded it."""

    task_id: str
    number: int
    observer: str | None
    source: str | None
    host: str | None
    first_position: int
    events: list[StoredEvent] = []
    exchanges: list[Exchange] = []

    @property
    def selector(self) -> str:
        return selector(self.task_id, self.number)

    @property
    def binding(self) -> str | None:
        return next((ex.binding for ex in self.exchanges if ex.binding), None)

    @property
    def upstream(self) -> str | None:
        """The URL its first A2A call went to."""
        return next((ex.url for ex in self.exchanges if ex.rpc_method != "agent-card" and ex.url), None)

    def fold(self, *, document: bool = False) -> TaskFold:
        return fold_task_events(self.task_id, self.events, document=document)

    def view(self) -> TaskView:
        # the exchanges that ended, as inspection.steps.closed_exchanges reads them
        closed = {
            ex.id: ex.ended_at if ex.ended_at is not None else 0.0
            for ex in self.exchanges
            if ex.id is not None and (ex.ended_at is not None or ex.outcome is not None)
        }
        return self.fold().view(closed)

    def row(self) -> dict[str, object]:
        """What ``tasks --runs --json`` prints of it."""
        return {
            "run": self.selector,
            "task_id": self.task_id,
            "number": self.number,
            "source": self.source,
            "observer": self.observer,
            "host": self.host,
            "binding": self.binding,
            "upstream": self.upstream,
            "events": len(self.events),
            "first_position": self.first_position,
            "last_position": self.events[-1].position if self.events else self.first_position,
        }


class StoredCopy(msgspec.Struct, frozen=True):
    """The agent's stored copy of a run's task (a GetTask answer after the stream ended it, the
    last one): evidence, never folded into the run's channels. ``state`` and ``final_answer`` as
    the copy alone holds them; ``differences``: how it differs from what was streamed (the
    fold's ``stored-copy-differs``, each way; empty: the same)."""

    position: int
    state: str
    final_answer: str | None
    differences: list[str]


def stored_copy(run: Run) -> StoredCopy | None:
    """The run's stored copy (:meth:`TaskFold.takes_as_stored_copy`: the fold's own rule), if it has one."""
    fold = TaskFold(run.task_id)
    found = None
    for ev in run.events:
        item = decode_item(bytes(ev.payload))
        body = item.body
        if type(body) is TaskSnapshot and fold.takes_as_stored_copy(ev.exchange_id, local=ev.origin == "local"):
            alone = TaskFold(run.task_id)
            alone.apply(ev, item)
            view = alone.view()
            state = body.state if body.state != "unknown" else view.state
            found = StoredCopy(ev.position, state, view.final_answer, stored_copy_differences(fold.s, body))
        fold.apply(ev, item)
    return found


def split_runs(task_id: str, events: Sequence[StoredEvent], exchanges: Iterable[Exchange]) -> list[Run]:
    """The runs of a task from its events (log order) and exchanges, by :func:`enter_run`'s rule."""
    by_id = {ex.id: ex for ex in exchanges if ex.id is not None}
    runs: list[Run] = []
    index: dict[str, Run] = {}
    placed: dict[int, Run] = {}  # exchange id -> the run it was put in
    for ev in events:
        ex = by_id.get(ev.exchange_id) if ev.exchange_id is not None else None
        observer = ex.observer if ex is not None else None
        run = _run_of(task_id, runs, index, ex, observer, ev.position)
        run.events.append(ev)
        if ex is not None and ex.id not in placed:
            placed[ex.id] = run  # type: ignore[index]  # by_id holds exchanges with an id
            run.exchanges.append(ex)
    anonymous = next((run for run in runs if run.observer is None), None)
    for ex_id, ex in by_id.items():  # an exchange without events (a card, a failure) is its observer's
        owner = index.get(ex.observer) if ex.observer is not None else None
        if owner is None and ex.observer is not None:
            # an observer with no event of the task: the run no observer's event made, if there is one
            # (a task known by its pushes alone: the config call the proxy relayed for the pushes it took)
            owner = anonymous
        if owner is not None and ex_id not in placed:
            owner.exchanges.append(ex)
    for run in runs:
        run.exchanges.sort(key=lambda e: e.id or 0)
    return runs


def _run_of(
    task_id: str, runs: list[Run], index: dict[str, Run], ex: Exchange | None, observer: str | None, pos: int
) -> Run:
    if observer is not None:
        found = index.get(observer)
        if found is not None:
            return found
    if runs and (observer is None or runs[-1].observer is None):
        last = runs[-1]
        if observer is not None:  # an anonymous first run takes the first observer that comes
            last.observer, last.source, last.host = observer, ex.source if ex else None, ex.host if ex else None
            index[observer] = last
        return last
    run = Run(
        task_id,
        len(runs) + 1,
        observer,
        ex.source if ex is not None else None,
        ex.host if ex is not None else None,
        pos,
    )
    runs.append(run)
    if observer is not None:
        index[observer] = run
    return run


SERVED_NOTE: Final = "serve-run"
"""The action of the local note ``verify --update`` appends to a run it adopts: from then on that run is
the one ``serve`` replays and ``verify`` compares with (:func:`served_run`)."""


def adopted(run: Run, before: int | None = None) -> bool:
    """Whether ``verify --update`` made this run the one served (its own note says so); ``before``:
    as the log stood before that position (a note after it not counted)."""
    for ev in run.events:
        if before is not None and ev.position >= before:
            break
        if ev.origin == "local" and SERVED_NOTE.encode() in ev.payload:
            body = decode_item(ev.payload).body
            if isinstance(body, Note) and body.action == SERVED_NOTE:
                return True
    return False


def served_run(runs: Sequence[Run], before: int | None = None) -> Run | None:
    """The run ``serve`` replays and ``verify`` compares with: the latest one ``verify --update``
    adopted, else the first that is not a verify run (the agent as it was recorded), else the first.
    ``before``: as it was before that position of the log (the runs begun, the notes written by then):
    the run a verify run that began there was compared with."""
    if before is not None:
        runs = [r for r in runs if r.first_position < before]
    if not runs:
        return None
    chosen = next((r for r in reversed(runs) if r.source == "verify" and adopted(r, before)), None)
    return chosen or next((r for r in runs if r.source != "verify"), runs[0])


def task_runs(st: Recordings, task_id: str) -> list[Run]:
    """The runs of a task in the log, in order (none: no such task)."""
    return split_runs(task_id, st.read_task(task_id), st.exchanges(task_id))


# -- selectors --------------------------------------------------------------------------------


def selector(task_id: str, number: int) -> str:
    """The notation of run ``number`` of a task: ``TASK@N``."""
    return f"{task_id}@{number}"


def parse_selector(text: str) -> tuple[str, int | None]:
    """``TASK@N`` as ``(TASK, N)``; a task alone as ``(TASK, None)`` (its latest run).
    :class:`BadSelector` when what follows the last ``@`` is not a run number."""
    task, at, number = text.rpartition("@")
    if not at:
        return text, None
    if not number.isdigit() or int(number) < 1 or not task:
        raise BadSelector(f"bad run selector '{text}': TASK@N with N a run number from 1 (see 'a2a-tape tasks --runs')")
    return task, int(number)


def read_selector(st: EventLog, text: str, run: int | None = None) -> tuple[str, int | None]:
    """What a selector names, as every view reads it (the CLI's ``TASK@N`` and ``--run N``, the
    UI's ``/tasks/TASK@N``): ``(task, N)``, or ``(task, None)`` for the latest run. ``task`` is as
    written (a prefix is the caller's to resolve); a task id that holds an ``@`` of its own names
    that task. :class:`BadSelector` for a selector that names no run number, or ``TASK@N`` with
    another ``run``."""
    if text and st.has_task(text):
        task, number = text, None
    else:
        task, number = parse_selector(text)
    if run is not None:
        if number is not None and number != run:
            raise BadSelector(f"{text} and --run {run} name two runs: give one")
        number = run
    return task, number


def pick_run(runs: Sequence[Run], task_id: str, number: int | None) -> Run:
    """Run ``number`` of these (the latest when None); :class:`BadSelector` when there is none."""
    if not runs:
        raise BadSelector(f"unknown task: {task_id} (see 'a2a-tape tasks')")
    if number is None:
        return runs[-1]
    if number > len(runs):
        n = len(runs)
        have = selector(task_id, 1) if n == 1 else f"{selector(task_id, 1)} .. {selector(task_id, n)}"
        raise BadSelector(f"task {task_id} has {n} run{'s' if n != 1 else ''} ({have}): no run {number}")
    return runs[number - 1]


class RunLog:
    """The log as one run of a task shows it: that task's events and exchanges are the run's, the
    rest of the log as it is. What the exports read a run through (``export TASK@N``): each
    format reads a task from a log, so a run is exported by every format alike."""

    def __init__(self, st: Recordings, run: Run) -> None:
        self._st = st
        self.run = run

    @property
    def whole(self) -> Recordings:
        """The log itself, every run of every task (what a run's OTLP spans link to)."""
        return self._st

    def read_task(self, task_id: str) -> list[StoredEvent]:
        return list(self.run.events) if task_id == self.run.task_id else self._st.read_task(task_id)

    def iter_task(
        self, task_id: str, *, after: int = 0, limit: int | None = None, batch: int = 5000
    ) -> Iterator[StoredEvent]:
        if task_id != self.run.task_id:
            return self._st.iter_task(task_id, after=after, limit=limit, batch=batch)
        found = [ev for ev in self.run.events if ev.position > after]
        return iter(found if limit is None else found[:limit])

    def exchanges(self, task_id: str | None = None, *, after_id: int = 0) -> list[Exchange]:
        if task_id != self.run.task_id:
            return self._st.exchanges(task_id, after_id=after_id)
        return [ex for ex in self.run.exchanges if (ex.id or 0) > after_id]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._st, name)
