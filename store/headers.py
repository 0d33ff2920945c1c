"""What can be an HTTP header: one rule for a tape's import and for every server that sends a
recorded header back (a hostile tape must not split a response, nor crash the server)."""

from __future__ import annotations

import re

_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


def header_problem(name: str, value: str) -> str | None:
    """Why ``name: value`` cannot be an HTTP header (a name that is not a token, a value holding
    CR, LF or NUL: it would end the header, or the head, where it stands), or None."""
    if _TOKEN.fullmatch(name) is None:
        return f"header name {name[:60]!r} is not a valid name"
    if "\r" in value or "\n" in value or "\0" in value:
        return f"header {name!r} holds a line break or NUL"
    return None
