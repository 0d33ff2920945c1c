"""``proxy --otlp-endpoint`` and ``record --otlp-endpoint``: each exchange a span, sent as it ends (docs/otel.md).

It runs in the export's own process (:mod:`recorder.otlp_process`: ``proxy``/``record`` hand that process
each ended exchange's id over a pipe, and it calls :meth:`LiveExport.ended`). :meth:`LiveExport.ended` puts
the ended exchange on a queue: its id (read back from the log), or the exchange as a capture wrote it
(:class:`capture.ended.EndedExchange`: the row, its events as stored and the items decoded on their way in;
``benchmarks/bench_otlp_live.py`` hands those). A thread of its own builds its span with the one mapping (:func:`capture.otlp.ended_span`,
or :func:`capture.otlp.exchange_span` for an id: the exchange read back from the log through a connection
of its own; the trace, ids, parent and links ``export --format otlp`` gives it too, its inferred caller
looked for among the exchanges open when it began, kept by :class:`capture.open_exchanges.OpenExchanges`)
and sends the spans in batches to the collector (:class:`capture.otlp_send.Collector`: the batch built as one
OTLP request, sent by the official OTLP/HTTP exporter's client). A call whose caller cannot be told yet
(:class:`capture.span_places.NotYet`) is built again with the next batch, for at most
:data:`WAIT_FOR_CALLER` seconds. A slow collector only makes the queue of ids longer (bounded:
:data:`MAX_PENDING`); a dead one costs the spans of the batches it refused, never an event: the log has
them, ``export --format otlp`` sends them later. Either is said once, on stderr.
"""

from __future__ import annotations

import os
import queue
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from a2a_tape.capture.ended import EndedExchange
from a2a_tape.capture.open_exchanges import OpenExchanges

if TYPE_CHECKING:
    from a2a_tape.capture.otlp import Settings
    from a2a_tape.capture.otlp_messages import Span
    from a2a_tape.capture.otlp_send import Collector
    from a2a_tape.store import Store

MAX_PENDING = 100_000
"""Exchanges waiting for their span (a collector far behind): past it, they are counted, not kept."""
MAX_HELD_EVENTS = 100_000
"""Events of the exchanges queued as written (their payloads in memory): past it, an exchange is queued by
its id and read back from the log when its span is built (a slow collector must not grow the proxy)."""
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
_DONE = -1

Ended = int | EndedExchange
"""An ended exchange as the sender is handed it: as written (the proxy), or its id (read back)."""


def _id(e: Ended) -> int:
    return e if isinstance(e, int) else e.row.id or 0


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def warning_line(why: str) -> str:
    """The live export's one warning line (said once per recording)."""
    return (
        f"a2a-tape: warning: OTLP export: {why}; recording goes on, every event is in the log "
        "('a2a-tape export --format otlp' sends the spans later)"
    )


class LiveExport:
    """Spans of the exchanges of one log, sent off the hot path (:meth:`ended`, :meth:`close`)."""

    def __init__(
        self,
        open_log: Callable[[], Store],
        collector: Collector,
        settings: Settings,
        *,
        where: str,
        timeout: float = TIMEOUT,
        say: Callable[[str], None] = _stderr,
        thread: bool = True,
        since: float | None = None,
    ) -> None:
        """``thread``: start the sender's thread (without: :meth:`send` is called by the caller, as
        ``benchmarks/bench_otlp_live.py`` does). ``since``: when the exchanges to send may have begun
        (now, by default: the recording starts after the export)."""
        self._open_log, self._collector, self._settings = open_log, collector, settings
        self.where, self.timeout, self._say = where, timeout, say
        self._ids: queue.Queue[Ended] = queue.Queue(MAX_PENDING)
        self.sent = 0  # spans the collector took
        self.failed = 0  # spans it did not take (or that were never built)
        self.skipped = 0  # ids past MAX_PENDING
        self._held = 0  # events of the exchanges queued as written (MAX_HELD_EVENTS)
        self._held_lock = threading.Lock()
        self._warned = False
        self._later: dict[int, tuple[Ended, float]] = {}  # calls put off: exchange id -> (it, when first tried)
        self._open = OpenExchanges(time.time() if since is None else since)  # the rows a call's caller is looked for in
        self._thread = threading.Thread(target=self._run, name="a2a-tape otlp", daemon=True)
        if thread:
            self._thread.start()

    # -- the hot path -------------------------------------------------------------------------------

    def ended(self, exchange_id: int, written: EndedExchange | None = None) -> None:
        """An exchange's row is final (called on the recorder's loop: never blocks); ``written``: the
        exchange as its capture wrote it (its span is built from it, nothing read back)."""
        if written is not None:
            with self._held_lock:
                if self._held + len(written.events) > MAX_HELD_EVENTS:
                    written = None  # read back when its span is built
                else:
                    self._held += len(written.events)
        try:
            self._ids.put_nowait(exchange_id if written is None else written)
        except queue.Full:
            self.skipped += 1
            self._release([] if written is None else [written])

    def _release(self, taken: list[Ended]) -> None:
        """The events of exchanges taken off the queue no longer count as held."""
        n = sum(len(e.events) for e in taken if not isinstance(e, int))
        if n:
            with self._held_lock:
                self._held -= n

    # -- the sender's thread ------------------------------------------------------------------------

    def open_log(self) -> Store | None:
        """The sender's own connection to the log (None, said once, when it cannot be opened)."""
        try:
            return self._open_log()
        except Exception as exc:  # noqa: BLE001 - the recording goes on; said once
            self.warn(f"cannot read the log to export spans ({type(exc).__name__}: {exc})")
            return None

    def _run(self) -> None:
        log = self.open_log()
        if log is None:
            return
        try:
            while self._send_batch(log):
                pass
        finally:
            log.close()

    def _send_batch(self, log: Store) -> bool:
        """One batch: the next exchanges' spans, sent. False once :meth:`close` asked to stop."""
        try:  # while calls wait for their caller's task, look again at least every LINGER
            ids = [self._ids.get(timeout=LINGER if self._later else None)]
        except queue.Empty:
            ids = []
        until = time.monotonic() + LINGER
        try:
            while ids and len(ids) < BATCH and ids[-1] != _DONE:
                ids.append(self._ids.get(timeout=max(until - time.monotonic(), 0.0)))
        except queue.Empty:
            pass
        more = not ids or ids[-1] != _DONE
        taken = [i for i in ids if i != _DONE]
        self._release(taken)
        self.send(log, taken, final=not more)
        return more

    def send(self, log: Store, ended: Sequence[Ended], *, final: bool = False, waiting: Sequence[int] = ()) -> None:
        """The spans of ``ended`` (and of the calls put off before), built and sent as one batch; ``waiting``:
        the ids handed and not yet sent (their callers' rows stay known), beside those on the queue."""
        spans = self._spans(log, ended, final=final, waiting=waiting)
        if spans:
            self._export(spans)

    @property
    def put_off(self) -> bool:
        """Whether calls wait for their caller's task (:meth:`send` should be called within :data:`LINGER`)."""
        return bool(self._later)

    def _spans(self, log: Store, ended: Sequence[Ended], *, final: bool, waiting: Sequence[int] = ()) -> list[Span]:
        """The spans of ``ended`` and of the calls put off before; a call whose caller cannot be told yet
        (:class:`capture.span_places.NotYet`) is put off again, for at most :data:`WAIT_FOR_CALLER` seconds
        (at the end, or past that, the log as it is decides)."""
        from a2a_tape.capture.otlp import ended_span, exchange_span, held_rows
        from a2a_tape.capture.span_places import LogWindows, NotYet

        now = time.monotonic()
        due = list(self._later.values())
        self._later = {}
        with self._ids.mutex:  # what is still queued: calls whose callers must stay known
            queued = [_id(e) for e in self._ids.queue if e != _DONE]
        try:
            keep = [*map(_id, ended), *(_id(e) for e, _ in due), *queued, *waiting]
            self._open.refresh(log, keep_from=keep)
        except Exception as exc:  # noqa: BLE001 - the spans go without inferred callers; said once
            self.warn(f"cannot read the open exchanges ({type(exc).__name__}: {exc})")
        joins = LogWindows(log, open_rows=self._open)
        settled = LogWindows(log, final=True, open_rows=self._open)
        written = [e for e, _ in [*due, *((e, now) for e in ended)] if not isinstance(e, int)]
        try:  # the task rows of the exchanges handed as written: from memory when the batch holds them all
            rows_of = held_rows(log, written)
        except Exception:  # noqa: BLE001 - each span then reads its task's rows (and says what fails)
            rows_of = log.exchanges
        spans = []
        for e, since in [*due, *((e, now) for e in ended)]:
            last_chance = final or now - since >= WAIT_FOR_CALLER
            ex_id = _id(e)
            lineage = settled if last_chance else joins
            try:
                if isinstance(e, int):
                    span = exchange_span(log, e, self._settings, lineage)
                else:
                    span = ended_span(log, e, self._settings, lineage, rows_of)
            except NotYet:
                self._later[ex_id] = (e, since)
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

    # -- the end ----------------------------------------------------------------------------------

    def finish(self, left: int) -> None:
        """The end without the thread (the caller sent the last batch): the collector closed, ``left``
        exchanges never sent said once."""
        self._collector.shutdown()
        if left:
            self.warn(f"{left} exchange(s) not exported before the end")

    def cut_short(self) -> None:
        """A batch still sending stops waiting, and any later one fails at once (the end's bound is past)."""
        self._collector.shutdown()

    def close(self) -> None:
        """Send what is queued (waiting at most :attr:`timeout`), then stop; what is left is said once."""
        try:
            self._ids.put(_DONE, timeout=self.timeout)
        except queue.Full:
            pass
        self._thread.join(self.timeout)
        if self._thread.is_alive():  # a collector that does not answer: its retries are cut short
            self._collector.shutdown()
            self._thread.join(self.timeout)
        else:
            self._collector.shutdown()
        left = self._ids.qsize() + self.skipped
        if left:
            self.warn(f"{left} exchange(s) not exported before the end")


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
