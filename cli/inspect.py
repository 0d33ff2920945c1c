"""Read-only inspection commands: ``tasks``, ``show``, ``channels``.

The rows come from :mod:`a2a_tape.inspection` (listing, timeline, task views, lone
messages); this module parses, calls, and prints them (``--json``, or :mod:`.render` for people).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated

import typer

from a2a_tape.cli import options
from a2a_tape.cli.app import (
    DbOption,
    JsonOption,
    RunOption,
    TaskArgument,
    UsageError,
    commands,
    emit_json,
    err,
    find_run,
    find_task_or_message,
    load_run,
    open_db,
    out,
    stream_json,
)
from a2a_tape.cli.progress import folding

# What a command reads and prints with (the store, the folds, rich's tables) loads in its body:
# `--help` costs typer alone, `tasks --json` never imports rich.
if TYPE_CHECKING:
    from a2a_tape.store import Store, StoredEvent

app = commands()

DEFAULT_TASKS = 50
"""How many tasks ``tasks`` shows people unless --limit or --all says otherwise."""


@app.command("show")
def show_cmd(
    task: TaskArgument,
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
    run: RunOption = None,
    db: DbOption = None,
    json: JsonOption = False,
) -> None:
    """The timeline of raw events of one task: its latest run, or the run TASK@N (--run N) names."""
    from a2a_tape.capture.lineage import carried
    from a2a_tape.cli import tables as render
    from a2a_tape.inspection import timeline
    from a2a_tape.inspection.messages import find_message

    st = open_db(db, readonly=True)
    with st:
        lone = None if st.has_task(task) else find_message(st, task)
        if lone is not None:  # a lone Message reply: no task, its exchange's events
            task_id, events, follow = lone.key, lone.events, False
        else:
            task_id, number = find_run(st, task, run)
            events = load_run(st, task_id, number).events
        if follow:
            _follow(timeline.follow(st, task_id, events, idle=idle), task_id, events, raw=raw, json=json)
            return
        wires = timeline.wires(st, task_id if lone is None else None, events)
        traces = [t for ex in st.exchanges(task_id) if (t := carried(ex))] if lone is None else []
        pushed = timeline.pushes(st, task_id) if lone is None else []
    if raw:
        _write_raw(events)
        return
    entries = timeline.with_pushes(list(timeline.entries(task_id, events, wires)), pushed)
    if json:
        emit_json([e.row for e in entries])
        return
    render.timeline(task_id, entries, timeline.labels(wires))
    render.trace_context(traces)


def run_rows(st: Store, task_id: str) -> list[dict[str, object]]:
    """The runs of a task as ``tasks --runs`` lists them: each folded alone."""
    from a2a_tape.fold.runs import task_runs
    from a2a_tape.inspection.doctor import FaultCount, findings

    rows = []
    runs = task_runs(st, task_id)
    for one in runs:
        view = one.view()
        found = findings(task_id, one.events, one.exchanges, followed=one is not runs[-1])  # doctor TASK@N's
        errors, warnings = FaultCount.of(found)
        faults = {"faults": errors + warnings, "errors": errors, "warnings": warnings}
        rows.append({**one.row(), "state": view.state, **faults, "final_answer": view.final_answer})
    return rows


def _write_raw(events: list[StoredEvent]) -> None:
    for ev in events:
        sys.stdout.buffer.write(bytes(ev.payload) + b"\n")
    sys.stdout.flush()


def _follow(followed: Iterator[StoredEvent], task_id: str, events: list[StoredEvent], *, raw: bool, json: bool) -> None:
    """Print each event as :func:`timeline.follow` yields it, until the task ends, it idles, or Ctrl-C."""
    import msgspec

    from a2a_tape.cli import tables as render
    from a2a_tape.inspection import timeline

    t0 = events[0].received_at if events else time.time()
    try:
        for ev in followed:
            if raw:
                sys.stdout.buffer.write(bytes(ev.payload) + b"\n")
            elif json:
                sys.stdout.buffer.write(msgspec.json.encode(timeline.entry(task_id, ev).row) + b"\n")
            else:
                render.timeline_line(timeline.entry(task_id, ev), t0)
            sys.stdout.flush()
    except KeyboardInterrupt:
        pass


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
    runs: Annotated[
        bool,
        typer.Option(
            "--runs",
            help="A line per run of each task (TASK@N: who recorded it, its source, host, binding, state, answer).",
        ),
    ] = False,
    db: DbOption = None,
    json: JsonOption = False,
) -> None:
    """List recorded tasks, newest (by last event) first.

    People see the newest 50 (--limit N, --all for more; how many more is said on stderr);
    --json prints every task unless --limit is given. Rows are streamed.
    """
    from a2a_tape.inspection.listing import TaskFilter, list_tasks, parse_states

    try:
        states = frozenset(parse_states(state)) if state else None
    except ValueError as exc:
        raise UsageError(f"--state: {exc}") from None
    if all_ and limit is not None:
        raise UsageError("--limit and --all do not go together")
    where = TaskFilter(states, context, options.parse_since(since))  # --since checked by the option already
    shown = limit if limit is not None else (None if all_ or json else DEFAULT_TASKS)
    st = open_db(db, readonly="fallback")  # the projection is kept when the log can be written
    with st:
        found = list_tasks(st, where, limit=shown, folding=folding, lineage=json)
        if runs:
            rows = (r for t in found.rows if t.task_id is not None for r in run_rows(st, t.task_id))
            if json:
                stream_json(rows)
            else:
                from a2a_tape.cli import tables as render

                render.runs(rows)
            return
        if json:
            stream_json(found.rows)
            return
        from a2a_tape.cli import tables as render

        printed = render.tasks(found.rows)
    if not printed:
        err.print("no tasks" + (" match" if where.filters else " recorded yet"))
    elif found.total > printed:
        from a2a_tape.inspection.words import count

        more = found.total - printed
        err.print(
            f"{count(more, 'more task')} not shown (newest {printed:,} of {found.total:,}): --limit N to see more, --all for every one",
            markup=False,
            soft_wrap=True,
        )


@app.command("channels")
def channels_cmd(
    task: TaskArgument,
    reasoning: Annotated[bool, typer.Option("--reasoning", help="Show the reasoning in full.")] = False,
    ignored: Annotated[bool, typer.Option("--ignored", help="List the events the contract ignored.")] = False,
    run: RunOption = None,
    db: DbOption = None,
    json: JsonOption = False,
) -> None:
    """The rebuilt channels of one task: final answer, reasoning, tool calls, artifacts, faults.

    A task recorded by several observers has several runs: the latest is shown unless TASK@N
    (or --run N) names another; --json then adds "run" (TASK@N) and "runs" (how many).
    Exit 0 whatever the task's state (the state is in the output); 2 for an unknown task or run. A lone
    Message reply (no task) shows its text as the answer.
    """
    import msgspec

    from a2a_tape.cli import tables as render
    from a2a_tape.fold.runs import selector, task_runs
    from a2a_tape.inspection.doctor import findings
    from a2a_tape.inspection.messages import message_view
    from a2a_tape.inspection.task_views import task_view_runs

    st = open_db(db, readonly="fallback")  # the projection is kept when the log can be written
    with st:
        if "@" not in task and run is None:
            found = find_task_or_message(st, task)
            if not isinstance(found, str):  # a lone Message reply: its text is the answer, no task
                message = message_view(found)
                if json:
                    emit_json(message)
                else:
                    render.message(message)
                return
            task = found  # the whole id: find_run takes it as it is, no second prefix lookup
        task_id, number = find_run(st, task, run)
        if number is None:  # the latest run: the projection's
            view, runs = task_view_runs(st, task_id, folding=folding)
            total, shown = len(runs), len(runs)
        else:
            one = load_run(st, task_id, number)
            view, total, shown = one.view(), len(task_runs(st, task_id)), number
        if not json:  # the faults people read are doctor's findings of this run (doctor TASK@N)
            one = load_run(st, task_id, number)
            faults = findings(task_id, one.events, one.exchanges, followed=shown < total)
    if view is None:  # pragma: no cover - find_task saw the task, catch_up folded it
        raise UsageError(f"unknown task: {task}")
    if json:
        emit_json(view if total <= 1 else {"run": selector(task_id, shown), "runs": total, **msgspec.to_builtins(view)})
        return
    if total > 1:
        out.print(f"run {selector(task_id, shown)} of {total} ('a2a-tape tasks --runs' lists them)", markup=False)
    render.channels(view, faults, show_reasoning=reasoning, show_ignored=ignored)
