"""Recorded tasks as OpenTelemetry traces: the one mapping of the log to spans (docs/otel.md), for
``a2a-tape export --format otlp`` (:mod:`inspection.otlp` adds doctor's findings) and for the live export
of ``proxy``/``record --otlp-endpoint`` (:mod:`recorder.otlp_live`, a span per exchange as it ends).

Each run of a task (its recording by one observer: ``record``, the proxy, a replay recorded back, a
verify run) is a trace (the trace its requests carried in ``traceparent``, else its inferred caller's,
else one named by the task id and the run), the runs of one task joined by span links; each exchange a
span (``a2a.client``, kind CLIENT, for what a client or ``record`` saw; ``a2a.server``, kind SERVER, for
what the proxy relayed or ``serve`` answered: the exchange row's ``role``), each stream item a span
event, and doctor's findings span events and the span's status. The attributes are those of the A2A
proposal of the OpenTelemetry GenAI semantic conventions (:data:`SEMCONV_PIN`), ours under ``a2a_tape.``.
Every time is the recorded one: a span starts and ends when its exchange did, an event is stamped with
its arrival time.

The spans are the OpenTelemetry SDK's own (``ReadableSpan``), encoded by the official OTLP packages
(the ``otel`` extra): protobuf over HTTP to a collector, OTLP/JSON lines to a file. The log is read a
task at a time and the spans go out in batches, so a large log is never held whole.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable, Iterable, Sequence
from typing import IO, Any, Protocol

import msgspec
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from a2a_tape.store import (
    ArtifactUpdate,
    ErrorItem,
    Exchange,
    Recordings,
    StatusUpdate,
    Store,
    StoredEvent,
    TaskSnapshot,
    decode_item,
)
from a2a_tape.store.decode import V1_STATE_NAMES, TextChunk, chunk_update
from a2a_tape.store.errors import A2ATapeError
from a2a_tape.store.events import Item
from a2a_tape.store.methods import ALL_METHODS, OPERATIONS, OTHER_OPERATIONS, binding_and_version
from a2a_tape.wire.trace_context import ExchangeTrace, TraceParent, parse_traceparent

from .ended import Decoded, EndedExchange
from .lineage import Link, call_of, caller_within, carried, infer, unsettled
from .open_exchanges import OpenExchanges

SEMCONV_PIN = "eternalcuriouslearner/semantic-conventions-genai@05bcacee0cf9c7f96f10d148542d0f8b8043e4be"
"""The head of open-telemetry/semantic-conventions-genai PR #195 (A2A) whose attributes we follow."""

SEMCONV_ATTRIBUTES = frozenset(
    {
        "a2a.method.name",
        "a2a.protocol.version",
        "a2a.tenant",
        "a2a.message.id",
        "a2a.message.reference_task_ids",
        "a2a.agent_card.url",
        "a2a.task.id",
        "a2a.task.state",
        "gen_ai.conversation.id",
        "error.type",
        "server.address",
        "server.port",
        "client.address",
        "client.port",
    }
)
"""Every attribute the pinned proposal puts on ``a2a.client`` and ``a2a.server`` spans."""

OURS = "a2a_tape."
SERVER_ROLES = frozenset({"proxy", "replay"})
MAX_SPAN_EVENTS = 10_000
"""Stream items kept as span events per span (the first ones; the rest are counted as dropped)."""
BATCH = 256

_V10_NAME = {
    name: names["1.0"]
    for table in (OPERATIONS, OTHER_OPERATIONS)
    for names in table.values()
    for name in names.values()
    if "1.0" in names
}
_FAILED_OUTCOMES = frozenset({"error", "timeout", "dropped"})


def task_state(state: str) -> str:
    """Our (v0.3-spelled) state as the proposal spells it: ``input-required`` -> ``TASK_STATE_INPUT_REQUIRED``."""
    return V1_STATE_NAMES.get(state, "TASK_STATE_" + state.upper().replace("-", "_"))


def method_name(ex: Exchange) -> str | None:
    """``a2a.method.name``: the operation's v1.0 name whatever the dialect (``message/stream`` -> ``SendStreamingMessage``)."""
    if ex.rpc_method is None:
        return None
    return _V10_NAME.get(ex.rpc_method, ex.rpc_method) if ex.rpc_method in ALL_METHODS else ex.rpc_method


def nanos(seconds: float) -> int:
    return round(seconds * 1e9)


def _digest(*parts: str) -> bytes:
    return hashlib.sha256("\0".join(parts).encode()).digest()


def derived_trace_id(task_id: str, observer: str | None = None) -> int:
    """The trace of a run whose requests carried none (named by the task id and the run's observer; by
    the task id alone for exchanges of no observer): the same id on every export of the run."""
    parts = ("a2a-tape trace", task_id) if observer is None else ("a2a-tape trace", task_id, observer)
    return int.from_bytes(_digest(*parts)[:16]) or 1


def derived_span_id(task_id: str, ex: Exchange) -> int:
    return int.from_bytes(_digest("a2a-tape span", task_id, str(ex.id), repr(ex.started_at))[:8]) or 1


class Finding(Protocol):
    """A doctor finding as a span shows it (:class:`inspection.doctor.Finding`; doctor is above this room)."""

    @property
    def code(self) -> str: ...
    @property
    def level(self) -> str: ...
    @property
    def message(self) -> str: ...
    @property
    def positions(self) -> list[int]: ...


Faults = Callable[[str, Sequence[StoredEvent], Iterable[Exchange]], Sequence[Finding]]
"""What finds a task's faults (doctor's ``findings``): given the task id, its events and its exchanges."""


class _Span(ReadableSpan):
    """A finished span built from the log, with the count of stream items beyond :data:`MAX_SPAN_EVENTS`."""

    def __init__(self, *args: Any, dropped: int = 0, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._dropped = dropped

    @property
    def dropped_events(self) -> int:
        return self._dropped


class _Builder:
    """The span of one exchange, filled as its events are read."""

    def __init__(self, task_id: str, ex: Exchange, max_events: int) -> None:
        self.task_id, self.ex, self.max_events = task_id, ex, max_events
        self.events: list[Event] = []
        self.count = 0
        self.first_at: float | None = None
        self.last_at: float | None = None
        self.state: str | None = None
        self.context_id: str | None = ex.context_id
        self.error_type: str | None = None
        self.error_message: str | None = None
        self.findings: list[Finding] = []

    def add(self, ev: StoredEvent, decoded: Decoded = None) -> None:
        """One stored event (``decoded``: its item as its capture decoded it; None: decoded here): what
        the span learns from it, and its span event (the first :attr:`max_events`). The event is named
        by the item's kind and stamped with its arrival, so neither is repeated as an attribute (nor the
        offset from the span's start, which is its time)."""
        item = _item(ev, decoded)
        self.count += 1
        if self.first_at is None:
            self.first_at = ev.received_at
        self.last_at = ev.received_at
        self.context_id = self.context_id or item.context_id
        body = item.body
        attrs: dict[str, Any] = {POSITION: ev.position}
        if isinstance(body, (StatusUpdate, TaskSnapshot)):
            self.state = body.state
            attrs["a2a.task.state"] = task_state(body.state)
        elif isinstance(body, ArtifactUpdate):
            attrs[ARTIFACT_ID] = body.artifact.artifact_id
            if body.append:
                attrs[ARTIFACT_APPEND] = True
            if body.last_chunk:
                attrs[ARTIFACT_LAST_CHUNK] = True
        elif isinstance(body, ErrorItem):
            self.error_type = str(body.code) if body.code is not None else "_OTHER"
            self.error_message = body.message
            attrs["error.type"] = self.error_type
            attrs[OURS + "error.message"] = body.message
        if len(self.events) >= self.max_events:
            return
        if ev.origin != "upstream":
            attrs[OURS + "event.origin"] = ev.origin
        if ev.sse_event:
            attrs[OURS + "event.sse_event"] = ev.sse_event
        self.events.append(Event(item.kind, attrs, nanos(ev.received_at)))


def _item(ev: StoredEvent, decoded: Decoded) -> Item:
    """The item of ``ev``: as its capture decoded it (a text chunk peeked is the update
    :func:`store.decode.decode_item` makes of the same bytes: :func:`store.decode.chunk_update`), else
    decoded from its payload."""
    if decoded is None:
        return decode_item(bytes(ev.payload))
    if isinstance(decoded, TextChunk):
        return Item(chunk_update(decoded))
    return decoded


POSITION = OURS + "event.position"
ARTIFACT_ID, ARTIFACT_APPEND, ARTIFACT_LAST_CHUNK = (OURS + "artifact." + k for k in ("id", "append", "last_chunk"))


def _request_fields(ex: Exchange) -> dict[str, Any]:
    """``a2a.tenant`` and ``a2a.message.reference_task_ids`` from a JSON request body (JSON-RPC, HTTP+JSON)."""
    body = ex.request_body
    if not body or len(body) > 1 << 20 or not body.lstrip().startswith(b"{"):
        return {}
    try:
        doc = msgspec.json.decode(body)
    except msgspec.DecodeError:
        return {}
    params = doc.get("params") if isinstance(doc.get("params"), dict) else doc
    out: dict[str, Any] = {}
    if isinstance(params.get("tenant"), str) and params["tenant"]:
        out["a2a.tenant"] = params["tenant"]
    message = params.get("message")
    refs = message.get("referenceTaskIds") if isinstance(message, dict) else None
    if isinstance(refs, list) and refs and all(isinstance(r, str) for r in refs):
        out["a2a.message.reference_task_ids"] = refs
    return out


def _address(url: str) -> dict[str, Any]:
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return {}
    if not parts.hostname:
        return {}
    out: dict[str, Any] = {"server.address": parts.hostname}
    default = {"http": 80, "https": 443}.get(parts.scheme)
    if port is not None or default is not None:
        out["server.port"] = port if port is not None else default
    return out


def _error_type(b: _Builder) -> str | None:
    ex = b.ex
    if b.error_type:
        return b.error_type
    if ex.status is not None and ex.status >= 400:
        return str(ex.status)
    if ex.outcome in _FAILED_OUTCOMES:
        return ex.outcome
    return None


def _attributes(b: _Builder, source: str) -> dict[str, Any]:
    ex = b.ex
    binding, version = binding_and_version(ex.binding, ex.dialect)
    attrs: dict[str, Any] = {"a2a.method.name": method_name(ex) or ex.http_method, "a2a.task.id": b.task_id}
    if version:
        attrs["a2a.protocol.version"] = version
    if b.state:
        attrs["a2a.task.state"] = task_state(b.state)
    if ex.message_id:
        attrs["a2a.message.id"] = ex.message_id
    if b.context_id:
        attrs["gen_ai.conversation.id"] = b.context_id
    attrs.update(_request_fields(ex))
    attrs.update(_address(ex.url))
    if (error := _error_type(b)) is not None:
        attrs["error.type"] = error
    ours: dict[str, Any] = {
        "exchange.id": ex.id,
        "role": ex.role,
        "binding": binding,
        "rpc_method": ex.rpc_method,
        "http.method": ex.http_method,
        "http.status_code": ex.status,
        "url": ex.url,
        "streaming": ex.streaming,
        "outcome": ex.outcome,
        "error": ex.error,
        "event.count": b.count,
        "trace_context.source": source,
    }
    if b.first_at is not None and ex.started_at:
        ours["time_to_first_event_ms"] = (b.first_at - ex.started_at) * 1000.0
    attrs.update({OURS + k: v for k, v in ours.items() if v is not None and v != ""})
    return attrs


def _finding_event(f: Finding, at: float) -> Event:
    attrs: dict[str, Any] = {
        OURS + "doctor.code": f.code,
        OURS + "doctor.level": f.level,
        OURS + "doctor.message": f.message,
    }
    if f.positions:
        attrs[OURS + "doctor.positions"] = list(f.positions)
    return Event("a2a_tape.doctor." + f.code, attrs, nanos(at))


def _status(b: _Builder, error_type: str | None) -> Status:
    errors = [f for f in b.findings if f.level == "error"]
    if error_type is not None:
        why = b.error_message or b.ex.error or f"{error_type}"
        return Status(StatusCode.ERROR, why)
    if errors:
        return Status(StatusCode.ERROR, f"{errors[0].code}: {errors[0].message}")
    return Status(StatusCode.UNSET)


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


def _of_task(task_id: str, rows: list[Exchange]) -> list[Exchange]:
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
        return _of_task(task_id, self._st.exchanges(task_id))


class Settings(msgspec.Struct, frozen=True):
    """What every span of one export shares: the resource (who exported), the scope, the event cap."""

    resource: Any  # opentelemetry.sdk.resources.Resource
    scope: Any  # opentelemetry.sdk.util.instrumentation.InstrumentationScope
    max_events: int = MAX_SPAN_EVENTS


def settings(version: str, log: str, *, max_events: int = MAX_SPAN_EVENTS) -> Settings:
    """The resource names a2a-tape (``OTEL_SERVICE_NAME``/``OTEL_RESOURCE_ATTRIBUTES`` may add to it) and the log."""
    resource = Resource.create({"service.name": "a2a-tape", "service.version": version, OURS + "log": log})
    return Settings(resource, InstrumentationScope("a2a-tape", version), max_events)


def _run_link(r: RunLink, task_id: str, flags: TraceFlags) -> Any:
    from opentelemetry.trace import Link as SpanLink

    attrs: dict[str, Any] = {
        OURS + "link.relation": "run",
        OURS + "link.task.id": task_id,
        OURS + "link.exchange.id": r.exchange_id,
    }
    if r.observer is not None:
        attrs[OURS + "link.run.observer"] = r.observer
    return SpanLink(SpanContext(r.trace_id, r.span_id, is_remote=True, trace_flags=flags), attrs)


def _span(
    b: _Builder,
    ctx: Context,
    found: list[tuple[Finding, float]],
    s: Settings,
    run: str | None = None,
    run_links: Sequence[RunLink] = (),
) -> ReadableSpan:
    from opentelemetry.trace import TraceState

    ex = b.ex
    start = ex.started_at or b.first_at or 0.0
    end = max(ex.ended_at or b.last_at or start, start)
    b.findings = [f for f, _ in found]
    error = _error_type(b)
    trace_state = TraceState.from_header([ctx.tracestate]) if ctx.tracestate else None
    flags = TraceFlags(TraceFlags.SAMPLED)
    parent = None
    if ctx.parent_id is not None:
        parent = SpanContext(ctx.trace_id, ctx.parent_id, is_remote=True, trace_flags=flags, trace_state=trace_state)
    links = []
    if ctx.inferred is not None:  # the caller the log points to, marked as inferred (capture/lineage.py)
        from opentelemetry.trace import Link as SpanLink

        trace_id, span_id, link = ctx.inferred
        caller = SpanContext(trace_id, span_id, is_remote=True, trace_flags=flags)
        links.append(
            SpanLink(
                caller,
                {
                    OURS + "link.relation": "caller",
                    OURS + "link.inferred": True,
                    OURS + "link.basis": link.basis,
                    OURS + "link.task.id": link.task_id,
                    OURS + "link.exchange.id": link.exchange_id,
                },
            )
        )
    links.extend(_run_link(r, b.task_id, flags) for r in run_links)
    attributes = _attributes(b, ctx.source)
    if run is not None:
        attributes[OURS + "run.observer"] = run
    if ex.id is None:  # events of the task that name no exchange
        name, kind = "a2a_tape.events", SpanKind.INTERNAL
    else:
        name = method_name(ex) or ex.http_method
        kind = SpanKind.SERVER if ex.role in SERVER_ROLES else SpanKind.CLIENT
    return _Span(
        name,
        context=SpanContext(ctx.trace_id, ctx.span_id, is_remote=False, trace_flags=flags, trace_state=trace_state),
        parent=parent,
        resource=s.resource,
        attributes=attributes,
        events=b.events + [_finding_event(f, at) for f, at in found],
        links=links,
        kind=kind,
        status=_status(b, error),
        start_time=nanos(start),
        end_time=nanos(end),
        instrumentation_scope=s.scope,
        dropped=b.count - len(b.events),
    )


def _exchanges_of(st: Recordings, task_id: str, events: Sequence[StoredEvent]) -> dict[int, Exchange]:
    """The task's exchanges, and those its events came in (a call recorded before its task was known)."""
    found = {ex.id: ex for ex in st.exchanges(task_id) if ex.id is not None}
    for ex_id in {ev.exchange_id for ev in events if ev.exchange_id is not None} - found.keys():
        ex = st.get_exchange(ex_id)
        if ex is not None and ex.id is not None:
            found[ex.id] = ex
    return found


def task_spans(
    st: Recordings,
    task_id: str,
    s: Settings,
    faults_of: Faults | None = None,
    joins: Lineage | None = None,
    every: Iterable[Exchange] = (),
) -> list[ReadableSpan]:
    """One task's spans, a span per exchange (and one for events that name no exchange), by start time,
    each run in its own trace (:class:`TaskRuns`; ``every``: the task's exchanges of every run, when
    ``st`` shows one run of it); with ``faults_of``, its findings as span events and statuses; with
    ``joins``, the callers inferred for exchanges that carried no trace context (parent and a span link
    marked inferred)."""
    events = st.read_task(task_id)
    exchanges = _exchanges_of(st, task_id, events)
    faults = list(faults_of(task_id, events, exchanges.values())) if faults_of is not None else []
    at_position: dict[int, list[Finding]] = {}
    for f in faults:
        if f.positions:
            at_position.setdefault(f.positions[0], []).append(f)
    builders: dict[int | None, _Builder] = {i: _Builder(task_id, ex, s.max_events) for i, ex in exchanges.items()}
    found: dict[int | None, list[tuple[Finding, float]]] = {}
    for ev in events:
        key = ev.exchange_id if ev.exchange_id in exchanges else None
        if key not in builders:
            builders[key] = _Builder(task_id, Exchange(id=None, role="client"), s.max_events)
        builders[key].add(ev)
        for f in at_position.pop(ev.position, ()):
            found.setdefault(key, []).append((f, ev.received_at))
    del events
    order = sorted(builders, key=lambda k: (builders[k].ex.started_at or builders[k].first_at or 0.0, k or 0))
    if order:  # findings that name no event go on the task's first span
        first = builders[order[0]]
        at = first.ex.started_at or first.first_at or 0.0
        found.setdefault(order[0], []).extend((f, at) for f in faults if not f.positions)
    rows = {ex.id or 0: ex for ex in every}  # the task's other runs, then the exchanges read here
    rows.update(exchanges)
    runs = TaskRuns(task_id, rows.values(), joins)
    spans = []
    for k in order:
        b = builders[k]
        spans.append(_span(b, runs.context(b.ex), found.get(k, []), s, runs.run(b.ex), runs.links(b.ex)))
    return spans


def exchange_span(st: Recordings, exchange_id: int, s: Settings, joins: Lineage | None = None) -> ReadableSpan | None:
    """The span of one ended exchange as :func:`task_spans` builds it (the same trace, ids, parent and
    links, from the log as it is now), without doctor's findings (the task may go on); None for an
    exchange that belongs to no task (a card fetch). With ``joins`` (:class:`LogWindows`), its caller
    inferred as the export infers it (:class:`NotYet` while that cannot be told)."""
    ex = st.get_exchange(exchange_id)
    if ex is None or ex.id is None:
        return None
    events = st.read_exchange(exchange_id)
    return _one_span(ex, events, (), st.exchanges, s, joins)


def ended_span(
    st: Recordings,
    ended: EndedExchange,
    s: Settings,
    joins: Lineage | None = None,
    rows_of: Callable[[str], list[Exchange]] | None = None,
) -> ReadableSpan | None:
    """:func:`exchange_span` of an exchange as its capture wrote it (:class:`capture.ended.EndedExchange`:
    the row and its events as stored, with the items decoded on their way in): the same span, without
    reading the exchange and its events back nor decoding them again. The log is asked only for the
    task's other exchanges (its runs: ``rows_of``, :func:`held_rows`; ``st.exchanges`` by default) and,
    through ``joins``, for what its caller's inference needs."""
    if ended.row.id is None:
        return None
    return _one_span(ended.row, ended.events, ended.items, rows_of or st.exchanges, s, joins)


def _task_of(ex: Exchange, events: Sequence[StoredEvent]) -> str | None:
    return ex.task_id or next((ev.task_id for ev in events if ev.task_id), None)


def held_rows(st: Store, ended: Sequence[EndedExchange]) -> Callable[[str], list[Exchange]]:
    """The task rows of a batch of ended exchanges (``ended_span``'s ``rows_of``): a task all of whose
    exchanges are in the batch (the common case: a task of one exchange) gets them from memory, any
    other reads its rows from the log, as :func:`exchange_span` does. One query for the batch, of ids
    only (:meth:`store.Store.task_exchange_ids`), tells which."""
    held: dict[str, dict[int, Exchange]] = {}
    for e in ended:
        task_id = _task_of(e.row, e.events)
        if task_id is not None and e.row.id is not None:
            held.setdefault(task_id, {})[e.row.id] = e.row
    known = st.task_exchange_ids(held) if held else {}

    def rows_of(task_id: str) -> list[Exchange]:
        mine = held.get(task_id, {})
        if mine and known.get(task_id, set()) <= mine.keys():
            return list(mine.values())
        return st.exchanges(task_id)

    return rows_of


def _one_span(
    ex: Exchange,
    events: Sequence[StoredEvent],
    items: Sequence[Decoded],
    rows_of: Callable[[str], list[Exchange]],
    s: Settings,
    joins: Lineage | None,
) -> ReadableSpan | None:
    """The span of the ended exchange ``ex`` from its ``events`` (``items``: their decoded items, when
    known), its task's rows from ``rows_of``: the one body of :func:`exchange_span` and :func:`ended_span`."""
    assert ex.id is not None
    task_id = _task_of(ex, events)
    if task_id is None:
        return None
    b = _Builder(task_id, ex, s.max_events)
    for k, ev in enumerate(events):
        if ev.task_id == task_id:  # as task_spans reads them: the task's events in this exchange
            b.add(ev, items[k] if k < len(items) else None)
    rows = {row.id: row for row in _of_task(task_id, rows_of(task_id))}
    rows[ex.id] = ex
    runs = TaskRuns(task_id, rows.values(), joins)
    return _span(b, runs.context(ex), [], s, runs.run(ex), runs.links(ex))


# -- where the spans go ------------------------------------------------------------------------


class ExportFailed(A2ATapeError):
    """The collector did not take the spans: the message says why, in one line."""


def json_line(spans: Sequence[ReadableSpan]) -> bytes:
    """One OTLP/JSON ``ExportTraceServiceRequest`` (the file exporter's and ``otlpjsonfile``'s line).

    Encoded by the official encoder, written by protobuf's JSON mapping, with the ids in hex as
    OTLP/JSON says (protobuf's mapping would write them in base64)."""
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    doc = MessageToDict(encode_spans(spans), use_integers_for_enums=True)
    for rs in doc.get("resourceSpans", ()):
        for ss in rs.get("scopeSpans", ()):
            for span in ss.get("spans", ()):
                _hex_ids(span)
                for link in span.get("links", ()):
                    _hex_ids(link)
    return msgspec.json.encode(doc) + b"\n"


def _hex_ids(node: dict[str, Any]) -> None:
    import base64

    for key in ("traceId", "spanId", "parentSpanId"):
        if node.get(key):
            node[key] = base64.b64decode(node[key]).hex()


def write_json_lines(fh: IO[bytes]) -> Callable[[Sequence[ReadableSpan]], None]:
    def send(spans: Sequence[ReadableSpan]) -> None:
        fh.write(json_line(spans))

    return send


def endpoint_url(url: str) -> str:
    """A collector's base URL (``http://host:4318``) gets OTLP/HTTP's traces path; a URL with a path is used as given."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return url.rstrip("/") + "/v1/traces" if parts.path in ("", "/") else url


def post_to(url: str) -> tuple[Callable[[Sequence[ReadableSpan]], None], Callable[[], None]]:
    """A sender of batches to a collector (OTLP/HTTP, protobuf; the official exporter, its retries bounded by
    ``OTEL_EXPORTER_OTLP_TRACES_TIMEOUT``, 10 s by default), and how to close it. A batch it did not take
    raises :class:`ExportFailed`: the exporter's own log lines are kept quiet, the caller says one."""
    import logging

    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import SpanExportResult

    logging.getLogger("opentelemetry.exporter").setLevel(logging.CRITICAL + 1)
    full = endpoint_url(url)
    exporter = OTLPSpanExporter(endpoint=full)

    def send(spans: Sequence[ReadableSpan]) -> None:
        if exporter.export(spans) is not SpanExportResult.SUCCESS:
            raise ExportFailed(f"the collector at {full} did not take the spans (is it running?)")

    return send, exporter.shutdown
