"""The rich Console every human output of the CLI goes through: what it lays out is made visible
first (:func:`a2a_tape.inspection.visible.visible`), so nothing of a recording acts on the
terminal, whichever command printed it and however (a string, a ``Text``, a table cell, a panel).

Strings are never read as rich markup nor emoji codes: an agent's ``[link=...]`` is text, not a
link. Made by ``app._LazyConsole`` on first use (``--json`` never imports rich).

A table printed where no terminal reads it (a pipe, a CI log, a file) is laid out plain: no box,
each row on one line as wide as it needs, instead of every row wrapped over several lines to fit
80 columns that nobody has.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich.console import Console, ConsoleOptions
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from a2a_tape.inspection.visible import visible

PLAIN_WIDTH = 100_000
"""The width a plain table may take (no row is wrapped; a log has no right margin)."""


class VisibleConsole(Console):
    """A Console whose strings and ``Text`` are made visible before they are laid out."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("markup", False)
        kwargs.setdefault("emoji", False)
        super().__init__(**kwargs)

    def print(self, *objects: Any, **kwargs: Any) -> None:
        if not self.is_terminal and any(isinstance(o, Table) for o in objects):
            kwargs["soft_wrap"] = True  # a plain table's lines are not cropped to a width nobody has
        super().print(*objects, **kwargs)

    def render_str(self, text: str, **kwargs: Any) -> Text:
        return super().render_str(visible(text), **kwargs)

    def render(self, renderable: Any, options: ConsoleOptions | None = None) -> Iterable[Segment]:
        if isinstance(renderable, Text):
            renderable = _visible_text(self, renderable)
        elif isinstance(renderable, Table) and not self.is_terminal:
            renderable, options = _plain(renderable), (options or self.options).update(width=PLAIN_WIDTH)
        return super().render(renderable, options)


def _visible_text(console: Console, text: Text) -> Text:
    """``text`` made visible, its styles kept (each styled run is escaped on its own)."""
    if visible(text.plain) == text.plain:
        return text
    shown = Text(justify=text.justify, overflow=text.overflow, no_wrap=text.no_wrap, end=text.end)
    shown.tab_size = text.tab_size
    for seg in text.render(console, end=""):
        shown.append(visible(seg.text), seg.style)
    return shown


def _plain(table: Table) -> Table:
    """``table`` without its box and with no column wrapped (it is laid out for a log, not a screen)."""
    table.box = None
    table.show_edge = False
    table.pad_edge = False
    table.expand = False
    for column in table.columns:
        column.no_wrap, column.overflow, column.max_width = True, "ignore", None
    return table
