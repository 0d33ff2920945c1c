"""Doctor's findings kept per task, as a projection: ``a2a-tape doctor`` (every task) reads
them instead of examining the whole log again.

One row per task: its findings (what :func:`inspection.doctor.findings` says, called as it is:
the rules stay in :mod:`inspection.doctor`), their counts, the task's first position (the report's
order) and whether the task is *settled* (every exchange of it has ended). Bringing it up to
date re-examines only the tasks with events after the cursor (``projection_cursors``, name
``doctor``) and the tasks not settled yet (an exchange still open when they were examined may
end later, which changes what doctor says without a new event). The cursor moves with the last
rows of a catch-up, in one transaction; rows written before it are re-examined after a crash
(the same rows again: a task's findings are a function of its events and exchanges), so an
index kept incrementally and one rebuilt from nothing hold the same rows. When the rules change
(a new a2a-tape) the rows are dropped and made again: their version is a digest of that code.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, cast

import msgspec

from a2a_tape.fold.catch_up import ProjectionMoved, catch_up_retrying, code_digest
from a2a_tape.inspection import doctor as _doctor
from a2a_tape.store import Durability, Exchange, FindingsStore, Recordings, Store
from a2a_tape.store.errors import A2ATapeError
from a2a_tape.store.indexes import DOCTOR_CURSOR, FindingsRow

if TYPE_CHECKING:  # imported when a pool is started: a CLI that never starts one does not pay for them
    from concurrent.futures import Future, ProcessPoolExecutor

Progress = Callable[[int, int], None]
_VERSION_KEY = "projection:doctor:version"
_encode = msgspec.msgpack.Encoder().encode
_decode = msgspec.msgpack.Decoder(list[_doctor.Finding]).decode
PARALLEL_MIN_TASKS = 1000
"""A catch-up with at least this many tasks to examine shares them with worker processes (one
per core, at most 4): tasks are independent, and doctor's rules are Python, one core each."""


def _code_digest() -> str:
    """A digest of the modules whose rules decide the findings."""
    from a2a_tape.fold import channel_view, fold, lifecycle, profiles, projection, runs, stored_copy, task_state, views
    from a2a_tape.inspection import steps as inspection

    modules = (_doctor, inspection, fold, lifecycle, stored_copy, channel_view, task_state, projection, profiles, runs)
    return code_digest(b"doctor-1", (*modules, views))


def task_row(store: Recordings, task_id: str) -> FindingsRow | None:
    """Examine one task as doctor does; None when it has no events (any more)."""
    events = store.read_task(task_id)
    if not events:
        return None
    exchanges = store.exchanges(task_id)
    findings = _doctor.run_findings(task_id, events, exchanges)
    errors = sum(1 for f in findings if f.level == "error")
    settled = all(ex.ended_at is not None for ex in exchanges)
    first = min(ev.position for ev in events)
    return (task_id, first, int(settled), errors, len(findings) - errors, _encode(findings))


class DoctorIndex:
    """The findings projection of one store."""

    def __init__(
        self,
        store: FindingsStore,
        *,
        chunk: int = 250,
        workers: int | None = None,
        parallel_min: int = PARALLEL_MIN_TASKS,
    ) -> None:
        self.store = store
        self.chunk = max(1, chunk)
        self.workers = workers if workers is not None else min(os.cpu_count() or 1, 4)
        self.parallel_min = parallel_min

    def cursor(self) -> int:
        return self.store.projection_cursor(DOCTOR_CURSOR)

    def catch_up(self, *, progress: Progress | None = None) -> int | None:
        """Re-examine the tasks touched since the cursor (and the unsettled ones); return how
        many (None: the store cannot be written, e.g. a read-only file)."""
        return catch_up_retrying("doctor", lambda: self._catch_up(progress))

    def _catch_up(self, progress: Progress | None) -> int:
        st = self.store
        digest = _code_digest()
        if st.get_meta(_VERSION_KEY) != digest:
            st.findings_reset()
            st.set_meta(_VERSION_KEY, digest)
        start = st.projection_cursor(DOCTOR_CURSOR)
        end = st.last_position()
        touched = st.tasks_touched(start, end) if end > start else []
        todo = list(dict.fromkeys([*st.findings_unsettled(), *touched]))
        if not todo:
            if end > start and not st.findings_commit(end, [], expect=start):
                raise ProjectionMoved("doctor")
            return 0
        parts = [todo[i : i + self.chunk] for i in range(0, len(todo), self.chunk)]
        done = 0
        with _Examiners(st, len(todo), self.workers, self.parallel_min) as examine:
            for n, rows in enumerate(examine(parts)):
                # the cursor moves with the last part only: a crash before it redoes them all
                if not st.findings_commit(end if n == len(parts) - 1 else None, rows, expect=start):
                    raise ProjectionMoved("doctor")
                done += len(parts[n])
                if progress is not None:
                    progress(done, len(todo))
        return len(todo)

    def rebuild(self, *, progress: Progress | None = None) -> int | None:
        self.store.findings_reset()
        return self.catch_up(progress=progress)

    def report(self) -> _doctor.Report:
        """The report of every task, as :func:`inspection.doctor.diagnose` gives it."""
        tasks, errors, warnings = self.store.findings_totals()
        findings = [f for row in self.store.findings_rows() for f in _decode(row[5])]
        return _doctor.Report(tasks=tasks, errors=errors, warnings=warnings, findings=findings)

    def rows(self) -> list[FindingsRow]:
        """Every row, in report order (what incremental == rebuild compares)."""
        return list(self.store.findings_rows(faulty_only=False))


class _Examiners:
    """Examines parts of the tasks in order: this process takes every n-th part, worker processes
    (``spawn``, each with its own connection to the store) the others; the parts come back in order,
    so the parent commits them in order. Without worker processes (or for a short list), this one."""

    def __init__(self, store: FindingsStore, tasks: int, workers: int, parallel_min: int) -> None:
        self.store = store
        self.n = workers if tasks >= parallel_min and store.backend in ("sqlite", "postgres") else 1
        self.pool: ProcessPoolExecutor | None = None

    def __enter__(self) -> Callable[[list[list[str]]], Iterator[list[FindingsRow]]]:
        if self.n > 1:
            import concurrent.futures
            import multiprocessing

            try:
                ctx = multiprocessing.get_context("spawn")  # never fork a process holding connections
                self.pool = concurrent.futures.ProcessPoolExecutor(self.n - 1, mp_context=ctx)
            except Exception:  # noqa: BLE001 - no worker processes here: examine in this one
                self.n, self.pool = 1, None
        return self.examine

    def __exit__(self, *exc: object) -> None:
        if self.pool is not None:
            self.pool.shutdown(cancel_futures=True)

    def examine(self, parts: list[list[str]]) -> Iterator[list[FindingsRow]]:
        st = self.store
        futures: dict[int, Future[list[FindingsRow]]] = {}
        if self.pool is not None:
            loc = str(st.path)
            try:
                futures = {
                    i: self.pool.submit(_examine, loc, st.durability, part)
                    for i, part in enumerate(parts)
                    if i % self.n
                }
            except Exception:  # noqa: BLE001 - the pool could not start: examine in this one
                futures = {}
        for i, part in enumerate(parts):
            future = futures.get(i)
            rows: list[FindingsRow] | None = None
            if future is not None:
                try:
                    rows = future.result()
                except Exception:  # noqa: BLE001 - a worker died: examine that part here
                    rows = None
            if rows is None:
                rows = [r for r in (task_row(st, t) for t in part) if r is not None]
            yield rows


_worker_stores: dict[str, Store] = {}


def _examine(location: str, durability: Durability, task_ids: list[str]) -> list[FindingsRow]:
    """One part of the tasks, examined in a worker process (its store opened once, then kept)."""
    st = _worker_stores.get(location)
    if st is None:
        from a2a_tape.store import open_store

        st = _worker_stores[location] = open_store(location, create=False, durability=durability)
    return [r for r in (task_row(st, t) for t in task_ids) if r is not None]


LIST_CATCH_UP = 200
"""A list (``tasks``, the UI's) brings the findings kept in the log up to date first when at most
this many tasks wait to be examined (a log ``doctor`` has examined, grown since): then each row's
count is read, not examined again. Further behind (a big log doctor never examined), each listed
task is examined afresh: the list costs what it shows."""


class FaultCounter:
    """doctor's counts of tasks as every list shows them (:func:`inspection.doctor.task_fault_count`):
    from the findings kept in the log when they are current, else examined afresh."""

    def __init__(self, store: Recordings, *, catch_up_at_most: int = LIST_CATCH_UP) -> None:
        self.store = store
        self.at_most = catch_up_at_most
        self._kept: FindingsStore | None | bool = False  # False: not decided yet

    def _current(self) -> FindingsStore | None:
        """The store, when its findings are current (brought up to date if few tasks wait)."""
        st = self.store
        if not hasattr(st, "findings_counts"):  # a store that keeps no findings
            return None
        kept = cast("Store", st)
        try:
            if kept.get_meta(_VERSION_KEY) != _code_digest():
                return None
            start, end = kept.projection_cursor(DOCTOR_CURSOR), kept.last_position()
            if end == start:
                return kept if not kept.findings_unsettled() else self._caught_up(kept)
            if len(kept.tasks_touched(start, end)) + len(kept.findings_unsettled()) > self.at_most:
                return None
            return self._caught_up(kept)
        except A2ATapeError:  # locked, read-only: examine afresh
            return None

    @staticmethod
    def _caught_up(st: Store) -> FindingsStore | None:
        return st if DoctorIndex(st, workers=1).catch_up() is not None else None

    def __call__(self, task_id: str, exchanges: Iterable[Exchange] | None = None) -> _doctor.FaultCount:
        if self._kept is False:
            self._kept = self._current()
        kept = self._kept
        if isinstance(kept, bool) or kept is None:
            return _doctor.task_fault_count(self.store, task_id, exchanges)
        got = kept.findings_counts(task_id)
        if got is None:  # a task with no events (any more)
            return _doctor.task_fault_count(self.store, task_id, exchanges)
        return _doctor.FaultCount(*got)


def doctor_report(
    store: Store, task_id: str | None = None, *, progress: Progress | None = None, run: int | None = None
) -> _doctor.Report:
    """What ``a2a-tape doctor`` reports: one task examined afresh; every task from the findings
    kept in the log, brought up to date first (``progress(done, total)``: tasks examined), or
    examined afresh when the log cannot keep them (read-only)."""
    if task_id is None:
        index = DoctorIndex(store)
        if index.catch_up(progress=progress) is not None:
            return index.report()
    return _doctor.diagnose(store, task_id, run)
