"""``export --format otlp``: the recorded tasks as traces, doctor's findings on their spans (docs/otel.md).

The mapping of the log to spans is :mod:`capture.otlp` (the live export of ``proxy``/``record
--otlp-endpoint`` shares it); this module adds what inspection knows (doctor's findings as span events
and statuses) and reads a log a task at a time, so a large log is never held whole.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from a2a_tape.capture.otlp import BATCH, Settings, settings
from a2a_tape.capture.otlp import task_spans as _task_spans
from a2a_tape.capture.otlp_messages import Span
from a2a_tape.capture.otlp_send import (
    Collector,
    ExportFailed,
    NoTransport,
    endpoint_url,
    json_line,
    post_to,
    write_json_lines,
)
from a2a_tape.capture.span_places import Lineage, WholeLog
from a2a_tape.fold.runs import RunLog
from a2a_tape.store import Recordings

from .doctor import findings

__all__ = [
    "BATCH",
    "Collector",
    "ExportFailed",
    "NoTransport",
    "Lineage",
    "Settings",
    "Span",
    "WholeLog",
    "batches",
    "endpoint_url",
    "json_line",
    "post_to",
    "settings",
    "task_spans",
    "write_json_lines",
]


def task_spans(st: Recordings, task_id: str, s: Settings, joins: Lineage | None = None) -> list[Span]:
    """One task's spans (:func:`capture.otlp.task_spans`) with doctor's findings on them, each run in its
    trace and linked to the others (a :class:`fold.runs.RunLog`: that run's spans, linked to the runs the
    whole log has), and the callers inferred from the log's exchanges (``joins``; read when not given)."""
    whole = st.whole if isinstance(st, RunLog) else st
    joins = joins if joins is not None else WholeLog(whole.exchanges())
    every = whole.exchanges(task_id) if whole is not st else ()
    return _task_spans(st, task_id, s, findings, joins, every)


def batches(
    st: Recordings,
    task_ids: Iterable[str],
    s: Settings,
    *,
    size: int = BATCH,
    progress: Callable[[int], None] | None = None,
) -> Iterator[list[Span]]:
    """The spans of ``task_ids``, a task at a time, in lists of about ``size`` spans (a task is never split)."""
    pending: list[Span] = []
    whole = st.whole if isinstance(st, RunLog) else st
    joins = WholeLog(whole.exchanges())  # every exchange row once: who called whom (capture/lineage.py)
    for n, task_id in enumerate(task_ids, 1):
        pending.extend(task_spans(st, task_id, s, joins))
        if len(pending) >= size:
            yield pending
            pending = []
        if progress is not None:
            progress(n)
    if pending:
        yield pending
