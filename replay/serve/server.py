"""The replay server: recordings answering over HTTP as an A2A agent (JSON-RPC + SSE).

A thin Starlette shell around :class:`replay.serve.engine.ReplayEngine`: every request goes to the
engine, whose reply is sent as a JSON body or streamed chunk by chunk. ``a2a-tape serve`` runs
it with uvicorn; the pytest plugin runs it on 127.0.0.1 for a test.
"""

from __future__ import annotations

from collections.abc import Callable

from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from a2a_tape.replay.serve.engine import ReplayEngine
from a2a_tape.replay.serve.reply import Reply, Said
from a2a_tape.replay.serve.rpc import INVALID_REQUEST, error_body
from a2a_tape.store.headers import header_problem
from a2a_tape.wire import http_json
from a2a_tape.wire.loopback import LOOPBACK_ONLY, Guard, LoopbackGuard
from a2a_tape.wire.served import MAX_REQUEST, read_request, sendable

# uvicorn sends its own date and server: a recorded one would be a second; the length is the body's
_OWN = frozenset({"date", "server", "content-length"})


def request_line(method: str, path: str, reply: Reply) -> str:
    """One request as ``serve`` reports it: HTTP method and path, the A2A method, the task, what
    the replay did (hit, miss, fault, forward, error: :class:`.reply.Said`) and the HTTP status.
    Recorded text in it: the printer shows control characters as escapes."""
    s = reply.said or Said()
    return f"{method} {path} {s.method or '-'} task {s.task_id or '-'} {s.outcome} {reply.status}"


def create_app(
    engine: ReplayEngine, guard: Guard = LOOPBACK_ONLY, *, log: Callable[[str], None] | None = None
) -> Starlette:
    """A Starlette app serving ``engine`` on every path (``/`` and the agent card), to loopback
    clients, not web pages (:mod:`wire.loopback`; ``guard``: what else it may serve).
    ``log``: given a :func:`request_line` per request, as its answer starts."""

    async def endpoint(request: Request) -> Response:
        body = await read_request(request.stream(), request.headers.get("content-length"))
        if body is None:  # a client cannot take serve's memory either
            refusal = error_body(INVALID_REQUEST, f"request body larger than serve's limit of {MAX_REQUEST} bytes")
            if log is not None:
                log(f"{request.method} {request.url.path} - task - error 413")
            return Response(refusal, status_code=413, media_type="application/json")
        base = guard.base_url(request.scope)  # never a Host a client made up
        path = http_json.sent_path(request.scope.get("raw_path"), request.scope["path"])
        reply = await engine.handle(request.method, path, request.url.query, request.headers, body, base)
        if log is not None:
            log(request_line(request.method, path, reply))
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
        if reply.said is not None and reply.said.answered is not None:  # the answer is out: pushes may go
            answer.background = BackgroundTask(reply.said.answered)
        return answer

    return Starlette(
        routes=[Route("/{path:path}", endpoint, methods=["GET", "POST", "PUT", "DELETE"])],
        middleware=[Middleware(LoopbackGuard, guard=guard)],
    )
