"""What each view of the UI reads from the log, a page at a time.

The task list reads the task projection's index newest first, by key (``before``: the last key
shown), never by offset; the search, the search index ``grep`` uses; a task's timeline pages by
position (:meth:`store.EventLog.iter_task`); the answer at a scrubber position is
:mod:`.scrub`'s. A page so costs what it shows, however long the log is.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Protocol

import msgspec

from a2a_tape.fold.fold import TaskFold, fold_task_events
from a2a_tape.fold.runs import BadSelector, Run, pick_run, read_selector, selector, task_runs
from a2a_tape.fold.task_state import RunRef
from a2a_tape.fold.views import TaskView
from a2a_tape.inspection import listing
from a2a_tape.inspection.doctor import FaultCount
from a2a_tape.inspection.doctor_index import FaultCounter
from a2a_tape.inspection.grep import Match, is_literal, iter_grep
from a2a_tape.inspection.messages import LoneMessage, find_message, lone_messages
from a2a_tape.inspection.steps import closed_exchanges
from a2a_tape.inspection.ui import rows
from a2a_tape.store import Exchange, ReadOnlyStore, Store, StoredEvent
from a2a_tape.store.errors import A2ATapeError
from a2a_tape.store.events import A2A_STATES
from a2a_tape.store.methods import BINDING_NAMES
from a2a_tape.store.open_reading import tasks_named

PAGE = 50
"""Tasks in one page of the list."""
ROWS = 100
"""Events in one page of a task's timeline: a few screens (the next page loads as it scrolls into view)."""
SCAN = 2000
"""Tasks (or search matches) one list page examines at most for the filters the index does not
hold (binding, upstream, faults); the page then offers to look further from where it stopped."""
STATES = A2A_STATES
BINDINGS = tuple(BINDING_NAMES.values())
"""The bindings the list filters by, as people read them (``JSONRPC``, ``HTTP+JSON``, ``GRPC``)."""


class BadQuery(A2ATapeError, ValueError):
    """A filter the UI cannot read (shown on the page, answered 400)."""


class Filters(msgspec.Struct, frozen=True):
    """The task list's filters, as the page's form sends them."""

    q: str | None = None
    states: tuple[str, ...] = ()
    context: str | None = None
    binding: str | None = None
    upstream: str | None = None
    since: float | None = None
    since_text: str | None = None
    level: str | None = None  # error / warning: tasks with faults of that level (or worse)

    @property
    def index_only(self) -> bool:
        """Every filter is one the task index answers."""
        return not (self.binding or self.upstream or self.level)

    def query(self) -> list[tuple[str, str]]:
        out = [("q", self.q)] if self.q else []
        out += [("state", s) for s in self.states]
        for key in ("context", "binding", "upstream", "level"):
            value = getattr(self, key)
            if value:
                out.append((key, value))
        if self.since_text:
            out.append(("since", self.since_text))
        return out


def parse_filters(params: Iterable[tuple[str, str]]) -> Filters:
    """The filters of a query string; :class:`BadQuery` naming what cannot be read."""
    got: dict[str, list[str]] = {}
    for key, value in params:
        value = value.strip()
        if value:
            got.setdefault(key, []).append(value)
    try:
        states = listing.parse_states(got.get("state", []))  # the CLI's --state rule
    except ValueError as exc:
        raise BadQuery(str(exc)) from None
    level = _one(got, "level")
    if level not in (None, "error", "warning"):
        raise BadQuery(f"faults: 'error' or 'warning', not '{level}'")
    binding = _one(got, "binding")
    if binding is not None and binding not in BINDINGS:
        raise BadQuery(f"unknown binding '{binding}'")
    since_text = _one(got, "since")
    return Filters(
        q=_one(got, "q"),
        states=states,
        context=_one(got, "context"),
        binding=binding,
        upstream=_one(got, "upstream"),
        since=None if since_text is None else parse_time(since_text),
        since_text=since_text,
        level=level,
    )


def _one(got: dict[str, list[str]], key: str) -> str | None:
    values = got.get(key)
    return values[-1] if values else None


def parse_time(text: str) -> float:
    """Unix seconds, or an ISO date or time (UTC when it names no zone): ``tasks --since``'s rule."""
    try:
        moment = listing.parse_since(text)
    except ValueError as exc:
        raise BadQuery(str(exc)) from None
    assert moment is not None
    return moment


def parse_position(text: str | None, name: str) -> int | None:
    if text is None or text == "":
        return None
    if not (text.isascii() and text.isdigit()) or len(text) > 18:
        raise BadQuery(f"{name}: a position (a number), not '{text}'")
    return int(text)


# -- the task list -----------------------------------------------------------------------------


class ListPage(msgspec.Struct):
    rows: list[rows.TaskListRow]
    more: int | None  # the key to go on from (None: the list ends here)
    scanned: int  # how many tasks (or matches) the page examined


class _Views(Protocol):
    def __call__(self, task_ids: Sequence[str]) -> dict[str, TaskView]: ...


def _closed(store: Store, task_ids: Iterable[str]) -> dict[int, float]:
    ended: dict[int, float] = {}
    for t in task_ids:
        ended.update(closed_exchanges(store.exchanges(t)))
    return ended


def views_of(store: Store, task_ids: Sequence[str], runs: dict[str, list[RunRef]] | None = None) -> dict[str, TaskView]:
    """The projection's views of some tasks (their streams closed as their exchanges say); each
    task's runs put in ``runs``, when given (as :func:`listing.keyed_listing` does)."""
    raw = store.projection_load("tasks", task_ids)
    ended = _closed(store, task_ids)
    out = {}
    for t in task_ids:
        row = raw.get(t)
        if row is not None:
            fold = TaskFold.load(row)
            out[t] = fold.view(ended)
            if runs is not None:
                runs[t] = list(fold.s.runs)
    return out


def passes(store: Store, view: TaskView, f: Filters, faults: FaultCount | None = None) -> bool:
    """Whether a task passes every filter (the index's and the others); ``faults``: doctor's
    counts of the task (read when the level filter needs them and they are not given)."""
    if f.states and view.state not in f.states:
        return False
    if f.context is not None and view.context_id != f.context:
        return False
    if f.since is not None and view.last_at < f.since:
        return False
    if f.level is not None:  # doctor's levels, as the list's faults column counts them
        errors, warnings = faults if faults is not None else FaultCounter(store)(view.task_id)
        if not errors and (f.level == "error" or not warnings):
            return False
    return _went(store.exchanges(view.task_id) if f.binding or f.upstream else [], f)


def _went(exchanges: Sequence[Exchange], f: Filters) -> bool:
    """Whether some of ``exchanges`` went over the binding and to the upstream ``f`` names."""
    if f.binding and not any(rows.binding_of(ex)[0] == f.binding for ex in exchanges):
        return False
    return not (f.upstream and not any(f.upstream in rows.upstream_of(ex) for ex in exchanges))


def _message_passes(m: LoneMessage, exchanges: Mapping[int, Exchange], f: Filters) -> bool:
    """The filters the index does not hold, for a lone Message reply: it has no faults; its
    binding and upstream are its exchange's."""
    if f.level is not None:
        return False
    ex = exchanges.get(m.events[0].exchange_id or -1)
    return _went([] if ex is None else [ex], f)


def task_list(store: Store, f: Filters, *, before: int | None = None, limit: int = PAGE) -> ListPage:
    """A page of the list, newest last event first, after the key ``before``: what ``a2a-tape
    tasks`` lists (:func:`listing.keyed_listing`: the tasks and the lone Message replies)."""
    if f.q:
        return search(store, f, after=before, limit=limit)
    found: list[rows.TaskListRow] = []
    scanned = 0
    taskless = store.exchanges_without_task()
    by_id = {ex.id: ex for ex in taskless if ex.id is not None}
    runs: dict[str, list[RunRef]] = {}  # each task's runs, read with its row
    keyed = listing.keyed_listing(
        store,
        listing.TaskFilter(states=frozenset(f.states) or None, context=f.context, since=f.since),
        before=before,
        batch=limit if f.index_only else 200,
        closed=lambda ids: _closed(store, ids),
        lone=lone_messages(store, taskless),
        runs=runs,
    )
    last = None
    counted = FaultCounter(store)  # doctor's counts, as ``tasks`` shows them
    for item, key in keyed:
        scanned += 1
        last = key
        if isinstance(item, LoneMessage):
            if f.index_only or _message_passes(item, by_id, f):
                found.append(rows.message_row(item))
        else:
            faults = counted(item.task_id)
            if f.index_only or passes(store, item, f, faults):
                found.append(rows.list_row(item, faults, runs=runs.get(item.task_id, ())))
        if len(found) >= limit or scanned >= SCAN:
            return ListPage(found, last, scanned)
    return ListPage(found, None, scanned)


def search(store: Store, f: Filters, *, after: int | None = None, limit: int = PAGE) -> ListPage:
    """Tasks whose events hold the text ``f.q`` (any case), in log order of their first match
    after position ``after``: the search index ``grep`` uses (brought up to date first)."""
    assert f.q is not None
    seen: set[str] = set()
    found: list[rows.TaskListRow] = []
    scanned = 0
    pending: dict[str, tuple[str, int]] = {}
    counted = FaultCounter(store)

    def flush() -> None:
        runs: dict[str, list[RunRef]] = {}
        views = views_of(store, list(pending), runs)
        for t, (snippet, _) in pending.items():
            view = views.get(t)
            if view is not None and passes(store, view, f, faults := counted(t)):
                found.append(rows.list_row(view, faults, match=snippet, runs=runs.get(t, ())))
        pending.clear()

    last = None
    for m in _matches(store, f.q, after):
        scanned += 1
        last = m.position
        if m.task_id is not None and m.task_id not in seen:
            seen.add(m.task_id)
            pending[m.task_id] = (f"{m.where}: {m.text}", m.position)
            if len(pending) >= limit - len(found):
                flush()
        if len(found) >= limit or scanned >= SCAN:
            flush()
            return ListPage(found[:limit], last, scanned)
    flush()
    return ListPage(found, None, scanned)


def _matches(store: Store, text: str, after: int | None) -> Iterator[Match]:
    pattern = text if is_literal(text) else re.escape(text)  # plain text is looked up in the index
    for m in iter_grep(store, pattern, ignore_case=True):
        if after is None or m.position > after:
            yield m


# -- one task ----------------------------------------------------------------------------------


def resolve(store: Store, key: str) -> str | None:
    """The task named by ``key``: its id, or a unique prefix of one."""
    found = tasks_named(store, key)
    return found[0] if len(found) == 1 else None


class Selected(msgspec.Struct, frozen=True):
    """What a task page's address names: a task and its run N (None: the latest)."""

    task_id: str
    number: int | None

    @property
    def key(self) -> str:
        """The address's own spelling: ``TASK`` or ``TASK@N`` (the CLI's and ``--json``'s)."""
        return self.task_id if self.number is None else selector(self.task_id, self.number)


class NotFound(msgspec.Struct, frozen=True):
    """An address that names no task or no run of it: why, in one line."""

    message: str


def select(store: Store, key: str) -> Selected | LoneMessage | NotFound:
    """What ``/tasks/KEY`` names: a task (its id or a unique prefix), ``TASK@N`` for its run N
    (:func:`fold.runs.read_selector`, the CLI's rule), or a lone Message reply."""
    try:
        text, number = read_selector(store, key)
    except BadSelector as exc:
        return NotFound(str(exc))
    task_id = resolve(store, text)
    if task_id is None:
        lone = find_message(store, key) if number is None else None
        return lone if lone is not None else NotFound(f"No task {text!r} in this log.")
    return Selected(task_id, number)


def run_count(store: Store, task_id: str) -> int:
    """How many runs the task projection knows the task to have (0: no row)."""
    raw = store.projection_load("tasks", [task_id]).get(task_id)
    return 0 if raw is None else len(TaskFold.load(raw).s.runs)


def runs_of(store: Store, task_id: str, number: int | None) -> tuple[list[Run], Run] | NotFound:
    """The task's runs read whole, and the one ``number`` names (the latest when None)."""
    runs = task_runs(store, task_id)
    try:
        return runs, pick_run(runs, task_id, number)
    except BadSelector as exc:
        return NotFound(str(exc))


CARD_LOOKBACK = 3
"""Exchanges before a task's first one where its recorder's agent-card fetch is looked for."""


def card_fetch(store: Store, exchanges: Sequence[Exchange]) -> Exchange | None:
    """The agent-card fetch that began the recording of these exchanges (the task's, or a run's):
    the same observer's card request just before its first exchange (a card names no task, so
    the task's own exchanges never hold it). A few lookups by id: a page never scans the log."""
    first = min((ex for ex in exchanges if ex.id is not None), key=lambda ex: ex.id or 0, default=None)
    if first is None or first.id is None or first.observer is None:
        return None
    for back in range(1, CARD_LOOKBACK + 1):
        ex = store.get_exchange(first.id - back) if first.id > back else None
        if ex is not None and ex.task_id is None and ex.rpc_method == "agent-card" and ex.observer == first.observer:
            return ex
    return None


def task_view(store: Store, task_id: str, exchanges: Sequence[Exchange]) -> TaskView:
    """The task as it is now: the projection's row (a fold of its events if the row is behind)."""
    closed = closed_exchanges(exchanges)
    raw = store.projection_load("tasks", [task_id]).get(task_id)
    if raw is not None:
        fold = TaskFold.load(raw)
        if store.projection_cursor("tasks") >= store.last_position():  # the projection has every event
            return fold.view(closed)
        behind = list(store.iter_task(task_id, after=fold.s.last_position, limit=ROWS + 1))
        if len(behind) <= ROWS:
            for ev in behind:
                fold.apply(ev)
            return fold.view(closed)
    return fold_task_events(task_id, store.iter_task(task_id)).view(closed)


def timeline(store: Store, task_id: str, after: int = 0, limit: int = ROWS) -> tuple[list[StoredEvent], bool]:
    """Up to ``limit`` events of the task after position ``after``, and whether more follow."""
    events = list(store.iter_task(task_id, after=after, limit=limit + 1))
    return events[:limit], len(events) > limit


def event_at(store: Store, task_id: str, position: int) -> StoredEvent | None:
    for ev in store.iter_task(task_id, after=position - 1, limit=1):
        return ev if ev.position == position else None
    return None


def previous_time(store: Store, task_id: str, position: int) -> float | None:
    """When the task's event at ``position`` arrived (the time the next page's first delta counts from)."""
    ev = event_at(store, task_id, position)
    return None if ev is None else ev.received_at


def keep_projection(store: Store) -> int | None:
    """Bring the task projection up to date; return the position it covers (None: the log
    cannot be written here, so the projection stays as it is)."""
    from a2a_tape.fold.projection import Projector

    proj = Projector(store)
    try:
        proj.catch_up()
    except ReadOnlyStore:
        return None
    return proj.cursor()
