"""``a2a-tape export --format otlp``: the recorded tasks as OpenTelemetry traces (docs/otel.md).

To a file (``-o FILE``, or stdout): OTLP/JSON, one ``ExportTraceServiceRequest`` a line. To a
collector (``--endpoint URL``): OTLP/HTTP in protobuf. The spans are built in
:mod:`a2a_tape.inspection.otlp` as the official OTLP messages and sent with the official OpenTelemetry
packages (the ``otel`` extra): without them, or with an exporter release the export cannot send
through, one line says what to install (exit 2).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Annotated
from urllib.parse import urlsplit

import typer

from a2a_tape.inspection.words import count

from .app import db_location, err, fail, find_export, open_db
from .output import Output
from .progress import bar

if TYPE_CHECKING:
    from a2a_tape.inspection.otlp import Collector, Settings
    from a2a_tape.recorder.otlp_process import ChildExport
    from a2a_tape.store import Recordings, Store

MISSING = "{what} needs the OpenTelemetry packages: pip install 'a2a-tape[otel]'"

OtlpEndpointOption = Annotated[
    str | None,
    typer.Option(
        "--otlp-endpoint",
        metavar="URL",
        help="Also send each exchange as an OpenTelemetry span to this OTLP/HTTP collector as it ends "
        "(e.g. http://127.0.0.1:4318), in batches, off the recording's path (docs/otel.md).",
        show_default=False,
    ),
]


def available() -> bool:
    """Whether the ``otel`` extra is installed (the SDK, the OTLP/HTTP exporter, the OTLP protobuf messages)."""
    try:
        import opentelemetry.exporter.otlp.proto.http.trace_exporter
        import opentelemetry.proto.trace.v1.trace_pb2
        import opentelemetry.sdk.trace  # noqa: F401
        from google.protobuf import json_format  # noqa: F401
    except ImportError:
        return False
    return True


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("a2a-tape")
    except PackageNotFoundError:
        return "0"


def check_endpoint(url: str, option: str = "--endpoint") -> str:
    """``--endpoint``: an http(s) URL with a host (one line, exit 2, otherwise)."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - a port out of range raises here
    except ValueError as exc:
        fail(f"{option} {url}: {exc}")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        fail(f"{option} {url}: not an http(s) URL of a collector (e.g. http://127.0.0.1:4318)")
    return url


def check_live(endpoint: str | None) -> Collector | None:
    """``--otlp-endpoint`` of ``proxy``/``record``, checked before anything is opened or sent: the
    collector the live export sends to (None without the option)."""
    if endpoint is None:
        return None
    if not available():
        fail(MISSING.format(what="--otlp-endpoint"))
    check_endpoint(endpoint, "--otlp-endpoint")
    from a2a_tape.inspection.otlp import NoTransport
    from a2a_tape.recorder import otlp_live

    try:
        return otlp_live.connect(endpoint)
    except NoTransport as exc:
        fail(f"--otlp-endpoint: {exc}")


@contextlib.contextmanager
def live_export(st: Store, collector: Collector | None) -> Iterator[ChildExport | None]:
    """The live export of ``st``'s exchanges to ``collector`` (:func:`check_live`) for the block (None
    without ``--otlp-endpoint``): the spans are built and sent by a child process, handed each ended
    exchange's id (:mod:`a2a_tape.recorder.otlp_process`); at the block's end, what is queued is sent
    (bounded) and the child ends."""
    if collector is None:
        yield None
        return
    from a2a_tape.recorder import otlp_process

    live = otlp_process.start(st, collector, _version())
    try:
        yield live
    finally:
        live.close()


def export_otlp(
    *,
    task: str | None,
    run: int | None = None,
    output: Output,
    endpoint: str | None,
    db: str | None,
    limit: int | None,
    progress: bool,
) -> None:
    if not available():
        fail(MISSING.format(what="--format otlp"))
    from a2a_tape.inspection import otlp
    from a2a_tape.inspection.listing import log_order_ids
    from a2a_tape.store.redact import safe_location  # here: msgspec, not for --help

    if endpoint is not None:
        check_endpoint(endpoint)
    st = open_db(db, readonly=True)
    with st:
        log: Recordings = st
        task_ids = log_order_ids(st, limit) if task is None else []
        if task is not None:
            log, found, _ = find_export(st, task, run)
            if not isinstance(found, str):
                fail(f"{task} is a lone Message reply (no task): --format otlp exports tasks")
            task_ids = [found]
        s = otlp.settings(_version(), safe_location(db_location(db)))
        where = otlp.endpoint_url(endpoint) if endpoint is not None else output.name
        with bar("exporting otlp", asked=progress, unit="tasks", show=progress or len(task_ids) >= 50) as report:
            spans = _send(log, task_ids, s, output, endpoint, lambda n: report(n, len(task_ids)))
    err.print(
        f"exported {count(len(task_ids), 'task')} ({count(spans, 'span')}) as OTLP to {where}",
        markup=False,
        soft_wrap=True,
    )


def _send(
    st: Recordings, task_ids: list[str], s: Settings, output: Output, endpoint: str | None, step: Callable[[int], None]
) -> int:
    """Every batch to the file or the collector; how many spans went."""
    from a2a_tape.inspection import otlp

    batches = otlp.batches(st, task_ids, s, progress=step)
    sent = 0
    if endpoint is None:
        with output.stream() as fh:
            write = otlp.write_json_lines(fh, s)
            for batch in batches:
                write(batch)
                sent += len(batch)
        return sent
    try:
        post, close = otlp.post_to(endpoint, s)
    except otlp.NoTransport as exc:
        fail(f"--endpoint: {exc}")
    try:
        for batch in batches:
            post(batch)
            sent += len(batch)
    except otlp.ExportFailed as exc:
        fail(f"cannot export to {otlp.endpoint_url(endpoint)}: {exc} ({count(sent, 'span')} sent before)")
    finally:
        close()
    return sent
