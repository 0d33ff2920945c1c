"""One way to show a tool call to people, wherever one is shown: ``channels``, the live view of
``record`` and ``demo``. The same five columns, the same name for the call.

A call is named by its tool (``read``, ``bash``), else by its call id; never by the artifact that
carried it (an opencode lane's ``{task}:stream:tool:{part}`` says nothing a reader wants). Input
and output are cut to one line's worth; ``channels --json`` has them whole.
"""

from __future__ import annotations

from typing import Any

import msgspec

from a2a_tape.fold.views import ToolCall

COLUMNS = ("tool", "status", "title / text", "input", "output / error")
BRIEF = 120
"""Characters of an input or an output shown in a cell."""


def name(call: ToolCall) -> str:
    """What the call is called: its tool, else its call id, else ``-``."""
    return call.tool or call.call_id or "-"


def brief(value: Any, limit: int = BRIEF) -> str:
    """A value on one cell: a string as it is, anything else as JSON; cut past ``limit`` characters."""
    if value is None:
        return ""
    text = value if isinstance(value, str) else msgspec.json.encode(value).decode()
    return text if len(text) <= limit else text[: limit - 3] + "..."


def cells(call: ToolCall) -> list[str]:
    """The call's row under :data:`COLUMNS`."""
    result = call.error if call.error is not None else call.output
    return [name(call), call.status or "", call.title or call.text, brief(call.input), brief(result)]
