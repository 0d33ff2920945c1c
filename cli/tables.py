"""How the inspection commands show their rows to people: rich tables and panels on stdout.

The rows and views come from :mod:`a2a_tape.inspection` (typed, the same ones ``--json``
prints); this module only lays them out. Imported by the read-only commands that print for
people, so it imports rich and nothing of the live side.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable, Mapping, Sequence
from itertools import islice
from typing import TYPE_CHECKING, Any

from rich import box
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from a2a_tape.cli.app import err, out
from a2a_tape.fold import tool_calls
from a2a_tape.inspection.words import count

if TYPE_CHECKING:  # the rows' types only: each command imports what it reads, nothing more
    from a2a_tape.fold.views import TaskView
    from a2a_tape.inspection.diff import PairDiff
    from a2a_tape.inspection.doctor import Finding, Report
    from a2a_tape.inspection.grep import Match
    from a2a_tape.inspection.listing import TaskRow
    from a2a_tape.inspection.messages import MessageView
    from a2a_tape.inspection.timeline import Entry
    from a2a_tape.wire.trace_context import ExchangeTrace

TABLE_ROWS = 500
"""Up to this many rows are one rich table; longer listings stream as aligned lines."""

_STATE_STYLES = {
    "completed": "green",
    "failed": "red",
    "rejected": "red",
    "canceled": "yellow",
    "input-required": "cyan",
    "auth-required": "cyan",
}


def state_text(state: str) -> Text:
    return Text(state, style=_STATE_STYLES.get(state, ""))


# -- show -------------------------------------------------------------------------------------------


def timeline(task_id: str, entries: Sequence[Entry], bindings: Sequence[str] = ()) -> None:
    """The timeline of one task as a table (its bindings in the title); a note on stderr when some rows are ours."""
    t0 = entries[0].event.received_at if entries else 0.0
    table = Table(title=f"task {task_id}" + (f" ({', '.join(bindings)})" if bindings else ""), show_lines=False)
    for col in ("seq", "pos", "+s", "kind", "origin"):
        table.add_column(col, no_wrap=True)
    table.add_column("artifact / channel", overflow="fold")
    table.add_column("what", overflow="fold")
    for e in entries:
        row = e.row
        kind = row.kind + (f" ({row.sse_event})" if row.sse_event else "")
        table.add_row(
            "-" if e.pushed and not row.position else str(row.seq),
            "-" if e.pushed and not row.position else str(row.position),
            f"+{row.received_at - t0:.3f}",
            Text(kind, style="bold red" if row.kind in ("error", "undecodable") else ""),
            Text("LOCAL", style="bold yellow") if e.local else Text("PUSH", style="bold cyan") if e.pushed else "",
            Text(e.where),
            Text(("a2a-tape decision: " if e.local else "") + e.what),
        )
    out.print(table)
    if any(e.local for e in entries):
        err.print(
            "LOCAL rows were written by a2a-tape itself (recovery decisions, a synthetic FAILED), not by the agent"
        )
    if any(e.pushed for e in entries):
        err.print("PUSH rows are the POSTs the agent made to the client's webhook (beside the stream, not in it)")


def trace_context(traces: Sequence[ExchangeTrace]) -> None:
    """Under a timeline: the W3C trace context each exchange's request carried (docs/otel.md)."""
    for t in traces:
        parts = [f"{name} {value}" for name in ("traceparent", "tracestate", "baggage") if (value := getattr(t, name))]
        injected = " (started by the proxy: the client sent none)" if t.injected else ""
        injected += " (in the message's metadata)" if t.metadata else ""
        out.print(
            f"exchange {t.exchange_id}: {'; '.join(parts)}{injected}", markup=False, highlight=False, soft_wrap=True
        )


def timeline_line(e: Entry, t0: float) -> None:
    """One event as ``show --follow`` prints it, as it arrives."""
    row = e.row
    local = "LOCAL " if e.local else ""
    out.print(
        f"{row.seq:>4} {row.position:>6} +{row.received_at - t0:8.3f} {row.kind:<11} {local}{e.where} {e.what}".rstrip(),
        markup=False,
        highlight=False,
        soft_wrap=True,
    )


# -- tasks ------------------------------------------------------------------------------------------


def row_name(r: TaskRow) -> str:
    """What the first column shows: the task id, or ``message <id>`` for a lone Message reply."""
    if r.kind == "message":
        return f"message {r.message_id or r.context_id or ''}".strip()
    if r.runs > 1:  # the row is the latest run's
        return f"{r.task_id} ({r.runs} runs: {', '.join(r.sources)})"
    return r.task_id or ""


def runs(rows: Iterable[Mapping[str, Any]]) -> int:
    """``tasks --runs`` for people: a line per run (``TASK@N``). Returns how many."""
    t = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, collapse_padding=True)
    for name in ("run", "source", "host", "binding", "events", "state", "faults", "answer"):
        t.add_column(name, no_wrap=name != "answer", overflow="ellipsis", max_width=40 if name == "answer" else None)
    n = 0
    for r in rows:
        answer = str(r.get("final_answer") or "").replace("\n", " ")
        t.add_row(
            str(r["run"]),
            str(r.get("source") or ""),
            str(r.get("host") or ""),
            str(r.get("binding") or ""),
            str(r.get("events")),
            state_text(str(r.get("state") or "unknown")),
            fault_cell(int(r.get("errors") or 0), int(r.get("warnings") or 0)),
            answer,
        )
        n += 1
    if n:
        out.print(t)
    else:
        err.print("no tasks recorded yet")
    return n


def fault_cell(errors: int, warnings: int) -> Text:
    """doctor's findings of a task or run as a list shows them: ``1E 2W`` (errors in red, warnings
    in yellow; nothing when doctor finds nothing)."""
    cell = Text()
    if errors:
        cell.append(f"{errors}E", style="bold red")
    if warnings:
        cell.append(f"{' ' if errors else ''}{warnings}W", style="yellow")
    return cell


def _task_cells(r: TaskRow, wide: bool, widest: bool) -> list[Any]:
    started = _dt.datetime.fromtimestamp(r.first_at, _dt.UTC).strftime("%Y-%m-%d %H:%M:%S" if wide else "%m-%d %H:%M")
    if r.kind == "message":
        name: Any = Text(row_name(r))
        state_cell: Any = Text("message", style="dim")  # a lone Message: no task state
    else:
        name, state_cell = row_name(r), state_text(r.state or "unknown")
    cells: list[Any] = [name, state_cell, str(r.events), started, fault_cell(r.errors, r.warnings)]
    if wide:
        cells.append(r.profile)
    if widest:
        cells.append((r.final_answer or "").replace("\n", " "))
    return cells


def _tasks_table(wide: bool, widest: bool, header: bool, id_width: int | None = None) -> Table:
    """A table for a page of tasks: boxed for one page; fixed widths, unboxed, for a long listing."""
    if wide and id_width is None:
        t = Table(show_lines=False, show_header=header)
    else:
        t = Table(
            box=box.SIMPLE_HEAD if id_width is None else None,
            pad_edge=False,
            show_edge=False,
            collapse_padding=True,
            show_header=header,
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


def tasks(rows: Iterable[TaskRow]) -> int:
    """Task rows for people: one table for a page, aligned lines streamed beyond it. Returns how many."""
    # narrow terminals drop the optional columns rather than squeezing the id and the state
    wide, widest = out.width >= 110, out.width >= 140
    it = iter(rows)
    page = list(islice(it, TABLE_ROWS + 1))
    if not page:
        return 0
    if len(page) <= TABLE_ROWS:
        t = _tasks_table(wide, widest, True)
        for r in page:
            t.add_row(*_task_cells(r, wide, widest))
        out.print(t)
        return len(page)
    # a long listing: the same columns at fixed widths, a page at a time
    width = max(len(row_name(r)) for r in page)  # a lone Message row has no task id: its shown name
    printed = 0
    while page:
        t = _tasks_table(wide, widest, printed == 0, width)
        for r in page:
            t.add_row(*_task_cells(r, wide, widest))
        out.print(t)
        printed += len(page)
        page = list(islice(it, TABLE_ROWS))
    return printed


# -- channels ---------------------------------------------------------------------------------------


def channels(view: TaskView, found: Sequence[Finding], *, show_reasoning: bool, show_ignored: bool) -> None:
    """One task's channels: the state line, reasoning, tool calls, the answer, artifacts, and
    ``found``: doctor's findings of the run shown (the faults, as doctor names and counts them)."""
    out.print(
        Text.assemble(
            ("task ", "bold"),
            (view.task_id, "bold"),
            "  ",
            state_text(view.state),
            f"  {count(view.events, 'event')}  profile {view.profile}",
            *((f"  context {view.context_id}",) if view.context_id else ()),
        )
    )
    if view.reasoning:
        _reasoning(view.reasoning, show_reasoning)
    if view.tool_calls:
        _tool_calls(view)
    if view.final_answer is not None:
        out.print(Panel(Text(view.final_answer), title="final answer", title_align="left", border_style="green"))
    else:
        out.print(Text("(no final answer)", style="yellow"))
    if view.status_message and view.status_message != view.final_answer:
        out.print(Text(f"status message: {view.status_message}", style="cyan"))
    _artifacts(view)
    for f in found:
        style = "red" if f.level == "error" else "yellow"
        where = ", ".join(str(p) for p in f.positions[:5]) + (" ..." if len(f.positions) > 5 else "")
        at = f" [position {where}]" if where else ""
        out.print(Text(f"{f.level}: {f.code}: {f.message}{at}", style=style))
    if view.ignored_events or show_ignored:
        _ignored(view, show_ignored)


def message(view: MessageView) -> None:
    """A lone Message reply as ``channels`` shows it: no task, so no state; its text is the answer."""
    out.print(
        Text.assemble(
            ("message ", "bold"),
            (view.key, "bold"),
            "  ",
            ("a lone message, no task", "dim"),
            f"  {count(view.events, 'event')}",
            *((f"  context {view.context_id}",) if view.context_id else ()),
        )
    )
    out.print(Panel(Text(view.final_answer), title="final answer", title_align="left", border_style="green"))


def _reasoning(reasoning: str, show: bool) -> None:
    if show:
        out.print(Panel(Text(reasoning, style="dim"), title="reasoning", title_align="left", border_style="dim"))
        return
    first = reasoning.strip().splitlines()[0] if reasoning.strip() else ""
    out.print(Text(f"> reasoning ({len(reasoning)} chars, --reasoning to expand): {first[:60]}", style="dim"))


def _tool_calls(view: TaskView) -> None:
    table = Table(title="tool calls", title_justify="left")
    for col in tool_calls.COLUMNS:
        table.add_column(col, overflow="fold")
    for tc in view.tool_calls:
        table.add_row(*tool_calls.cells(tc))
    out.print(table)


def _artifacts(view: TaskView) -> None:
    others = [a for a in view.artifacts if a.channel not in ("final_answer", "reasoning", "tool_call")]
    if len(others) > 1 or any(a.channel == "error" for a in others):
        table = Table(title="artifacts", title_justify="left")
        for col in ("artifact", "channel", "text"):
            table.add_column(col, overflow="fold")
        for a in others:
            table.add_row(a.artifact_id, a.channel, a.text[:200])
        out.print(table)


def _ignored(view: TaskView, show: bool) -> None:
    if not show:
        out.print(Text(f"{count(view.ignored_events, 'ignored event')} (--ignored to list them)", style="dim"))
        return
    if not view.ignored:
        out.print(Text("no ignored events: the contract took every event", style="dim"))
        return
    table = Table(title=f"ignored events ({view.ignored_events})", title_justify="left")
    for col in ("position", "seq", "reason"):
        table.add_column(col)
    for ig in view.ignored:
        table.add_row(str(ig.position), str(ig.seq), ig.reason)
    out.print(table)


# -- doctor, diff, grep -------------------------------------------------------------------------------


def doctor(report: Report) -> None:
    """doctor's findings as a table, and the counts."""
    if not report.findings:
        out.print(f"doctor: {count(report.tasks, 'task')}, no faults found")
        return
    table = Table(title=f"doctor: {count(report.tasks, 'task')}")
    for col in ("level", "task", "fault", "positions"):
        table.add_column(col, no_wrap=True)
    table.add_column("what", overflow="fold")
    for f in report.findings:
        table.add_row(
            Text(f.level, style="bold red" if f.level == "error" else "yellow"),
            (f.task_id or "")[:12],
            f.code,
            ", ".join(map(str, f.positions)),
            f.message,
        )
    out.print(table)
    out.print(f"{count(report.errors, 'error')}, {count(report.warnings, 'warning')}")


def _line(text: str) -> None:
    out.print(text, markup=False, soft_wrap=True)


def diff_pairs(pairs: Iterable[PairDiff]) -> bool:
    """Each pair as it comes (same, or its differing channels and events); returns whether all were equal."""
    equal = True
    for pair in pairs:
        equal = equal and pair.equal
        _line(f"A {pair.a or '-'}  B {pair.b or '-'}: " + ("same" if pair.equal else "DIFFERENT"))
        for name, lines in pair.channels.items():
            _line(f"  channel {name}:")
            for line in lines:
                _line("    " + line)
        if pair.events:
            _line("  events:")
            for line in pair.events:
                _line("    " + line)
    _line("recordings are equal" if equal else "recordings differ")
    return equal


def grep_matches(pattern: str, matches: Sequence[Match]) -> None:
    if not matches:
        _line(f"no match for {pattern!r}")
        return
    table = Table(title=f"{count(len(matches), 'match')} for {pattern!r}")
    for col in ("task", "pos", "seq", "kind", "where", "text"):
        table.add_column(col)
    for m in matches:
        table.add_row((m.task_id or "-")[:12], str(m.position), str(m.seq), m.kind, m.where, m.text)
    out.print(table)
