"""W3C trace context in a recorded exchange's request headers: ``traceparent``, ``tracestate``, ``baggage``.

The recorder keeps the request headers (redacted) of every exchange; these three are never redacted
(they name traces, not people). This module reads them back: for ``show`` and ``tasks --json`` (what
each exchange carried) and for ``export --format otlp`` (the trace a task's spans join).

A ``traceparent`` is ``VERSION-TRACEID-PARENTID-FLAGS`` (W3C Trace Context, level 1): 2, 32, 16 and 2
lowercase hex digits; an all-zero trace id or parent id is invalid, as is version ``ff``. An invalid one
is shown as recorded but joins no trace.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterable, Mapping

import msgspec

HEADERS = ("traceparent", "tracestate", "baggage")
"""The trace-context headers, as shown (lowercase)."""

INJECTED_HEADER = "x-a2a-tape-traceparent"
"""Recorded (never sent) beside ``traceparent`` when the proxy sent one of its own: ``--inject-traceparent``
started the trace (the client sent none: both headers are equal), or ``--continue-traceparent`` went on
with the client's (same trace, the proxy's span as the parent id). Its value is the ``traceparent`` the
proxy sent, whose parent id is the proxy's own span."""

_TRACEPARENT = re.compile(r"^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$")


class TraceParent(msgspec.Struct, frozen=True):
    """A valid ``traceparent``: the trace, the caller's span (``parent_id``) and the sampled flag."""

    trace_id: str  # 32 hex digits
    parent_id: str  # 16 hex digits
    sampled: bool

    @property
    def trace_int(self) -> int:
        return int(self.trace_id, 16)

    @property
    def parent_int(self) -> int:
        return int(self.parent_id, 16)


class ExchangeTrace(msgspec.Struct, omit_defaults=True):
    """What one exchange's request carried (``tasks --json``: a task's ``trace_context``)."""

    exchange_id: int | None
    traceparent: str | None = None
    tracestate: str | None = None
    baggage: str | None = None
    injected: bool = False  # the proxy started this traceparent (the client sent none)
    sent: str | None = None  # the client's went on as this one (proxy --continue-traceparent): the proxy's span
    metadata: bool = False  # carried in the message's metadata (A2A#2026), not in a header: capture.lineage.carried


def parse_traceparent(value: str | None) -> TraceParent | None:
    """The trace context a ``traceparent`` value names; None when absent or invalid."""
    if not value:
        return None
    m = _TRACEPARENT.match(value.strip().lower())
    if m is None:
        return None
    version, trace_id, parent_id, flags, rest = m.groups()
    if version == "ff" or (version == "00" and rest) or set(trace_id) == {"0"} or set(parent_id) == {"0"}:
        return None
    return TraceParent(trace_id, parent_id, bool(int(flags, 16) & 1))


def _lower(headers: Mapping[str, str]) -> dict[str, str]:
    return {k.lower(): v for k, v in headers.items()}


def of_headers(exchange_id: int | None, headers: Mapping[str, str]) -> ExchangeTrace | None:
    """The trace-context headers of one exchange's request (None when it carried none)."""
    low = _lower(headers)
    found = {name: low[name] for name in HEADERS if name in low}
    if not found:
        return None
    ours = low.get(INJECTED_HEADER)
    injected = ours is not None and ours == found.get("traceparent")
    sent = ours if ours is not None and not injected and parse_traceparent(ours) is not None else None
    tp, state, bag = (found.get(name) for name in HEADERS)
    return ExchangeTrace(exchange_id, tp, state, bag, injected=injected, sent=sent)


def carried(exchanges: Iterable[tuple[int | None, Mapping[str, str]]]) -> list[ExchangeTrace]:
    """The trace context each exchange carried, those that carried any, in the order given."""
    return [t for ex_id, headers in exchanges if (t := of_headers(ex_id, headers)) is not None]


def continued(value: str | None) -> str | None:
    """The client's trace going on through the proxy: the same version, trace id and flags, a new parent id
    (the proxy's span); None for no ``traceparent`` or an invalid one (sent on as it came)."""
    tp = parse_traceparent(value)
    if tp is None or value is None:
        return None
    span_id = secrets.token_hex(8)
    while set(span_id) == {"0"}:  # pragma: no cover - 2**-64
        span_id = secrets.token_hex(8)
    flags = value.strip().lower()[53:55]
    return f"00-{tp.trace_id}-{span_id}-{flags}"


def new_traceparent() -> str:
    """A fresh sampled ``traceparent`` (random trace and span ids, never zero)."""
    trace_id = secrets.token_hex(16)
    span_id = secrets.token_hex(8)
    if set(trace_id) == {"0"} or set(span_id) == {"0"}:  # pragma: no cover - 2**-64
        return new_traceparent()
    return f"00-{trace_id}-{span_id}-01"


def own_span(t: ExchangeTrace) -> str | None:
    """The span id the proxy sent upstream for this exchange (its own span's), if it sent one."""
    tp = parse_traceparent(t.traceparent if t.injected else t.sent)
    return tp.parent_id if tp is not None else None


def families(exchanges: Iterable[tuple[str, ExchangeTrace]]) -> dict[str, tuple[str | None, list[str]]]:
    """Each task's parent task and children, by trace context: a task whose request carried, as its parent
    id, the span a proxy sent on for another task's exchange (``--inject-traceparent``,
    ``--continue-traceparent``) is that task's child. ``exchanges``: (task id, what the exchange carried)."""
    seen = list(exchanges)
    owner = {span: task for task, t in seen if (span := own_span(t)) is not None}
    parent: dict[str, str] = {}
    for task, t in seen:
        tp = None if t.injected else parse_traceparent(t.traceparent)
        found = owner.get(tp.parent_id) if tp is not None else None
        if found is not None and found != task:
            parent.setdefault(task, found)
    children: dict[str, list[str]] = {}
    for child, up in parent.items():
        children.setdefault(up, []).append(child)
    return {t: (parent.get(t), children.get(t, [])) for t in {*parent, *children}}
