"""The task list, newest first, a page at a time: an indexed query on the task projection.

``a2a-tape tasks`` costs what it shows: the task index (``store.task_index_*``, kept by
:class:`fold.projection.Projector` in the same transaction as the task rows) gives the keys
of the newest tasks by last event, already filtered; only those rows are loaded and viewed.
:func:`list_tasks` merges in the lone Message replies (:mod:`inspection.messages`), which
have no task to index, and reads the fold in memory when the index cannot be brought up to date.
"""

from __future__ import annotations

import datetime as _dt
import heapq
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import islice
from typing import NamedTuple

import msgspec

from a2a_tape.capture.lineage import carried, infer
from a2a_tape.capture.lineage import families as inferred_families
from a2a_tape.fold.fold import TaskFold
from a2a_tape.fold.projection import Projector
from a2a_tape.fold.task_state import RunRef, known_by_pushes
from a2a_tape.fold.views import TaskView
from a2a_tape.inspection.doctor import FaultCount
from a2a_tape.inspection.doctor_index import FaultCounter
from a2a_tape.inspection.messages import LoneMessage, lone_messages
from a2a_tape.inspection.steps import closed_exchanges
from a2a_tape.inspection.task_views import Folding, InMemoryProjection, quietly, task_projection, with_pushes
from a2a_tape.store import Exchange, ReadOnlyStore, Recordings, Store, TaskIndexStore, normalise_state
from a2a_tape.store.events import ALL_STATES
from a2a_tape.store.methods import binding_and_version
from a2a_tape.wire.trace_context import ExchangeTrace, families


def count(
    store: TaskIndexStore,
    name: str = "tasks",
    *,
    states: Iterable[str] | None = None,
    context: str | None = None,
    since: float | None = None,
) -> int:
    """How many tasks pass the filters."""
    return store.task_index_count(name, states=states, context=context, since=since)


def newest(
    store: TaskIndexStore,
    name: str = "tasks",
    *,
    limit: int | None = None,
    states: Iterable[str] | None = None,
    context: str | None = None,
    since: float | None = None,
    batch: int = 200,
    closed: Callable[[list[str]], Mapping[int, float]] | None = None,
) -> Iterator[TaskView]:
    """The views of the tasks passing the filters, newest last event first, ``limit`` at most,
    read ``batch`` at a time (memory stays flat however many are listed). ``closed(task_ids)``:
    the exchanges of those tasks that ended (see :meth:`fold.fold.TaskFold.view`)."""
    if limit is not None:
        batch = max(1, min(batch, limit))  # a short listing reads no more rows than it shows
    keyed = keyed_newest(store, name, states=states, context=context, since=since, batch=batch, closed=closed)
    return (view for view, _ in islice(keyed, limit))


def keyed_newest(
    store: TaskIndexStore,
    name: str = "tasks",
    *,
    before: int | None = None,
    states: Iterable[str] | None = None,
    context: str | None = None,
    since: float | None = None,
    batch: int = 200,
    closed: Callable[[list[str]], Mapping[int, float]] | None = None,
    runs: dict[str, list[RunRef]] | None = None,
    pushed: Callable[[str], TaskView] | None = None,
) -> Iterator[tuple[TaskView, int]]:
    """:func:`newest` with each view's key in the index: passed back as ``before``, it goes on
    after that task (paging by key: a page deep in a long list costs what the first one does).
    A view is the task's latest run; ``runs`` (when given) receives each task's runs. ``pushed``:
    the view of a task known by its pushes alone folded with them (its final answer is theirs,
    as ``channels`` shows it)."""
    wanted = None if states is None else sorted(set(states))
    while True:
        keys = store.task_index_page(name, limit=batch, before=before, states=wanted, context=context, since=since)
        if not keys:
            return
        ids = [k for k, _ in keys]
        raw = store.projection_load(name, ids)
        ended = closed(ids) if closed is not None else None
        for key, position in keys:
            row = raw.get(key)
            if row is None:  # pragma: no cover - rows and index rows commit together
                continue
            try:
                fold = TaskFold.load(row)
                view = fold.view(ended)
            except (msgspec.DecodeError, msgspec.ValidationError):  # pragma: no cover - caught by catch_up
                continue
            if pushed is not None and known_by_pushes(fold.s) and view.final_answer is None:
                view = msgspec.structs.replace(view, final_answer=pushed(key).final_answer)
            if runs is not None:
                runs[key] = fold.s.runs
            yield view, position
        if len(keys) < batch:
            return
        before = keys[-1][1]


def parse_since(value: str | None) -> float | None:
    """Unix seconds (``1796004536.5``) or an ISO time (``2026-11-30T02:08``, ``...Z``; UTC when no zone).

    Raises ValueError for anything that is not a real moment (nan, inf, years out of range).
    """
    if value is None:
        return None
    text = value.strip()
    try:
        moment = float(text)
    except ValueError:
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            parsed = _dt.datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(f"'{value}' is neither unix seconds nor an ISO time (2026-11-30T02:08:00Z)") from None
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=_dt.UTC)
        return parsed.timestamp()
    try:
        _dt.datetime.fromtimestamp(moment, _dt.UTC)  # nan, inf and years past 9999 fail here
    except (ValueError, OverflowError, OSError):
        raise ValueError(f"'{value}' is not a time (unix seconds from 0 to year 9999)") from None
    return moment


# -- the listing of ``tasks``: tasks and lone Message replies, newest first -------------------------


class TaskRow(msgspec.Struct):
    """One line of ``tasks --json``: a task, or a lone Message reply (``kind`` ``message``: no
    task, so ``task_id`` and ``state`` are null; ``message_id`` / ``context_id`` name it)."""

    task_id: str | None
    context_id: str | None
    state: str | None
    events: int
    first_at: float
    last_at: float
    profile: str
    faults: int  # doctor's findings of the task (``doctor TASK``): errors + warnings
    final_answer: str | None
    kind: str = "task"
    message_id: str | None = None
    bindings: list[str] = []  # how its exchanges went: jsonrpc, http+json (store.methods.BINDINGS)
    trace_context: list[ExchangeTrace] = []  # the traceparent / tracestate / baggage its requests carried
    parent: str | None = None  # the task whose agent called this one (by trace context: wire.trace_context.families)
    parent_inferred: str | None = None  # set when the parent is inferred from the log, not trace context: the basis
    children: list[str] = []  # the tasks this one's agent called
    runs: int = 1  # how many runs the task has (fold.runs); the row shows the latest
    sources: list[str] = []  # the source of each run, in order (client, proxy, in-process, replay, import)
    errors: int = 0  # of ``faults``, doctor's errors
    warnings: int = 0  # and its warnings


class TaskFilter(msgspec.Struct, frozen=True):
    """Which tasks a listing keeps: in one of ``states``, of ``context``, active ``since`` (unix seconds)."""

    states: frozenset[str] | None = None
    context: str | None = None
    since: float | None = None

    @property
    def filters(self) -> bool:
        return bool(self.states) or self.context is not None or self.since is not None

    def keeps(self, v: TaskView) -> bool:
        return (
            (self.states is None or v.state in self.states)
            and (self.context is None or v.context_id == self.context)
            and (self.since is None or v.last_at >= self.since)
        )

    def keeps_message(self, m: LoneMessage) -> bool:
        """A lone Message has no task state: a filter on states leaves it out."""
        return (
            self.states is None
            and (self.context is None or m.context_id == self.context)
            and (self.since is None or m.events[-1].received_at >= self.since)
        )


def parse_states(values: Iterable[str]) -> tuple[str, ...]:
    """Task states as a user writes them (repeated, or comma-separated; either dialect's spelling),
    each once, in the order given. ValueError names a word that is no task state."""
    states: dict[str, None] = {}
    for value in values:
        for word in (w.strip() for w in value.split(",")):
            if not word:
                continue
            state = normalise_state(word)
            if state == "unknown" and word.lower() != "unknown":
                raise ValueError(f"unknown task state '{word}' (one of: {', '.join(ALL_STATES)})")
            states[state] = None
    return tuple(states)


class Listing(NamedTuple):
    total: int  # how many rows pass the filter (tasks and lone Messages)
    rows: Iterator[TaskRow]  # the newest ``limit`` of them, newest last event first, read as they are iterated


def keyed_listing(
    st: Store,
    where: TaskFilter,
    *,
    before: int | None = None,
    batch: int = 200,
    closed: Callable[[list[str]], Mapping[int, float]] | None = None,
    lone: list[LoneMessage] | None = None,
    runs: dict[str, list[RunRef]] | None = None,
) -> Iterator[tuple[TaskView | LoneMessage, int]]:
    """What ``tasks`` lists from the task index: the tasks and the lone Message replies passing
    ``where``, newest last event first, each with its key (its last event's position): passed
    back as ``before``, the listing goes on after it (the UI's pages). ``lone``: the lone Message
    replies, when the caller has read them already."""
    if lone is None:
        lone = lone_messages(st, st.exchanges_without_task())
    states = None if where.states is None else sorted(where.states)
    tasks = keyed_newest(
        st,
        before=before,
        states=states,
        context=where.context,
        since=where.since,
        batch=batch,
        closed=closed,
        runs=runs,
        pushed=lambda task_id: with_pushes(task_id, st.read_task(task_id), st.exchanges(task_id)),
    )
    return _newest_first(tasks, [m for m in lone if where.keeps_message(m)], before)


def _newest_first(
    tasks: Iterable[tuple[TaskView, int]], lone: Iterable[LoneMessage], before: int | None = None
) -> Iterator[tuple[TaskView | LoneMessage, int]]:
    """Tasks (with their keys, newest first) and lone Message replies (keyed by their last
    event), merged newest first, after the key ``before``."""
    messages = sorted(
        ((m, m.events[-1].position) for m in lone if before is None or m.events[-1].position < before),
        key=lambda p: p[1],
        reverse=True,
    )
    merged: Iterator[tuple[TaskView | LoneMessage, int]] = heapq.merge(
        tasks, messages, key=lambda p: p[1], reverse=True
    )
    return merged


def list_tasks(
    st: Store, where: TaskFilter, *, limit: int | None, folding: Folding = quietly, lineage: bool = False
) -> Listing:
    """Tasks and lone Message replies passing ``where``, newest (by last event) first; with ``lineage``,
    every task row's parent and children (inferred ones too: the log's exchanges are read once).

    Tasks come from the task index, a page at a time; on a log that cannot be written and whose
    projection is behind, from the fold in memory (every task, then sorted)."""
    proj = task_projection(st, folding=folding)
    lone = [m for m in lone_messages(st, st.exchanges_without_task()) if where.keeps_message(m)]
    bindings = _Seen(st)  # task -> the bindings and trace context of its exchanges, read with them
    bindings.lineage = lineage
    bindings.read_all = limit is None and not where.filters  # every row is shown: one read of the exchanges
    runs: dict[str, list[RunRef]] = {}  # task -> its runs, read with its row
    if isinstance(proj, InMemoryProjection):  # no index to page
        every = bindings.every = st.exchanges()
        _note_bindings(every, bindings)
        views = [v for v in proj.views(closed_exchanges(every)) if where.keeps(v)]
        views.sort(key=lambda v: v.last_position, reverse=True)
        runs.update((v.task_id, proj.runs(v.task_id)) for v in views)
        merged = _newest_first(((v, v.last_position) for v in views), lone)
        return Listing(len(views) + len(lone), (_row(found, bindings, runs) for found, _ in islice(merged, limit)))
    total = count(st, states=where.states, context=where.context, since=where.since) + len(lone)
    batch = 200 if limit is None else max(1, min(200, limit))  # a short listing reads no more rows than it shows
    keyed = keyed_listing(st, where, batch=batch, closed=lambda ids: _closed(st, ids, bindings), lone=lone, runs=runs)
    return Listing(total, (_row(found, bindings, runs) for found, _ in islice(keyed, limit)))


def _closed(st: Store, task_ids: Iterable[str], bindings: _Seen) -> dict[int, float]:
    """The ended exchanges of some tasks (a page of the listing); their bindings noted in ``bindings``."""
    ended: dict[int, float] = {}
    for t in task_ids:
        exchanges = st.exchanges(t)
        _note_bindings(exchanges, bindings)
        ended.update(closed_exchanges(exchanges))
    return ended


_OPEN = 1e18  # the end of an exchange that has not ended, in a window


class _Seen:
    """What a listing learnt of each task's exchanges: their bindings, the trace context their requests
    carried, the time they span (for the callers and callees inferred of a page's tasks)."""

    def __init__(self, st: Recordings | None = None) -> None:
        self.exchanges: dict[str, list[Exchange]] = {}  # task -> its exchanges, once read
        self._counter: FaultCounter | None = None  # doctor's counts, read when a row asks
        self.bindings: dict[str, set[str]] = {}
        self.traces: dict[str, list[ExchangeTrace]] = {}
        self.lineage = False  # every row's parent and children, inferred ones too (tasks --json)
        self.every: list[Exchange] | None = None  # every exchange, when the listing read them all anyway
        self.read_all = False  # a listing of every task: read every exchange once rather than by page
        self.lineage_done = False  # every task's lineage is known (from every exchange)
        self._st = st
        self._traced: dict[str, tuple[str | None, list[str]]] | None = None
        self._inferred: dict[str, tuple[str | None, list[str], str | None]] = {}
        self._windows: dict[str, tuple[float, float]] = {}  # tasks noted, not inferred yet: first start, last end

    def note(self, ex: Exchange) -> None:
        if ex.task_id and self.lineage and not self.lineage_done and ex.task_id not in self._inferred:
            lo, hi = self._windows.get(ex.task_id, (ex.started_at, ex.started_at))
            end = _OPEN if ex.ended_at is None else ex.ended_at
            self._windows[ex.task_id] = (min(lo, ex.started_at), max(hi, end))

    def family(self, task_id: str) -> tuple[str | None, list[str], str | None]:
        """The task's parent and children: by trace context (the whole log's exchanges, read once, when a
        row carries any), else inferred from the log (:mod:`capture.lineage`: the basis is the third item)."""
        up, kids = self._traced_family(task_id) if self.traces.get(task_id) else (None, [])
        if not self.lineage:
            return up, kids, None
        guess, guessed_kids, basis = self._inferred_family(task_id)
        kids = kids + [k for k in guessed_kids if k not in kids]
        return (up, kids, None) if up is not None or guess is None else (guess, kids, basis)

    def _traced_family(self, task_id: str) -> tuple[str | None, list[str]]:
        if self._traced is None:
            every = self.every if self.every is not None else self._st.exchanges() if self._st is not None else []
            self._traced = families((ex.task_id, t) for ex in every if ex.task_id and (t := carried(ex)))
        return self._traced.get(task_id, (None, []))

    def _inferred_family(self, task_id: str) -> tuple[str | None, list[str], str | None]:
        """Inferred for the tasks noted so far (a page) at once, from the exchanges open while any of them
        was: every caller of their calls and every call of theirs is among those (capture/lineage.py).
        A listing of every task (``read_all``) reads every exchange once instead, and infers once."""
        if task_id in self._inferred or task_id not in self._windows:
            return self._inferred.get(task_id, (None, [], None))
        pending, self._windows = self._windows, {}
        if self.every is None and self.read_all and self._st is not None:
            self.every = self._st.exchanges()
        if self.every is not None:
            rows = self.every
        elif self._st is not None:
            rows = self._st.exchanges_open_within(
                min(lo for lo, _ in pending.values()), max(hi for _, hi in pending.values())
            )
        else:
            rows = []
        found = inferred_families(infer(rows), {ex.id: ex.task_id for ex in rows if ex.id and ex.task_id})
        children: dict[str, list[str]] = {}
        for child, (caller, _) in sorted(found.items()):
            children.setdefault(caller, []).append(child)
        answer: dict[str, tuple[str | None, list[str], str | None]] = {}
        for t in {*found, *children}:
            link = found.get(t)
            answer[t] = (link[0] if link else None, children.get(t, []), link[1] if link else None)
        for t in pending if self.every is None else {*pending, *answer}:
            self._inferred[t] = answer.get(t, (None, [], None))
        if self.every is not None:
            self.lineage_done = True
        return self._inferred.get(task_id, (None, [], None))

    def faults(self, task_id: str) -> FaultCount:
        """doctor's counts of the task (``doctor TASK``): a list's faults are doctor's."""
        if self._st is None:  # pragma: no cover - a listing always has its store
            return FaultCount()
        if self._counter is None:
            self._counter = FaultCounter(self._st)
        return self._counter(task_id, self.exchanges.get(task_id))


def _note_bindings(exchanges: Iterable[Exchange], seen: _Seen) -> None:
    for ex in exchanges:
        if ex.task_id:
            seen.exchanges.setdefault(ex.task_id, []).append(ex)
        name = binding_and_version(ex.binding, ex.dialect)[0]
        if ex.task_id and name:
            seen.bindings.setdefault(ex.task_id, set()).add(name)
        if ex.task_id and (found := carried(ex)) is not None:
            seen.traces.setdefault(ex.task_id, []).append(found)
        seen.note(ex)


def _task_row(
    v: TaskView, bindings: Iterable[str] = (), runs: Sequence[RunRef] = (), faults: FaultCount = FaultCount()
) -> TaskRow:
    row = TaskRow(
        v.task_id, v.context_id, v.state, v.events, v.first_at, v.last_at, v.profile, faults.total, v.final_answer
    )
    row.errors, row.warnings = faults
    row.bindings = sorted(bindings)
    row.runs = max(1, len(runs))
    row.sources = [r.source or "unknown" for r in runs]
    return row


def _message_row(m: LoneMessage) -> TaskRow:
    first, last = m.events[0].received_at, m.events[-1].received_at
    return TaskRow(None, m.context_id, None, len(m.events), first, last, "generic", 0, m.text, "message", m.message_id)


def _row(found: TaskView | LoneMessage, seen: _Seen, runs: Mapping[str, list[RunRef]] | None = None) -> TaskRow:
    if isinstance(found, LoneMessage):
        return _message_row(found)
    row = _task_row(
        found, seen.bindings.get(found.task_id, ()), (runs or {}).get(found.task_id, ()), seen.faults(found.task_id)
    )
    row.trace_context = sorted(seen.traces.get(found.task_id, []), key=lambda t: t.exchange_id or 0)
    if row.trace_context or seen.lineage:
        row.parent, row.children, row.parent_inferred = seen.family(found.task_id)
    return row


def newest_ids(st: Store, limit: int | None) -> tuple[list[str], int | None]:
    """The newest ``limit`` task ids (every one: None) by last event, newest first, and how many
    tasks the log holds. A log that cannot be written, with its task index behind, is ordered
    from the log itself, and the count is None."""
    try:
        Projector(st).catch_up()
    except ReadOnlyStore:
        events = sorted(st.task_events(), key=lambda t: t.last_position, reverse=True)
        return [t.task_id for t in (events if limit is None else events[:limit])], None
    return [v.task_id for v in newest(st, limit=limit)], count(st)


def log_order_ids(st: Recordings, limit: int | None = None) -> list[str]:
    """Every task id in log order (of first appearance); the last ``limit`` of them."""
    ids = [t.task_id for t in st.task_events()]
    return ids if limit is None else ids[-limit:]


class Relative(msgspec.Struct, frozen=True):
    """A task's parent or child: by trace context (``inferred`` None), or inferred from the log
    (:mod:`capture.lineage`; ``inferred``: the basis of a parent, ``"inferred"`` for a child)."""

    task_id: str
    inferred: str | None = None


class Family(msgspec.Struct, frozen=True):
    """A task's parent and children, as ``tasks --json`` names them (``parent``, ``parent_inferred``,
    ``children``), each marked when inferred."""

    parent: Relative | None
    children: list[Relative]


def family_of(st: Store, task_id: str) -> Family:
    """One task's parent and children by the listing's own rule (:meth:`_Seen.family`: trace
    context first, else inferred), each child marked inferred when no trace context names it."""
    seen = _Seen(st)
    seen.lineage = True
    _note_bindings(st.exchanges(task_id), seen)
    parent, children, basis = seen.family(task_id)
    traced = seen._traced_family(task_id)[1] if seen.traces.get(task_id) else []
    return Family(
        None if parent is None else Relative(parent, basis),
        [Relative(c, None if c in traced else "inferred") for c in children],
    )
