"""One notation in every ``--help`` (issue 26 item 5): what a value looks like is an UPPER word
(``URL``, ``TASK``, ``N``, ``SECONDS``, ``HOST:PORT``) or its choices (``[full|normal]``), and a
default is typer's ``[default: ...]`` (a descriptive one in parentheses: ``[default: (a new UUID)]``).

typer 0.29 writes ``{url}`` in a usage line, ``url <str>``, ``--limit <int>`` and
``<list[str]>`` beside the metavars we name; :func:`uniform` gives every parameter of a command
its UPPER metavar once the command is built (``app.TapeGroup.get_command``), so a new option
follows without a word of its own. A metavar an option names itself is kept.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, get_args

from typer.core import TyperArgument


class UpperArgument(TyperArgument):
    """An argument shown by its metavar alone: ``URL`` in the usage line and in the list (no ``{}``, no ``<str>``)."""

    def get_usage_pieces(self, ctx: Any) -> list[str]:
        shown = self.metavar or (self.name or "").upper()
        shown = shown if self.required else f"[{shown}]"
        return [shown + ("..." if self.nargs != 1 else "")]

    def get_help_record(self, ctx: Any) -> tuple[str, str] | None:
        record = super().get_help_record(ctx)
        return None if record is None else (self.metavar or (self.name or "").upper(), record[1])


def _metavar(param: Any) -> str | None:
    """The UPPER word (or the choices) for a parameter that takes a value; None for a flag."""
    if getattr(param, "is_flag", False) or getattr(param, "count", False):
        return None
    described = getattr(param, "type_descriptor", None)  # typer >= 0.2x; before, click's type says it
    if described is None:
        choices = getattr(param.type, "choices", None)
        kind = {"integer": int, "float": float}.get(getattr(param.type, "name", ""), str)
        return "[" + "|".join(map(str, choices)) + "]" if choices else _word(param, kind)
    annotation = described.annotation
    inner = get_args(annotation)[0] if get_args(annotation) else annotation
    if isinstance(inner, type) and issubclass(inner, Enum):
        return "[" + "|".join(str(member.value) for member in inner) + "]"
    return _word(param, inner)


def _word(param: Any, kind: Any) -> str:
    if kind is int:
        return "N"
    if kind is float:
        return "SECONDS"  # every float option of ours is a duration
    return (param.name or "").upper()


def uniform(command: Any) -> Any:
    """``command`` (a click command typer built) with every parameter in the one notation."""
    for param in command.params:
        if isinstance(param, TyperArgument) and not isinstance(param, UpperArgument):
            param.__class__ = UpperArgument
        if param.metavar is None:
            param.metavar = _metavar(param)
    return command
