"""The recording modes' way upstream: a request the recordings do not answer goes to the live
agent, and what comes back is recorded (write-ahead, exact bytes) as it is passed on.

The client's end-to-end headers go upstream, its credentials included (the agent may want
them); the log keeps them redacted, and secrets in the upstream URL too.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Mapping

import httpx

from a2a_tape.store import Exchange, NewEvent, decode_item
from a2a_tape.store.methods import STREAMING_OPERATIONS
from a2a_tape.store.redact import Redactor
from a2a_tape.store.sse import SseLineTooLong, SseParser

from . import rpc
from .faults import FAULT_HEADER
from .library import Library
from .reply import SSE_HEADERS, Reply, error_reply
from .sse import comment, frame

_REDACT = Redactor()
_NOT_FORWARDED = frozenset(
    {
        "host",
        "content-length",
        "connection",
        "keep-alive",
        "transfer-encoding",
        "te",
        "trailer",
        "upgrade",
        "proxy-authorization",
        "proxy-connection",
        "accept-encoding",
        FAULT_HEADER.lower(),
    }
)  # hop-by-hop headers, and our own fault header


class Forwarder:
    """Forwards to ``upstream`` and records into ``library``'s store; counts what it recorded."""

    def __init__(self, library: Library, upstream: str) -> None:
        self.library = library
        self.upstream = upstream.rstrip("/")
        self.recorded = 0  # exchanges recorded from upstream

    async def forward(
        self, req: rpc.RpcRequest, operation: str, dialect: str, path: str, headers: Mapping[str, str], body: bytes
    ) -> Reply:
        """Send the request to the upstream agent, record what comes back, pass it on as it comes."""
        url = self.upstream + (path if path.startswith("/") else "/" + path)
        # the client's end-to-end headers go upstream (its credentials included: the agent may
        # want them); the log keeps them redacted
        fwd = {k: v for k, v in headers.items() if k.lower() not in _NOT_FORWARDED}
        st = self.library.store
        started = time.time()
        t0 = time.monotonic()
        msg = req.params.message if req.params else None
        ex_id = st.begin_exchange(
            Exchange(
                started_at=started,
                url=_REDACT.url(url),
                rpc_method=req.method,
                dialect=dialect,
                streaming=operation in STREAMING_OPERATIONS,
                request_headers=_REDACT.headers_dict(fwd),
                request_body=body,
                message_id=msg.messageId if msg else None,
                role="proxy",
            )
        )
        self.library.dirty = True
        client = httpx.AsyncClient(timeout=httpx.Timeout(30.0, read=None))
        try:
            resp = await client.send(client.build_request("POST", url, content=body, headers=fwd), stream=True)
        except httpx.HTTPError as exc:
            await client.aclose()
            st.update_exchange(
                ex_id, ended_at=time.time(), outcome="error", error=_REDACT.text(str(exc) or type(exc).__name__)
            )
            return error_reply(rpc.INTERNAL_ERROR, f"a2a-tape: upstream {self.upstream} unreachable: {exc}", req.id)
        ctype = resp.headers.get("content-type", "")
        state = {"task": None}

        def record(payload: bytes, event: str | None) -> None:
            item = decode_item(payload)
            tid = item.task_id or state["task"]
            state["task"] = tid
            st.append(
                NewEvent(
                    payload=payload,
                    task_id=tid,
                    exchange_id=ex_id,
                    sse_event=event,
                    received_at=time.time(),
                    mono=time.monotonic() - t0,
                )
            )

        def finish(outcome: str) -> None:
            st.update_exchange(
                ex_id,
                ended_at=time.time(),
                status=resp.status_code,
                content_type=ctype,
                outcome=outcome,
                task_id=state["task"],
            )
            self.recorded += 1
            for ep in self.library.refresh():
                ep.used += 1

        if not ctype.startswith("text/event-stream"):
            data = await resp.aread()
            await resp.aclose()
            await client.aclose()
            if data:
                record(data, None)
            finish("ok")
            return Reply(status=resp.status_code, content_type=ctype or "application/json", body=data)

        async def gen() -> AsyncIterator[bytes]:
            outcome = "closed"
            parser = SseParser()  # the exact bytes of each item, keep-alive comments seen
            try:
                async for chunk in resp.aiter_bytes():
                    for it in parser.feed(chunk):
                        if it.comment:
                            yield comment(it.data.decode("utf-8", "replace"))
                            continue
                        record(it.data, it.event)  # write-ahead: in the log before the client sees it
                        yield frame(it.data, it.event)
                for it in parser.close():
                    if not it.comment:
                        record(it.data, it.event)
                        yield frame(it.data, it.event)
                outcome = "ok"
            except (httpx.HTTPError, SseLineTooLong):
                outcome = "dropped"
                raise
            finally:
                await resp.aclose()
                await client.aclose()
                finish(outcome)

        return Reply(status=resp.status_code, content_type=ctype, stream=gen(), headers=dict(SSE_HEADERS))
