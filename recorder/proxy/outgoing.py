"""One request as the proxy sends it upstream (:class:`Outgoing`), and the trace context it carries
(``--inject-traceparent``, ``--continue-traceparent``, ``--traceparent-metadata``; docs/otel.md)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from starlette.requests import Request

from a2a_tape.capture.lineage import request_of
from a2a_tape.recorder.proxy.plumbing import Departure
from a2a_tape.recorder.proxy.proxy_config import ProxyConfig
from a2a_tape.recorder.proxy.relay import Headers
from a2a_tape.wire.trace_context import INJECTED_HEADER, continued, new_traceparent


@dataclass
class Outgoing:
    """One request as it goes upstream (the client's, less hop-by-hop headers and our token)."""

    method: str
    url: str
    headers: Headers
    body: bytes
    rpc_id: bytes | None  # the JSON-RPC id to answer our own errors to (None: not JSON-RPC)
    dialect: str | None  # the protocol version
    binding: str | None = None  # store.methods.BINDINGS; None: not an A2A request
    departure: Departure = field(default_factory=Departure)  # whether it may have reached the upstream
    notes: list[str] = field(default_factory=list)  # redaction notes of the request row, written with the answer's
    injected: str | None = None  # the traceparent the proxy started (--inject-traceparent), sent upstream
    in_metadata: bool = False  # the client's traceparent came in the message's metadata, not a header
    to_metadata: str | None = None  # the tracestate to write with ``injected`` into the message's metadata ("" none)


def carry_trace_context(cfg: ProxyConfig, request: Request, out: Outgoing) -> None:
    """--inject-traceparent, --continue-traceparent, --traceparent-metadata (docs/otel.md): the
    client's traceparent is its header's, else its message metadata's (A2A#2026); never overwritten."""
    if not (cfg.inject_traceparent or cfg.continue_traceparent):
        return
    header = request.headers.get("traceparent")
    meta: Mapping[str, str] = {}
    if header is None and b"traceparent" in out.body and "content-encoding" not in request.headers:
        meta = request_of(out.body).trace
    state = request.headers.get("tracestate") if header is not None else meta.get("tracestate")
    if cfg.inject_traceparent and header is None and not meta:  # never over the client's
        out.injected = new_traceparent()
        out.headers = [*out.headers, ("traceparent", out.injected)]
    elif cfg.continue_traceparent:  # the client's trace, this hop's span as the parent
        out.injected = continued(header if header is not None else meta.get("traceparent"))
        if out.injected is None:
            return
        if header is not None:
            out.headers = [(k, out.injected if k.lower() == "traceparent" else v) for k, v in out.headers]
        else:  # it came in the metadata: it goes on there (and in a header, for agents that read those)
            out.in_metadata = True
            out.headers = [*out.headers, ("traceparent", out.injected)]
    if out.injected is not None and (cfg.traceparent_metadata or out.in_metadata):
        out.to_metadata = state or ""


def with_injected(headers: dict[str, str], injected: str | None, in_metadata: bool = False) -> dict[str, str]:
    """The recorded request headers: the client's, and the traceparent the proxy sent (marked as ours; the
    client's own, when it sent one, stays as it was; when it came in the message's metadata, the log keeps
    it there, in the request body as received)."""
    if injected is None:
        return headers
    if in_metadata:
        return {**headers, INJECTED_HEADER: injected}
    return {"traceparent": injected, **headers, INJECTED_HEADER: injected}


def error_event(out: Outgoing) -> str | None:
    """The SSE event name an error item carries in the request's dialect (a2a-sdk 1.3.0 names it
    ``error`` in v1.0 streams, sends it unnamed in v0.3 ones)."""
    return "error" if out.dialect == "1.0" else None
