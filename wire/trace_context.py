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
"""Recorded (never sent) beside ``traceparent`` when ``proxy --inject-traceparent`` started the trace:
its value is the ``traceparent`` the proxy sent, whose parent id is the proxy's own span."""

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
    injected = INJECTED_HEADER in low and low[INJECTED_HEADER] == found.get("traceparent")
    return ExchangeTrace(exchange_id, injected=injected, **found)


def carried(exchanges: Iterable[tuple[int | None, Mapping[str, str]]]) -> list[ExchangeTrace]:
    """The trace context each exchange carried, those that carried any, in the order given."""
    return [t for ex_id, headers in exchanges if (t := of_headers(ex_id, headers)) is not None]


def new_traceparent() -> str:
    """A fresh sampled ``traceparent`` (random trace and span ids, never zero)."""
    trace_id = secrets.token_hex(16)
    span_id = secrets.token_hex(8)
    if set(trace_id) == {"0"} or set(span_id) == {"0"}:  # pragma: no cover - 2**-64
        return new_traceparent()
    return f"00-{trace_id}-{span_id}-01"
