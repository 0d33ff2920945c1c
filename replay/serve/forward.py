"""The recording modes' way upstream: a request the recordings do not answer goes to the live
agent, and what comes back is recorded (write-ahead, exact bytes) as it is passed on.

A :class:`capture.upstream_call.UpstreamCall`, as every call of ours to an agent: the request row
redacted (headers, URL secrets, configured JSON paths), SSE items per the HTML standard (a BOM, CR
line ends, ``id``/``retry``/comments, a cut last item kept and marked incomplete), every payload
redacted as configured (``[tool.a2a-tape]`` and ``--redact``), one outcome word. What differs
from ``record`` is where the items go: to the client, as the stream's exact bytes (each item's
``raw``), once they are in the log. The client's end-to-end headers go upstream, its credentials
included (the agent may want them); the log keeps them redacted. The answer is the agent's,
whatever it is (a redirect, an error page): this path is transparent.

Timeouts: connect and write 30 s, the response head within 30 s of the request (an agent that
accepts and says nothing does not hang the client), no read timeout on a stream (an agent may
think for long; its keep-alives are passed on).

The writes go through the store's shared :class:`store.writer.GroupCommitWriter`: they never make
the server's event loop wait for the log's lock; a request being recorded while another process
holds the log waits alone, and replayed answers go on.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping

import httpx

from a2a_tape.capture.exchange import Capture, Outcome
from a2a_tape.capture.hooks import HookError, NotRecorded, RecordHooks
from a2a_tape.capture.upstream_call import FAULTS, HttpSource, UpstreamCall
from a2a_tape.replay.serve import rpc
from a2a_tape.replay.serve.faults import FAULT_HEADER
from a2a_tape.replay.serve.library import Library
from a2a_tape.replay.serve.reply import SSE_HEADERS, Reply, error_reply
from a2a_tape.replay.serve.target import Target
from a2a_tape.store.events import ErrorItem
from a2a_tape.store.headers import HOP_BY_HOP, media_type_of
from a2a_tape.store.methods import HTTP_JSON, JSONRPC, STREAMING_OPERATIONS
from a2a_tape.store.observers import new_observer
from a2a_tape.store.redact import Redactor, build_redactor
from a2a_tape.store.writer import writer_of
from a2a_tape.wire import http_json
from a2a_tape.wire.http_client import LazyTlsTransport, Timeouts

FIRST_BYTE = 30.0
_NOT_FORWARDED = HOP_BY_HOP | frozenset(
    {"host", "content-length", "proxy-authorization", "accept-encoding", FAULT_HEADER.lower()}
)  # hop-by-hop headers, what httpx sets itself, and our own fault header


class Forwarder:
    """Forwards to ``upstream`` and records into ``library``'s store; counts what it recorded.
    ``redactor``: the run's (default: ``[tool.a2a-tape]`` of the current directory)."""

    def __init__(
        self, library: Library, upstream: str, redactor: Redactor | None = None, hooks: RecordHooks | None = None
    ) -> None:
        self.library = library
        self.hooks = hooks  # a user's before-record hooks (capture/hooks.py): the pytest plugin's, ReplayTransport's
        self.hook_errors: list[str] = []  # one line per hook that raised (the plugin fails the test with it)
        self.upstream = upstream.rstrip("/")
        self.redactor = redactor or build_redactor()
        self.recorded = 0  # exchanges recorded from upstream
        self.observer = new_observer("proxy")  # this session's recordings are one run of each task
        self.first_byte = FIRST_BYTE

    async def forward(
        self, req: rpc.RpcRequest, operation: str, dialect: str, target: Target, headers: Mapping[str, str], body: bytes
    ) -> Reply:
        """Send the request to the upstream agent as the client sent it (its method, path, query and
        body), record what comes back, pass it on as it comes."""
        url = target.url(self.upstream)
        binding = HTTP_JSON if http_json.is_route(target.method, target.path) else JSONRPC
        # the client's end-to-end headers go upstream (its credentials included: the agent may
        # want them); the log keeps them redacted
        fwd = {k: v for k, v in headers.items() if k.lower() not in _NOT_FORWARDED}
        st = self.library.store
        # a client of its own per request (no cookie of one request rides along with another's);
        # no CA bundle for a plain-HTTP agent: that cost ~20 ms per forwarded request
        client = httpx.AsyncClient(transport=LazyTlsTransport())
        timeouts = Timeouts(connect=30.0, first_byte=self.first_byte, read=None, write=30.0)
        source = HttpSource(
            client, client.build_request(target.method, url, content=body or None, headers=fwd), timeouts
        )
        call = UpstreamCall(
            st,
            writer_of(st),
            Capture(self.redactor, hooks=self.hooks),
            source,
            url=url,
            what=req.method or "the request",
        )
        msg = req.params.message if req.params else None
        try:
            exchange = call.capture.request(
                url=url,
                rpc_method=req.method,
                dialect=dialect,
                streaming=operation in STREAMING_OPERATIONS,
                headers=fwd,
                body=body,
                http_method=target.method,
                message_id=msg.messageId if msg else None,
                role="proxy",
                binding=binding,
            )
        except NotRecorded:  # before_record_request said None: to the agent and back, unrecorded
            return await _unrecorded(source, client)
        except HookError as exc:  # nothing went upstream, nothing was written
            await client.aclose()
            return self._hook_failed(exc, req.id)
        await call.begin(exchange, self.observer)
        self.library.dirty = True
        try:
            await call.send()  # transparent: the answer goes on whatever the binding calls it
        except FAULTS as exc:
            await client.aclose()
            why = call.capture.text(f"upstream {url} unreachable: {exc or type(exc).__name__}")
            await call.end("timeout" if isinstance(exc, httpx.TimeoutException) else "error", why)
            return error_reply(rpc.INTERNAL_ERROR, f"a2a-tape: {why}", req.id)
        if call.capture.sse:
            return self._stream(call, client)
        return await self._whole(call, client, url, req.id)

    async def _finish(self, call: UpstreamCall, outcome: Outcome, error: str | None = None, **fields: object) -> None:
        await call.end(outcome, error, **fields)
        self.recorded += 1
        for ep in self.library.refresh():
            ep.used += 1

    def _hook_failed(self, exc: HookError, rpc_id: object) -> Reply:
        """A user's hook raised: one line, for the client and for the test (the plugin fails it)."""
        self.hook_errors.append(f"a2a-tape: {exc}")
        return error_reply(rpc.INTERNAL_ERROR, f"a2a-tape: {exc}", rpc_id)

    async def _whole(self, call: UpstreamCall, client: httpx.AsyncClient, url: str, rpc_id: object) -> Reply:
        """An answer that is not a stream: recorded (an event when it is one), then passed on whole."""
        head = call.head
        assert head is not None
        try:
            item, data, logged = await call.answer()
        except FAULTS as exc:  # cut off, or without end: named, nothing half-served
            why = call.capture.text(f"upstream {url}: {exc or type(exc).__name__}")
            await self._finish(call, "timeout" if isinstance(exc, httpx.TimeoutException) else "error", why)
            return error_reply(rpc.INTERNAL_ERROR, f"a2a-tape: {why}", rpc_id)
        finally:
            await call.source.aclose()
            await client.aclose()
        hook_error = call.capture.hook_error
        if hook_error is not None:
            await self._finish(call, "error", f"{hook_error}: the answer is not recorded")
            return self._hook_failed(hook_error, rpc_id)
        failed = head.status >= 400 or (logged and isinstance(item.body, ErrorItem))
        fields = {} if logged or not data else {"response_body": call.capture.response_body(data)}
        await self._finish(call, "error" if failed else "ok", None, **fields)
        return Reply(
            status=head.status, content_type=head.content_type or "application/json", body=data, forwarded=True
        )

    def _stream(self, call: UpstreamCall, client: httpx.AsyncClient) -> Reply:
        """A stream: each chunk's items in the log, then its exact bytes to the client."""

        async def gen() -> AsyncGenerator[bytes, None]:
            outcome: Outcome = "ok"
            error: str | None = None
            try:
                async for data in call.relay():
                    yield data
            except FAULTS as exc:
                outcome = "timeout" if isinstance(exc, httpx.TimeoutException) else "dropped"
                error = f"{type(exc).__name__}: {exc}"
                raise
            except HookError as exc:  # what the hook passed is in the log; the client is told
                outcome, error = "error", f"{exc}: not recorded from here on"
                self.hook_errors.append(f"a2a-tape: {exc}")
                raise
            finally:
                await call.source.aclose()
                await client.aclose()
                await self._finish(call, outcome, error)

        head = call.head
        assert head is not None
        return Reply(
            status=head.status,
            content_type=head.content_type or "",
            stream=gen(),
            headers=dict(SSE_HEADERS),
            forwarded=True,
        )


async def _unrecorded(source: HttpSource, client: httpx.AsyncClient) -> Reply:
    """A request ``before_record_request`` dropped: sent as the client sent it, its answer passed
    on as the agent gave it, nothing recorded."""
    try:
        head = await source.send()
    except FAULTS as exc:
        await client.aclose()
        return error_reply(rpc.INTERNAL_ERROR, f"a2a-tape: upstream unreachable: {exc or type(exc).__name__}", None)
    ctype = head.content_type or ""
    if media_type_of(ctype) != "text/event-stream":
        try:
            data = await source.body("the answer")
        finally:
            await source.aclose()
            await client.aclose()
        return Reply(status=head.status, content_type=ctype or "application/json", body=data, forwarded=True)

    async def gen() -> AsyncGenerator[bytes, None]:
        try:
            async for data in source.chunks():
                yield data
        finally:
            await source.aclose()
            await client.aclose()

    return Reply(status=head.status, content_type=ctype, stream=gen(), headers=dict(SSE_HEADERS), forwarded=True)
