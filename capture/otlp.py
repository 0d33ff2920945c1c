"""Recorded tasks as OpenTelemetry traces: the one mapping of the log to spans (docs/otel.md), for
``a2a-tape export --format otlp`` (:mod:`inspection.otlp` adds doctor's findings) and for the live export
of ``proxy``/``record --otlp-endpoint`` (:mod:`recorder.otlp_live`, a span per exchange as it ends).

Each run of a task (its recording by one observer: ``record``, the proxy, a replay recorded back, a
verify run) is a trace, the runs of one task joined by span links (:mod:`capture.span_places` says where
each span sits); each exchange a span (``a2a.client``, kind CLIENT, for what a client or ``record`` saw;
``a2a.server``, kind SERVER, for what the proxy relayed or ``serve`` answered: the exchange row's
``role``), each stream item a span event, and doctor's findings span events and the span's status. The
attributes are those of the A2A proposal of the OpenTelemetry GenAI semantic conventions
(:data:`SEMCONV_PIN`), ours under ``a2a_tape.``. Every time is the recorded one: a span starts and ends
when its exchange did, an event is stamped with its arrival time.

A span is built as the OTLP protobuf ``Span`` message's own fields, as plain data (:class:`Span`: the
proto field names, ids as bytes, times as integer nanoseconds), and a batch becomes one official
``ExportTraceServiceRequest`` (the ``opentelemetry-proto`` class) in one construction (:func:`request`):
protobuf builds every submessage in C, where the SDK's span objects and its encoder built each in Python
(docs/performance.md section 30). The message is the one that encoder wrote, field for field
(tests/otel/test_otlp_oracle.py); :mod:`capture.otlp_send` sends it (protobuf over HTTP to a collector,
OTLP/JSON lines to a file). The log is read a task at a time and the spans go out in batches, so a large
log is never held whole.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, cast

import msgspec

from a2a_tape.store import (
    ArtifactUpdate,
    ErrorItem,
    Exchange,
    Recordings,
    StatusUpdate,
    StoredEvent,
    TaskSnapshot,
    decode_item,
)
from a2a_tape.store.decode import V1_STATE_NAMES
from a2a_tape.store.methods import ALL_METHODS, OPERATIONS, OTHER_OPERATIONS, binding_and_version

from .otlp_messages import (
    FLAGS_LOCAL,
    FLAGS_REMOTE,
    KIND_CLIENT,
    KIND_INTERNAL,
    KIND_SERVER,
    STATUS_ERROR,
    STATUS_UNSET,
    KeyValue,
    ProtoMessage,
    Scope,
    Span,
    SpanEvent,
    SpanLink,
    SpanStatus,
    key_values,
    span_id_bytes,
    trace_id_bytes,
)
from .span_places import Context, Lineage, RunLink, TaskRuns, of_task

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


class _Builder:
    """The span of one exchange, filled as its events are read."""

    def __init__(self, task_id: str, ex: Exchange, max_events: int) -> None:
        self.task_id, self.ex, self.max_events = task_id, ex, max_events
        self.events: list[SpanEvent] = []
        self.count = 0
        self.first_at: float | None = None
        self.last_at: float | None = None
        self.state: str | None = None
        self.context_id: str | None = ex.context_id
        self.error_type: str | None = None
        self.error_message: str | None = None
        self.findings: list[Finding] = []

    def add(self, ev: StoredEvent) -> None:
        """One stored event: what the span learns from it, and its span event (the first
        :attr:`max_events`). The event is named
        by the item's kind and stamped with its arrival, so neither is repeated as an attribute (nor the
        offset from the span's start, which is its time)."""
        item = decode_item(bytes(ev.payload))
        self.count += 1
        if self.first_at is None:
            self.first_at = ev.received_at
        self.last_at = ev.received_at
        self.context_id = self.context_id or item.context_id
        body = item.body
        # the event's attributes written as KeyValues here (the one path of every stream item; the values'
        # types are the store's: an int position, str states and ids), as key_values() would write them
        kvs: list[Any] = [{"key": POSITION, "value": {"int_value": ev.position}}]
        if isinstance(body, (StatusUpdate, TaskSnapshot)):
            self.state = body.state
            kvs.append({"key": "a2a.task.state", "value": {"string_value": task_state(body.state)}})
        elif isinstance(body, ArtifactUpdate):
            kvs.append({"key": ARTIFACT_ID, "value": {"string_value": body.artifact.artifact_id}})
            if body.append:
                kvs.append({"key": ARTIFACT_APPEND, "value": {"bool_value": True}})
            if body.last_chunk:
                kvs.append({"key": ARTIFACT_LAST_CHUNK, "value": {"bool_value": True}})
        elif isinstance(body, ErrorItem):
            self.error_type = str(body.code) if body.code is not None else "_OTHER"
            self.error_message = body.message
            kvs += key_values({"error.type": self.error_type, OURS + "error.message": body.message})
        if len(self.events) >= self.max_events:
            return
        if ev.origin != "upstream":
            kvs.append({"key": ORIGIN, "value": {"string_value": ev.origin}})
        if ev.sse_event:
            kvs.append({"key": SSE_EVENT, "value": {"string_value": ev.sse_event}})
        self.events.append({"name": item.kind, "time_unix_nano": nanos(ev.received_at), "attributes": kvs})


POSITION, ORIGIN, SSE_EVENT = (OURS + "event." + k for k in ("position", "origin", "sse_event"))
ARTIFACT_ID, ARTIFACT_APPEND, ARTIFACT_LAST_CHUNK = (OURS + "artifact." + k for k in ("id", "append", "last_chunk"))


def _request_fields(ex: Exchange) -> dict[str, Any]:
    """``a2a.tenant`` and ``a2a.message.reference_task_ids`` from a JSON request body (JSON-RPC, HTTP+JSON)."""
    body = ex.request_body
    if not body or len(body) > 1 << 20 or not body.lstrip().startswith(b"{"):
        return {}
    if b"tenant" not in body and b"referenceTaskIds" not in body:  # neither is named: nothing to decode
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


@functools.lru_cache(maxsize=256)
def _address(url: str) -> Mapping[str, Any]:
    """``server.address`` and ``server.port`` of a URL (the few a log has, each split once)."""
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


def _finding_event(f: Finding, at: float) -> SpanEvent:
    attrs: dict[str, Any] = {
        OURS + "doctor.code": f.code,
        OURS + "doctor.level": f.level,
        OURS + "doctor.message": f.message,
    }
    if f.positions:
        attrs[OURS + "doctor.positions"] = list(f.positions)
    return {"name": "a2a_tape.doctor." + f.code, "time_unix_nano": nanos(at), "attributes": key_values(attrs)}


def _status(b: _Builder, error_type: str | None) -> SpanStatus:
    errors = [f for f in b.findings if f.level == "error"]
    if error_type is not None:
        return _error_status(b.error_message or b.ex.error or f"{error_type}")
    if errors:
        return _error_status(f"{errors[0].code}: {errors[0].message}")
    return {"code": STATUS_UNSET}


def _error_status(why: object) -> SpanStatus:
    """An error status with its description as the API's ``Status`` keeps one: a str, else none."""
    return {"code": STATUS_ERROR, "message": why} if isinstance(why, str) else {"code": STATUS_ERROR}


class Settings(msgspec.Struct, frozen=True):
    """What every span of one export shares: the resource (who exported), the scope, the event cap."""

    resource: list[KeyValue]  # the resource's attributes
    scope: Scope
    max_events: int = MAX_SPAN_EVENTS


def settings(version: str, log: str, *, max_events: int = MAX_SPAN_EVENTS) -> Settings:
    """The resource names a2a-tape (``OTEL_SERVICE_NAME``/``OTEL_RESOURCE_ATTRIBUTES`` may add to it: the
    SDK's own ``Resource.create`` reads them) and the log."""
    from opentelemetry.sdk.resources import Resource

    resource = Resource.create({"service.name": "a2a-tape", "service.version": version, OURS + "log": log})
    return Settings(
        key_values(resource.attributes), {"name": "a2a-tape", "version": version, "attributes": []}, max_events
    )


def request(spans: Sequence[Span], s: Settings) -> ProtoMessage:
    """A batch of spans as one OTLP ``ExportTraceServiceRequest``: the official class, made in one call
    from the nested data (protobuf builds each submessage; one resource, one scope, as the official
    encoder groups the spans of one export)."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    # the generated class takes a dict wherever it takes a message (its stubs name only the message types)
    make = cast(Callable[..., ProtoMessage], ExportTraceServiceRequest)
    if not spans:
        return make()
    return make(
        resource_spans=[{"resource": {"attributes": s.resource}, "scope_spans": [{"scope": s.scope, "spans": spans}]}]
    )


def _trace_state(header: str) -> str:
    """``tracestate`` as the API's ``TraceState`` keeps it (an invalid header: none) and the encoder writes it."""
    from opentelemetry.trace import TraceState

    return ",".join(f"{k}={v}" for k, v in TraceState.from_header([header]).items())


def _link(trace_id: int, span_id: int, attrs: dict[str, Any]) -> SpanLink:
    return {
        "trace_id": trace_id_bytes(trace_id),
        "span_id": span_id_bytes(span_id),
        "attributes": key_values(attrs),
        "flags": FLAGS_REMOTE,
    }


def _run_link(r: RunLink, task_id: str) -> SpanLink:
    attrs: dict[str, Any] = {
        OURS + "link.relation": "run",
        OURS + "link.task.id": task_id,
        OURS + "link.exchange.id": r.exchange_id,
    }
    if r.observer is not None:
        attrs[OURS + "link.run.observer"] = r.observer
    return _link(r.trace_id, r.span_id, attrs)


def _span(
    b: _Builder,
    ctx: Context,
    found: list[tuple[Finding, float]],
    run: str | None = None,
    run_links: Sequence[RunLink] = (),
) -> Span:
    ex = b.ex
    start = ex.started_at or b.first_at or 0.0
    end = max(ex.ended_at or b.last_at or start, start)
    b.findings = [f for f, _ in found]
    error = _error_type(b)
    links = []
    if ctx.inferred is not None:  # the caller the log points to, marked as inferred (capture/lineage.py)
        trace_id, span_id, link = ctx.inferred
        caller = {
            OURS + "link.relation": "caller",
            OURS + "link.inferred": True,
            OURS + "link.basis": link.basis,
            OURS + "link.task.id": link.task_id,
            OURS + "link.exchange.id": link.exchange_id,
        }
        links.append(_link(trace_id, span_id, caller))
    links.extend(_run_link(r, b.task_id) for r in run_links)
    attributes = _attributes(b, ctx.source)
    if run is not None:
        attributes[OURS + "run.observer"] = run
    if ex.id is None:  # events of the task that name no exchange
        name, kind = "a2a_tape.events", KIND_INTERNAL
    else:
        name = method_name(ex) or ex.http_method
        kind = KIND_SERVER if ex.role in SERVER_ROLES else KIND_CLIENT
    span: Span = {
        "trace_id": trace_id_bytes(ctx.trace_id),
        "span_id": span_id_bytes(ctx.span_id),
        "flags": FLAGS_LOCAL,
        "name": name,
        "kind": kind,
        "start_time_unix_nano": nanos(start),
        "end_time_unix_nano": nanos(end),
        "attributes": key_values(attributes),
        "events": b.events + [_finding_event(f, at) for f, at in found],
        "status": _status(b, error),
    }
    if ctx.tracestate:
        span["trace_state"] = _trace_state(ctx.tracestate)
    if ctx.parent_id is not None:
        span["parent_span_id"], span["flags"] = span_id_bytes(ctx.parent_id), FLAGS_REMOTE
    if links:
        span["links"] = links
    if b.count > len(b.events):
        span["dropped_events_count"] = b.count - len(b.events)
    return span


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
) -> list[Span]:
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
    spans: list[Span] = []
    for k in order:
        b = builders[k]
        spans.append(_span(b, runs.context(b.ex), found.get(k, []), runs.run(b.ex), runs.links(b.ex)))
    return spans


def exchange_span(st: Recordings, exchange_id: int, s: Settings, joins: Lineage | None = None) -> Span | None:
    """The span of one ended exchange as :func:`task_spans` builds it (the same trace, ids, parent and
    links, from the log as it is now), without doctor's findings (the task may go on); None for an
    exchange that belongs to no task (a card fetch). With ``joins`` (:class:`LogWindows`), its caller
    inferred as the export infers it (:class:`NotYet` while that cannot be told)."""
    ex = st.get_exchange(exchange_id)
    if ex is None or ex.id is None:
        return None
    events = st.read_exchange(exchange_id)
    return _one_span(ex, events, st.exchanges, s, joins)


def _task_of(ex: Exchange, events: Sequence[StoredEvent]) -> str | None:
    return ex.task_id or next((ev.task_id for ev in events if ev.task_id), None)


def _one_span(
    ex: Exchange,
    events: Sequence[StoredEvent],
    rows_of: Callable[[str], list[Exchange]],
    s: Settings,
    joins: Lineage | None,
) -> Span | None:
    """The span of the ended exchange ``ex`` from its ``events``, its task's rows from ``rows_of``."""
    assert ex.id is not None
    task_id = _task_of(ex, events)
    if task_id is None:
        return None
    b = _Builder(task_id, ex, s.max_events)
    for ev in events:
        if ev.task_id == task_id:  # as task_spans reads them: the task's events in this exchange
            b.add(ev)
    rows = {row.id: row for row in of_task(task_id, rows_of(task_id))}
    rows[ex.id] = ex
    runs = TaskRuns(task_id, rows.values(), joins)
    return _span(b, runs.context(ex), [], runs.run(ex), runs.links(ex))
