"""Where the spans go: a batch as one OTLP ``ExportTraceServiceRequest`` (:func:`capture.otlp.request`),
written as an OTLP/JSON line (``export --format otlp -o FILE``) or posted in protobuf to a collector
through the official OTLP/HTTP exporter's own HTTP client (``export --endpoint``, ``proxy``/``record
--otlp-endpoint``): the exporter is made as the SDK makes it, so its environment variables
(``OTEL_EXPORTER_OTLP_TRACES_HEADERS``, a backend's auth among them; the certificates; the compression;
the timeout) and its retries hold; only its encoder is not run (the request is already built).
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Sequence
from typing import IO, Any, cast

import msgspec

from a2a_tape.store.errors import A2ATapeError

from .otlp import Settings, request
from .otlp_messages import Span

EXPORTER = "opentelemetry-exporter-otlp-proto-http"
"""The distribution of the OTLP/HTTP exporter (named when its release lacks what :class:`Collector` uses)."""
TESTED = "1.45"
"""The exporter's release series the export is tested with (the 'otel' extra's lowest and CI's newest)."""


class ExportFailed(A2ATapeError):
    """The collector did not take the spans: the message says why, in one line."""


class NoTransport(A2ATapeError):
    """The installed OTLP/HTTP exporter has no HTTP client to send a built request through."""


def json_line(spans: Sequence[Span], s: Settings) -> bytes:
    """One OTLP/JSON ``ExportTraceServiceRequest`` (the file exporter's and ``otlpjsonfile``'s line): the
    batch's message written by protobuf's JSON mapping, with the ids in hex as OTLP/JSON says (protobuf's
    mapping would write them in base64)."""
    from google.protobuf.json_format import MessageToDict

    doc = MessageToDict(request(spans, s), use_integers_for_enums=True)
    for rs in doc.get("resourceSpans", ()):
        for ss in rs.get("scopeSpans", ()):
            for span in ss.get("spans", ()):
                _hex_ids(span)
                for link in span.get("links", ()):
                    _hex_ids(link)
    return msgspec.json.encode(doc) + b"\n"


def _hex_ids(node: dict[str, Any]) -> None:
    for key in ("traceId", "spanId", "parentSpanId"):
        if node.get(key):
            node[key] = base64.b64decode(node[key]).hex()


def write_json_lines(fh: IO[bytes], s: Settings) -> Callable[[Sequence[Span]], None]:
    def send(spans: Sequence[Span]) -> None:
        fh.write(json_line(spans, s))

    return send


def endpoint_url(url: str) -> str:
    """A collector's base URL (``http://host:4318``) gets OTLP/HTTP's traces path; a URL with a path is used as given."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return url.rstrip("/") + "/v1/traces" if parts.path in ("", "/") else url


def _release() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"{EXPORTER} {version(EXPORTER)}"
    except PackageNotFoundError:
        return EXPORTER


class Collector:
    """A collector at ``url`` (its traces path: :func:`endpoint_url`), reached by the official
    ``OTLPSpanExporter`` (``timeout``: a batch's, retries included; None: the exporter's environment's,
    10 s by default). A batch is built and serialized here and handed to the exporter's own HTTP client
    (``_client.export``, which compresses, sends with its headers and retries): it is private, so it is
    looked for once, here: a release without it raises :class:`NoTransport` (said in one line at start,
    never at the first batch)."""

    def __init__(self, url: str, *, timeout: float | None = None) -> None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        quiet_exporter()
        self.url = url
        self._exporter = cast(Any, OTLPSpanExporter(endpoint=url, timeout=timeout))  # its shutdown() is untyped
        client = getattr(self._exporter, "_client", None)
        if not callable(getattr(client, "export", None)):
            raise NoTransport(
                f"the installed {_release()} has no HTTP client a2a-tape can send its spans through "
                f"(tested with {TESTED}: pip install '{EXPORTER}=={TESTED}.*')"
            )
        self._client: Any = client
        self._closed = False

    def send(self, spans: Sequence[Span], s: Settings) -> bool:
        """Whether the collector took the batch (after the exporter's retries); False once closed."""
        if self._closed:
            return False
        return bool(self._client.export(request(spans, s).SerializeToString()).success)

    def shutdown(self) -> None:
        """Close the exporter (a batch in its retries stops waiting)."""
        if not self._closed:
            self._closed = True
            self._exporter.shutdown()


def post_to(url: str, s: Settings) -> tuple[Callable[[Sequence[Span]], None], Callable[[], None]]:
    """A sender of batches to a collector (OTLP/HTTP, protobuf: :class:`Collector`), and how to close it.
    A batch it did not take raises :class:`ExportFailed`: the exporter's own log lines are kept quiet,
    the caller says one."""
    full = endpoint_url(url)
    collector = Collector(full)

    def send(spans: Sequence[Span]) -> None:
        if not collector.send(spans, s):
            raise ExportFailed(f"the collector at {full} did not take the spans (is it running?)")

    return send, collector.shutdown


def quiet_exporter() -> None:
    """The exporter's own log lines kept quiet: a failure is said once, our way."""
    import logging

    logging.getLogger("opentelemetry.exporter").setLevel(logging.CRITICAL + 1)
