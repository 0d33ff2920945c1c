"""Export formats other than the tape: ``har``, ``mermaid`` and ``html`` (see ``a2a-tape export``).

Each format is built in ``inspection`` from the stored events, and the tasks are chosen there
(:mod:`inspection.listing`); this module writes to stdout or ``-o FILE`` and reports where
it wrote on stderr.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version

from a2a_tape.cli.app import err, find_export, open_db
from a2a_tape.cli.options import ExportFormat
from a2a_tape.cli.output import Output
from a2a_tape.cli.progress import bar
from a2a_tape.inspection.export_har import build_har, encode_har
from a2a_tape.inspection.export_html import (
    DEFAULT_TASKS,
    PAGE_LIMIT,
    Section,
    write_dir,
    write_page,
)
from a2a_tape.inspection.export_mermaid import build_mermaid, message_mermaid
from a2a_tape.inspection.listing import log_order_ids, newest_ids
from a2a_tape.inspection.messages import LoneMessage
from a2a_tape.inspection.ui.sections import message_section
from a2a_tape.inspection.words import count
from a2a_tape.store import Recordings, Store


def _version() -> str:
    try:
        return version("a2a-tape")
    except PackageNotFoundError:
        return "0"


def _said(text: str) -> None:
    err.print(text, markup=False, soft_wrap=True)


def export(
    *,
    task: str | None,
    run: int | None = None,
    all_: bool,
    format: ExportFormat,
    output: Output,
    db: str | None,
    limit: int | None = None,
    no_limit: bool = False,
    progress: bool = False,
) -> None:
    # html of --all reads the task index (kept when the log can be written), the rest only reads
    st = open_db(db, readonly="fallback" if all_ and format == "html" else True)
    with st:
        log, found, selector = (st, None, None) if task is None else find_export(st, task, run)
        if found is not None and not isinstance(found, str):
            _export_message(st, found, format, output)
            return
        task_ids = [found] if found is not None else _chosen(st, format, limit, no_limit)
        # progress on stderr for long exports (only on a terminal, or when asked: stdout may be the file)
        with bar(f"exporting {format}", asked=progress, show=progress or len(task_ids) >= 50) as report:

            def step(n: int) -> None:
                report(n, len(task_ids))

            if format == "html":
                title = "a2a-tape report" + ("" if all_ else f": task {selector or task_ids[0]}")
                _export_html(log, task_ids, output, title=title, step=step, asked_all=no_limit)
                return
            if format == "har":
                data = encode_har(build_har(log, None if all_ and limit is None else task_ids, version=_version()))
            else:
                data = build_mermaid(log, task_ids, progress=step).encode()
    with output.stream() as fh:
        fh.write(data)
    if not output.to_stdout:
        _said(f"wrote {format} ({len(data)} bytes) to {output.name}")


def _export_message(st: Store, lone: LoneMessage, format: ExportFormat, output: Output) -> None:
    """A lone Message reply (no task): its exchange in HAR, its events in a diagram or a report."""
    if format == "html":
        title = f"a2a-tape report: message {lone.key}"
        _export_html(st, [lone.key], output, title=title, step=lambda n: None, asked_all=False, lone=lone)
        return
    if format == "har":
        data = encode_har(build_har(st, None, version=_version(), exchange_ids=[lone.exchange.id or 0]))
    else:
        data = message_mermaid(lone.key, lone.events, [lone.exchange]).encode()
    with output.stream() as fh:
        fh.write(data)
    if not output.to_stdout:
        _said(f"wrote {format} ({len(data)} bytes) to {output.name}")


def _chosen(st: Store, format: ExportFormat, limit: int | None, no_limit: bool) -> list[str]:
    """The tasks ``--all`` exports: the newest ones for a report, the log's for the rest."""
    if format != "html":
        return log_order_ids(st, limit)
    ids, total = newest_ids(st, None if no_limit else (limit or DEFAULT_TASKS))
    if not no_limit and total is not None and total > len(ids):
        _said(
            f"the report holds the newest {len(ids):,} of {total:,} tasks (--limit N for another number, "
            "--no-limit for every one)"
        )
    return ids


def _export_html(
    st: Recordings,
    task_ids: list[str],
    output: Output,
    *,
    title: str,
    step: Callable[[int], None],
    asked_all: bool,
    lone: LoneMessage | None = None,
) -> None:
    section: Section | None = None if lone is None else (lambda _st, _key: message_section(lone))
    if output.directory:
        try:
            written = write_dir(st, task_ids, output.path, title=title, progress=step, section=section)
        except OSError as exc:
            output.failed(exc)
        pages, tasks = count(written.pages, "page"), count(written.tasks, "task")
        _said(f"wrote html: {pages} ({tasks} and index.html) to {output.name}")
        return
    cap = None if asked_all else PAGE_LIMIT
    with output.stream() as fh:
        written = write_page(st, task_ids, fh, title=title, progress=step, max_bytes=cap, section=section)
    if not output.to_stdout:
        _said(f"wrote html ({written.bytes} bytes) to {output.name}")
    if written.cut:
        _said(
            f"the page stops at {written.tasks:,} of {len(task_ids):,} tasks ({PAGE_LIMIT // 1_000_000} MB): "
            "-o DIR/ writes a page per task"
        )
