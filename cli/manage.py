"""``a2a-tape rm`` and ``a2a-tape prune``: take tasks out of a log (vcrpy users delete a cassette,
pytest-recording users re-record one). The work is :func:`a2a_tape.store.removal.remove_tasks`;
this module picks the tasks, refuses what it must, and says what it did."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Annotated

import typer

from a2a_tape.cli.app import (
    BusyTimeoutOption,
    DbOption,
    JsonOption,
    commands,
    db_location,
    emit_json,
    fail,
    find_task,
    open_db,
    say,
)
from a2a_tape.inspection.words import count
from a2a_tape.store import Store
from a2a_tape.store.events import is_terminal
from a2a_tape.store.removal import Removed, remove_tasks

app = commands()

ForceOption = Annotated[
    bool, typer.Option("--force", help="Also remove tasks not finished (submitted, working, waiting for input).")
]
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")


def parse_duration(text: str) -> float:
    """``30d``, ``12h``, ``90m``, ``45s``, ``2w`` or plain seconds; ValueError otherwise."""
    m = _DURATION.match(text)
    if m is None or float(m.group(1)) <= 0:
        raise ValueError(f"'{text}' is not a duration (a number and s, m, h, d or w: 30d, 12h)")
    return float(m.group(1)) * _UNITS[m.group(2) or "s"]


def _writable(db: str | None, busy_timeout: float | None) -> Store:
    """The log, opened to be written: a tape (JSONL) is refused, it is a file of its own to edit
    with the tools that made it."""
    from a2a_tape.store.tape_copy import is_tape

    loc = db_location(db)
    if "://" not in loc and Path(loc).is_file() and is_tape(loc):
        fail(f"{loc} is a tape (JSONL): rm and prune change a database (import it, remove, export it again)")
    st = open_db(db, busy_timeout=busy_timeout)
    if st.readonly:
        st.close()
        fail(f"{loc} is read-only here: nothing removed")
    return st


def _state(st: Store, task_id: str) -> str | None:
    from a2a_tape.inspection.task_views import task_view

    view = task_view(st, task_id)
    return None if view is None else view.state


def _said(result: Removed, *, json: bool) -> None:
    if json:
        emit_json(result)
        return
    verb = "would remove" if result.dry_run else "removed"
    say(
        f"{verb} {count(len(result.task_ids), 'task')} ({count(result.events, 'event')}, "
        f"{count(result.exchanges, 'exchange')})"
        + (f": {', '.join(result.task_ids[:5])}{' ...' if len(result.task_ids) > 5 else ''}" if result.task_ids else "")
    )


@app.command("rm")
def rm_cmd(
    tasks: Annotated[list[str], typer.Argument(metavar="TASK", help="Task ids (or unique prefixes).")],
    force: ForceOption = False,
    db: DbOption = None,
    json: JsonOption = False,
    busy_timeout: BusyTimeoutOption = None,
) -> None:
    """Remove tasks from the log: their events, exchanges and projection rows (a LOCAL note says so).

    Only finished tasks (completed, failed, canceled, rejected) unless --force: a task still
    working may be being recorded. What stays is what a rebuild of it gives. Not for a tape.
    """
    st = _writable(db, busy_timeout)
    with st:
        ids = list(dict.fromkeys(find_task(st, key) for key in tasks))
        if not force:
            open_ = [(t, s) for t in ids if not is_terminal(s := _state(st, t))]
            if open_:
                t, s = open_[0]
                fail(f"task {t} is not finished ({s or 'no state'}): nothing removed (--force removes it anyway)")
        result = remove_tasks(st, ids, by="a2a-tape rm")
    _said(result, json=json)


@app.command("prune")
def prune_cmd(
    older_than: Annotated[
        str | None,
        typer.Option(
            "--older-than",
            metavar="DURATION",
            help="Only tasks whose last event is older than this: 30d, 12h, 90m, 45s, 2w.",
        ),
    ] = None,
    force: ForceOption = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what would be removed; remove nothing.")] = False,
    db: DbOption = None,
    json: JsonOption = False,
    busy_timeout: BusyTimeoutOption = None,
) -> None:
    """Remove every finished task (or, with --older-than, those last heard of before then).

    Finished: completed, failed, canceled, rejected; --force takes the others too (an
    abandoned WORKING task). Lone Message replies are kept. --dry-run only lists them.
    """
    try:
        age = None if older_than is None else parse_duration(older_than)
    except ValueError as exc:
        fail(f"--older-than: {exc}")
    from a2a_tape.inspection.listing import TaskFilter, list_tasks

    st = _writable(db, busy_timeout) if not dry_run else open_db(db, readonly="fallback", busy_timeout=busy_timeout)
    with st:
        before = None if age is None else time.time() - age
        rows = list_tasks(st, TaskFilter(), limit=None).rows
        ids = [
            r.task_id
            for r in rows
            if r.task_id is not None
            and r.kind == "task"
            and (before is None or r.last_at < before)
            and (force or is_terminal(r.state))
        ]
        if dry_run:
            events = sum(len(st.read_task(t)) for t in ids)
            result = Removed(ids, events, len({x.id for t in ids for x in st.exchanges(t)}), dry_run=True)
        else:
            result = remove_tasks(st, ids, by="a2a-tape prune")
    _said(result, json=json)
