"""HTTP header rules, each once: what can be a header (one rule for a tape's import and for every
server that sends a recorded header back: a hostile tape must not split a response, nor crash the
server), which headers never cross a hop, and what a Content-Type's media type is."""

from __future__ import annotations

import re

HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
"""What an HTTP field name is (RFC 9110's token), used with ``fullmatch``."""


def header_problem(name: str, value: str) -> str | None:
    """Why ``name: value`` cannot be an HTTP header (a name that is not a token, a value holding
    CR, LF or NUL: it would end the header, or the head, where it stands), or None."""
    if HEADER_NAME.fullmatch(name) is None:
        return f"header name {name[:60]!r} is not a valid name"
    if "\r" in value or "\n" in value or "\0" in value:
        return f"header {name!r} holds a line break or NUL"
    return None


HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade"}
)
"""The hop-by-hop headers (RFC 9110 section 7.6.1, and the old proxy-connection): never passed on."""


def media_type_of(content_type: str | None) -> str:
    """The media type of a Content-Type value: lower case, without its parameters."""
    return (content_type or "").split(";", 1)[0].strip().lower()


def is_json_type(content_type: str | None) -> bool:
    """``application/json`` or any ``+json`` type."""
    media = media_type_of(content_type)
    return media == "application/json" or media.endswith("+json")
