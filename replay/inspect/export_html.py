"""A self-contained HTML report of recorded tasks, for people who never used the CLI.

One file: inline CSS, no script, no external URL (no fonts, images or stylesheets fetched), so
it opens the same offline, attached to a bug report. Per task it shows, in this order: what
happened in one sentence, the final answer (once: a snapshot never doubles it), the doctor's
findings, the reasoning folded in a ``<details>`` element, the tool calls as a table, every
artifact, and the timeline of raw events. Every recorded string is HTML-escaped: a recording
is untrusted input.
"""

from __future__ import annotations

import datetime as _dt
import html
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import IO, Any

import msgspec

from a2a_tape.store import Recordings, StoredEvent

from ..views import TaskView
from .doctor import Finding, findings
from .steps import Step, decode_events, summary, task_view

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:70rem;
color:#1d1d1f;background:#fff;line-height:1.45;padding:0 1rem}
h1{font-size:1.5rem}h2{font-size:1.25rem;border-bottom:1px solid #ddd;padding-bottom:.3rem;margin-top:2.5rem}
h3{font-size:1.05rem;margin-top:1.5rem}
pre{white-space:pre-wrap;word-break:break-word;background:#f6f8fa;padding:.75rem;border-radius:6px;margin:.3rem 0}
.answer pre{background:#eef7ee;border-left:4px solid #2e7d32;font-size:1.05rem}
.none{color:#777;font-style:italic}
table{border-collapse:collapse;width:100%;font-size:.9rem}
th,td{border:1px solid #ddd;padding:.3rem .5rem;text-align:left;vertical-align:top}
th{background:#f0f0f0}
tr.local td{background:#fff8e1}
.error{color:#b71c1c;font-weight:600}.warning{color:#8a6d00;font-weight:600}.ok{color:#2e7d32}
.state{font-weight:600}
details{margin:.5rem 0}summary{cursor:pointer;font-weight:600}
td pre{padding:.3rem;margin:0;background:transparent}
.meta{color:#555}
"""


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _when(ts: float) -> str:
    if not ts:
        return "?"
    return _dt.datetime.fromtimestamp(ts, _dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _json(value: Any) -> str:
    try:
        return msgspec.json.format(msgspec.json.encode(value), indent=2).decode()
    except Exception:  # noqa: BLE001 - anything odd is still shown, as text
        return str(value)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else _json(value)


def _tool_rows(calls: Sequence[Any]) -> str:
    """One row per tool call; structured fields as columns, anything else in a last column."""
    if not calls:
        return '<p class="none">No tool calls.</p>'
    cols = ["tool", "call_id", "status", "title", "input", "output", "error", "text"]
    dicts = [c if isinstance(c, dict) else {"text": _cell(c)} for c in calls]
    present = [c for c in cols if any(d.get(c) not in (None, "", {}, []) for d in dicts)]
    known = {*cols, "artifact_id"}
    extra = any(set(d) - known for d in dicts)
    head = "".join(f"<th>{_e(c)}</th>" for c in present) + ("<th>other fields</th>" if extra else "")
    rows = []
    for d in dicts:
        cells = [f"<td><pre>{_e(_cell(d.get(c)))}</pre></td>" for c in present]
        if extra:
            rest = {k: v for k, v in d.items() if k not in known}
            cells.append(f"<td><pre>{_e(_json(rest) if rest else '')}</pre></td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return f'<table class="tool-calls"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def _findings(findings: Sequence[Finding]) -> str:
    if not findings:
        return '<p class="ok">No lifecycle or contract faults found.</p>'
    rows = "".join(
        f'<tr><td class="{_e(f.level)}">{_e(f.level)}</td><td>{_e(f.code)}</td><td>{_e(f.message)}</td>'
        f"<td>{_e(', '.join(map(str, f.positions)))}</td></tr>"
        for f in findings
    )
    return (
        '<table class="findings"><thead><tr><th>level</th><th>fault</th><th>what</th><th>positions</th></tr></thead>'
        f"<tbody>{rows}</tbody></table>"
    )


def _timeline(steps: Sequence[Step]) -> str:
    if not steps:
        return '<p class="none">No events.</p>'
    t0 = steps[0].event.received_at
    rows = []
    for s in steps:
        ev = s.event
        origin = "LOCAL (added by a2a-tape)" if s.local else "upstream"
        text = summary(s.item)
        if s.item.kind == "undecodable":
            text += "\n" + bytes(ev.payload).decode("utf-8", "replace")
        rows.append(
            f'<tr class="{"local" if s.local else "upstream"}"><td>{ev.position}</td><td>{ev.seq}</td>'
            f"<td>+{ev.received_at - t0:.3f}s</td><td>{_e(s.item.kind)}</td><td>{_e(origin)}</td>"
            f"<td><pre>{_e(text)}</pre></td></tr>"
        )
    return (
        '<table class="timeline"><thead><tr><th>position</th><th>seq</th><th>time</th><th>kind</th>'
        f"<th>origin</th><th>what</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def _artifacts(view: TaskView) -> str:
    if not view.artifacts:
        return '<p class="none">No artifacts.</p>'
    rows = "".join(
        f"<tr><td>{_e(a.artifact_id)}</td><td>{_e(a.channel)}</td><td>{'yes' if a.closed else 'no'}</td>"
        f"<td><pre>{_e(a.text)}</pre></td></tr>"
        for a in view.artifacts
    )
    return (
        '<table class="artifacts"><thead><tr><th>artifact</th><th>channel</th><th>closed</th><th>text</th></tr>'
        f"</thead><tbody>{rows}</tbody></table>"
    )


def task_section(task_id: str, events: Sequence[StoredEvent], exchanges: Iterable[Any] = ()) -> str:
    steps = decode_events(events)
    exchanges = list(exchanges)
    view = task_view(task_id, events, exchanges)
    found = findings(task_id, events, exchanges)
    errors = sum(1 for f in found if f.level == "error")
    first = events[0].received_at if events else 0.0
    last = events[-1].received_at if events else 0.0
    verdict = (
        f'<span class="error">{errors} error(s)</span>'
        if errors
        else ('<span class="warning">warnings only</span>' if found else '<span class="ok">no faults</span>')
    )
    answer = (
        f'<pre class="final-answer">{_e(view.final_answer)}</pre>'
        if view.final_answer is not None
        else '<p class="none">The agent gave no final answer.</p>'
    )
    said = ""
    if view.status_message:
        said += (
            f'<p>The agent\'s last status message: <span class="status-message">“{_e(view.status_message)}”</span></p>'
        )
    if view.error:
        said += f'<p class="error">The stream carried an error: {_e(view.error)}</p>'
    reasoning = (
        f'<details class="reasoning"><summary>Reasoning ({len(view.reasoning)} characters, click to open)</summary>'
        f"<pre>{_e(view.reasoning)}</pre></details>"
        if view.reasoning
        else '<p class="none">No reasoning was streamed.</p>'
    )
    return f"""<section class="task" id="task-{_e(task_id)}">
<h2>Task <code>{_e(task_id)}</code></h2>
<p>The task ended <span class="state">{_e(view.state)}</span> after {len(events)} recorded event(s),
from {_e(_when(first))} to {_e(_when(last))} ({last - first:.3f} s). Doctor: {verdict}.</p>
{said}
<div class="answer"><h3>Final answer</h3>
{answer}</div>
<h3>Doctor's findings</h3>
{_findings(found)}
<h3>Reasoning</h3>
{reasoning}
<h3>Tool calls</h3>
{_tool_rows([msgspec.to_builtins(c) for c in view.tool_calls])}
<h3>Artifacts</h3>
{_artifacts(view)}
<h3>Timeline of raw events</h3>
<p class="meta">Rows marked LOCAL were added by a2a-tape itself (recovery decisions), not sent by the agent.</p>
{_timeline(steps)}
</section>"""


PAGE_LIMIT = 20_000_000
"""A one-page report stops before it grows past this many bytes (unless asked for everything)."""
DEFAULT_TASKS = 200
"""How many tasks (the newest) ``export --all --format html`` puts in a report unless told."""


def _head(title: str, tasks: int) -> str:
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<title>{_e(title)}</title>
<style>{_CSS}</style></head>
<body>
<h1>{_e(title)}</h1>
<p class="meta">What an A2A agent sent, as recorded by a2a-tape, for {tasks} task(s). The final answer is
what a user should have seen; the doctor lists what went wrong on the wire; the timeline lists every raw event.</p>
"""


Progress = Callable[[int], None]
"""Called with the number of tasks written so far."""
_TAIL = "\n</body></html>\n"


def _nav(task_ids: Sequence[str], href: Callable[[str], str] = lambda t: f"#task-{_e(t)}") -> str:
    if len(task_ids) <= 1:
        return ""
    items = "".join(f'<li><a href="{href(t)}">{_e(t)}</a></li>' for t in task_ids)
    return f"<nav><h2>Tasks</h2><ul>{items}</ul></nav>"


def _section(store: Recordings, task_id: str) -> str:
    return task_section(task_id, store.read_task(task_id), store.exchanges(task_id))


def build_html(
    store: Recordings, task_ids: Sequence[str], *, title: str = "a2a-tape report", progress: Progress | None = None
) -> str:
    """The whole page; ``progress(n)`` is called after each task (for a progress bar)."""
    sections = []
    for n, t in enumerate(task_ids, 1):
        sections.append(_section(store, t))
        if progress is not None:
            progress(n)
    return _head(title, len(task_ids)) + _nav(task_ids) + "\n" + "".join(sections) + _TAIL


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
) -> Written:
    """One page on ``out`` (a binary file), a task at a time. With ``max_bytes``, the page ends
    before the section that would take it past that size (the sections wait in memory, at most
    that much, so the index lists only what is in the page); without, sections stream as made."""
    if max_bytes is None:
        head = (_head(title, len(task_ids)) + _nav(task_ids) + "\n").encode()
        out.write(head)
        size = len(head)
        for n, t in enumerate(task_ids, 1):
            data = _section(store, t).encode()
            out.write(data)
            size += len(data)
            if progress is not None:
                progress(n)
        out.write(_TAIL.encode())
        return Written(len(task_ids), 1, size + len(_TAIL))
    kept: list[bytes] = []
    size = 0
    budget = max_bytes - 4096 - 64 * len(task_ids)  # head, tail, the index's links
    cut = False
    for n, t in enumerate(task_ids, 1):
        data = _section(store, t).encode()
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
            f'<p class="warning">This page stops at {len(kept)} of {len(task_ids)} tasks to stay under '
            f"{max_bytes // 1_000_000} MB: export to a directory (-o DIR/) for a page per task.</p>\n"
        )
    head = (_head(title, len(shown)) + note + _nav(shown) + "\n").encode()
    out.write(head)
    for data in kept:
        out.write(data)
    out.write(_TAIL.encode())
    return Written(len(shown), 1, len(head) + size + len(_TAIL), cut)


def page_name(n: int, task_id: str) -> str:
    """The file name of task number ``n``'s page in a directory export (safe on any file system)."""
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in task_id)[:80]
    return f"task-{n:05d}-{safe}.html"


def write_dir(
    store: Recordings, task_ids: Sequence[str], directory: Path, *, title: str, progress: Progress | None = None
) -> Written:
    """``index.html`` (a link per task) and one page per task in ``directory`` (a Path)."""
    directory.mkdir(parents=True, exist_ok=True)
    names = {t: page_name(n, t) for n, t in enumerate(task_ids, 1)}
    largest = 0
    for n, t in enumerate(task_ids, 1):
        data = _head(f"{title}: task {t}", 1) + '<p><a href="index.html">all tasks</a></p>\n' + _section(store, t)
        data += _TAIL
        raw = data.encode()
        (directory / names[t]).write_bytes(raw)
        largest = max(largest, len(raw))
        if progress is not None:
            progress(n)
    index = (_head(title, len(task_ids)) + _nav(task_ids, href=lambda t: _e(names[t])) + _TAIL).encode()
    if len(task_ids) == 1:
        index = (_head(title, 1) + f'<p><a href="{_e(names[task_ids[0]])}">{_e(task_ids[0])}</a></p>' + _TAIL).encode()
    (directory / "index.html").write_bytes(index)
    return Written(len(task_ids), len(task_ids) + 1, max(largest, len(index)))
