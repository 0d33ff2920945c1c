"""The answer as the client saw it after the first ``n`` events of a task: the scrubber's view.

The one fold (:class:`fold.fold.TaskFold`) over a prefix of the task's events. Folding from the
first event at every move would cost a long task's whole length; so the fold is kept at every
``EVERY`` events it passes (its state dumped, as the projection keeps it) and a position is reached
from the nearest kept state before it, reading only the events in between (a page of the log).
Playing forward is one event per step. A few tasks are kept, the least recently used dropped.
"""

from __future__ import annotations

import bisect
import threading
from collections import OrderedDict
from collections.abc import Callable

import msgspec

from a2a_tape.fold.fold import TaskFold
from a2a_tape.fold.views import TaskView
from a2a_tape.store import EventLog, StoredEvent

EVERY = 1024
"""Events between two kept states of one task's fold."""
TASKS = 4
"""Tasks whose kept states stay in memory."""
STATES = 128
"""Kept states per task at most (beyond, the ones farthest apart are thinned out)."""


class At(msgspec.Struct, frozen=True):
    """The fold after ``n`` events: the view, where it stands, and how long until the next event."""

    n: int
    total: int
    position: int  # the log position of the n-th event (0 before the first)
    offset: float  # seconds from the first event to the n-th
    next_delay: float | None  # seconds from the n-th event to the next one (None at the end)
    view: TaskView

    @property
    def label(self) -> str:
        if self.n == 0:
            return f"before the first of {self.total} events"
        return f"after event {self.n} of {self.total} (position {self.position}, +{self.offset:.3f} s)"


class _Task:
    def __init__(self, task_id: str) -> None:
        self.marks: list[tuple[int, int]] = [(0, 0)]  # (n, position) of each kept state, ascending
        self.states: dict[int, bytes] = {0: TaskFold(task_id).dump()}


class Scrubber:
    """Folds of task prefixes, for every page of the app (thread-safe)."""

    def __init__(self, store: EventLog) -> None:
        self.store = store
        self._tasks: OrderedDict[str, _Task] = OrderedDict()
        self._lock = threading.Lock()

    def at(self, task_id: str, n: int, total: int, *, final: TaskView | None = None) -> At:
        """The fold after ``min(n, total)`` events of ``task_id`` (``total``: its events now).
        ``final``: the task's view after all of them, when the caller has it (the projection's):
        the end of a long task is then not folded again."""
        n = max(0, min(n, total))
        if final is not None and n == total == final.events:
            return At(total, total, final.last_position, final.last_at - final.first_at, None, final)
        return self._fold(task_id, total, lambda mark: mark[0] <= n, lambda done, _: done >= n)

    def at_position(self, task_id: str, position: int, total: int) -> At:
        """The fold after the task's events up to log position ``position``."""
        return self._fold(task_id, total, lambda mark: mark[1] <= position, lambda _, ev: ev.position > position)

    def _fold(
        self,
        task_id: str,
        total: int,
        usable: Callable[[tuple[int, int]], bool],
        stop: Callable[[int, StoredEvent], bool],
    ) -> At:
        """Fold from the last kept state ``usable`` says may be used, until ``stop(done, next event)``."""
        with self._lock:
            kept = self._tasks.get(task_id)
            if kept is None:
                kept = self._tasks[task_id] = _Task(task_id)
                while len(self._tasks) > TASKS:
                    self._tasks.popitem(last=False)
            self._tasks.move_to_end(task_id)
            start = [m for m in kept.marks if usable(m)][-1][0]
            state = kept.states[start]
        fold = TaskFold.load(state)
        done = start
        nxt = None
        for ev in self.store.iter_task(task_id, after=fold.s.last_position, batch=EVERY):
            if done >= total or stop(done, ev):
                nxt = ev.received_at
                break
            fold.apply(ev)
            done += 1
            if done % EVERY == 0:
                self._keep(kept, (done, ev.position), fold.dump())
        s = fold.s
        return At(
            n=done,
            total=total,
            position=s.last_position if s.events else 0,
            offset=(s.last_at - s.first_at) if s.events else 0.0,
            next_delay=None if nxt is None or not s.events else max(0.0, nxt - s.last_at),
            view=fold.view(),
        )

    def _keep(self, kept: _Task, mark: tuple[int, int], state: bytes) -> None:
        with self._lock:
            if mark[0] in kept.states:
                return
            bisect.insort(kept.marks, mark)
            kept.states[mark[0]] = state
            if len(kept.marks) > STATES:  # drop every other kept state (the first stays)
                for n, _ in kept.marks[1::2]:
                    del kept.states[n]
                kept.marks = kept.marks[::2]

    def forget(self, task_id: str) -> None:
        with self._lock:
            self._tasks.pop(task_id, None)
