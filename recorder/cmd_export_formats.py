"""Export formats other than the tape: ``har``, ``mermaid`` and ``html`` (see ``a2a-tape export``).

Each format is built in ``replay`` from the stored events; this module picks the tasks, writes
to stdout or ``-o FILE`` and reports where it wrote on stderr.
"""

from __future__ import annotations

import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from a2a_tape.replay.export_har import build_har, encode_har
from a2a_tape.replay.export_html import build_html
from a2a_tape.replay.export_mermaid import build_mermaid

from .app import err, fail, find_task, open_db

FORMATS = ("jsonl", "har", "mermaid", "html")


def _version() -> str:
    try:
        return version("a2a-tape")
    except PackageNotFoundError:
        return "0"


def export(*, task: str | None, all_: bool, format: str, output: Path | None, db: str | None) -> None:
    if format not in FORMATS:
        fail(f"unknown export format '{format}' (known: {', '.join(FORMATS)})")
    st = open_db(db, readonly=True)
    with st:
        if all_:
            task_ids = [t.task_id for t in st.task_events()]
        else:
            task_ids = [find_task(st, task)]  # type: ignore[arg-type]
        # a progress bar on stderr for long exports (only on a terminal: stdout may be the file)
        with Progress(
            TextColumn(f"exporting {format}"),
            BarColumn(),
            MofNCompleteColumn(),
            console=err,
            transient=True,
            disable=not err.is_terminal or len(task_ids) < 50,
        ) as bar:
            job = bar.add_task("export", total=len(task_ids))

            def step(n: int) -> None:
                bar.update(job, completed=n)

            if format == "har":
                data = encode_har(build_har(st, None if all_ else task_ids, version=_version()))
            elif format == "mermaid":
                data = build_mermaid(st, task_ids, progress=step).encode()
            else:
                title = "a2a-tape report" + ("" if all_ else f": task {task_ids[0]}")
                data = build_html(st, task_ids, title=title, progress=step).encode()
    if output is None:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    else:
        output.write_bytes(data)
        err.print(f"wrote {format} ({len(data)} bytes) to {output}", markup=False)
