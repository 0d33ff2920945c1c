"""``proxy --otlp-endpoint`` and ``record --otlp-endpoint``: each exchange a span, sent as it ends (docs/otel.md).

:class:`LiveExport` is the sender of the export's own process (:mod:`recorder.otlp_process`: ``proxy`` and
``record`` hand that process each ended exchange's id over a pipe, and it calls :meth:`LiveExport.send`
with a batch of them). Each span is built with the one mapping (:func:`capture.otlp.exchange_span`: the
exchange read back from the log through a connection of its own; the trace, ids, parent and links
``export --format otlp`` gives it too, its inferred caller looked for among the exchanges open when it
began, kept by :class:`capture.open_exchanges.OpenExchanges`), and the batch is sent to the collector
(:class:`capture.otlp_send.Collector`: one OTLP request, sent by the official OTLP/HTTP exporter's
client). A call whose caller cannot be told yet (:class:`capture.span_places.NotYet`) is built again with
the next batch, for at most :data:`WAIT_FOR_CALLER` seconds. A dead collector costs the spans of the
batches it refused, never an event: the log has them, ``export --format otlp`` sends them later. It is
said once, on stderr.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from a2a_tape.capture.open_exchanges import OpenExchanges

if TYPE_CHECKING:
    from a2a_tape.capture.otlp import Settings
    from a2a_tape.capture.otlp_messages import Span
    from a2a_tape.capture.otlp_send import Collector
    from a2a_tape.store import Store

BATCH = 256
LINGER = 1.0
"""Seconds the sender waits for more exchanges before it sends what it has (a POST costs the proxy's
process more CPU than a span: fewer, larger batches; the SDK's batch processor waits 5 s)."""
WAIT_FOR_CALLER = 10.0
"""Seconds a call's span waits for an open caller to name its task (:func:`capture.lineage.unsettled`)."""
TIMEOUT = 5.0
"""Seconds one batch may take, retries included (``OTEL_EXPORTER_OTLP_TRACES_TIMEOUT`` or
``OTEL_EXPORTER_OTLP_TIMEOUT`` overrides it);
also how long closing waits for what is still queued."""


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def warning_line(why: str) -> str:
    """The live export's one warning line (said once per recording)."""
    return (
        f"a2a-tape: warning: OTLP export: {why}; recording goes on, every event is in the log "
        "('a2a-tape export --format otlp' sends the spans later)"
    )


class LiveExport:
    """Spans of the exchanges of one log, built and sent a batch at a time (:meth:`send`, :meth:`finish`)."""

    def __init__(
        self,
        open_log: Callable[[], Store],
        collector: Collector,
        settings: Settings,
        *,
        where: str,
        timeout: float = TIMEOUT,
        say: Callable[[str], None] = _stderr,
        since: float | None = None,
    ) -> None:
        """``since``: when the exchanges to send may have begun (now, by default: the recording starts
        after the export)."""
        self._open_log, self._collector, self._settings = open_log, collector, settings
        self.where, self.timeout, self._say = where, timeout, say
        self.sent = 0  # spans the collector took
        self.failed = 0  # spans it did not take (or that were never built)
        self._warned = False
        self._later: dict[int, float] = {}  # calls put off: exchange id -> when first tried
        self._open = OpenExchanges(time.time() if since is None else since)  # the rows a call's caller is looked for in

    def open_log(self) -> Store | None:
        """The sender's own connection to the log (None, said once, when it cannot be opened)."""
        try:
            return self._open_log()
        except Exception as exc:  # noqa: BLE001 - the recording goes on; said once
            self.warn(f"cannot read the log to export spans ({type(exc).__name__}: {exc})")
            return None

    def send(self, log: Store, ended: Sequence[int], *, final: bool = False, waiting: Sequence[int] = ()) -> None:
        """The spans of ``ended`` (and of the calls put off before), built and sent as one batch; ``waiting``:
        the ids handed and not yet sent (their callers' rows stay known)."""
        spans = self._spans(log, ended, final=final, waiting=waiting)
        if spans:
            self._export(spans)

    @property
    def put_off(self) -> bool:
        """Whether calls wait for their caller's task (:meth:`send` should be called within :data:`LINGER`)."""
        return bool(self._later)

    def _spans(self, log: Store, ended: Sequence[int], *, final: bool, waiting: Sequence[int] = ()) -> list[Span]:
        """The spans of ``ended`` and of the calls put off before; a call whose caller cannot be told yet
        (:class:`capture.span_places.NotYet`) is put off again, for at most :data:`WAIT_FOR_CALLER` seconds
        (at the end, or past that, the log as it is decides)."""
        from a2a_tape.capture.otlp import exchange_span
        from a2a_tape.capture.span_places import LogWindows, NotYet

        now = time.monotonic()
        due = list(self._later.items())
        self._later = {}
        try:
            self._open.refresh(log, keep_from=[*ended, *(e for e, _ in due), *waiting])
        except Exception as exc:  # noqa: BLE001 - the spans go without inferred callers; said once
            self.warn(f"cannot read the open exchanges ({type(exc).__name__}: {exc})")
        joins = LogWindows(log, open_rows=self._open)
        settled = LogWindows(log, final=True, open_rows=self._open)
        spans = []
        for ex_id, since in [*due, *((e, now) for e in ended)]:
            last_chance = final or now - since >= WAIT_FOR_CALLER
            try:
                span = exchange_span(log, ex_id, self._settings, settled if last_chance else joins)
            except NotYet:
                self._later[ex_id] = since
                continue
            except Exception as exc:  # noqa: BLE001 - one unreadable exchange must not stop the export
                self.failed += 1
                self.warn(f"exchange {ex_id} not exported ({type(exc).__name__}: {exc})")
                continue
            if span is not None:
                spans.append(span)
        return spans

    def _export(self, spans: list[Span]) -> None:
        try:
            ok = self._collector.send(spans, self._settings)
        except Exception:  # noqa: BLE001 - an exporter fault is a collector that did not take them
            ok = False
        if ok:
            self.sent += len(spans)
            return
        self.failed += len(spans)
        self.warn(f"the collector at {self.where} did not take the spans (is it running?)")

    def warn(self, why: str) -> None:
        if self._warned:
            return
        self._warned = True
        self._say(warning_line(why))

    def finish(self, left: int) -> None:
        """The end (the caller sent the last batch): the collector closed, ``left`` exchanges never sent
        said once."""
        self._collector.shutdown()
        if left:
            self.warn(f"{left} exchange(s) not exported before the end")

    def cut_short(self) -> None:
        """A batch still sending stops waiting, and any later one fails at once (the end's bound is past)."""
        self._collector.shutdown()


def connect(endpoint: str) -> Collector:
    """The collector at ``endpoint`` (OTLP/HTTP, protobuf), made before anything is recorded: a release of
    the exporter the export cannot send through is said at start (:class:`capture.otlp_send.NoTransport`)."""
    from a2a_tape.capture.otlp_send import Collector, endpoint_url

    return Collector(endpoint_url(endpoint), timeout=timeout_setting())


def timeout_setting() -> float:
    try:
        env = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT") or os.environ.get("OTEL_EXPORTER_OTLP_TIMEOUT")
        value = float(env or TIMEOUT)
    except ValueError:
        return TIMEOUT
    return value if value > 0 else TIMEOUT
