"""A self-contained HTML report of recorded tasks, for people who never used the CLI.

One file: inline CSS, no script, no external URL (no fonts, images or stylesheets fetched), so
it opens the same offline, attached to a bug report. Per task it shows, in this order: what
happened in one sentence, the final answer (once: a snapshot never doubles it), the doctor's
findings, the reasoning folded in a ``<details>`` element, the tool calls as a table, every
artifact, and the timeline of raw events. Every recorded string is HTML-escaped: a recording
is untrusted input.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

import msgspec
from markupsafe import Markup

from a2a_tape.inspection.ui.render import render
from a2a_tape.inspection.ui.sections import task_section
from a2a_tape.store import Recordings
from a2a_tape.store.files import write_private

PAGE_LIMIT = 20_000_000
"""A one-page report stops before it grows past this many bytes (unless asked for everything)."""
DEFAULT_TASKS = 200
"""How many tasks (the newest) ``export --all --format html`` puts in a report unless told."""


_SECTIONS = "<!--a2a-tape: the sections-->"


def _page(
    title: str,
    tasks: int,
    links: Sequence[tuple[str, str]] = (),
    *,
    note: str = "",
    back: bool = False,
    index: bool = False,
) -> tuple[str, str]:
    """The report page around its sections (``ui/templates/report.html``): (top, bottom)."""
    page = render(
        "report.html",
        live=False,
        title=title,
        count=tasks,
        note=note,
        back=back,
        links=links,
        index=index,
        sections=Markup(_SECTIONS),
    )
    top, bottom = page.split(_SECTIONS)
    return top, bottom


Progress = Callable[[int], None]
"""Called with the number of tasks written so far."""


def _anchors(task_ids: Sequence[str]) -> list[tuple[str, str]]:
    return [(f"#task-{t}", t) for t in task_ids]


def _section(store: Recordings, task_id: str) -> str:
    return task_section(task_id, store.read_task(task_id), store.exchanges(task_id))


Section = Callable[[Recordings, str], str]
"""What a report shows of the task named: its section (a lone Message reply's, for ``export MSG``)."""


def build_html(
    store: Recordings, task_ids: Sequence[str], *, title: str = "a2a-tape report", progress: Progress | None = None
) -> str:
    """The whole page; ``progress(n)`` is called after each task (for a progress bar)."""
    sections = []
    for n, t in enumerate(task_ids, 1):
        sections.append(_section(store, t))
        if progress is not None:
            progress(n)
    top, bottom = _page(title, len(task_ids), _anchors(task_ids))
    return top + "".join(sections) + bottom


class Written(msgspec.Struct):
    tasks: int  # tasks in the report
    pages: int  # files written
    bytes: int  # of the largest page
    cut: bool = False  # the page stopped at PAGE_LIMIT before every task was in


def write_page(
    store: Recordings,
    task_ids: Sequence[str],
    out: IO[bytes],
    *,
    title: str,
    progress: Progress | None = None,
    max_bytes: int | None = PAGE_LIMIT,
    section: Section | None = None,
) -> Written:
    """One page on ``out`` (a binary file), a task at a time. With ``max_bytes``, the page ends
    before the section that would take it past that size (the sections wait in memory, at most
    that much, so the index lists only what is in the page); without, sections stream as made.
    ``section``: what a task's section is (default: the stored task's)."""
    section = section or _section
    if max_bytes is None:
        top, bottom = (part.encode() for part in _page(title, len(task_ids), _anchors(task_ids)))
        out.write(top)
        size = len(top)
        for n, t in enumerate(task_ids, 1):
            data = section(store, t).encode()
            out.write(data)
            size += len(data)
            if progress is not None:
                progress(n)
        out.write(bottom)
        return Written(len(task_ids), 1, size + len(bottom))
    kept: list[bytes] = []
    size = 0
    budget = max_bytes - 8192 - 64 * len(task_ids)  # the page's top (its stylesheet), bottom, the index's links
    cut = False
    for n, t in enumerate(task_ids, 1):
        data = section(store, t).encode()
        if kept and size + len(data) > budget:
            cut = True
            break
        kept.append(data)
        size += len(data)
        if progress is not None:
            progress(n)
    shown = task_ids[: len(kept)]
    note = ""
    if cut:
        note = (
            f"This page stops at {len(kept):,} of {len(task_ids):,} tasks to stay under "
            f"{max_bytes // 1_000_000} MB: export to a directory (-o DIR/) for a page per task."
        )
    top, bottom = (part.encode() for part in _page(title, len(shown), _anchors(shown), note=note))
    out.write(top)
    for data in kept:
        out.write(data)
    out.write(bottom)
    return Written(len(shown), 1, len(top) + size + len(bottom), cut)


def page_name(n: int, task_id: str) -> str:
    """The file name of task number ``n``'s page in a directory export (safe on any file system)."""
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in task_id)[:80]
    return f"task-{n:05d}-{safe}.html"


def write_dir(
    store: Recordings,
    task_ids: Sequence[str],
    directory: Path,
    *,
    title: str,
    progress: Progress | None = None,
    section: Section | None = None,
) -> Written:
    """``index.html`` (a link per task) and one page per task in ``directory`` (a Path)."""
    section = section or _section
    directory.mkdir(parents=True, exist_ok=True)
    names = {t: page_name(n, t) for n, t in enumerate(task_ids, 1)}
    largest = 0
    for n, t in enumerate(task_ids, 1):
        top, bottom = _page(f"{title}: task {t}", 1, back=True)
        raw = (top + section(store, t) + bottom).encode()
        write_private(directory / names[t], raw)
        largest = max(largest, len(raw))
        if progress is not None:
            progress(n)
    top, bottom = _page(title, len(task_ids), [(names[t], t) for t in task_ids], index=True)
    index = (top + bottom).encode()
    write_private(directory / "index.html", index)
    return Written(len(task_ids), len(task_ids) + 1, max(largest, len(index)))
