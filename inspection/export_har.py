"""Export recorded exchanges as HAR 1.2, so browser dev tools and HAR viewers can open them.

One HAR entry per exchange. A streaming response's body is the SSE stream rebuilt from the
recorded events exactly as they came (``event:`` when there was one, then the ``data:`` payload
bytes, then a blank line); events a2a-tape added itself (origin local) never went over the wire
and are left out of the body. Times come from the recorded wall clock and monotonic offsets.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable
from typing import Any

import msgspec

from a2a_tape.store import Exchange, Recordings, StoredEvent
from a2a_tape.store.methods import binding_label
from a2a_tape.store.redact import REDACTED, Redactor

HAR_VERSION = "1.2"


class NameValue(msgspec.Struct):
    name: str
    value: str


class PostData(msgspec.Struct):
    mimeType: str
    text: str


class Request(msgspec.Struct, omit_defaults=True):
    method: str
    url: str
    httpVersion: str
    cookies: list[Any]
    headers: list[NameValue]
    queryString: list[NameValue]
    headersSize: int
    bodySize: int
    postData: PostData | None = None


class Content(msgspec.Struct, omit_defaults=True):
    size: int
    mimeType: str
    text: str
    encoding: str | None = None


class Response(msgspec.Struct):
    status: int
    statusText: str
    httpVersion: str
    cookies: list[Any]
    headers: list[NameValue]
    content: Content
    redirectURL: str
    headersSize: int
    bodySize: int


class Timings(msgspec.Struct):
    send: float
    wait: float
    receive: float
    blocked: float = -1
    dns: float = -1
    connect: float = -1
    ssl: float = -1


class Entry(msgspec.Struct, omit_defaults=True):
    startedDateTime: str
    time: float
    request: Request
    response: Response
    cache: dict[str, Any]
    timings: Timings
    comment: str = ""


class Creator(msgspec.Struct):
    name: str
    version: str


class Log(msgspec.Struct):
    version: str
    creator: Creator
    entries: list[Entry]
    comment: str = ""


class Har(msgspec.Struct):
    log: Log


_SHAPE = Redactor()  # the default rule: every header a secret by its name or value


def _iso(ts: float) -> str:
    return _dt.datetime.fromtimestamp(ts, _dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _headers(h: dict[str, str]) -> list[NameValue]:
    """Stored headers (redacted when recorded); a log recorded before secrets were found by their
    shape may hold one in clear: the export redacts by the same rule again."""
    return [NameValue(k, REDACTED if _SHAPE.is_secret(k, v) else v) for k, v in h.items()]


def sse_body(events: Iterable[StoredEvent]) -> bytes:
    """The SSE stream as recorded: one frame per upstream event."""
    out = bytearray()
    for ev in events:
        if ev.origin == "local":
            continue
        if ev.sse_event:
            out += b"event: " + ev.sse_event.encode() + b"\n"
        for line in bytes(ev.payload).split(b"\n"):
            out += b"data: " + line + b"\n"
        out += b"\n"
    return bytes(out)


def _entry(ex: Exchange, events: list[StoredEvent]) -> Entry:
    upstream = [e for e in events if e.origin != "local"]
    if ex.streaming:
        body = sse_body(upstream)
        mime = ex.content_type or "text/event-stream"
    else:
        body = ex.response_body if ex.response_body is not None else b"\n".join(bytes(e.payload) for e in upstream)
        mime = ex.content_type or "application/json"
    text = body.decode("utf-8", "replace")
    req_text = (ex.request_body or b"").decode("utf-8", "replace")
    ended = ex.ended_at or (upstream[-1].received_at if upstream else ex.started_at)
    first = upstream[0].received_at if upstream else ended
    total = max(0.0, (ended - ex.started_at) * 1000.0)
    wait = max(0.0, min(total, (first - ex.started_at) * 1000.0))
    req_headers = dict(ex.request_headers)
    return Entry(
        startedDateTime=_iso(ex.started_at),
        time=round(total, 3),
        request=Request(
            method=ex.http_method or "POST",
            url=ex.url or "http://unknown/",
            httpVersion="HTTP/1.1",
            cookies=[],
            headers=_headers(req_headers),
            queryString=[],
            headersSize=-1,
            bodySize=len(ex.request_body or b""),
            postData=PostData(req_headers.get("content-type", "application/json"), req_text)
            if ex.request_body
            else None,
        ),
        response=Response(
            status=ex.status or 0,
            statusText=ex.outcome or "",
            httpVersion="HTTP/1.1",
            cookies=[],
            headers=_headers(ex.response_headers),
            content=Content(size=len(body), mimeType=mime, text=text),
            redirectURL="",
            headersSize=-1,
            bodySize=len(body),
        ),
        cache={},
        timings=Timings(send=0.0, wait=round(wait, 3), receive=round(total - wait, 3)),
        comment=" ".join(
            x
            for x in (
                binding_label(ex.binding, ex.dialect) or "",
                ex.rpc_method or "",
                f"outcome={ex.outcome}" if ex.outcome else "",
                ex.error or "",
            )
            if x
        ),
    )


def build_har(
    store: Recordings, task_ids: Iterable[str] | None, *, version: str = "0", exchange_ids: Iterable[int] | None = None
) -> Har:
    """A HAR document for some tasks (or every exchange of the log when ``task_ids`` is None), or
    for ``exchange_ids`` (a lone Message reply has no task, only its exchange)."""
    if exchange_ids is not None:
        picked = [store.get_exchange(i) for i in dict.fromkeys(exchange_ids)]
        exchanges = [ex for ex in picked if ex is not None and ex.id is not None]
    elif task_ids is None:
        exchanges = [ex for ex in store.exchanges() if ex.id is not None]  # a stored exchange has its id
    else:
        seen: dict[int, Exchange] = {}
        for t in task_ids:
            for ex in store.exchanges(t):
                if ex.id is not None:
                    seen[ex.id] = ex
        exchanges = sorted(seen.values(), key=lambda e: e.id or 0)
    entries = [_entry(ex, store.read_exchange(ex.id)) for ex in exchanges if ex.id is not None]
    return Har(Log(version=HAR_VERSION, creator=Creator("a2a-tape", version), entries=entries))


def encode_har(har: Har) -> bytes:
    return msgspec.json.format(msgspec.json.encode(har), indent=2) + b"\n"
