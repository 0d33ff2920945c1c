"""The task views inspection reads (``tasks``, ``channels``): the persisted projection, brought up
to date first, or, for a log this process cannot write (read-only media, a read-only server)
whose projection is behind, the same fold run in memory.

A view also needs the task's ended exchanges (a stream ends when its exchange does, see
:meth:`fold.fold.TaskFold.view`): :func:`closed` reads them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, nullcontext

from a2a_tape.fold.fold import RunRef
from a2a_tape.fold.projection import Projector
from a2a_tape.fold.runs import fold_latest
from a2a_tape.fold.views import TaskView
from a2a_tape.inspection.steps import closed_exchanges
from a2a_tape.store import ExchangeLog, ReadOnlyStore, Recordings, Store

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
    """:func:`task_view`, and the task's runs (the view is the last one's)."""
    proj = task_projection(st, folding=folding)
    view = proj.view(task_id, closed(st, task_id))
    if isinstance(proj, InMemoryProjection):
        return view, proj.runs(task_id)
    fold = proj.fold(task_id)
    return view, [] if fold is None else fold.s.runs
