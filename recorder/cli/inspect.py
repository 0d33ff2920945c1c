"""Read-only inspection commands: ``tasks``, ``show``, ``channels``."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Annotated, Any, Protocol

import msgspec
import typer
from rich.table import Table
from rich.text import Text

from a2a_tape.store import (
    ArtifactUpdate,
    ErrorItem,
    EventLog,
    Exchange,
    ExchangeLog,
    Following,
    Item,
    MessageItem,
    Note,
    ReadOnlyStore,
    Recordings,
    StatusUpdate,
    Store,
    StoredEvent,
    TaskSnapshot,
    Undecodable,
    decode_item,
)
from a2a_tape.store.methods import binding_and_version, binding_label

from . import options
from .app import DbOption, JsonOption, UsageError, commands, emit_json, err, find_task, open_db, out

app = commands()

if TYPE_CHECKING:
    from a2a_tape.replay.projection import Projector
    from a2a_tape.replay.views import TaskView


class _FollowedLog(EventLog, Following, Protocol):
    """What ``show --follow`` reads: the log, and a wait for what other writers commit."""


class ShowRow(msgspec.Struct):
    seq: int
    position: int
    kind: str
    received_at: float
    origin: str
    sse_event: str | None
    exchange_id: int | None
    data: Any  # the payload as received: msgspec.Raw when it is JSON, else the text / None
    raw: str | None = None  # the payload text when it is not JSON
    binding: str | None = None  # the exchange's: jsonrpc / http+json / grpc (store.methods)
    version: str | None = None  # its protocol version: 0.3 / 1.0


@app.command("show")
def show_cmd(
    task: Annotated[str, typer.Argument(help="Task id (or a unique prefix).")],
    raw: Annotated[bool, typer.Option("--raw", help="Print the exact recorded bytes, one item per line.")] = False,
    follow: Annotated[
        bool,
        typer.Option(
            "--follow",
            "-f",
            help="Keep printing the task's new events as they are recorded (until the task "
            "ends or Ctrl-C); with --json, one JSON object per line.",
        ),
    ] = False,
    idle: Annotated[
        float | None,
        typer.Option(
            "--idle-timeout",
            help="With --follow: stop after this many seconds without a new event.",
            show_default=False,
            callback=options.seconds,
        ),
    ] = None,
    db: DbOption = None,
    json: JsonOption = False,
) -> None:
    """The timeline of raw events of one task."""
    st = open_db(db, readonly=True)
    with st:
        lone = None if st.has_task(task) else _find_message(st, task)
        if lone is not None:  # a lone Message reply: no task, its exchange's events
            task_id, events = lone.key, lone.events
            follow = False
        else:
            task_id = find_task(st, task)
            events = st.read_task(task_id)
        if follow:
            _follow(st, task_id, events, raw=raw, json=json, idle=idle)
            return
        wires = _wires(st, task_id if lone is None else None, events)
    if raw:
        for ev in events:
            sys.stdout.buffer.write(bytes(ev.payload) + b"\n")
        sys.stdout.flush()
        return
    rows = [_show_row(ev, wires.get(ev.exchange_id or 0)) for ev in events]
    if json:
        emit_json(rows)
        return
    t0 = events[0].received_at if events else 0.0
    labels = sorted({label for w in wires.values() if (label := binding_label(*w))})
    table = Table(title=f"task {task_id}" + (f" ({', '.join(labels)})" if labels else ""), show_lines=False)
    for col in ("seq", "pos", "+s", "kind", "origin"):
        table.add_column(col, no_wrap=True)
    table.add_column("artifact / channel", overflow="fold")
    table.add_column("what", overflow="fold")
    for ev, row in zip(events, rows):
        item = decode_item(ev.payload)
        local = row.origin == "local"
        kind = row.kind + (f" ({ev.sse_event})" if ev.sse_event else "")
        table.add_row(
            str(row.seq),
            str(row.position),
            f"+{ev.received_at - t0:.3f}",
            Text(kind, style="bold red" if row.kind in ("error", "undecodable") else ""),
            Text("LOCAL", style="bold yellow") if local else "",
            Text(_where(task_id, item)),
            Text(("a2a-tape decision: " if local else "") + _summary(item, bytes(ev.payload))),
        )
    out.print(table)
    if any(r.origin == "local" for r in rows):
        err.print(
            "LOCAL rows were written by a2a-tape itself (recovery decisions, a synthetic FAILED), not by the agent"
        )


def _wires(
    st: ExchangeLog, task_id: str | None, events: Iterable[StoredEvent]
) -> dict[int, tuple[str | None, str | None]]:
    """(binding, version) of each exchange the events came in."""
    wanted = {ev.exchange_id for ev in events if ev.exchange_id is not None}
    found = st.exchanges(task_id) if task_id is not None else [e for i in wanted if (e := st.get_exchange(i))]
    return {ex.id: binding_and_version(ex.binding, ex.dialect) for ex in found if ex.id in wanted}


def _show_row(ev: StoredEvent, wire: tuple[str | None, str | None] | None = None) -> ShowRow:
    item = decode_item(ev.payload)
    body = item.body
    is_json = not isinstance(body, Undecodable) or not body.reason.startswith(("invalid JSON", "undecodable"))
    return ShowRow(
        seq=ev.seq,
        position=ev.position,
        kind=item.kind,
        received_at=ev.received_at,
        origin=ev.origin,
        sse_event=ev.sse_event,
        exchange_id=ev.exchange_id,
        data=msgspec.Raw(bytes(ev.payload)) if is_json else None,
        raw=None if is_json else bytes(ev.payload).decode("utf-8", "replace"),
        binding=wire[0] if wire else None,
        version=wire[1] if wire else None,
    )


def _follow(
    st: _FollowedLog, task_id: str, events: list[StoredEvent], *, raw: bool, json: bool, idle: float | None
) -> None:
    """Print the events so far, then each new one of the task as it is committed.

    Waits on the store (LISTEN/NOTIFY on PostgreSQL; SQLite's data version with a short
    back-off) and catches up with a read from the last position seen: nothing is skipped.
    Ends when the task reaches a terminal state, after ``idle`` quiet seconds, or on Ctrl-C.
    """
    import time

    from a2a_tape.replay.fold import TaskFold
    from a2a_tape.store.events import is_terminal

    t0 = events[0].received_at if events else time.time()
    fold = TaskFold(task_id)  # the task's state, as the one fold has it

    def emit(ev: StoredEvent) -> None:
        item = decode_item(ev.payload)
        fold.apply(ev, item)
        if raw:
            sys.stdout.buffer.write(bytes(ev.payload) + b"\n")
        elif json:
            sys.stdout.buffer.write(msgspec.json.encode(_show_row(ev)) + b"\n")
        else:
            local = "LOCAL " if ev.origin == "local" else ""
            out.print(
                f"{ev.seq:>4} {ev.position:>6} +{ev.received_at - t0:8.3f} {item.kind:<11} {local}"
                f"{_where(task_id, item)} {_summary(item, bytes(ev.payload))}".rstrip(),
                markup=False,
                highlight=False,
                soft_wrap=True,
            )
        sys.stdout.flush()

    for ev in events:
        emit(ev)
    cursor = st.last_position()
    quiet_since = time.monotonic()
    try:
        while not is_terminal(fold.s.state):
            wait = 1.0 if idle is None else max(0.0, min(1.0, idle - (time.monotonic() - quiet_since)))
            if st.wait_for_events(cursor, timeout=wait):
                for ev in st.read_from(cursor):
                    cursor = ev.position
                    if ev.task_id == task_id:
                        emit(ev)
                        quiet_since = time.monotonic()
            elif idle is not None and time.monotonic() - quiet_since >= idle:
                break
    except KeyboardInterrupt:
        pass


def _short_id(task_id: str, artifact_id: str) -> str:
    """``{task_id}:stream:reasoning`` -> ``…:stream:reasoning`` (the task id is the table's title)."""
    if task_id and artifact_id.startswith(task_id) and len(artifact_id) > len(task_id):
        return "…" + artifact_id[len(task_id) :]
    return artifact_id


def _where(task_id: str, item: Item) -> str:
    """The artifact and the channel the contract profile puts it in (or why it is ignored)."""
    body = item.body
    if not isinstance(body, ArtifactUpdate):
        return ""
    from a2a_tape.replay.profiles import classify

    chunk = classify(task_id, body)
    where = f"{_short_id(task_id, body.artifact.artifact_id)} [{chunk.channel}]"
    if chunk.ignore:
        where += f" ignored: {chunk.ignore}"
    return where


def _preview(text: str, limit: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _summary(item: Item, payload: bytes = b"") -> str:
    b = item.body
    if isinstance(b, ArtifactUpdate):
        mode = "append" if b.append else "replace"
        if b.artifact.meta.source == "final_snapshot":
            mode += " (final snapshot)"
        data = sum(1 for p in b.artifact.parts if p.kind == "data")
        extra = f" +{data} data part(s)" if data else ""
        return f"{mode}{', last chunk' if b.last_chunk else ''}: {_preview(b.artifact.text)!r}{extra}"
    if isinstance(b, StatusUpdate):
        msg = b.message
        return b.state + (f": {_preview(msg.text)}" if msg is not None and msg.text else "")
    if isinstance(b, TaskSnapshot):
        msg = b.status_message
        arts = f", {len(b.artifacts)} artifact(s)" if b.artifacts else ""
        return b.state + arts + (f": {_preview(msg.text)}" if msg is not None and msg.text else "")
    if isinstance(b, MessageItem):
        return f"{b.message.role}: {_preview(b.message.text)}"
    if isinstance(b, ErrorItem):
        return f"error {b.code}: {_preview(b.message)}"
    if isinstance(b, Note):
        return f"{b.action}: {_preview(b.detail)}"
    if isinstance(b, Undecodable):
        return f"{b.reason[:50]}; raw: {payload[:60]!r}"
    return b.summary


# -- tasks / channels: read the projection (brought up to date first) ------------------------


class TaskRow(msgspec.Struct):
    """One line of ``tasks --json``: a task, or a lone Message reply (``kind`` ``message``: no
    task, so ``task_id`` and ``state`` are null; ``message_id`` / ``context_id`` name it)."""

    task_id: str | None
    context_id: str | None
    state: str | None
    events: int
    first_at: float
    last_at: float
    profile: str
    faults: int
    final_answer: str | None
    kind: str = "task"
    message_id: str | None = None
    bindings: list[str] = []  # how its exchanges went: jsonrpc, http+json (store.methods.BINDINGS)


_SENDS = frozenset({"message/send", "message/stream", "SendMessage", "SendStreamingMessage"})


class LoneMessage(msgspec.Struct):
    """A send answered by a Message that names no task."""

    key: str  # the reply's message id, else its context id, else ``exchange-N``
    message_id: str | None
    context_id: str | None
    text: str
    events: list[Any]


def _lone_messages(st: Recordings, exchanges: Iterable[Exchange] | None = None) -> list[LoneMessage]:
    """Every send whose answer was a lone Message (no task id anywhere), in exchange order."""
    out: list[LoneMessage] = []
    for ex in exchanges if exchanges is not None else st.exchanges():
        if ex.task_id is not None or ex.id is None or ex.rpc_method not in _SENDS:
            continue
        events = list(st.iter_exchange(ex.id))
        if not events or any(e.task_id is not None for e in events):
            continue
        reply = None
        for e in events:
            item = decode_item(e.payload)
            body = item.body
            if isinstance(body, MessageItem) and body.message.task_id is None and body.message.role != "user":
                reply = body.message
        if reply is None:
            continue
        ctx = reply.context_id or ex.context_id
        key = reply.message_id or ctx or f"exchange-{ex.id}"
        out.append(LoneMessage(key, reply.message_id, ctx, reply.text, events))
    return out


def _find_message(st: Recordings, key: str) -> LoneMessage | None:
    """The lone Message reply named by its message id or context id (or a unique prefix)."""
    if not key:
        return None
    found = [m for m in _lone_messages(st) if key in (m.message_id, m.context_id, m.key)]
    if not found:
        found = [m for m in _lone_messages(st) if m.key.startswith(key)]
    return found[-1] if len(found) >= 1 and len({m.key for m in found}) == 1 else None


class _InMemory:
    """The projection folded in memory, for a database we may not write to (read-only file)."""

    def __init__(self, st: EventLog) -> None:
        from a2a_tape.replay.projection import fold_stored

        self._folds = fold_stored(st.read_from(0))

    def view(self, task_id: str, closed: Mapping[int, float] | None = None) -> TaskView | None:
        fold = self._folds.get(task_id)
        return None if fold is None else fold.view(closed)

    def views(self, closed: Mapping[int, float] | None = None) -> Iterator[TaskView]:
        return iter(sorted((f.view(closed) for f in self._folds.values()), key=lambda v: v.task_id))


def _projector(st: Store) -> Projector | _InMemory:
    """The persisted projection, brought up to date; folded in memory when the log cannot be
    written (read-only media, a read-only server) and the stored projection is behind."""
    from a2a_tape.replay.projection import Projector

    from .progress import spinner

    proj = Projector(st)
    try:
        behind = st.last_position() - proj.cursor()
        with spinner(f"folding {behind:,} new events into the task projection", show=behind > 50_000):
            proj.catch_up()
    except ReadOnlyStore:
        return _InMemory(st)
    return proj


def _closed(st: ExchangeLog, task_id: str | None = None) -> dict[int, float]:
    """The exchanges that ended (by id, when): a stream ends when its exchange does."""
    return _closed_of(st.exchanges(task_id))


def _closed_of(exchanges: Iterable[Exchange]) -> dict[int, float]:
    from a2a_tape.replay.inspect.steps import closed_exchanges

    return closed_exchanges(exchanges)


@app.command("tasks")
def tasks_cmd(
    state: Annotated[
        list[str] | None,
        typer.Option("--state", metavar="STATE", help="Only tasks in this state (repeat, or comma-separate)."),
    ] = None,
    context: Annotated[
        str | None, typer.Option("--context", metavar="CONTEXT_ID", help="Only tasks of this context id.")
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            metavar="TIME",
            help="Only tasks active since: unix seconds or an ISO time (UTC if no zone).",
            callback=options.since,
        ),
    ] = None,
    limit: Annotated[
        int | None, typer.Option("--limit", metavar="N", help="At most this many tasks.", callback=options.count)
    ] = None,
    all_: Annotated[
        bool, typer.Option("--all", help=f"Every task (people see the newest {DEFAULT_TASKS} unless asked).")
    ] = False,
    db: DbOption = None,
    json: JsonOption = False,
) -> None:
    """List recorded tasks, newest (by last event) first.

    People see the newest 50 (--limit N, --all for more; how many more is said on stderr);
    --json prints every task unless --limit is given. Rows are streamed.
    """
    from a2a_tape.store import normalise_state

    wanted = None
    if state:
        wanted = set()
        for s in state:
            for one in s.split(","):
                if one.strip():
                    norm = normalise_state(one.strip())
                    if norm == "unknown" and one.strip().lower() != "unknown":
                        raise UsageError(f"--state: unknown task state '{one.strip()}'")
                    wanted.add(norm)
    if all_ and limit is not None:
        raise UsageError("--limit and --all do not go together")
    cutoff = options.parse_since(since)  # checked by the option already
    shown = limit if limit is not None else (None if all_ or json else DEFAULT_TASKS)
    filtered = bool(wanted or context is not None or cutoff is not None)
    st = open_db(db, readonly="fallback")  # the projection is kept when the log can be written
    with st:
        proj = _projector(st)
        from a2a_tape.replay.inspect import listing

        # lone Message replies (a send answered without a task) are listed with the tasks
        lone = [
            m
            for m in _lone_messages(st, _taskless_exchanges(st))
            if wanted is None
            and (context is None or m.context_id == context)
            and (cutoff is None or m.events[-1].received_at >= cutoff)
        ]
        bindings: dict[str, set[str]] = {}  # task -> the bindings of its exchanges, read with them
        if isinstance(proj, _InMemory):  # a read-only log behind its projection: no index to page
            every = st.exchanges()
            _note_bindings(every, bindings)
            views = sorted(proj.views(_closed_of(every)), key=lambda v: v.last_position, reverse=True)
            views = [
                v
                for v in views
                if (wanted is None or v.state in wanted)
                and (context is None or v.context_id == context)
                and (cutoff is None or v.last_at >= cutoff)
            ]
            total = len(views) + len(lone)
            found = iter(views)
        else:
            total = listing.count(st, states=wanted, context=context, since=cutoff) + len(lone)
            found = listing.newest(
                st,
                limit=shown,
                states=wanted,
                context=context,
                since=cutoff,
                closed=lambda ids: _closed_for(st, ids, bindings),
            )
        rows_iter = _newest_rows(found, lone, shown, bindings)
        if json:
            _stream_json(rows_iter)
            return
        printed = _print_tasks(rows_iter)
    if not printed:
        err.print("no tasks" + (" match" if filtered else " recorded yet"))
        return
    if total > printed:
        more = total - printed
        err.print(
            f"{more} more task(s) not shown (newest {printed} of {total}): --limit N to see more, --all for every one",
            markup=False,
            soft_wrap=True,
        )


DEFAULT_TASKS = 50
"""How many tasks ``tasks`` shows people unless --limit or --all says otherwise."""
_TABLE_ROWS = 500
"""Up to this many rows are one rich table; longer listings stream as aligned lines."""


def _task_row(v: TaskView, bindings: Iterable[str] = ()) -> TaskRow:
    row = TaskRow(
        v.task_id, v.context_id, v.state, v.events, v.first_at, v.last_at, v.profile, len(v.faults), v.final_answer
    )
    row.bindings = sorted(bindings)
    return row


def _message_row(m: LoneMessage) -> TaskRow:
    first, last = m.events[0].received_at, m.events[-1].received_at
    return TaskRow(None, m.context_id, None, len(m.events), first, last, "generic", 0, m.text, "message", m.message_id)


def _newest_rows(
    views: Iterable[TaskView], lone: list[LoneMessage], limit: int | None, bindings: Mapping[str, set[str]]
) -> Iterator[TaskRow]:
    """Task rows (``views``: newest last event first) and lone Message rows, merged newest first."""
    import heapq
    from itertools import islice

    tasks = ((v.last_position, _task_row(v, bindings.get(v.task_id, ()))) for v in views)
    messages = sorted(((m.events[-1].position, _message_row(m)) for m in lone), key=lambda p: p[0], reverse=True)
    merged = heapq.merge(tasks, messages, key=lambda p: p[0], reverse=True)
    return (row for _, row in islice(merged, limit))


def _taskless_exchanges(st: ExchangeLog) -> list[Exchange]:
    """The exchanges that name no task (where lone Message replies are), without reading the others."""
    return st.exchanges_without_task()


def _closed_for(st: ExchangeLog, task_ids: Iterable[str], bindings: dict[str, set[str]]) -> dict[int, float]:
    """The ended exchanges of some tasks (a page of the listing); their bindings noted in ``bindings``."""
    closed: dict[int, float] = {}
    for t in task_ids:
        exchanges = st.exchanges(t)
        _note_bindings(exchanges, bindings)
        closed.update(_closed_of(exchanges))
    return closed


def _note_bindings(exchanges: Iterable[Exchange], bindings: dict[str, set[str]]) -> None:
    for ex in exchanges:
        name = binding_and_version(ex.binding, ex.dialect)[0]
        if ex.task_id and name:
            bindings.setdefault(ex.task_id, set()).add(name)


def _stream_json(rows: Iterable[TaskRow]) -> None:
    """One JSON list on stdout, written a row at a time (the same bytes as ``emit_json``)."""
    import msgspec as _msgspec

    enc = _msgspec.json.Encoder()
    write = sys.stdout.buffer.write
    write(b"[")
    first = True
    for row in rows:
        write(enc.encode(row) if first else b"," + enc.encode(row))
        first = False
    write(b"]\n")
    sys.stdout.flush()


def _print_tasks(rows: Iterable[TaskRow]) -> int:
    """Print task rows for people: a table for a page, aligned lines streamed beyond it."""
    import datetime as _dt
    from itertools import islice

    from rich import box

    # narrow terminals drop the optional columns rather than squeezing the id and the state
    wide = out.width >= 110
    widest = out.width >= 140
    it = iter(rows)
    head = list(islice(it, _TABLE_ROWS + 1))
    if not head:
        return 0

    def cells(r: TaskRow) -> list[Any]:
        started = _dt.datetime.fromtimestamp(r.first_at, _dt.UTC).strftime(
            "%Y-%m-%d %H:%M:%S" if wide else "%m-%d %H:%M"
        )
        if r.kind == "message":
            name: Any = Text(_row_name(r))
            state_cell: Any = Text("message", style="dim")  # a lone Message: no task state
        else:
            name, state_cell = _row_name(r), _state_text(r.state or "unknown")
        c: list[Any] = [name, state_cell, str(r.events), started, str(r.faults) if r.faults else ""]
        if wide:
            c.append(r.profile)
        if widest:
            c.append((r.final_answer or "").replace("\n", " "))
        return c

    def table(title_row: bool, id_width: int | None = None) -> Table:
        t = (
            Table(show_lines=False, show_header=title_row)
            if wide and id_width is None
            else Table(
                box=box.SIMPLE_HEAD if id_width is None else None,
                pad_edge=False,
                show_edge=False,
                collapse_padding=True,
                show_header=title_row,
            )
        )
        t.add_column("task", min_width=id_width, max_width=id_width, no_wrap=True)
        t.add_column("state", min_width=14 if id_width else None, no_wrap=True)
        t.add_column("events", justify="right", min_width=6, no_wrap=True)
        t.add_column("started (UTC)", min_width=19 if id_width and wide else None, no_wrap=True)
        t.add_column("faults", justify="right", min_width=6, no_wrap=True)
        if wide:
            t.add_column("profile", min_width=16 if id_width else None, no_wrap=True)
        if widest:
            t.add_column("answer", overflow="ellipsis", max_width=40, no_wrap=True)
        return t

    if len(head) <= _TABLE_ROWS:
        t = table(True)
        for r in head:
            t.add_row(*cells(r))
        out.print(t)
        return len(head)
    # a long listing: the same columns at fixed widths, a page at a time
    width = max(len(_row_name(r)) for r in head)  # a lone Message row has no task id: its shown name
    printed = 0
    page: list[TaskRow] = head
    first = True
    while page:
        t = table(first, width)
        for r in page:
            t.add_row(*cells(r))
        out.print(t)
        printed += len(page)
        first = False
        page = list(islice(it, _TABLE_ROWS))
    return printed


def _row_name(r: TaskRow) -> str:
    """What the first column shows: the task id, or ``message <id>`` for a lone Message reply."""
    if r.kind == "message":
        return f"message {r.message_id or r.context_id or ''}".strip()
    return r.task_id or ""


def _state_text(state: str) -> Text:
    style = {
        "completed": "green",
        "failed": "red",
        "rejected": "red",
        "canceled": "yellow",
        "input-required": "cyan",
        "auth-required": "cyan",
    }.get(state, "")
    return Text(state, style=style)


@app.command("channels")
def channels_cmd(
    task: Annotated[str, typer.Argument(help="Task id (or a unique prefix).")],
    reasoning: Annotated[bool, typer.Option("--reasoning", help="Show the reasoning in full.")] = False,
    ignored: Annotated[bool, typer.Option("--ignored", help="List the events the contract ignored.")] = False,
    db: DbOption = None,
    json: JsonOption = False,
) -> None:
    """The rebuilt channels of one task: final answer, reasoning, tool calls, artifacts, faults.

    Exit 0 whatever the task's state (the state is in the output); 2 for an unknown task.
    """
    st = open_db(db, readonly="fallback")  # the projection is kept when the log can be written
    with st:
        task_id = find_task(st, task)
        view = _projector(st).view(task_id, _closed(st, task_id))
    if view is None:  # pragma: no cover - find_task saw the task, catch_up folded it
        raise UsageError(f"unknown task: {task}")
    if json:
        emit_json(view)
        return
    _print_channels(view, show_reasoning=reasoning, show_ignored=ignored)


def _print_channels(view: TaskView, *, show_reasoning: bool, show_ignored: bool) -> None:
    from rich.panel import Panel

    out.print(
        Text.assemble(
            ("task ", "bold"),
            (view.task_id, "bold"),
            "  ",
            _state_text(view.state),
            f"  {view.events} events  profile {view.profile}",
            *((f"  context {view.context_id}",) if view.context_id else ()),
        )
    )
    if view.reasoning:
        if show_reasoning:
            out.print(
                Panel(Text(view.reasoning, style="dim"), title="reasoning", title_align="left", border_style="dim")
            )
        else:
            first = view.reasoning.strip().splitlines()[0] if view.reasoning.strip() else ""
            out.print(
                Text(f"> reasoning ({len(view.reasoning)} chars, --reasoning to expand): {first[:60]}", style="dim")
            )
    if view.tool_calls:
        table = Table(title="tool calls", title_justify="left")
        for col in ("tool", "status", "title / text", "input", "output / error"):
            table.add_column(col, overflow="fold")
        for tc in view.tool_calls:
            result = tc.error if tc.error is not None else tc.output
            table.add_row(
                tc.tool or tc.call_id or tc.artifact_id,
                tc.status or "",
                tc.title or tc.text,
                _brief(tc.input),
                _brief(result),
            )
        out.print(table)
    if view.final_answer is not None:
        out.print(Panel(Text(view.final_answer), title="final answer", title_align="left", border_style="green"))
    else:
        out.print(Text("(no final answer)", style="yellow"))
    if view.status_message and view.status_message != view.final_answer:
        out.print(Text(f"status message: {view.status_message}", style="cyan"))
    others = [a for a in view.artifacts if a.channel not in ("final_answer", "reasoning", "tool_call")]
    if len(others) > 1 or any(a.channel == "error" for a in others):
        table = Table(title="artifacts", title_justify="left")
        for col in ("artifact", "channel", "text"):
            table.add_column(col, overflow="fold")
        for a in others:
            table.add_row(a.artifact_id, a.channel, a.text[:200])
        out.print(table)
    for f in view.faults:
        style = "red" if f.level == "error" else "yellow"
        where = ", ".join(str(p) for p in f.positions[:5]) + (" ..." if len(f.positions) > 5 else "")
        count = f" (x{f.count})" if f.count > 1 else ""
        out.print(Text(f"{f.level}: {f.code}{count}: {f.message} [position {where}]", style=style))
    if view.ignored_events:
        if show_ignored:
            table = Table(title=f"ignored events ({view.ignored_events})", title_justify="left")
            for col in ("position", "seq", "reason"):
                table.add_column(col)
            for ig in view.ignored:
                table.add_row(str(ig.position), str(ig.seq), ig.reason)
            out.print(table)
        else:
            out.print(Text(f"{view.ignored_events} ignored events (--ignored to list them)", style="dim"))


def _brief(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        text = value
    else:
        text = msgspec.json.encode(value).decode()
    return text if len(text) <= 120 else text[:117] + "..."
