"""Who called whom, inferred from the log when no trace context says it (docs/otel.md, "Inferred parents").

Agents in a chain that pass no ``traceparent`` on leave a trace per hop. The log still knows a lot:
when each request arrived and ended, at which agent, on which host, and what the request said (its
message's ``contextId``, ``referenceTaskIds``, ``messageId``). :func:`infer` joins a task's call to the
exchange of another task that was under way at another agent when the call came, by one rule,
deterministic (the same log always gives the same links) and marked as inferred wherever it is shown.

The rule, for each exchange *c* that sends a message (``SendMessage``, ``SendStreamingMessage``, either
dialect or binding) and whose request carried no valid ``traceparent``:

1. The candidates are the exchanges *p* of another task, at another agent (the scheme, host and port of
   the exchange's URL: behind a proxy, its upstream), that send a message or subscribe (an agent working
   on *p*'s task), began before *c* (earlier start, or the same start and a lower id) and had not ended
   when *c* began. *p*'s agent was handling *p*'s task when *c*'s request was made.
2. The evidence, strongest first: *c*'s message names *p*'s task in ``referenceTaskIds``
   (``reference_task_ids``); *c*'s message carries *p*'s ``contextId`` (``context_id``); *c* carries
   *p*'s message id (``message_id``: the caller passed the message on); else, for ``timing`` alone, *c*
   was recorded by a proxy (the request came to an agent's door), on the same host as *p* (one clock),
   and ended no later than *p* (within :data:`END_SLACK`: each proxy stamps a row's end when it has
   relayed the last bytes, and the outer agent may answer as soon as it has the inner answer).
3. The first basis with candidates decides. Among them, the innermost: the one that began last (in a
   chain A -> B -> C, when C is called both A's and B's exchanges are open; B's began last). When two of
   them are at the same agent for different tasks, the log cannot say which session made the call: no
   link (ambiguous), never a guess.

The link is from exchange to exchange (*c*'s task gets *p*'s task as its parent); its basis is kept, and
every view says it is inferred: ``tasks --json`` (``parent_inferred``), the OTLP export (a span link with
``a2a_tape.link.inferred``). Trace context, when an exchange carried it, always wins over inference.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Any, Final
from urllib.parse import urlsplit

import msgspec

from a2a_tape.store import Exchange
from a2a_tape.store.methods import ALL_METHODS
from a2a_tape.wire.trace_context import INJECTED_HEADER, ExchangeTrace, of_headers, parse_traceparent

BASES: Final = ("reference_task_ids", "context_id", "message_id", "timing")
"""The kinds of evidence an inferred link rests on, strongest first."""

END_SLACK: Final = 1.0
"""Seconds a call's end may be stamped after its caller's and still count as nested (``timing``): the
inner hop's proxy sees its stream's last bytes only after the outer agent has them, so under load it
can stamp its row's end tens of milliseconds after the outer hop's proxy stamps its own."""

_CALLS: Final = frozenset({"send", "stream"})
_WORKING: Final = frozenset({"send", "stream", "resubscribe"})


class Link(msgspec.Struct, frozen=True):
    """An inferred call: the exchange ``exchange_id`` of task ``task_id`` made the request (``basis``: :data:`BASES`)."""

    exchange_id: int
    task_id: str
    basis: str


class Request(msgspec.Struct, frozen=True):
    """What a request's message said: its ``contextId``, ``referenceTaskIds``, ``messageId``, and the
    trace context in its metadata (``traceparent``/``tracestate``/``baggage``, :func:`metadata_trace`)."""

    context_id: str | None = None
    reference_task_ids: tuple[str, ...] = ()
    message_id: str | None = None
    trace: Mapping[str, str] = {}


TRACE_EXTENSION: Final = "https://deeparchi.ai/extensions/trace-context/v1"
"""The A2A extension that carries W3C trace context in a message's ``metadata`` (a2aproject/A2A#2026):
``metadata[TRACE_EXTENSION] = {"traceparent": ..., "tracestate": ..., "baggage": ...}``."""

_TRACE_KEYS: Final = ("traceparent", "tracestate", "baggage")


def metadata_trace(metadata: object) -> dict[str, str]:
    """The trace context a message's ``metadata`` carries: under the trace-context extension's URI
    (:data:`TRACE_EXTENSION`), else as top-level ``traceparent``/``tracestate``/``baggage`` keys (as some
    agents write it); the string values only."""
    if not isinstance(metadata, dict):
        return {}
    for node in (metadata.get(TRACE_EXTENSION), metadata):
        if isinstance(node, dict) and isinstance(node.get("traceparent"), str):
            return {k: node[k] for k in _TRACE_KEYS if isinstance(node.get(k), str)}
    return {}


def request_of(body: bytes) -> Request:
    """What a JSON request body (JSON-RPC ``params``, an HTTP+JSON body, gRPC's JSON mapping) says of its message."""
    if not body or len(body) > 1 << 20 or not body.lstrip().startswith(b"{"):
        return Request()
    try:
        doc = msgspec.json.decode(body)
    except msgspec.DecodeError:
        return Request()
    if not isinstance(doc, dict):
        return Request()
    params = doc.get("params") if isinstance(doc.get("params"), dict) else doc
    message = params.get("message") if isinstance(params, dict) else None
    if not isinstance(message, dict):
        return Request()
    refs = message.get("referenceTaskIds")
    return Request(
        _text(message.get("contextId")),
        tuple(r for r in refs if isinstance(r, str) and r) if isinstance(refs, list) else (),
        _text(message.get("messageId")),
        metadata_trace(message.get("metadata")),
    )


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


@functools.lru_cache(maxsize=256)
def agent_of(url: str) -> tuple[str, str, int | None] | None:
    """The agent an exchange went to: its URL's scheme, host and port (None for a URL without a host;
    each of the few URLs a log has split once)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if not parts.hostname:
        return None
    return parts.scheme, parts.hostname.lower(), port


class _Row:
    """One exchange as the rule reads it; its request body is decoded only when the row is a call with
    candidates (most exchanges of a log never are)."""

    __slots__ = (
        "_body",
        "_headers",
        "_request",
        "agent",
        "context_id",
        "ended",
        "host",
        "id",
        "message_id",
        "operation",
        "role",
        "started",
        "task_id",
    )

    def __init__(self, ex: Exchange, agent: tuple[str, str, int | None] | None) -> None:
        self.id: int = ex.id or 0
        self.task_id: str = ex.task_id or ""
        self.started, self.ended = ex.started_at, ex.ended_at
        self.agent, self.host, self.role = agent, ex.host, ex.role
        self.operation = ALL_METHODS.get(ex.rpc_method or "", (None, None))[0]
        self.context_id, self.message_id = ex.context_id, ex.message_id
        self._body, self._headers = ex.request_body, ex.request_headers
        self._request: Request | None = None

    @property
    def request(self) -> Request:
        if self._request is None:
            self._request = request_of(self._body)
        return self._request

    @property
    def traced(self) -> bool:
        """Its request carried a valid traceparent (a header, or the message's metadata)."""
        low = next((v for k, v in self._headers.items() if k.lower() == "traceparent"), None)
        if low is None and b"traceparent" not in self._body:  # none in the metadata either (as carried() reads it)
            return False
        return parse_traceparent(low or self.request.trace.get("traceparent")) is not None

    @property
    def call_message_id(self) -> str | None:
        return self.message_id or self.request.message_id


def _evidence(c: _Row, p: _Row) -> str:
    """The strongest basis that joins call ``c`` to the open exchange ``p`` (``""``: none)."""
    if p.task_id in c.request.reference_task_ids:
        return "reference_task_ids"
    if c.request.context_id is not None and c.request.context_id == p.context_id:
        return "context_id"
    if p.message_id is not None and c.call_message_id == p.message_id:
        return "message_id"
    if (
        c.role == "proxy"
        and c.host is not None
        and c.host == p.host
        and (p.ended is None or (c.ended is not None and c.ended <= p.ended + END_SLACK))
    ):
        return "timing"
    return ""


def infer(exchanges: Iterable[Exchange]) -> dict[int, Link]:
    """The inferred caller of each exchange that has one (by exchange id), by the rule of this module."""
    agents: dict[str, tuple[str, str, int | None] | None] = {}
    rows = []
    for ex in exchanges:
        if ex.id is not None and ex.task_id:
            if ex.url not in agents:
                agents[ex.url] = agent_of(ex.url)
            rows.append(_Row(ex, agents[ex.url]))
    rows.sort(key=lambda r: (r.started, r.id))
    links: dict[int, Link] = {}
    active: list[_Row] = []  # working exchanges begun so far, in start order, not ended before the current one began
    for c in rows:  # a sweep in start order: what was open when each call began
        active = [p for p in active if p.ended is None or p.ended >= c.started]
        if active and c.operation in _CALLS and c.agent is not None and not c.traced:
            link = _decide(c, active)
            if link is not None:
                links[c.id] = link
        if c.operation in _WORKING and c.agent is not None:
            active.append(c)
    return links


def call_of(ex: Exchange) -> bool:
    """Whether ``ex`` is a *call* the rule may join to a caller: a message send of a task, to an agent,
    whose request carried no valid traceparent (the cheap test before any other row is read)."""
    if ex.id is None or not ex.task_id:
        return False
    row = _Row(ex, agent_of(ex.url))
    return row.operation in _CALLS and row.agent is not None and not row.traced


def caller_within(call: Exchange, open_at_start: Iterable[Exchange]) -> Link | None:
    """The inferred caller of ``call`` from the exchanges open when it began (the store's
    ``exchanges_open_within(call.started_at, call.started_at)``): what :func:`infer` gives it over the
    whole log, since every candidate of a call is open when it begins."""
    rows = [ex for ex in open_at_start if ex.id != call.id]
    return infer([*rows, call]).get(call.id or 0)


def unsettled(call: Exchange, open_at_start: Iterable[Exchange]) -> bool:
    """Whether a candidate caller of ``call`` may still name its task: an exchange that began before it at
    another agent, is still open and has no task yet (a blocking send learns its task from its answer).
    Until it names it, the rule over the log as it is now could miss a link it will give later."""
    agent = agent_of(call.url)
    for ex in open_at_start:
        began_after = (ex.started_at, ex.id or 0) > (call.started_at, call.id or 0)
        if ex.id == call.id or ex.task_id or ex.ended_at is not None or began_after:
            continue
        other = agent_of(ex.url)
        if ALL_METHODS.get(ex.rpc_method or "", (None, None))[0] in _WORKING and other is not None and other != agent:
            return True
    return False


def _decide(c: _Row, open_: list[_Row]) -> Link | None:
    by_basis: dict[str, list[_Row]] = {}
    for p in open_:
        if p.task_id != c.task_id and p.agent != c.agent and (basis := _evidence(c, p)):
            by_basis.setdefault(basis, []).append(p)
    for basis in BASES:
        found = by_basis.get(basis)
        if not found:
            continue
        agents: dict[object, set[str]] = {}
        for p in found:
            agents.setdefault(p.agent, set()).add(p.task_id)
        if any(len(tasks) > 1 for tasks in agents.values()):
            return None  # the strongest evidence decides, even when it is ambiguous
        chosen = found[-1]  # the innermost: the one that began last
        return Link(chosen.id, chosen.task_id, basis)
    return None


def families(links: Mapping[int, Link], task_of: Mapping[int, str]) -> dict[str, tuple[str, str]]:
    """Each task's inferred parent task and the basis, from its earliest linked exchange (``task_of``:
    exchange id -> task id)."""
    out: dict[str, tuple[str, str]] = {}
    for ex_id in sorted(links):
        task = task_of.get(ex_id)
        link = links[ex_id]
        if task is not None and task != link.task_id:
            out.setdefault(task, (link.task_id, link.basis))
    return out


def carried(ex: Exchange) -> ExchangeTrace | None:
    """The trace context an exchange's request carried: its headers' ``traceparent`` (and ``tracestate``,
    ``baggage``), else the message metadata's (:func:`metadata_trace`, marked ``metadata``; with the
    ``traceparent`` the proxy sent on, when it continued it), else whatever trace headers it had (None:
    none at all)."""
    headers = of_headers(ex.id, ex.request_headers)
    if headers is not None and headers.traceparent is not None:
        return headers
    found = request_of(ex.request_body).trace if b"traceparent" in ex.request_body else {}
    if found:
        ours = next((v for k, v in ex.request_headers.items() if k.lower() == INJECTED_HEADER), None)
        return ExchangeTrace(
            ex.id,
            found.get("traceparent"),
            found.get("tracestate"),
            found.get("baggage"),
            sent=ours if parse_traceparent(ours) is not None else None,
            metadata=True,
        )
    return headers


def with_metadata_trace(body: bytes, traceparent: str, tracestate: str | None = None) -> bytes | None:
    """``body`` (a JSON-RPC send, or an HTTP+JSON one) with its message's metadata carrying ``traceparent``
    (and ``tracestate``) under the trace-context extension (:data:`TRACE_EXTENSION`), the rest of the
    metadata kept; None when the body holds no message to carry it (it is sent as it came)."""
    try:
        doc = msgspec.json.decode(body) if body.lstrip().startswith(b"{") else None
    except msgspec.DecodeError:
        return None
    if not isinstance(doc, dict):
        return None
    params = doc.get("params")
    message = (params if isinstance(params, dict) else doc).get("message")
    if not isinstance(message, dict):
        return None
    metadata = message.get("metadata")
    if metadata is None:
        metadata = message["metadata"] = {}
    if not isinstance(metadata, dict):
        return None
    carried_here = metadata.get(TRACE_EXTENSION)
    node = dict(carried_here) if isinstance(carried_here, dict) else {}
    node["traceparent"] = traceparent
    if tracestate:
        node["tracestate"] = tracestate
    metadata[TRACE_EXTENSION] = node
    return msgspec.json.encode(doc)
