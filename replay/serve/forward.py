"""The recording modes' way upstream: a request the recordings do not answer goes to the live
agent, and what comes back is recorded (write-ahead, exact bytes) as it is passed on.

Recorded through the capture core (:class:`store.capture.Capture`), as every other path: the
request row redacted (headers, URL secrets, configured JSON paths), SSE items per the HTML
standard (a BOM, CR line ends, ``id``/``retry``/comments, a cut last item kept and marked
incomplete), every payload redacted as configured (``[tool.a2a-tape]`` and ``--redact``), one
outcome word. The client gets the stream's exact bytes (each item's ``raw``), after the items
are in the log. The client's end-to-end headers go upstream, its credentials included (the
agent may want them); the log keeps them redacted.

Timeouts: connect and write 30 s, the response head within 30 s of the request (an agent that
accepts and says nothing does not hang the client), no read timeout on a stream (an agent may
think for long; its keep-alives are passed on). The HTTP side of :mod:`recorder.sending` is not
importable from here (store <- replay <- recorder), hence the few lines of :func:`_send`.

The writes never make the server's event loop wait for the log's lock
(:func:`store.writer.write_soon`): a request being recorded while another process holds the log
waits alone, and replayed answers go on.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping

import anyio
import httpx

from a2a_tape.store.capture import Capture, Outcome
from a2a_tape.store.events import ErrorItem
from a2a_tape.store.methods import STREAMING_OPERATIONS
from a2a_tape.store.redact import Redactor, build_redactor
from a2a_tape.store.sse import SseLineTooLong
from a2a_tape.store.writer import write_soon

from ..http import BodyTooLarge, LazyTlsTransport, read_body
from . import rpc
from .faults import FAULT_HEADER
from .library import Library
from .reply import SSE_HEADERS, Reply, error_reply

FIRST_BYTE = 30.0
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


async def _send(client: httpx.AsyncClient, request: httpx.Request, first_byte: float) -> httpx.Response:
    with anyio.move_on_after(first_byte):
        return await client.send(request, stream=True)
    raise httpx.ReadTimeout(f"no response head within {first_byte:g} s", request=request)


class Forwarder:
    """Forwards to ``upstream`` and records into ``library``'s store; counts what it recorded.
    ``redactor``: the run's (default: ``[tool.a2a-tape]`` of the current directory)."""

    def __init__(self, library: Library, upstream: str, redactor: Redactor | None = None) -> None:
        self.library = library
        self.upstream = upstream.rstrip("/")
        self.redactor = redactor or build_redactor()
        self.recorded = 0  # exchanges recorded from upstream
        self.first_byte = FIRST_BYTE

    async def forward(
        self, req: rpc.RpcRequest, operation: str, dialect: str, path: str, headers: Mapping[str, str], body: bytes
    ) -> Reply:
        """Send the request to the upstream agent, record what comes back, pass it on as it comes."""
        url = self.upstream + (path if path.startswith("/") else "/" + path)
        # the client's end-to-end headers go upstream (its credentials included: the agent may
        # want them); the log keeps them redacted
        fwd = {k: v for k, v in headers.items() if k.lower() not in _NOT_FORWARDED}
        st = self.library.store
        msg = req.params.message if req.params else None
        cap = Capture(self.redactor)
        ex_id = await write_soon(
            st,
            st.begin_exchange,
            cap.request(
                url=url,
                rpc_method=req.method,
                dialect=dialect,
                streaming=operation in STREAMING_OPERATIONS,
                headers=fwd,
                body=body,
                message_id=msg.messageId if msg else None,
                role="proxy",
            ),
        )
        cap.exchange_id = ex_id
        self.library.dirty = True
        # a client of its own per request (no cookie of one request rides along with another's);
        # no CA bundle for a plain-HTTP agent: that cost ~20 ms per forwarded request
        client = httpx.AsyncClient(transport=LazyTlsTransport(), timeout=httpx.Timeout(30.0, read=None))
        try:
            resp = await _send(client, client.build_request("POST", url, content=body, headers=fwd), self.first_byte)
        except httpx.HTTPError as exc:
            await client.aclose()
            why = cap.text(f"upstream {url} unreachable: {exc or type(exc).__name__}")
            outcome: Outcome = "timeout" if isinstance(exc, httpx.TimeoutException) else "error"
            await write_soon(st, st.update_exchange, ex_id, **cap.end(outcome, why))
            return error_reply(rpc.INTERNAL_ERROR, f"a2a-tape: {why}", req.id)
        ctype = resp.headers.get("content-type", "")
        cap.head(resp.status_code, ctype or None, resp.headers.multi_items())

        async def finish(outcome: Outcome, error: str | None = None, **fields: object) -> None:
            await write_soon(st, st.update_exchange, ex_id, **cap.end(outcome, error, **fields))
            self.recorded += 1
            for ep in self.library.refresh():
                ep.used += 1

        if not cap.sse:
            try:
                data = await read_body(resp, "the answer")
            except (httpx.HTTPError, BodyTooLarge) as exc:  # cut off, or without end: named, nothing half-served
                why = cap.text(f"upstream {url}: {exc or type(exc).__name__}")
                await finish("timeout" if isinstance(exc, httpx.TimeoutException) else "error", why)
                return error_reply(rpc.INTERNAL_ERROR, f"a2a-tape: {why}", req.id)
            finally:
                await resp.aclose()
                await client.aclose()
            fields: dict[str, bytes] = {}  # response_body, when the answer is not an event
            failed = resp.status_code >= 400
            if data:
                new, item = cap.answer(data)  # redacted as configured: a JSON answer is an event too
                if new is not None:
                    await write_soon(st, st.append, new)
                    failed = failed or isinstance(item.body, ErrorItem)
                else:
                    fields["response_body"] = cap.response_body(data)
            await finish("error" if failed else "ok", None, **fields)
            return Reply(status=resp.status_code, content_type=ctype or "application/json", body=data)

        async def gen() -> AsyncGenerator[bytes, None]:
            outcome: Outcome = "ok"
            error: str | None = None
            try:
                async for chunk in resp.aiter_bytes():
                    items = cap.feed(chunk)
                    if not items:
                        continue
                    new, _ = cap.events(items)
                    if new:
                        await write_soon(st, st.append_batch, new)  # write-ahead: in the log before the client sees it
                    yield b"".join(it.raw for it in items)  # the exact bytes: id, retry, comments
                items = cap.close()  # a last item cut by the close: kept, marked incomplete
                new, _ = cap.events(items)
                if new:
                    await write_soon(st, st.append_batch, new)
                rest = b"".join(it.raw for it in items) + (cap.parser.tail if cap.parser else b"")
                if rest:
                    yield rest
            except (httpx.HTTPError, SseLineTooLong) as exc:
                outcome = "timeout" if isinstance(exc, httpx.TimeoutException) else "dropped"
                error = f"{type(exc).__name__}: {exc}"
                raise
            finally:
                await resp.aclose()
                await client.aclose()
                await finish(outcome, error)

        return Reply(status=resp.status_code, content_type=ctype, stream=gen(), headers=dict(SSE_HEADERS))
