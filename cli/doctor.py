"""``a2a-tape doctor``, ``a2a-tape diff`` and ``a2a-tape grep``: post-mortem questions about recordings.

The work is done in ``inspection`` (doctor, diff, grep); this module parses arguments, opens
the databases and prints: rich tables for people (:mod:`.render`), one JSON document with
``--json`` for scripts.
"""

from __future__ import annotations

import itertools
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated

import msgspec
import typer

from a2a_tape.cli import tables as render
from a2a_tape.cli.app import (
    EXIT_FAILED,
    DbOption,
    JsonOption,
    RunOption,
    commands,
    db_location,
    emit_json,
    fail,
    find_run,
    find_task,
    load_run,
    open_db,
    stream_json,
)
from a2a_tape.cli.progress import ProgressOption, bar
from a2a_tape.inspection import diff as diff_mod
from a2a_tape.inspection.doctor import CHECKS
from a2a_tape.inspection.doctor_index import doctor_report
from a2a_tape.inspection.grep import iter_grep

app = commands()

_DOCTOR_HELP = (
    "List lifecycle and contract faults, with the event positions involved.\n\n"
    "Exit 1 when any finding is an error (warnings alone exit 0). The faults (codes in --json):\n\n\b\n"
    + "\n".join(f"  {code}: {what}" for code, what in CHECKS.items())
)


@app.command("doctor", help=_DOCTOR_HELP)
def doctor_cmd(
    task: Annotated[
        str | None,
        typer.Argument(
            help="Task id (or a unique prefix); TASK@N for its run N alone; without it, every task. "
            "Each run of a task is examined alone."
        ),
    ] = None,
    run: RunOption = None,
    db: DbOption = None,
    json: JsonOption = False,
    progress: ProgressOption = False,
) -> None:
    """List lifecycle and contract faults (the help text is built from inspection.doctor.CHECKS)."""
    if run is not None and task is None:
        fail("--run N needs a TASK")
    # every task: doctor's findings are kept in the log when it can be written (a cache)
    st = open_db(db, readonly="fallback" if task is None else True)
    with st:
        task_id, number = find_run(st, task, run) if task is not None else (None, None)
        if task_id is not None and number is not None:
            load_run(st, task_id, number)  # a run that is not there: one line, exit 2
        with bar("doctor: examining tasks", asked=progress, show=task_id is None) as report_progress:
            report = doctor_report(st, task_id, progress=report_progress, run=number)
    if json:
        doc = {"ok": report.ok, "tasks": report.tasks, "errors": report.errors, "warnings": report.warnings}
        emit_json({**doc, "findings": report.findings})
    else:
        render.doctor(report)
    if not report.ok:
        raise typer.Exit(EXIT_FAILED)


@app.command("diff")
def diff_cmd(
    a: Annotated[str, typer.Argument(help="A task id or run TASK@N (in --db), or a database file.")],
    b: Annotated[str, typer.Argument(help="A task id or run TASK@N (in --db), or a database file.")],
    db: DbOption = None,
    json: JsonOption = False,
    progress: ProgressOption = False,
) -> None:
    """Compare two tasks, two runs of one task (TASK@1 TASK@2), or two databases (tasks paired
    by request), ids and timestamps normalised.

    Two runs are compared on what the agent sent (each observer's own notes left out): a proxy
    and the client recording through it diff to the same stream when the proxy was transparent.
    Exit 0 when they show the same behaviour, 1 when they differ.
    """
    a_is_db, b_is_db = Path(a).is_file(), Path(b).is_file()
    if a_is_db and b_is_db:
        # two logs: pairs are diffed and printed one at a time (memory stays flat)
        with (
            open_db(a, readonly=True) as sa,
            open_db(b, readonly=True) as sb,
            bar("diff: pairing tasks", asked=progress) as report,
        ):
            equal = _print_pairs(diff_mod.iter_store_pairs(sa, sb, progress=report), json=json)
    elif a_is_db != b_is_db and not (db and Path(db_location(db)).exists()):
        fail("give two task ids (with --db) or two database files")
    else:
        with open_db(db, readonly=True) as st:
            (ta, na), (tb, nb) = find_run(st, a), find_run(st, b)
            if na is None and nb is None:
                result = diff_mod.diff_tasks(st, ta, st, tb)
            else:  # a run against a run (a task alone: its latest run)
                result = diff_mod.diff_runs(load_run(st, ta, na), load_run(st, tb, nb))
            equal = _print_pairs(iter(result.pairs), json=json)
    if not equal:
        raise typer.Exit(EXIT_FAILED)


def _print_pairs(pairs: Iterable[diff_mod.PairDiff], *, json: bool) -> bool:
    """Print diff pairs as they come; returns whether every pair was equal. ``--json``: one
    document, ``{"pairs": [...], "equal": ...}``, written a pair at a time."""
    if not json:
        return render.diff_pairs(pairs)
    equal = True
    enc = msgspec.json.Encoder()
    write = sys.stdout.buffer.write
    write(b'{"pairs":[')
    for n, pair in enumerate(pairs):
        write(enc.encode(pair) if n == 0 else b"," + enc.encode(pair))
        equal = equal and pair.equal
    write(b'],"equal":' + (b"true" if equal else b"false") + b"}\n")
    sys.stdout.flush()
    return equal


@app.command("grep")
def grep_cmd(
    pattern: Annotated[str, typer.Argument(help="A regular expression (Python syntax).")],
    task: Annotated[str | None, typer.Option("--task", help="Search one task only.")] = None,
    ignore_case: Annotated[bool, typer.Option("-i", "--ignore-case", help="Match case-insensitively.")] = False,
    regex: Annotated[
        bool,
        typer.Option("--regex", help="Always scan the log with the regular expression (never the search index)."),
    ] = False,
    db: DbOption = None,
    json: JsonOption = False,
    progress: ProgressOption = False,
) -> None:
    """Search payloads (text parts, data parts, metadata, errors, notes) across tasks.

    Plain text (3+ characters, no regular-expression syntax) is looked up in the search index,
    kept up to date like the other projections; a regular expression, or --regex, scans the log.
    Exit 1 when nothing matches, as grep does.
    """
    # the search index is kept in the log when it can be written (a cache); --regex only reads
    st = open_db(db, readonly=True if regex else "fallback")
    with st:
        task_id = find_task(st, task) if task is not None else None
        try:
            with bar("grep: indexing events", asked=progress, unit="events") as report_progress:
                found = iter_grep(
                    st, pattern, ignore_case=ignore_case, task_id=task_id, regex=regex, progress=report_progress
                )
                first = next(found, None)  # the index is brought up to date before the first match
        except re.error as exc:
            fail(f"bad pattern {pattern!r}: {exc}")
        matches = itertools.chain([] if first is None else [first], found)
        if json:
            if not stream_json(matches):
                raise typer.Exit(EXIT_FAILED)
            return
        shown = list(matches)
    render.grep_matches(pattern, shown)
    if not shown:
        raise typer.Exit(EXIT_FAILED)
