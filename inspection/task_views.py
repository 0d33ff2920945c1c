"""The task views inspection reads (``tasks``, ``channels``): the persisted projection, brought up
to date first, or, for a log this process cannot write (read-only media, a read-only server)
whose projection is behind, the same fold run in memory.

A view also needs the task's ended exchanges (a stream ends when its exchange does, see
:meth:`fold.fold.TaskFold.view`): :func:`closed` reads them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext

from a2a_tape.fold.fold import fold_task_events
from a2a_tape.fold.projection import Projector
from a2a_tape.fold.runs import fold_latest
from a2a_tape.fold.task_state import RunRef
from a2a_tape.fold.views import TaskView
from a2a_tape.inspection.steps import closed_exchanges
from a2a_tape.store import Exchange, ExchangeLog, ReadOnlyStore, Recordings, Store, StoredEvent
from a2a_tape.wire.push_configs import PUSH

Folding = Callable[[int], AbstractContextManager[object]]
"""``folding(behind)``: entered while ``behind`` new events are folded into the projection (a
spinner, for a caller that shows one)."""


def quietly(behind: int) -> AbstractContextManager[object]:
    """The :data:`Folding` that shows nothing."""
    return nullcontext()


class InMemoryProjection:
    """The projection folded in memory, for a log we may not write to. Reads as a :class:`Projector`."""

    def __init__(self, st: Recordings) -> None:
        observers = {ex.id: (ex.observer, ex.source) for ex in st.exchanges() if ex.id is not None}
        self._folds = fold_latest(st.read_from(0), observers)  # each task's latest run, as the projection

    def view(self, task_id: str, closed: Mapping[int, float] | None = None) -> TaskView | None:
        fold = self._folds.get(task_id)
        return None if fold is None else fold.view(closed)

    def runs(self, task_id: str) -> list[RunRef]:
        """The task's runs (its view is the latest's)."""
        fold = self._folds.get(task_id)
        return [] if fold is None else fold.s.runs

    def views(self, closed: Mapping[int, float] | None = None) -> Iterator[TaskView]:
        """Every task's view, in task id order."""
        return iter(sorted((f.view(closed) for f in self._folds.values()), key=lambda v: v.task_id))


def task_projection(st: Store, *, folding: Folding = quietly) -> Projector | InMemoryProjection:
    """The persisted projection, brought up to date; folded in memory when the log cannot be
    written and the stored projection is behind."""
    proj = Projector(st)
    try:
        with folding(st.last_position() - proj.cursor()):
            proj.catch_up()
    except ReadOnlyStore:
        return InMemoryProjection(st)
    return proj


def closed(st: ExchangeLog, task_id: str | None = None) -> dict[int, float]:
    """The exchanges (of one task, or all) that ended: by id, when."""
    return closed_exchanges(st.exchanges(task_id))


def task_view(st: Store, task_id: str, *, folding: Folding = quietly) -> TaskView | None:
    """What ``channels`` shows of one task: its latest run (None: no such task in the projection)."""
    return task_view_runs(st, task_id, folding=folding)[0]


def task_view_runs(st: Store, task_id: str, *, folding: Folding = quietly) -> tuple[TaskView | None, list[RunRef]]:
    """:func:`task_view`, and the task's runs (the view is the last one's). A task whose client never
    streamed and that was pushed to a webhook is folded with its pushes as if they had been streamed
    (:func:`with_pushes`)."""
    exchanges = st.exchanges(task_id)
    if any(ex.role == PUSH for ex in exchanges) and not any(ex.streaming for ex in exchanges):
        return with_pushes(task_id, st.read_task(task_id), exchanges), []
    proj = task_projection(st, folding=folding)
    view = proj.view(task_id, closed(st, task_id))
    if isinstance(proj, InMemoryProjection):
        return view, proj.runs(task_id)
    fold = proj.fold(task_id)
    return view, [] if fold is None else fold.s.runs


def with_pushes(task_id: str, events: Sequence[StoredEvent], exchanges: Sequence[Exchange]) -> TaskView:
    """The task folded from its events and its pushes (each an exchange row: the agent's
    StreamResponse as its request body), in arrival order, a push as a streamed item of its own
    exchange; it is not an event, so it takes the position of the event before it. A push's
    exchange is no stream that ended: the view is not told it closed."""
    pushed = sorted((ex for ex in exchanges if ex.role == PUSH and ex.id is not None), key=lambda ex: ex.started_at)
    merged: list[StoredEvent] = []
    last = 0
    for ev in events:
        while pushed and pushed[0].started_at <= ev.received_at:
            merged.append(_as_event(task_id, pushed.pop(0), last))
        merged.append(ev)
        last = ev.position
    merged += [_as_event(task_id, ex, last) for ex in pushed]
    ended = closed_exchanges([ex for ex in exchanges if ex.role != PUSH])
    return fold_task_events(task_id, merged).view(ended)


def _as_event(task_id: str, ex: Exchange, position: int) -> StoredEvent:
    return StoredEvent(position, task_id, 0, ex.id, None, ex.request_body, ex.started_at, None, "upstream")
