"""Recorded tasks as OpenTelemetry traces: the one mapping of the log to spans (docs/otel.md), for
``a2a-tape export --format otlp`` (:mod:`inspection.otlp` adds doctor's findings) and for the live export
of ``proxy``/``record --otlp-endpoint`` (:mod:`recorder.otlp_live`, a span per exchange as it ends).

Each task is a trace (the trace its requests carried in ``traceparent``, else one named by the task id),
each exchange a span (``a2a.client``, kind CLIENT, for what a client or ``record`` saw; ``a2a.server``,
kind SERVER, for what the proxy relayed or ``serve`` answered: the exchange row's ``role``), each stream
item a span event, and doctor's findings span events and the span's status. The attributes are those of
the A2A proposal of the OpenTelemetry GenAI semantic conventions (:data:`SEMCONV_PIN`), ours under
``a2a_tape.``. Every time is the recorded one: a span starts and ends when its exchange did, an event is
stamped with its arrival time.

The spans are the OpenTelemetry SDK's own (``ReadableSpan``), encoded by the official OTLP packages
(the ``otel`` extra): protobuf over HTTP to a collector, OTLP/JSON lines to a file. The log is read a
task at a time and the spans go out in batches, so a large log is never held whole.
"""

from __future__ import annotations

import hashlib
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
    Item,
    Recordings,
    StatusUpdate,
    StoredEvent,
    TaskSnapshot,
    decode_item,
)
from a2a_tape.store.decode import V1_STATE_NAMES
from a2a_tape.store.errors import A2ATapeError
from a2a_tape.store.methods import ALL_METHODS, OPERATIONS, OTHER_OPERATIONS, binding_and_version
from a2a_tape.wire.trace_context import TraceParent, parse_traceparent

from .lineage import Link, carried, infer

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


def derived_trace_id(task_id: str) -> int:
    """The trace of a task whose requests carried none: the same id on every export of the task."""
    return int.from_bytes(_digest("a2a-tape trace", task_id)[:16]) or 1


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

    def add(self, ev: StoredEvent) -> None:
        item = decode_item(bytes(ev.payload))
        self.count += 1
        if self.first_at is None:
            self.first_at = ev.received_at
        self.last_at = ev.received_at
        self.context_id = self.context_id or item.context_id
        attrs = self._item(item)
        if len(self.events) >= self.max_events:
            return
        offset = (ev.received_at - self.ex.started_at) * 1000.0 if self.ex.started_at else None
        attrs.update(
            {
                OURS + "event.kind": item.kind,
                OURS + "event.position": ev.position,
                OURS + "event.seq": ev.seq,
                OURS + "event.origin": ev.origin,
            }
        )
        if offset is not None:
            attrs[OURS + "event.offset_ms"] = offset
        if ev.sse_event:
            attrs[OURS + "event.sse_event"] = ev.sse_event
        self.events.append(Event(item.kind, attrs, nanos(ev.received_at)))

    def _item(self, item: Item) -> dict[str, Any]:
        """The item's own attributes (a state, an artifact, an error), and what the span learns from it."""
        body = item.body
        attrs: dict[str, Any] = {}
        if isinstance(body, (StatusUpdate, TaskSnapshot)):
            self.state = body.state
            attrs["a2a.task.state"] = task_state(body.state)
        elif isinstance(body, ArtifactUpdate):
            attrs[OURS + "artifact.id"] = body.artifact.artifact_id
            attrs[OURS + "artifact.append"] = body.append
            attrs[OURS + "artifact.last_chunk"] = body.last_chunk
        elif isinstance(body, ErrorItem):
            self.error_type = str(body.code) if body.code is not None else "_OTHER"
            self.error_message = body.message
            attrs["error.type"] = self.error_type
            attrs[OURS + "error.message"] = body.message
        return attrs


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


def context_of(task_id: str, ex: Exchange, task_trace: int, joins: Lineage | None = None) -> Context:
    found = carried(ex)
    tp: TraceParent | None = parse_traceparent(found.traceparent) if found else None
    own = derived_span_id(task_id, ex)
    if found is None or tp is None:
        caller = joins.caller(ex) if joins is not None else None
        if caller is None:
            return Context(task_trace, own, None, "derived")
        trace_id, span_id, link = caller
        parent = span_id if trace_id == task_trace else None  # a parent is in the span's own trace
        return Context(task_trace, own, parent, "inferred", None, caller)
    if found.injected:  # the proxy started the trace: the id it sent is its own span's
        return Context(tp.trace_int, tp.parent_int, None, "injected", found.tracestate)
    sent = parse_traceparent(found.sent)
    if sent is not None and sent.trace_id == tp.trace_id:  # the proxy went on with it: its span, the client's parent
        return Context(tp.trace_int, sent.parent_int, tp.parent_int, "continued", found.tracestate)
    return Context(tp.trace_int, own, tp.parent_int, "request", found.tracestate)


def task_trace_id(task_id: str, exchanges: Iterable[Exchange], joins: Lineage | None = None) -> int:
    """The task's trace: the first one its requests carried, else its first inferred caller's (:class:`Lineage`),
    else one named by the task id."""
    ordered = sorted(exchanges, key=lambda e: (e.started_at, e.id or 0))
    for ex in ordered:
        found = carried(ex)
        tp = parse_traceparent(found.traceparent) if found else None
        if tp is not None:
            return tp.trace_int
    if joins is not None:
        for ex in ordered:
            caller = joins.caller(ex)
            if caller is not None:
                return caller[0]
    return derived_trace_id(task_id)


class Lineage:
    """The inferred callers of a log's exchanges (:func:`capture.lineage.infer`), and the span each caller
    has in the export (its trace followed up the chain): read from every exchange row once."""

    def __init__(self, exchanges: Iterable[Exchange]) -> None:
        rows = [ex for ex in exchanges if ex.id is not None]
        self.links = infer(rows)
        parents = {link.task_id for link in self.links.values()}
        self._by_task: dict[str, list[Exchange]] = {}
        for ex in rows:
            if ex.task_id in parents:  # kept without bodies beyond what carried() reads
                self._by_task.setdefault(ex.task_id, []).append(ex)
        self._by_id = {ex.id: ex for exs in self._by_task.values() for ex in exs}
        self._traces: dict[str, int] = {}

    def caller(self, ex: Exchange) -> tuple[int, int, Link] | None:
        """The inferred caller's (trace id, span id) and the link, for an exchange with one."""
        link = self.links.get(ex.id) if ex.id is not None else None
        parent = self._by_id.get(link.exchange_id) if link is not None else None
        if link is None or parent is None:
            return None
        trace = self.trace_of(link.task_id)
        return trace, context_of(link.task_id, parent, trace, self).span_id, link

    def trace_of(self, task_id: str) -> int:
        if task_id not in self._traces:
            self._traces[task_id] = derived_trace_id(task_id)  # a guard: links point to earlier exchanges
            self._traces[task_id] = task_trace_id(task_id, self._by_task.get(task_id, ()), self)
        return self._traces[task_id]


class Settings(msgspec.Struct, frozen=True):
    """What every span of one export shares: the resource (who exported), the scope, the event cap."""

    resource: Any  # opentelemetry.sdk.resources.Resource
    scope: Any  # opentelemetry.sdk.util.instrumentation.InstrumentationScope
    max_events: int = MAX_SPAN_EVENTS


def settings(version: str, log: str, *, max_events: int = MAX_SPAN_EVENTS) -> Settings:
    """The resource names a2a-tape (``OTEL_SERVICE_NAME``/``OTEL_RESOURCE_ATTRIBUTES`` may add to it) and the log."""
    resource = Resource.create({"service.name": "a2a-tape", "service.version": version, OURS + "log": log})
    return Settings(resource, InstrumentationScope("a2a-tape", version), max_events)


def _span(b: _Builder, ctx: Context, found: list[tuple[Finding, float]], s: Settings) -> ReadableSpan:
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
                    OURS + "link.inferred": True,
                    OURS + "link.basis": link.basis,
                    OURS + "link.task.id": link.task_id,
                    OURS + "link.exchange.id": link.exchange_id,
                },
            )
        )
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
        attributes=_attributes(b, ctx.source),
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
    st: Recordings, task_id: str, s: Settings, faults_of: Faults | None = None, joins: Lineage | None = None
) -> list[ReadableSpan]:
    """One task's spans, a span per exchange (and one for events that name no exchange), by start time;
    with ``faults_of``, its findings as span events and statuses; with ``joins``, the callers inferred
    for exchanges that carried no trace context (parent and a span link marked inferred)."""
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
    trace = task_trace_id(task_id, exchanges.values(), joins)
    return [_span(builders[k], context_of(task_id, builders[k].ex, trace, joins), found.get(k, []), s) for k in order]


def exchange_span(st: Recordings, exchange_id: int, s: Settings) -> ReadableSpan | None:
    """The span of one ended exchange as :func:`task_spans` builds it (the same trace and ids), without
    doctor's findings (the task may go on); None for an exchange that belongs to no task (a card fetch)."""
    ex = st.get_exchange(exchange_id)
    if ex is None or ex.id is None:
        return None
    events = st.read_exchange(exchange_id)
    task_id = ex.task_id or next((ev.task_id for ev in events if ev.task_id), None)
    if task_id is None:
        return None
    b = _Builder(task_id, ex, s.max_events)
    for ev in events:
        if ev.task_id == task_id:  # as task_spans reads them: the task's events in this exchange
            b.add(ev)
    trace = task_trace_id(task_id, [ex, *st.exchanges(task_id)])
    return _span(b, context_of(task_id, ex, trace), [], s)


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
