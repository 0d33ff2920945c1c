"""What each template is given: the context of a view, made from the log's records.

Nothing here reads a store: callers pass the events, exchanges and views they read (the export
a task at a time, the app a page at a time), so the live UI and the static export fill the same
templates from the same functions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from a2a_tape.fold.views import TaskView
from a2a_tape.inspection.doctor import Finding
from a2a_tape.inspection.listing import Family
from a2a_tape.inspection.ui import rows
from a2a_tape.inspection.ui.render import pretty_json
from a2a_tape.inspection.words import count
from a2a_tape.store import Exchange, StoredEvent, decode_item


class Verdict(msgspec.Struct, frozen=True):
    level: str  # the CSS class: error / warning / ok
    text: str


def verdict(found: Sequence[Finding]) -> Verdict:
    errors = sum(1 for f in found if f.level == "error")
    if errors:
        return Verdict("error", count(errors, "error"))
    return Verdict("warning", "warnings only") if found else Verdict("ok", "no faults")


def task_context(
    view: TaskView,
    exchanges: Sequence[Exchange],
    events: Sequence[StoredEvent],
    *,
    findings: Sequence[Finding] | None,
    channels: TaskView | None = None,
    previous_at: float | None = None,
    preview: int | None = rows.PREVIEW,
    kind: str = "task",
    card: Exchange | None = None,
    family: Family | None = None,
    task_link: Callable[[str], str] | None = None,
) -> dict[str, Any]:
    """task.html's context: ``view`` the task as it ends (its header), ``channels`` the answer
    shown (``view`` unless a scrubber position asks for another), ``events`` the timeline rows
    shown (all of them, or a live page's first page), ``findings`` None while the doctor has
    not looked (a live page loads them after). ``kind``: ``message`` for a lone Message reply
    (no task: the header says so, and names no task state). ``card``: the agent-card fetch that
    began the recording (:func:`reading.card_fetch`), first among the exchanges. ``family``: the
    task's parent and children (:func:`inspection.listing.family_of`; None: not shown), linked by
    ``task_link`` (a task id to its page; None: named, not linked, as in a report of one page)."""
    h = rows.header(view, exchanges, kind=kind)
    calls = [card, *exchanges] if card is not None else list(exchanges)
    start = min([view.first_at, *(ex.started_at for ex in calls if ex.started_at)]) if calls else view.first_at
    end = max([view.last_at, *(ex.ended_at for ex in calls if ex.ended_at)]) if calls else view.last_at
    shown = channels if channels is not None else view
    numbers = rows.exchange_numbers(calls)
    return {
        "h": h,
        "bars": rows.exchange_bars(calls, start, end),
        "view": shown,
        "tools": rows.tool_table(shown),
        "findings": None if findings is None else rows.finding_rows(findings),
        "verdict": None if findings is None else verdict(findings),
        "rows": rows.event_rows(events, view.first_at, previous_at, preview=preview, numbers=numbers),
        "more": None,
        "traces": rows.trace_rows(exchanges, numbers),
        "family": family,
        "task_link": task_link,
    }


class EventDetail(msgspec.Struct, frozen=True):
    position: int
    seq: int
    received_at: float
    exchange_id: int | None
    origin: str
    sse_event: str | None
    size: int
    raw: str  # the bytes as text; bytes that are not UTF-8 as \xNN
    json: str | None
    reason: str | None  # why the bytes are not JSON


def event_detail(ev: StoredEvent) -> EventDetail:
    raw = bytes(ev.payload)
    pretty = pretty_json(raw)
    reason = None
    if pretty is None:
        body = decode_item(raw).body
        reason = getattr(body, "reason", "not JSON")
    return EventDetail(
        position=ev.position,
        seq=ev.seq,
        received_at=ev.received_at,
        exchange_id=ev.exchange_id,
        origin=ev.origin,
        sse_event=ev.sse_event,
        size=len(raw),
        raw=raw.decode("utf-8", "backslashreplace"),
        json=pretty,
        reason=reason,
    )


class Update(msgspec.Struct, frozen=True):
    """What a task's live page receives when the log grows: its new timeline rows, its header,
    and the answer at the newest position."""

    rows: str
    header: str
    channels: str
    last_at: float
