"""What the replay core answers: a whole body or a stream of body chunks (SSE)."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from contextvars import ContextVar, Token
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import msgspec

from a2a_tape.replay.serve import rpc
from a2a_tape.store.headers import HOP_BY_HOP
from a2a_tape.store.json_values import Decoder
from a2a_tape.store.methods import HTTP_JSON
from a2a_tape.wire import http_json
from a2a_tape.wire.a2a_errors import A2A_CODES, error_info, kind_of
from a2a_tape.wire.grpc import rewrite_grpc_urls

if TYPE_CHECKING:
    from a2a_tape.replay.serve.library import RecordedCard

SSE_HEADERS = {"cache-control": "no-store", "x-accel-buffering": "no"}


class Said(msgspec.Struct):
    """What the engine did with one request, for the line ``serve`` prints per request: the
    method, the task, and the outcome: ``hit`` (a recorded answer), ``miss`` (nothing recorded
    matched), ``fault`` (a recorded answer with a fault injected), ``forward`` (the upstream
    agent's answer, the recording modes) or ``error`` (a request the replay refused)."""

    method: str | None = None
    task_id: str | None = None
    outcome: str = "hit"
    # told once a whole-body answer is sent (the server, the transport): pushes wait for it
    answered: Callable[[], None] | None = None


_SAID: ContextVar[Said | None] = ContextVar("a2a_tape_said", default=None)


def said() -> Said:
    """The request being answered (a throwaway outside :meth:`ReplayEngine.handle`)."""
    return _SAID.get() or Said()


def saying() -> tuple[Said, Token[Said | None]]:
    """Start noting what the engine does with a request (``_SAID.reset(token)`` ends it)."""
    s = Said()
    return s, _SAID.set(s)


def stop_saying(token: Token[Said | None]) -> None:
    _SAID.reset(token)


class Reply(msgspec.Struct):
    """What to answer: a whole body, or a stream of body chunks (SSE). ``content_type`` ""
    means none (a 304)."""

    status: int = 200
    content_type: str = "application/json"
    body: bytes = b""
    stream: AsyncGenerator[bytes, None] | None = None  # a generator: a dropped client closes it
    headers: dict[str, str] = {}
    forwarded: bool = False  # the agent's own answer, passed on (the recording modes): never re-rendered
    said: Said | None = None  # what the engine did, for serve's line per request (set by ReplayEngine.handle)


def json_reply(body: bytes, status: int = 200) -> Reply:
    return Reply(status=status, body=body)


def error_reply(code: int, message: str, rpc_id: Any = None, dialect: str | None = None) -> Reply:
    """Our error, as an a2a-sdk 1.3.0 agent sends it: in v1.0 an A2A error (and invalid params)
    carries its ``google.rpc.ErrorInfo`` as ``data``."""
    s = said()
    if s.outcome in ("hit", "fault"):
        s.outcome = "error"
    return json_reply(rpc.error_body(code, message, rpc_id, error_data(code, dialect)))


def error_data(code: int, dialect: str | None) -> Any:
    """The ``data`` of an error of ours (None: none), as :func:`error_reply` says."""
    if dialect == "1.0" and (code in A2A_CODES or code == rpc.INVALID_PARAMS):
        return [error_info(kind_of(code).reason)]
    return None


def render(reply: Reply, binding: str) -> Reply:
    """The engine's answer (written in the JSON-RPC form) on the wire of ``binding``
    (:mod:`wire.bindings`): the same reply for JSON-RPC; for HTTP+JSON, results alone, errors as
    an HTTP status with the SDK's error body, stream items re-framed one by one."""
    if binding != HTTP_JSON or reply.forwarded:
        return reply
    if reply.stream is not None:
        if reply.content_type.startswith("text/event-stream"):
            return msgspec.structs.replace(reply, stream=http_json.render_stream(reply.stream))
        return msgspec.structs.replace(reply, stream=_whole(reply.stream, reply.content_type))
    status, ctype, body = http_json.render_body(reply.status, reply.content_type, reply.body)
    return msgspec.structs.replace(reply, status=status, content_type=ctype, body=body)


async def _whole(chunks: AsyncGenerator[bytes, None], content_type: str) -> AsyncGenerator[bytes, None]:
    """A whole body held back by a fault (a delay, a stall): each chunk is the whole body."""
    try:
        async for chunk in chunks:
            yield http_json.render_body(200, content_type, chunk)[2]
    finally:
        await chunks.aclose()


# Not replayed with a recorded card: hop-by-hop headers, and what describes the recorded body
# rather than the one served (its length and coding change with the URLs; the type is the
# Reply's own field).
_NOT_REPLAYED = HOP_BY_HOP | frozenset(
    {
        "content-length",
        "content-encoding",
        "content-type",
    }
)


class _Interface(msgspec.Struct):
    url: str | None = None


class _CardUrls(msgspec.Struct):
    """The URLs of a card (the fields that say where the agent is)."""

    url: str | None = None
    supportedInterfaces: list[_Interface] = []
    additionalInterfaces: list[_Interface] = []


_card_urls = Decoder(_CardUrls)


def _origin(url: str | None) -> str | None:
    if not url:
        return None
    p = urlsplit(url)
    return f"{p.scheme}://{p.netloc}" if p.scheme and p.netloc else None


def rewrite_card_urls(body: bytes, fetched_from: str, base_url: str, grpc_address: str | None = None) -> bytes:
    """The card's bytes with the agent's origins (where it was fetched, its ``url``, each
    interface's ``url``) replaced by ours, and its gRPC interfaces by ``grpc_address`` (serve
    --grpc-listen; without it they are left out: a gRPC client would reach the agent); every
    other byte as recorded."""
    body, grpc_urls = rewrite_grpc_urls(body, grpc_address)
    origins = {o for o in (_origin(fetched_from),) if o}
    try:
        card = _card_urls.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError):
        card = _CardUrls()
    for u in [card.url, *(i.url for i in card.supportedInterfaces + card.additionalInterfaces)]:
        o = _origin(u) if u not in grpc_urls else None
        if o:
            origins.add(o)
    ours = (_origin(base_url) or base_url.rstrip("/")).encode()
    for o in sorted(origins, key=len, reverse=True):
        body = body.replace(o.encode(), ours)
    return body


def _etag_hits(if_none_match: str, etag: str) -> bool:
    """RFC 9110's weak comparison of If-None-Match against the ETag."""
    tags = [t.strip() for t in if_none_match.split(",")]
    return "*" in tags or any(t.removeprefix("W/") == etag.removeprefix("W/") for t in tags)


def card_reply(card: RecordedCard, base_url: str, if_none_match: str | None, grpc_address: str | None = None) -> Reply:
    """A recorded card as the agent served it (status, headers, body), its URLs rewritten to
    ``base_url``; a 304 with the same headers when ``If-None-Match`` names its ETag."""
    headers = {k: v for k, v in card.headers.items() if k not in _NOT_REPLAYED}
    etag = headers.get("etag")
    if etag and if_none_match and _etag_hits(if_none_match, etag):
        return Reply(status=304, content_type="", headers=headers)
    return Reply(
        status=card.status,
        content_type=card.content_type or "application/json",
        body=rewrite_card_urls(card.body, card.url, base_url, grpc_address),
        headers=headers,
    )
