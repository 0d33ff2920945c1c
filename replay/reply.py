"""What the replay core answers: a whole body or a stream of body chunks (SSE)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import msgspec

from . import rpc

SSE_HEADERS = {"cache-control": "no-store", "x-accel-buffering": "no"}


class Reply(msgspec.Struct):
    """What to answer: a whole body, or a stream of body chunks (SSE)."""

    status: int = 200
    content_type: str = "application/json"
    body: bytes = b""
    stream: AsyncIterator[bytes] | None = None
    headers: dict[str, str] = {}


def json_reply(body: bytes, status: int = 200) -> Reply:
    return Reply(status=status, body=body)


def error_reply(code: int, message: str, rpc_id: Any = None) -> Reply:
    return json_reply(rpc.error_body(code, message, rpc_id))
