"""Progress on stderr for commands that can take more than a second on a big log.

Shown when stderr is a terminal, or when asked (``--progress``, or ``A2A_TAPE_PROGRESS=1``);
never on stdout, which may be the data. rich, imported only when a bar is shown.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import Annotated

import typer

from a2a_tape.cli.app import err

ProgressOption = Annotated[
    bool,
    typer.Option(
        "--progress",
        help="Show progress on stderr even when it is not a terminal (also: A2A_TAPE_PROGRESS=1).",
    ),
]

Report = Callable[[int, int | None], None]
"""``report(done, total)``: how far a long job is (``total`` None: not known)."""


def wanted(asked: bool = False) -> bool:
    return asked or err.is_terminal or os.environ.get("A2A_TAPE_PROGRESS", "") not in ("", "0")


@contextlib.contextmanager
def bar(label: str, *, asked: bool = False, unit: str = "", show: bool = True) -> Iterator[Report]:
    """A progress bar; yields ``report(done, total)``. Does nothing unless :func:`wanted` (or when not ``show``)."""
    if not show or not wanted(asked):
        yield lambda done, total: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = [TextColumn(label), BarColumn(), MofNCompleteColumn()]
    if unit:
        columns.append(TextColumn(unit))
    columns.append(TimeElapsedColumn())
    with Progress(*columns, console=err, transient=err.is_terminal) as progress:
        job = progress.add_task(label, total=None)

        def report(done: int, total: int | None) -> None:
            progress.update(job, completed=done, total=total)

        yield report


def folding(behind: int) -> contextlib.AbstractContextManager[None]:
    """A spinner while a projection folds ``behind`` new events (past 50,000 of them), for
    :func:`a2a_tape.inspection.task_views.task_projection`."""
    return spinner(f"folding {behind:,} new events into the task projection", show=behind > 50_000)


@contextlib.contextmanager
def spinner(label: str, *, asked: bool = False, show: bool = True) -> Iterator[None]:
    """A spinner for work without a count (a projection folding many events)."""
    if not show or not wanted(asked):
        yield
        return
    with err.status(label, spinner="dots"):
        yield
