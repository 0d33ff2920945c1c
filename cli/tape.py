"""``a2a-tape import`` and ``a2a-tape export``: move recordings in and out of a database."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from a2a_tape.cli import options
from a2a_tape.cli import output as output_rules
from a2a_tape.cli.app import (
    BusyTimeoutOption,
    DbOption,
    JsonOption,
    commands,
    db_location,
    emit_json,
    err,
    fail,
    find_export,
    open_db,
    say,
)
from a2a_tape.cli.options import ExportFormat
from a2a_tape.cli.output import Output
from a2a_tape.cli.progress import ProgressOption, bar
from a2a_tape.inspection.words import count
from a2a_tape.store import safe_location
from a2a_tape.store.tape import ImportResult, TapeError, export_lines, import_tape, write_tape

app = commands()

ExportRunOption = Annotated[
    int | None,
    typer.Option(
        "--run",
        metavar="N",
        help="Run N of the task (as TASK@N; 1 is the first recorded; default: every run; 'a2a-tape tasks --runs' lists them).",
        show_default=False,
        callback=options.count,
    ),
]


@app.command("import")
def import_cmd(
    files: Annotated[
        list[Path], typer.Argument(metavar="FILE", help="JSONL tapes (docs/tape-format.md); '-' reads stdin.")
    ],
    db: DbOption = None,
    json: JsonOption = False,
    busy_timeout: BusyTimeoutOption = None,
    progress: ProgressOption = False,
) -> None:
    """Import JSONL tapes into the database, atomically (a bad line in any file imports nothing).

    What is in the log already (the same events, exchanges and tasks) is not imported again, and
    the report says so: importing a tape twice adds nothing. --json: one document for all files.
    """
    for file in files:
        if str(file) != "-" and not file.is_file():
            fail(f"no such file: {file}")
    if sum(str(file) == "-" for file in files) > 1:
        fail("'-' (stdin) can be read once")
    results: list[tuple[Path, ImportResult]] = []
    st = open_db(db, create=True, busy_timeout=busy_timeout)
    with st, st.transaction():  # every file or none
        for file in files:
            src = sys.stdin.buffer if str(file) == "-" else file.open("rb")
            with src, bar(f"importing {file}", asked=progress, unit="events") as report:
                try:
                    results.append((file, import_tape(st, src, progress=lambda n: report(n, None))))
                except TapeError as exc:
                    raise TapeError(f"{file}: {exc} (nothing imported)" if len(files) > 1 else str(exc)) from None
    total = _total([r for _, r in results])
    if not json and len(results) > 1:
        for file, result in results:
            say(f"{file}: {_summary('imported', result)}")
    _report("in all: imported" if len(results) > 1 else "imported", total, json=json)


def _total(results: list[ImportResult]) -> ImportResult:
    """The import of several files as one: counts added, each task once (new if the first file
    that named it added it)."""
    total = ImportResult()
    present: dict[str, bool] = {}
    for r in results:
        total.exchanges += r.exchanges
        total.events += r.events
        total.skipped += r.skipped
        total.exchanges_present += r.exchanges_present
        for task_id in r.task_ids:
            present.setdefault(task_id, task_id in r.tasks_present)
    total.task_ids = list(present)
    total.tasks_present = [task_id for task_id, held in present.items() if held]
    return total


def _summary(done: str, result: ImportResult) -> str:
    """What an import or a copy did, truthfully: what was added, and what the log held already."""
    tasks = len(result.task_ids)
    if not (result.skipped or result.exchanges_present or result.tasks_present):
        return f"{done} {count(result.events, 'event')}, {count(result.exchanges, 'exchange')}, {count(tasks, 'task')}"
    held = [
        count(n, noun)
        for n, noun in (
            (result.skipped, "event"),
            (result.exchanges_present, "exchange"),
            (len(result.tasks_present), "task"),
        )
        if n
    ]
    return (
        f"{done} {count(result.events, 'new event')}, {count(result.exchanges, 'new exchange')}, "
        f"{count(result.new_tasks, 'new task')}; already in the log: {', '.join(held)}"
    )


def _report(done: str, result: ImportResult, *, json: bool) -> None:
    if json:
        emit_json(result)
        return
    say(_summary(done, result))  # one line each, never wrapped (a pipe reads it whole)


@app.command("export")
def export_cmd(
    task: Annotated[
        str | None,
        typer.Argument(help="Task id (or a unique prefix); TASK@N for its run N, else every run of it."),
    ] = None,
    all_: Annotated[bool, typer.Option("--all", help="Export every task.")] = False,
    format: Annotated[
        ExportFormat,
        typer.Option(
            "--format",
            help="jsonl (the tape format), har (HAR 1.2), mermaid (a sequence diagram), html (a self-contained "
            "report) or otlp (OpenTelemetry traces: OTLP/JSON, or OTLP/HTTP with --endpoint; needs a2a-tape[otel]).",
        ),
    ] = ExportFormat.jsonl,
    output: Annotated[
        str | None,
        typer.Option(
            "-o",
            "--output",
            metavar="PATH",
            help="Write to FILE instead of stdout ('-': stdout); html: DIR/ writes index.html and a page per task.",
            callback=output_rules.checked,
        ),
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option(
            "--limit",
            metavar="N",
            help="With --all: the newest N tasks (html: 200 unless told; one page stops before 20 MB).",
            callback=options.count,
        ),
    ] = None,
    no_limit: Annotated[
        bool, typer.Option("--no-limit", help="html with --all: every task, in one page however large.")
    ] = False,
    endpoint: Annotated[
        str | None,
        typer.Option(
            "--endpoint",
            metavar="URL",
            help="otlp: send to this OTLP/HTTP collector (http://host:4318, or its full /v1/traces URL) instead of a file.",
        ),
    ] = None,
    progress: ProgressOption = False,
    run: ExportRunOption = None,
    db: DbOption = None,
) -> None:
    """Export one task, or the whole log with --all.

    A task is exported with every run of it; TASK@N (or --run N) exports its run N alone.
    """
    if (task is None) == (not all_):
        fail("name a TASK or pass --all (not both)")
    if run is not None and task is None:
        fail("--run N goes with a TASK (not --all)")
    if endpoint is not None and (format != "otlp" or output is not None):
        fail("--endpoint goes with --format otlp, and not with -o (the spans go to the collector)")
    if limit is not None and no_limit:
        fail("--limit and --no-limit do not go together")
    out = Output(output)
    if out.directory and format != "html":
        fail(f"-o {output}: a directory is only for --format html (a page per task)")
    out.check_apart_from(db_location(db))
    if format == "otlp":
        from .export_otlp import export_otlp  # the spans are built with the optional OpenTelemetry packages

        export_otlp(task=task, run=run, output=out, endpoint=endpoint, db=db, limit=limit, progress=progress)
        return
    if format != "jsonl":
        from a2a_tape.cli.export_formats import export  # other formats live with the inspection views

        export(
            task=task,
            run=run,
            all_=all_,
            format=format,
            output=out,
            db=db,
            limit=limit,
            no_limit=no_limit,
            progress=progress,
        )
        return
    st = open_db(db, readonly=True)
    with st:
        log, found = (st, None) if task is None else find_export(st, task, run)[:2]  # a TASK or --all, checked above
        if found is None or isinstance(found, str):
            chosen: dict[str, object] = {"task_ids": None if found is None else [found]}
        else:  # a lone Message reply: its exchange (there is no task)
            chosen = {"exchange_ids": [found.exchange.id]}
        with out.stream() as fh:
            n = write_tape(log, fh, **chosen)
    if not out.to_stdout:
        err.print(f"wrote {count(n - 1, 'line')} to {output}")


@app.command("copy")
def copy_cmd(
    src: Annotated[str, typer.Argument(help="Source log: a SQLite file or a postgresql:// URL.")],
    dst: Annotated[str, typer.Argument(help="Destination log: a SQLite file or a postgresql:// URL.")],
    json: JsonOption = False,
    busy_timeout: BusyTimeoutOption = None,
    progress: ProgressOption = False,
) -> None:
    """Copy every recording from SRC to DST (SQLite <-> PostgreSQL), losslessly and atomically.

    Into an empty DST the copy keeps positions, sequence numbers, exchanges and payload bytes;
    copying again changes nothing.
    """
    source = open_db(src, readonly=True, busy_timeout=busy_timeout)
    with source:
        total = source.count_events()
        target = open_db(dst, create=True, busy_timeout=busy_timeout)
        with target, bar("copying", asked=progress, unit="events") as report:
            lines = export_lines(source, source=safe_location(src))
            result = import_tape(target, lines, progress=lambda n: report(n, total))
    _report("copied", result, json=json)
