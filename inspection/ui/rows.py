"""What the HTML views show, as typed rows: built from the log's records and the one fold's views.

The templates print these and nothing else (no template reads a store or decodes a payload), so
the live UI and the static export show the same facts the same way.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from urllib.parse import urlsplit

import msgspec

from a2a_tape.capture.lineage import carried
from a2a_tape.fold import tool_calls
from a2a_tape.fold.runs import Run, StoredCopy, selector, stored_copy
from a2a_tape.fold.task_state import RunRef
from a2a_tape.fold.views import TaskView
from a2a_tape.inspection.doctor import FaultCount, Finding
from a2a_tape.inspection.messages import LoneMessage
from a2a_tape.inspection.steps import summary
from a2a_tape.inspection.ui.render import cell
from a2a_tape.inspection.verify_runs import RunVerdict
from a2a_tape.store import Exchange, StoredEvent, decode_item
from a2a_tape.store.events import is_terminal
from a2a_tape.store.methods import BINDING_NAMES, METHODS, SEND_METHODS, binding_and_version, binding_label
from a2a_tape.wire.bindings import recorded_call

GAP = 1.0
"""Seconds of silence between two events of a task that the waterfall marks as a gap."""
DECISIONS = frozenset({"get", "cancel", "resubscribe"})
"""Operations a client sends on its own (poll, cancel, resubscribe): marked as decisions."""
PREVIEW = 300
"""Characters of an event's summary a live row shows (the item's detail shows all of it)."""


def dom_id(kind: str, key: str) -> str:
    """An element id for a recorded key (any string): a digest, so CSS selectors never break."""
    return f"{kind}-{hashlib.blake2s(key.encode('utf-8', 'surrogatepass'), digest_size=8).hexdigest()}"


class EventRow(msgspec.Struct, frozen=True):
    """One raw event on the waterfall."""

    position: int
    seq: int
    received_at: float
    offset: float  # seconds since the task's first event
    delta: float  # seconds since the event before it
    gap: bool  # delta >= GAP
    kind: str
    local: bool  # written by a2a-tape (a decision, a synthetic FAILED), not by the agent
    exchange_id: int | None
    sse_event: str | None
    what: str
    exchange_no: int | None = None  # the exchange's number in its task (1, 2, ...: the exchanges table's #)

    @property
    def problem(self) -> bool:
        return self.kind in ("error", "undecodable")


def event_rows(
    events: Iterable[StoredEvent],
    first_at: float,
    previous_at: float | None = None,
    *,
    preview: int | None = PREVIEW,
    numbers: Mapping[int, int] | None = None,
) -> list[EventRow]:
    """Rows for ``events`` (in log order) of a task whose first event came at ``first_at``;
    ``previous_at``: when the event before the first of these came. ``preview``: characters of
    each summary kept (None: all). ``numbers``: each exchange's number in the task (:func:`exchange_numbers`)."""
    numbers = numbers or {}
    rows = []
    prev = previous_at
    for ev in events:
        item = decode_item(bytes(ev.payload))
        what = summary(item, ev.task_id if ev.task_id is not None else item.task_id)
        if item.kind == "undecodable":
            what += ": " + bytes(ev.payload).decode("utf-8", "backslashreplace")
        if preview is not None and len(what) > preview:
            what = what[: preview - 1] + "…"
        delta = 0.0 if prev is None else max(0.0, ev.received_at - prev)
        rows.append(
            EventRow(
                position=ev.position,
                seq=ev.seq,
                received_at=ev.received_at,
                offset=ev.received_at - first_at,
                delta=delta,
                gap=delta >= GAP,
                kind=item.kind,
                local=ev.origin == "local",
                exchange_id=ev.exchange_id,
                sse_event=ev.sse_event,
                what=what,
                exchange_no=None if ev.exchange_id is None else numbers.get(ev.exchange_id),
            )
        )
        prev = ev.received_at
    return rows


class ExchangeBar(msgspec.Struct, frozen=True):
    """One HTTP exchange of a task on the waterfall: when it ran, what it was, how it ended."""

    id: int  # the exchange's id in the log
    number: int  # its number in the task: 1, 2, ... in the order they began
    method: str
    operation: str | None
    binding: str
    version: str | None
    upstream: str
    status: int | None
    outcome: str | None
    started: float  # seconds since the task's first moment
    ended: float | None
    decision: bool  # a poll, cancel or resubscribe: a client's own decision
    role: str
    x: float  # the bar's start and width, in thousandths of the task's span (an SVG's coordinates)
    width: float


def binding_of(ex: Exchange) -> tuple[str, str | None]:
    """(binding, version) of an exchange as people read them (``HTTP+JSON``, ``1.0``); ``?`` for
    an exchange that was no A2A call (a card fetch)."""
    name, version = binding_and_version(ex.binding, ex.dialect)
    return (BINDING_NAMES.get(name, name) if name else "?"), version


def upstream_of(ex: Exchange) -> str:
    """The agent an exchange went to: scheme, host and port (never a credential)."""
    try:
        parts = urlsplit(ex.url)
    except ValueError:
        return "(an unreadable URL)"
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}" if parts.netloc else "(no host)"


def exchange_numbers(exchanges: Iterable[Exchange]) -> dict[int, int]:
    """Each exchange's number in its task (1, 2, ... by id: the order they began), for people: a
    log's global ids say nothing about one task."""
    return {ex_id: n for n, ex_id in enumerate(sorted(ex.id for ex in exchanges if ex.id is not None), 1)}


def exchange_bars(exchanges: Sequence[Exchange], start: float, end: float) -> list[ExchangeBar]:
    span = max(end - start, 1e-6)
    numbers = exchange_numbers(exchanges)
    bars = []
    for ex in exchanges:
        if ex.id is None:
            continue
        op = METHODS.get(ex.rpc_method or "", (None, None))[0]
        binding, version = binding_of(ex)
        began = max(0.0, ex.started_at - start)
        ended = None if ex.ended_at is None else max(began, ex.ended_at - start)
        width = (span if ended is None else ended) - began
        bars.append(
            ExchangeBar(
                id=ex.id,
                number=numbers[ex.id],
                method=ex.rpc_method or ex.http_method,
                operation=op,
                binding=binding,
                version=version,
                upstream=upstream_of(ex),
                status=ex.status,
                outcome=ex.outcome,
                started=began,
                ended=ended,
                decision=op in DECISIONS,
                role=ex.role,
                x=round(1000 * began / span, 1),
                width=max(2.0, round(1000 * width / span, 1)),
            )
        )
    return bars


class TraceRow(msgspec.Struct, frozen=True):
    """The W3C trace context one exchange's request carried (:func:`capture.lineage.carried`, as
    ``show`` prints it under the timeline and ``tasks --json`` lists it)."""

    number: int | None  # the exchange's number in the task
    exchange_id: int | None
    traceparent: str | None
    tracestate: str | None
    baggage: str | None
    how: str | None  # where it came from, when not the client's header as sent
    sent: str | None  # the traceparent the proxy sent on in its place (--continue-traceparent)


def trace_rows(exchanges: Iterable[Exchange], numbers: Mapping[int, int]) -> list[TraceRow]:
    """The trace context of each of ``exchanges`` that carried any, in the order they began."""
    out = []
    for ex in sorted(exchanges, key=lambda e: e.id or 0):
        t = carried(ex)
        if t is None:
            continue
        how = "started by the proxy: the client sent none" if t.injected else None
        if t.metadata:
            how = "in the message's metadata" + (f"; {how}" if how else "")
        number = None if t.exchange_id is None else numbers.get(t.exchange_id)
        out.append(TraceRow(number, t.exchange_id, t.traceparent, t.tracestate, t.baggage, how, t.sent))
    return out


class Header(msgspec.Struct, frozen=True):
    """What a task page says first: state, context, where it went, when, how long to its first event."""

    task_id: str
    context_id: str | None
    state: str
    events: int
    first_at: float
    last_at: float
    first_position: int
    last_position: int
    time_to_first_event: float | None  # from the first request to the first event
    upstreams: list[str]
    bindings: list[str]
    faults: int  # the fold's faults
    profile: str
    status_message: str | None
    error: str | None
    terminal: bool  # completed, failed, canceled or rejected: nothing more is expected
    kind: str = "task"  # or "message": a lone Message reply (task_id is then its key; no task state)
    recording: bool = False  # an exchange of it is open now: being recorded
    asked: list[str] = []  # what the user sent, each send's text


def header(view: TaskView, exchanges: Sequence[Exchange], *, kind: str = "task") -> Header:
    started = min((ex.started_at for ex in exchanges if ex.started_at), default=None)
    ttfe = None if started is None or not view.first_at else max(0.0, view.first_at - started)
    bindings = [label for label in (binding_label(ex.binding, ex.dialect) for ex in exchanges) if label]
    return Header(
        task_id=view.task_id,
        context_id=view.context_id,
        state=view.state,
        events=view.events,
        first_at=view.first_at,
        last_at=view.last_at,
        first_position=view.first_position,
        last_position=view.last_position,
        time_to_first_event=ttfe,
        upstreams=sorted({upstream_of(ex) for ex in exchanges}),
        bindings=sorted(set(bindings)),
        faults=len(view.faults),
        profile=view.profile,
        status_message=view.status_message,
        error=view.error,
        terminal=is_terminal(view.state) or kind == "message",
        kind=kind,
        recording=recording(exchanges),
        asked=asked(exchanges),
    )


def asked(exchanges: Iterable[Exchange]) -> list[str]:
    """What the user sent: the text of each send's message (any binding), in the order sent."""
    out = []
    for ex in sorted((ex for ex in exchanges if ex.rpc_method in SEND_METHODS), key=lambda e: e.id or 0):
        try:
            body = msgspec.json.decode(recorded_call(ex).body)
        except (msgspec.DecodeError, ValueError):
            continue
        params = body.get("params") if isinstance(body, dict) else None
        message = params.get("message") if isinstance(params, dict) else None
        parts = message.get("parts") if isinstance(message, dict) else None
        if isinstance(parts, list):
            text = "".join(p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str))
            if text:
                out.append(text)
    return out


class ToolTable(msgspec.Struct, frozen=True):
    """Tool calls as a table: the columns and the call's name of :mod:`..tool_calls` (as ``channels``
    and ``record`` show them), each value whole (a page has room; a terminal cuts them)."""

    columns: list[str]
    rows: list[list[str]]


def tool_table(view: TaskView) -> ToolTable:
    rows = [
        [
            tool_calls.name(c),
            c.status or "",
            c.title or c.text,
            cell(c.input),
            cell(c.error if c.error is not None else c.output),
        ]
        for c in view.tool_calls
    ]
    return ToolTable(list(tool_calls.COLUMNS), rows)


class FindingRow(msgspec.Struct, frozen=True):
    level: str
    code: str
    message: str
    positions: list[int]


def finding_rows(found: Iterable[Finding]) -> list[FindingRow]:
    return [FindingRow(f.level, f.code, f.message, list(f.positions)) for f in found]


class TaskListRow(msgspec.Struct, frozen=True):
    """One line of the list: a task, or a lone Message reply (``kind`` ``message``: no task, so
    no ``task_id``, no page and no state; ``name`` says which reply, as ``tasks`` prints it)."""

    task_id: str | None
    dom_id: str
    context_id: str | None
    state: str
    events: int
    first_at: float
    last_at: float
    last_position: int
    faults: int  # doctor's findings of the task (``doctor TASK``, as ``tasks`` counts them)
    profile: str
    answer: str | None  # the final answer's first line, shortened
    match: str | None = None  # a search's snippet
    kind: str = "task"
    message_key: str = ""  # a lone Message reply's message id, else its context id
    errors: int = 0  # of ``faults``, doctor's errors
    warnings: int = 0  # and its warnings
    sources: list[str] = []  # each run's source, in order (``tasks``' ``sources``): one a run

    @property
    def runs(self) -> int:
        """How many runs the task has (``tasks``' ``runs``); a lone Message reply: none."""
        return max(1, len(self.sources)) if self.kind == "task" else 0

    @property
    def name(self) -> str:
        """What the first column shows: the task id, or ``message <id>`` (``tasks``' rule)."""
        return self.task_id if self.task_id is not None else f"message {self.message_key}".strip()


def _first_line(text: str | None) -> str | None:
    """A text's first line, shortened to 80 characters (None: no text)."""
    if not text:
        return None
    first = text.strip().splitlines()[0] if text.strip() else ""
    return first if len(first) <= 80 else first[:79] + "…"


def message_row(m: LoneMessage) -> TaskListRow:
    """A lone Message reply in the list, as ``tasks`` lists it."""
    first, last = m.events[0], m.events[-1]
    return TaskListRow(
        task_id=None,
        dom_id=dom_id("message", m.key),
        context_id=m.context_id,
        state="message",
        events=len(m.events),
        first_at=first.received_at,
        last_at=last.received_at,
        last_position=last.position,
        faults=0,
        profile="generic",
        answer=_first_line(m.text),
        kind="message",
        message_key=m.message_id or m.context_id or "",
    )


def list_row(view: TaskView, faults: FaultCount, match: str | None = None, runs: Sequence[RunRef] = ()) -> TaskListRow:
    """A task in the list; ``faults``: doctor's counts of it (:func:`inspection.doctor.task_fault_count`);
    ``runs``: its runs, as the task projection lists them (the row shows the latest)."""
    answer = _first_line(view.final_answer)
    return TaskListRow(
        task_id=view.task_id,
        dom_id=dom_id("row", view.task_id),
        context_id=view.context_id,
        state=view.state,
        events=view.events,
        first_at=view.first_at,
        last_at=view.last_at,
        last_position=view.last_position,
        faults=faults.total,
        profile=view.profile,
        answer=answer,
        match=match,
        errors=faults.errors,
        warnings=faults.warnings,
        sources=[r.source or "unknown" for r in runs],
    )


class RunLink(msgspec.Struct, frozen=True):
    """A link of the list to one run of a task (``TASK@N``); None in a list of them: runs left out."""

    number: int
    selector: str
    source: str


RUN_LINKS = 5
"""Runs a list row links to at most: the first and the last ones of a task of more (the task page has all)."""


def run_links(row: TaskListRow) -> list[RunLink | None]:
    """The runs a list row links to, when the task has more than one: every one, or the first and
    the last :data:`RUN_LINKS` - 1 with a None between (the runs left out)."""
    if row.task_id is None or row.runs < 2:
        return []
    links: list[RunLink | None] = [
        RunLink(n, selector(row.task_id, n), source) for n, source in enumerate(row.sources, 1)
    ]
    if len(links) > RUN_LINKS:
        links = [links[0], None, *links[-(RUN_LINKS - 1) :]]
    return links


class RunCard(msgspec.Struct, frozen=True):
    """One run of a task as the task page shows it beside the others: who recorded it and how,
    how it ended, its answer, and the agent's stored copy (evidence, never its answer)."""

    number: int
    selector: str  # TASK@N: the notation of the CLI and --json
    source: str | None
    binding: str | None  # as people read it: JSONRPC 1.0, HTTP+JSON 1.0
    upstream: str | None
    host: str | None
    events: int
    state: str
    terminal: bool
    final_answer: str | None
    faults: int
    recording: bool  # an exchange of it is open now: being recorded
    stored: StoredCopy | None
    verify: RunVerdict | None = None  # a verify run: against the run it was compared with


def run_card(run: Run, verdict: RunVerdict | None = None) -> RunCard:
    view = run.view()
    called = [ex for ex in run.exchanges if ex.binding]
    label = None
    if called:
        name, version = binding_of(called[0])
        label = f"{name} {version}" if version else name
    upstream = run.upstream
    return RunCard(
        number=run.number,
        selector=run.selector,
        source=run.source,
        binding=label,
        upstream=None if upstream is None else upstream_of(Exchange(url=upstream)),
        host=run.host,
        events=len(run.events),
        state=view.state,
        terminal=is_terminal(view.state),
        final_answer=view.final_answer,
        faults=len(view.faults),
        recording=recording(run.exchanges),
        stored=stored_copy(run),
        verify=verdict,
    )


def recording(exchanges: Iterable[Exchange]) -> bool:
    """Whether one of ``exchanges`` is open now (no end, no outcome recorded): still being recorded."""
    return any(ex.ended_at is None and ex.outcome is None for ex in exchanges)


class RunPair(msgspec.Struct, frozen=True):
    a: str  # TASK@N
    b: str
    label: str


def run_pairs(cards: Sequence[RunCard]) -> list[RunPair]:
    """Every pair of runs, to compare in the diff view."""
    return [
        RunPair(x.selector, y.selector, f"run {x.number} and run {y.number}")
        for i, x in enumerate(cards)
        for y in cards[i + 1 :]
    ]
