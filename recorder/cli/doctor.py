"""``a2a-tape doctor``, ``a2a-tape diff`` and ``a2a-tape grep``: post-mortem questions about recordings.

The work is done in ``replay`` (doctor, diff, grep); this module parses arguments, opens the
databases and prints: rich tables for people, one JSON document with ``--json`` for scripts.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from a2a_tape.replay.inspect import diff as diff_mod
from a2a_tape.replay.inspect.doctor import CHECKS, diagnose
from a2a_tape.replay.inspect.grep import Match, iter_grep

from .app import DbOption, JsonOption, commands, db_location, emit_json, fail, find_task, open_db, out
from .progress import ProgressOption, bar

app = commands()

EXIT_FAILED = 1


_DOCTOR_HELP = (
    "List lifecycle and contract faults, with the event positions involved.\n\n"
    "Exit 1 when any finding is an error (warnings alone exit 0). The faults (codes in --json):\n\n\b\n"
    + "\n".join(f"  {code}: {what}" for code, what in CHECKS.items())
)


@app.command("doctor", help=_DOCTOR_HELP)
def doctor_cmd(
    task: Annotated[str | None, typer.Argument(help="Task id (or a unique prefix); without it, every task.")] = None,
    db: DbOption = None,
    json: JsonOption = False,
    progress: ProgressOption = False,
) -> None:
    """List lifecycle and contract faults (the help text is built from replay.inspect.doctor.CHECKS)."""
    # every task: doctor's findings are kept in the log when it can be written (a cache)
    st = open_db(db, readonly="fallback" if task is None else True)
    with st:
        task_id = find_task(st, task) if task is not None else None
        report = None
        if task_id is None:
            # every task: from the findings projection, re-examining only what changed
            from a2a_tape.replay.inspect.doctor_index import DoctorIndex

            index = DoctorIndex(st)
            with bar("doctor: examining tasks", asked=progress) as report_progress:
                ready = index.catch_up(progress=report_progress)
            if ready is not None:
                report = index.report()
        if report is None:
            report = diagnose(st, task_id)
    if json:
        emit_json(
            {
                "ok": report.ok,
                "tasks": report.tasks,
                "errors": report.errors,
                "warnings": report.warnings,
                "findings": report.findings,
            }
        )
    else:
        if not report.findings:
            out.print(f"doctor: {report.tasks} task(s), no faults found")
        else:
            table = Table(title=f"doctor: {report.tasks} task(s)")
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
            out.print(f"{report.errors} error(s), {report.warnings} warning(s)")
    if not report.ok:
        raise typer.Exit(EXIT_FAILED)


def _is_db_file(arg: str) -> bool:
    p = Path(arg)
    return p.is_file()


@app.command("diff")
def diff_cmd(
    a: Annotated[str, typer.Argument(help="A task id (in --db), or a database file.")],
    b: Annotated[str, typer.Argument(help="A task id (in --db), or a database file.")],
    db: DbOption = None,
    json: JsonOption = False,
    progress: ProgressOption = False,
) -> None:
    """Compare two tasks, or two databases (tasks paired by request), ids and timestamps normalised.

    Exit 0 when they show the same behaviour, 1 when they differ.
    """
    if _is_db_file(a) and _is_db_file(b):
        # two logs: pairs are diffed and printed one at a time (memory stays flat)
        with (
            open_db(a, readonly=True) as sa,
            open_db(b, readonly=True) as sb,
            bar("diff: pairing tasks", asked=progress) as report,
        ):
            equal = _print_pairs(diff_mod.iter_store_pairs(sa, sb, progress=report), json=json)
    elif _is_db_file(a) != _is_db_file(b) and not (db and Path(db_location(db)).exists()):
        fail("give two task ids (with --db) or two database files")
    else:
        with open_db(db, readonly=True) as st:
            ta, tb = find_task(st, a), find_task(st, b)
            equal = _print_pairs(iter(diff_mod.diff_tasks(st, ta, st, tb).pairs), json=json)
    if not equal:
        raise typer.Exit(EXIT_FAILED)


def _print_pairs(pairs: Iterable[diff_mod.PairDiff], *, json: bool) -> bool:
    """Print diff pairs as they come; returns whether every pair was equal. ``--json``: one
    document, ``{"pairs": [...], "equal": ...}``, written a pair at a time."""
    import sys

    import msgspec

    equal = True
    if json:
        enc = msgspec.json.Encoder()
        write = sys.stdout.buffer.write
        write(b'{"pairs":[')
        for n, pair in enumerate(pairs):
            write(enc.encode(pair) if n == 0 else b"," + enc.encode(pair))
            equal = equal and pair.equal
        write(b'],"equal":' + (b"true" if equal else b"false") + b"}\n")
        sys.stdout.flush()
        return equal
    for pair in pairs:
        equal = equal and pair.equal
        head = f"A {pair.a or '-'}  B {pair.b or '-'}: " + ("same" if pair.equal else "DIFFERENT")
        out.print(head, markup=False, soft_wrap=True)
        for name, lines in pair.channels.items():
            out.print(f"  channel {name}:", markup=False, soft_wrap=True)
            for line in lines:
                out.print("    " + line, markup=False, soft_wrap=True)
        if pair.events:
            out.print("  events:", markup=False, soft_wrap=True)
            for line in pair.events:
                out.print("    " + line, markup=False, soft_wrap=True)
    out.print("recordings are equal" if equal else "recordings differ", markup=False, soft_wrap=True)
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
            if json:
                n = _stream_json(first, found)
                if not n:
                    raise typer.Exit(EXIT_FAILED)
                return
            matches = ([] if first is None else [first]) + list(found)
        except re.error as exc:
            fail(f"bad pattern {pattern!r}: {exc}")
    if json:  # pragma: no cover - streamed above
        emit_json(matches)
    else:
        if matches:
            table = Table(title=f"{len(matches)} match(es) for {pattern!r}")
            for col in ("task", "pos", "seq", "kind", "where", "text"):
                table.add_column(col)
            for m in matches:
                table.add_row((m.task_id or "-")[:12], str(m.position), str(m.seq), m.kind, m.where, m.text)
            out.print(table)
        else:
            out.print(f"no match for {pattern!r}", markup=False, soft_wrap=True)
    if not matches:
        raise typer.Exit(EXIT_FAILED)


def _stream_json(first: Match | None, rest: Iterable[Match]) -> int:
    """One JSON list on stdout, a match at a time (the same bytes as ``emit_json``); returns how many."""
    import sys

    import msgspec

    enc = msgspec.json.Encoder()
    write = sys.stdout.buffer.write
    write(b"[")
    n = 0
    if first is not None:
        write(enc.encode(first))
        n = 1
        for m in rest:
            write(b"," + enc.encode(m))
            n += 1
    write(b"]\n")
    sys.stdout.flush()
    return n
