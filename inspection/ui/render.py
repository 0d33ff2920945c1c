"""One template per view, for the live UI and the static export alike.

Every value a template prints passes :func:`text` (the environment's ``finalize``): it is
HTML-escaped, and a control character or a bidirectional override in it is shown as its escape
(``\\x1b``, ``\\u202e``) instead of acting on the page. A recording is untrusted input: an agent's
``<script>`` or terminal escape sequence shows as the text it is. Only markup this package builds
itself (:class:`markupsafe.Markup`) passes through as it is.

A page is rendered in one of two modes: ``live`` (``a2a-tape ui``: a stylesheet and scripts
served by the app, under a Content-Security-Policy header that allows nothing else) or static
(``export --format html``: one file, the stylesheet inline, no script, a CSP that forbids any fetch).
"""

from __future__ import annotations

import datetime as _dt
import functools
import re
from pathlib import Path
from typing import Any

import jinja2
import msgspec
from markupsafe import Markup, escape

from a2a_tape.inspection.visible import CONTROLS
from a2a_tape.inspection.words import count

HERE = Path(__file__).resolve().parent
TEMPLATES = HERE / "templates"
STATIC = HERE / "static"

_CONTROL = re.compile(f"[{CONTROLS}]")  # the terminal's set (..visible): one list of what acts rather than shows


def _shown(char: str) -> str:
    # no quotes: printed inside an attribute by mistake, it could not end the attribute
    code = ord(char)
    return f"<span class=ctl>\\x{code:02x}</span>" if code < 0x100 else f"<span class=ctl>\\u{code:04x}</span>"


def text(value: Any) -> Markup:
    """``value`` as HTML text: escaped; control characters and bidirectional overrides visible."""
    if isinstance(value, Markup):
        return value
    escaped = escape("" if value is None else str(value))
    if not _CONTROL.search(escaped):
        return escaped
    return Markup(_CONTROL.sub(lambda m: _shown(m.group(0)), str(escaped)))


CLIP = 65_536
"""Characters of one text a live page shows at most: the first and the last half of that (a
browser lays out megabytes of text in seconds; the whole text is a link away, as plain text)."""


def clip(value: Any, limit: int = CLIP) -> Markup:
    """``value`` as :func:`text`, its middle left out past ``limit`` characters, saying how much."""
    s = "" if value is None else str(value)
    if len(s) <= limit:
        return text(s)
    half = limit // 2
    gap = Markup('<span class="clipped">\n… {:,} characters not shown here …\n</span>').format(len(s) - 2 * half)
    return text(s[:half]) + gap + text(s[-half:])


def clipped(value: Any, limit: int = CLIP) -> bool:
    return value is not None and len(str(value)) > limit


def attr(value: Any) -> Markup:
    """``value`` for an attribute that must keep it exactly (a task id in a form's value): escaped
    only (an attribute is never shown as text, so nothing needs to be made visible)."""
    return escape("" if value is None else str(value))


def when(ts: float | None, *, short: bool = False) -> str:
    """A wall-clock time in UTC, to the millisecond (``short``: to the second, no zone)."""
    if not ts:
        return "?"
    at = _dt.datetime.fromtimestamp(ts, _dt.UTC)
    return at.strftime("%Y-%m-%d %H:%M:%S") if short else at.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"


def seconds(value: float | None) -> str:
    """A duration for people: ``12 ms``, ``3.20 s``, ``4 min 05 s``."""
    if value is None:
        return "?"
    if value < 1:
        return f"{value * 1000:.0f} ms"
    if value < 120:
        return f"{value:.2f} s"
    minutes, secs = divmod(int(value), 60)
    return f"{minutes} min {secs:02d} s"


def pretty_json(raw: bytes) -> str | None:
    """The JSON of ``raw`` indented as written (key order and numbers kept); None if not JSON."""
    try:
        msgspec.json.decode(raw)
    except (msgspec.DecodeError, RecursionError):
        return None
    return msgspec.json.format(raw, indent=2).decode("utf-8", "backslashreplace")


def cell(value: Any) -> str:
    """A tool call's field for a table cell: text as it is, anything else as indented JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    try:
        return msgspec.json.format(msgspec.json.encode(value), indent=2).decode()
    except (TypeError, msgspec.EncodeError):
        return str(value)


def plural(n: int, noun: str) -> str:
    """``1 task``, ``10 recorded events``: :func:`inspection.words.count`, the CLI's rule."""
    return count(n, noun)


@functools.cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        finalize=text,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        auto_reload=False,
    )
    env.filters.update(attr=attr, clip=clip, when=when, seconds=seconds, cell=cell, plural=plural)
    env.tests.update(clipped=clipped)
    env.globals.update(css=stylesheet)
    return env


def render(template: str, **context: Any) -> str:
    """The HTML of ``template`` (a file of ``templates/``) with ``context``."""
    return environment().get_template(template).render(**context)


def fragment(template: str, block: str, **context: Any) -> str:
    """One block of ``template``: what a live page swaps in (a row, a panel) without a whole page."""
    tpl = environment().get_template(template)
    return "".join(tpl.blocks[block](tpl.new_context(context)))


@functools.cache
def stylesheet() -> Markup:
    """The stylesheet, inlined by the static export (ours: it holds no ``</style``)."""
    css = (STATIC / "ui.css").read_text(encoding="utf-8")
    assert "</" not in css
    return Markup(css)
