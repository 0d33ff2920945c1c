"""Where each exchange's span sits in the export (docs/otel.md, "Traces" and "Inferred parents"): the trace
of its run (the trace its requests carried in ``traceparent``, else its inferred caller's, else one named by
the task id and the run), its own span id, its parent (a remote caller's span, or none) and its links (the
caller it was joined to by :mod:`capture.lineage`, marked inferred; the first span of each earlier run of
its task). :class:`WholeLog` reads the callers from every exchange row once (``export``), :class:`LogWindows`
from the rows open when a call began (the live export); they give the same places.

The ids are ints here, as the trace context headers name them; :mod:`capture.otlp` writes them as OTLP's bytes.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable, Iterable

import msgspec

from a2a_tape.store import Exchange, Recordings, decode_item
from a2a_tape.store.errors import A2ATapeError
from a2a_tape.wire.trace_context import ExchangeTrace, TraceParent, parse_traceparent

from .lineage import Link, call_of, caller_within, carried, infer, unsettled
from .open_exchanges import OpenExchanges


def _digest(*parts: str) -> bytes:
    return hashlib.sha256("\0".join(parts).encode()).digest()


def derived_trace_id(task_id: str, observer: str | None = None) -> int:
    """The trace of a run whose requests carried none (named by the task id and the run's observer; by
    the task id alone for exchanges of no observer): the same id on every export of the run."""
    parts = ("a2a-tape trace", task_id) if observer is None else ("a2a-tape trace", task_id, observer)
    return int.from_bytes(_digest(*parts)[:16]) or 1


def derived_span_id(task_id: str, ex: Exchange) -> int:
    return int.from_bytes(_digest("a2a-tape span", task_id, str(ex.id), repr(ex.started_at))[:8]) or 1


class Context(msgspec.Struct, frozen=True):
    """Where one exchange's span sits: its trace, its own id, its parent (a remote caller's span, or none)."""

    trace_id: int
    span_id: int
    parent_id: int | None
    source: str  # request (the client's traceparent) / injected (the proxy's) / derived (none was carried) / inferred
    tracestate: str | None = None
    inferred: tuple[int, int, Link] | None = None  # the inferred caller's span (trace id, span id) and the link


Carried = Callable[[Exchange], ExchangeTrace | None]
"""What an exchange's request carried (:func:`capture.lineage.carried`, or :meth:`TaskRuns.carried`: read once)."""


def context_of(
    task_id: str, ex: Exchange, run_trace: int, joins: Lineage | None = None, found_of: Carried = carried
) -> Context:
    """Where ``ex``'s span sits, in the trace of its run (``run_trace``: :meth:`TaskRuns.trace`)."""
    found = found_of(ex)
    tp: TraceParent | None = parse_traceparent(found.traceparent) if found else None
    own = derived_span_id(task_id, ex)
    if found is None or tp is None:
        caller = joins.caller(ex) if joins is not None else None
        if caller is None:
            return Context(run_trace, own, None, "derived")
        trace_id, span_id, link = caller
        parent = span_id if trace_id == run_trace else None  # a parent is in the span's own trace
        return Context(run_trace, own, parent, "inferred", None, caller)
    if found.injected:  # the proxy started the trace: the id it sent is its own span's
        return Context(tp.trace_int, tp.parent_int, None, "injected", found.tracestate)
    sent = parse_traceparent(found.sent)
    if sent is not None and sent.trace_id == tp.trace_id:  # the proxy went on with it: its span, the client's parent
        return Context(tp.trace_int, sent.parent_int, tp.parent_int, "continued", found.tracestate)
    return Context(tp.trace_int, own, tp.parent_int, "request", found.tracestate)


def _start(ex: Exchange) -> tuple[float, int]:
    return ex.started_at, ex.id or 0


def run_trace_id(
    task_id: str,
    run: str | None,
    exchanges: Iterable[Exchange],
    joins: Lineage | None = None,
    found_of: Carried = carried,
) -> int:
    """A run's trace: the first one its requests carried, else its first inferred caller's (:class:`Lineage`),
    else one named by the task id and the run's observer."""
    ordered = sorted(exchanges, key=_start)
    for ex in ordered:
        found = found_of(ex)
        tp = parse_traceparent(found.traceparent) if found else None
        if tp is not None:
            return tp.trace_int
    if joins is not None:
        for ex in ordered:
            caller = joins.caller(ex)
            if caller is not None:
                return caller[0]
    return derived_trace_id(task_id, run)


def runs_of(exchanges: Iterable[Exchange]) -> dict[int, str | None]:
    """The run of each of a task's exchanges (by id), as its observer: its own; for an exchange of no
    observer (a recovery's GetTask, a push), the run of the latest exchange with one that began before it
    (the first one's when none did): it completes that run (docs/design.md, "Runs")."""
    ordered = sorted((ex for ex in exchanges if ex.id is not None), key=_start)
    first = next((ex.observer for ex in ordered if ex.observer is not None), None)
    out: dict[int, str | None] = {}
    last = first
    for ex in ordered:
        if ex.observer is not None:
            last = ex.observer
        out[ex.id or 0] = ex.observer if ex.observer is not None else last
    return out


MAX_RUN_LINKS = 32
"""Earlier runs a run's first span links to (the latest ones, when a task has more)."""


class RunLink(msgspec.Struct, frozen=True):
    """The first span of another run of the same task: its trace and span id, its observer, its exchange."""

    trace_id: int
    span_id: int
    observer: str | None
    exchange_id: int


class TaskRuns:
    """A task's runs as the export shows them: each run its own trace (:func:`run_trace_id`), ordered by
    their first exchange; the first span of each run after the first linked to the first span of the runs
    before it (:meth:`links`), so a backend shows them as related."""

    def __init__(self, task_id: str, exchanges: Iterable[Exchange], joins: Lineage | None = None) -> None:
        self.task_id, self.joins = task_id, joins
        self.rows = sorted((ex for ex in exchanges if ex.id is not None), key=_start)
        self.run_of = runs_of(self.rows)
        self._firsts: dict[str | None, Exchange] = {}  # each run's first exchange, runs in order
        for ex in self.rows:
            self._firsts.setdefault(self.run_of[ex.id or 0], ex)
        self.order = list(self._firsts)
        self._traces: dict[str | None, int] = {}
        self._carried: dict[int, ExchangeTrace | None] = {}

    def carried(self, ex: Exchange) -> ExchangeTrace | None:
        """What ``ex``'s request carried (:func:`capture.lineage.carried`), read once for the task."""
        key = ex.id or 0
        if key not in self._carried:
            self._carried[key] = carried(ex)
        return self._carried[key]

    def run(self, ex: Exchange) -> str | None:
        """The run of ``ex`` (events that name no exchange: the first run's)."""
        if ex.id is not None and ex.id in self.run_of:
            return self.run_of[ex.id]
        return self.order[0] if self.order else None

    def trace(self, run: str | None) -> int:
        if run not in self._traces:
            self._traces[run] = derived_trace_id(self.task_id, run)  # a guard: links point to earlier exchanges
            mine = [ex for ex in self.rows if self.run_of[ex.id or 0] == run]
            self._traces[run] = run_trace_id(self.task_id, run, mine, self.joins, self.carried)
        return self._traces[run]

    def context(self, ex: Exchange) -> Context:
        return context_of(self.task_id, ex, self.trace(self.run(ex)), self.joins, self.carried)

    def links(self, ex: Exchange) -> list[RunLink]:
        """For the first exchange of a run after the first: the first span of each run before it."""
        run = self.run(ex)
        if ex.id is None or run not in self._firsts or self._firsts[run].id != ex.id:
            return []
        if self.joins is not None:
            self.joins.runs_known(ex, {row.id for row in self.rows})
        before = self.order[: self.order.index(run)][-MAX_RUN_LINKS:]
        out = []
        for other in before:
            first = self._firsts[other]
            ctx = self.context(first)
            out.append(RunLink(ctx.trace_id, ctx.span_id, other, first.id or 0))
        return out


def of_task(task_id: str, rows: list[Exchange]) -> list[Exchange]:
    """A task's exchange rows, each naming it (an open row names its task only once it ends)."""
    for row in rows:
        row.task_id = row.task_id or task_id
    return rows


FIRST_EVENTS = 8
"""Events of an open exchange read for its task (the first that names one)."""


class NotYet(A2ATapeError):
    """A live exchange's caller cannot be told yet (:func:`capture.lineage.unsettled`): ask again later."""


class Lineage:
    """The inferred callers of exchanges (:mod:`capture.lineage`) and the span each caller has in the
    export (the trace of its run, followed up the chain). Two readings of one rule: :class:`WholeLog`
    (every exchange row read once, for ``export``) and :class:`LogWindows` (the rows open when a call
    began, read from the log as each span is sent: the live export); they give the same links."""

    def __init__(self) -> None:
        self._runs: dict[str, TaskRuns] = {}

    def link(self, ex: Exchange) -> Link | None:
        raise NotImplementedError

    def row(self, exchange_id: int) -> Exchange | None:
        raise NotImplementedError

    def task_rows(self, task_id: str) -> list[Exchange]:
        raise NotImplementedError

    def runs_known(self, first: Exchange, known: set[int | None]) -> None:
        """Before ``first`` (the first exchange of a run) is linked to the runs before it: whether every
        run that began before it is known (the whole log: always)."""

    def runs(self, task_id: str) -> TaskRuns:
        """A caller's task's runs (read once)."""
        if task_id not in self._runs:
            self._runs[task_id] = TaskRuns(task_id, self.task_rows(task_id), self)
        return self._runs[task_id]

    def caller(self, ex: Exchange) -> tuple[int, int, Link] | None:
        """The inferred caller's (trace id, span id) and the link, for an exchange with one."""
        link = self.link(ex) if ex.id is not None else None
        parent = self.row(link.exchange_id) if link is not None else None
        if link is None or parent is None:
            return None
        ctx = self.runs(link.task_id).context(parent)
        return ctx.trace_id, ctx.span_id, link


class WholeLog(Lineage):
    """The callers of a log's exchanges, read from every exchange row once (``export``)."""

    def __init__(self, exchanges: Iterable[Exchange]) -> None:
        super().__init__()
        rows = [ex for ex in exchanges if ex.id is not None]
        self.links = infer(rows)
        parents = {link.task_id for link in self.links.values()}
        self._by_task: dict[str, list[Exchange]] = {}
        for ex in rows:
            if ex.task_id in parents:  # kept without bodies beyond what carried() reads
                self._by_task.setdefault(ex.task_id, []).append(ex)
        self._by_id = {ex.id: ex for exs in self._by_task.values() for ex in exs}

    def link(self, ex: Exchange) -> Link | None:
        return self.links.get(ex.id) if ex.id is not None else None

    def row(self, exchange_id: int) -> Exchange | None:
        return self._by_id.get(exchange_id)

    def task_rows(self, task_id: str) -> list[Exchange]:
        return self._by_task.get(task_id, [])


class LogWindows(Lineage):
    """The callers of exchanges as they end (the live export): for each call, the exchanges open when it
    began (every candidate the rule has is among them), from ``open_rows`` (the live export's
    :class:`capture.open_exchanges.OpenExchanges`, refreshed before each batch), else read from the log
    (``exchanges_open_within``, a scan of the exchange rows).
    A candidate that has not named its task yet makes the call :class:`NotYet` (unless ``final``: then
    the log as it is decides). Made afresh for each batch: what it reads is kept for that batch only."""

    def __init__(self, st: Recordings, *, final: bool = False, open_rows: OpenExchanges | None = None) -> None:
        super().__init__()
        self._st, self.final, self._rows = st, final, open_rows
        self._links: dict[int, Link | None] = {}
        self._open: dict[int, list[Exchange]] = {}

    def _open_at_start(self, ex: Exchange) -> list[Exchange]:
        """The exchanges open when ``ex`` began; an open one's task and context as its first events name
        them (a row is given them when it ends, where the export reads them)."""
        if ex.id not in self._open:
            if self._rows is not None and self._rows.covers(ex.started_at):
                rows = self._rows.open_at(ex.started_at)
            else:
                rows = self._st.exchanges_open_within(ex.started_at, ex.started_at)
            for row in rows:
                if row.ended_at is None and row.id is not None and not (row.task_id and row.context_id):
                    self._learn(row)
            self._open[ex.id or 0] = rows
        return self._open[ex.id or 0]

    def _learn(self, row: Exchange) -> None:
        assert row.id is not None
        for ev in itertools.islice(self._st.iter_exchange(row.id, batch=FIRST_EVENTS), FIRST_EVENTS):
            row.task_id = row.task_id or ev.task_id
            if row.context_id is None and ev.origin == "upstream":
                row.context_id = decode_item(bytes(ev.payload)).context_id
            if row.task_id and row.context_id:
                return

    def link(self, ex: Exchange) -> Link | None:
        if ex.id is None:
            return None
        if ex.id not in self._links:
            if not call_of(ex):
                self._links[ex.id] = None
                return None
            open_then = self._open_at_start(ex)
            if not any(row.id != ex.id for row in open_then):  # nothing else was open: no caller (the rule's answer)
                self._links[ex.id] = None
                return None
            if not self.final and unsettled(ex, open_then):
                raise NotYet(ex.id)
            self._links[ex.id] = caller_within(ex, open_then)
        return self._links[ex.id]

    def runs_known(self, first: Exchange, known: set[int | None]) -> None:
        """Another observer of the same request (the same message id) that began before ``first`` and has
        not named the task yet (``record`` through a proxy: its row learns the task from the proxy's first
        event) may be an earlier run of it: :class:`NotYet` until it does, or ends."""
        if self.final or first.message_id is None:
            return
        for ex in self._open_at_start(first):
            if (
                ex.id not in known
                and ex.task_id in (None, first.task_id)
                and ex.message_id == first.message_id
                and ex.ended_at is None
                and _start(ex) < _start(first)
            ):
                raise NotYet(first.id)

    def row(self, exchange_id: int) -> Exchange | None:
        row = self._st.get_exchange(exchange_id)
        if row is not None and row.ended_at is None and not (row.task_id and row.context_id):
            self._learn(row)
        return row

    def task_rows(self, task_id: str) -> list[Exchange]:
        return of_task(task_id, self._st.exchanges(task_id))
