"""The replay server: recordings answering over HTTP as an A2A agent (JSON-RPC + SSE).

A thin Starlette shell around :class:`replay.serve.engine.ReplayEngine`: every request goes to the
engine, whose reply is sent as a JSON body or streamed chunk by chunk. ``a2a-tape serve`` runs
it with uvicorn; the pytest plugin runs it on 127.0.0.1 for a test.
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from a2a_tape.replay.serve.engine import ReplayEngine
from a2a_tape.replay.serve.rpc import INVALID_REQUEST, error_body
from a2a_tape.store.headers import header_problem
from a2a_tape.wire.http_client import MAX_REQUEST, read_request, sendable
from a2a_tape.wire.loopback import LOOPBACK_ONLY, Guard, LoopbackGuard

# uvicorn sends its own date and server: a recorded one would be a second; the length is the body's
_OWN = frozenset({"date", "server", "content-length"})


def create_app(engine: ReplayEngine, guard: Guard = LOOPBACK_ONLY) -> Starlette:
    """A Starlette app serving ``engine`` on every path (``/`` and the agent card), to loopback
    clients, not web pages (:mod:`wire.loopback`; ``guard``: what else it may serve)."""

    async def endpoint(request: Request) -> Response:
        body = await read_request(request.stream(), request.headers.get("content-length"))
        if body is None:  # a client cannot take serve's memory either
            refusal = error_body(INVALID_REQUEST, f"request body larger than serve's limit of {MAX_REQUEST} bytes")
            return Response(refusal, status_code=413, media_type="application/json")
        base = guard.base_url(request.scope)  # never a Host a client made up
        reply = await engine.handle(request.method, request.url.path, request.url.query, request.headers, body, base)
        media = reply.content_type or None
        if media is not None and header_problem("content-type", media) is not None:
            media = None  # a log written by hand: what cannot be a header is dropped
        if reply.stream is not None:
            answer: Response = StreamingResponse(reply.stream, status_code=reply.status, media_type=media)
        else:
            answer = Response(reply.body, status_code=reply.status, media_type=media)
        recorded = sendable(reply.headers, skip=_OWN)  # what cannot be a header is dropped
        names = {k for k, _ in recorded}
        answer.raw_headers = [(k, v) for k, v in answer.raw_headers if k not in names] + recorded
        return answer

    return Starlette(
        routes=[Route("/{path:path}", endpoint, methods=["GET", "POST", "PUT", "DELETE"])],
        middleware=[Middleware(LoopbackGuard, guard=guard)],
    )
