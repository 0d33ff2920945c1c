"""An OTLP/HTTP trace receiver for tests: ``POST /v1/traces`` (protobuf) decoded by the official
``opentelemetry-proto`` messages, the spans kept as plain dicts.

Why not only a collector users run: Arize Phoenix (tests/oracles/phoenix.py) is that receiver, but it
weighs ~850 MB in a venv of its own and takes ~10 s to start, so it runs with the oracles (marked
``oracle``); the OpenTelemetry Collector has no package in the registries we reach (it ships as a Go
binary or container image). This receiver decodes with the same protobuf definitions a collector uses,
so the fast tests check the bytes on the wire, not our own reading of them.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


def flat_spans(request: dict[str, Any]) -> list[dict[str, Any]]:
    """Every span of an ``ExportTraceServiceRequest`` (as a dict: protobuf's JSON mapping, or OTLP/JSON),
    with its resource's attributes under ``resource`` and attributes as a plain dict."""
    out = []
    for rs in request.get("resourceSpans", []):
        resource = attributes(rs.get("resource", {}).get("attributes", []))
        for ss in rs.get("scopeSpans", []):
            for span in ss.get("spans", []):
                span = dict(span)
                span["resource"] = resource
                span["attrs"] = attributes(span.get("attributes", []))
                span["events"] = [dict(e, attrs=attributes(e.get("attributes", []))) for e in span.get("events", [])]
                out.append(span)
    return out


def attributes(kvs: list[dict[str, Any]]) -> dict[str, Any]:
    return {kv["key"]: _value(kv.get("value", {})) for kv in kvs}


def _value(v: dict[str, Any]) -> Any:
    if "arrayValue" in v:
        return [_value(x) for x in v["arrayValue"].get("values", [])]
    if "intValue" in v:
        return int(v["intValue"])
    for key in ("stringValue", "boolValue", "doubleValue"):
        if key in v:
            return v[key]
    return None


@dataclass
class Received:
    url: str
    requests: list[dict[str, Any]] = field(default_factory=list)
    changed: threading.Condition = field(default_factory=threading.Condition)

    @property
    def spans(self) -> list[dict[str, Any]]:
        with self.changed:
            return [s for r in self.requests for s in flat_spans(r)]

    def wait_for_spans(self, n: int, timeout: float = 10.0) -> list[dict[str, Any]]:
        """The spans once at least ``n`` arrived (on a condition the handler signals; AssertionError past ``timeout``)."""
        with self.changed:
            if not self.changed.wait_for(lambda: sum(len(flat_spans(r)) for r in self.requests) >= n, timeout):
                raise AssertionError(f"{n} span(s) expected, {len(self.spans)} received")
        return self.spans


@contextmanager
def receiver(hold: threading.Event | None = None) -> Iterator[Received]:
    """A receiver on 127.0.0.1 (a free port) for the duration of the block. ``hold``: a slow collector,
    which answers no request until the event is set."""
    got = Received(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            if hold is not None:
                hold.wait(30)
            if self.path != "/v1/traces" or self.headers.get("content-type") != "application/x-protobuf":
                self.send_response(404)
                self.end_headers()
                return
            msg = ExportTraceServiceRequest()
            msg.ParseFromString(body)
            with got.changed:
                got.requests.append(MessageToDict(msg, use_integers_for_enums=True))
                got.changed.notify_all()
            answer = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("content-type", "application/x-protobuf")
            self.send_header("content-length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    got.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield got
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
