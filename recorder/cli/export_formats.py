"""Export formats other than the tape: ``har``, ``mermaid`` and ``html`` (see ``a2a-tape export``).

Each format is built in ``replay`` from the stored events; this module picks the tasks, writes
to stdout or ``-o FILE`` and reports where it wrote on stderr.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from a2a_tape.replay.inspect.export_har import build_har, encode_har
from a2a_tape.replay.inspect.export_html import DEFAULT_TASKS, PAGE_LIMIT, write_dir, write_page
from a2a_tape.replay.inspect.export_mermaid import build_mermaid
from a2a_tape.store import Store
from a2a_tape.store.errors import ReadOnlyStore
from a2a_tape.store.files import open_private, write_private

from .app import err, fail, find_task, open_db
from .progress import wanted

FORMATS = ("jsonl", "har", "mermaid", "html")


def _version() -> str:
    try:
        return version("a2a-tape")
    except PackageNotFoundError:
        return "0"


def export(
    *,
    task: str | None,
    all_: bool,
    format: str,
    output: Path | None,
    db: str | None,
    limit: int | None = None,
    no_limit: bool = False,
    progress: bool = False,
) -> None:
    if format not in FORMATS:
        fail(f"unknown export format '{format}' (known: {', '.join(FORMATS)})")
    # a directory: one that exists, or a path typed with a trailing slash (the parsed Path drops it)
    to_dir = output is not None and (
        output.is_dir() or any(a.endswith(("/", os.sep)) and Path(a) == output for a in sys.argv[1:])
    )
    if to_dir and format != "html":
        fail(f"-o {output}: a directory is only for --format html (a page per task)")
    # html of --all reads the task index (kept when the log can be written), the rest only reads
    st = open_db(db, readonly="fallback" if all_ and format == "html" else True)
    with st:
        if task is not None:  # a TASK or --all: the command checked that it is one of them
            task_ids = [find_task(st, task)]
        elif format == "html":
            task_ids = _newest(st, None if no_limit else (limit or DEFAULT_TASKS))
        else:
            task_ids = [t.task_id for t in st.task_events()]
            if limit is not None:
                task_ids = task_ids[-limit:]
        # a progress bar on stderr for long exports (only on a terminal, or when asked: stdout may be the file)
        with Progress(
            TextColumn(f"exporting {format}"),
            BarColumn(),
            MofNCompleteColumn(),
            console=err,
            transient=True,
            disable=not (wanted(progress) and (progress or len(task_ids) >= 50)),
        ) as bar:
            job = bar.add_task("export", total=len(task_ids))

            def step(n: int) -> None:
                bar.update(job, completed=n)

            if format == "html":
                title = "a2a-tape report" + ("" if all_ else f": task {task_ids[0]}")
                _export_html(st, task_ids, output, to_dir=to_dir, title=title, step=step, asked_all=no_limit)
                return
            if format == "har":
                data = encode_har(build_har(st, None if all_ and limit is None else task_ids, version=_version()))
            else:
                data = build_mermaid(st, task_ids, progress=step).encode()
    if output is None:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    else:
        write_private(output, data)
        err.print(f"wrote {format} ({len(data)} bytes) to {output}", markup=False)


def _newest(st: Store, limit: int | None) -> list[str]:
    """The newest ``limit`` tasks by last event (all of them: None), newest first."""
    import sqlite3

    from a2a_tape.replay.inspect import listing
    from a2a_tape.replay.projection import Projector

    try:
        Projector(st).catch_up()
    except (sqlite3.OperationalError, ReadOnlyStore) as exc:  # a read-only log: no index to read
        if not isinstance(exc, ReadOnlyStore) and "readonly" not in str(exc) and "read-only" not in str(exc):
            raise
    else:
        total = listing.count(st)
        ids = [v.task_id for v in listing.newest(st, limit=limit)]
        if limit is not None and total > len(ids):
            err.print(
                f"the report holds the newest {len(ids)} of {total} tasks (--limit N for another number, "
                "--no-limit for every one)",
                markup=False,
                soft_wrap=True,
            )
        return ids
    events = sorted(st.task_events(), key=lambda t: t.last_position, reverse=True)
    return [t.task_id for t in (events if limit is None else events[:limit])]


def _export_html(
    st: Store,
    task_ids: list[str],
    output: Path | None,
    *,
    to_dir: bool,
    title: str,
    step: Callable[[int], None],
    asked_all: bool,
) -> None:
    if to_dir:
        assert output is not None
        written = write_dir(st, task_ids, output, title=title, progress=step)
        err.print(
            f"wrote html: {written.pages} page(s) ({written.tasks} task(s) and index.html) to {output}",
            markup=False,
            soft_wrap=True,
        )
        return
    cap = None if asked_all else PAGE_LIMIT
    if output is None:
        written = write_page(st, task_ids, sys.stdout.buffer, title=title, progress=lambda n: step(n), max_bytes=cap)
        sys.stdout.flush()
    else:
        with open_private(output) as fh:
            written = write_page(st, task_ids, fh, title=title, progress=step, max_bytes=cap)
        err.print(f"wrote html ({written.bytes} bytes) to {output}", markup=False)
    if written.cut:
        err.print(
            f"the page stops at {written.tasks} of {len(task_ids)} tasks ({PAGE_LIMIT // 1_000_000} MB): "
            "-o DIR/ writes a page per task",
            markup=False,
            soft_wrap=True,
        )
