"""The live routes' server-sent event streams: when the log grew (the one :class:`.follower.Follower`),
where a stream resumes, and the response that carries it."""

from __future__ import annotations

from collections.abc import AsyncIterator

from starlette.requests import Request
from starlette.responses import StreamingResponse

from a2a_tape.inspection.ui import reading
from a2a_tape.inspection.ui.follower import Follower

KEEPALIVE_EVERY = 15.0
"""Seconds between keep-alive comments on a quiet event stream."""


async def grown(follower: Follower, after: int) -> AsyncIterator[tuple[int, int] | None]:
    """``(from, to)`` each time the log grows past ``after`` (None after a quiet while: time for a
    keep-alive); ends when the server stops."""
    while not follower.closing:
        upto = await follower.past(after, KEEPALIVE_EVERY)
        if follower.closing:
            return
        if upto <= after:
            yield None
            continue
        yield after, upto
        after = upto


def resume(request: Request) -> int:
    """Where an event stream starts: after the browser's ``Last-Event-ID`` (a reconnection), else
    after the ``after`` the page was rendered at."""
    given = request.headers.get("last-event-id") or request.query_params.get("after")
    return reading.parse_position(given, "after") or 0


def event_stream(events: AsyncIterator[bytes]) -> StreamingResponse:
    return StreamingResponse(events, media_type="text/event-stream", headers={"x-accel-buffering": "no"})
