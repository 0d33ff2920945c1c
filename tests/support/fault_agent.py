"""A hand-written fault-injecting A2A agent (v0.3 and v1.0 JSON-RPC), one behaviour per path.

A real a2a-sdk agent cannot be made to cut a stream while its task goes on, stall with only
keep-alive comments, send invalid JSON or non-UTF-8 bytes, or answer with an HTML page on
demand: this agent does, and only that. It builds on :class:`recorder.demo_agent.AgentHost`
(in-memory tasks that outlive their HTTP stream). Mount point ``/{mode}``:

- ``cut``: the first stream dies abruptly after chunk-1 while the task goes on (chunk-2,
  chunk-3, completed); GetTask / resubscribe give the rest;
- ``stall``: WORKING, chunk-0, then only keep-alive comments until cancelled;
- ``ping``: keep-alive comments between every chunk, then completed;
- ``stallonce``: the first task stalls like ``stall``, the next ones complete (``--on-stall resend``);
- ``nostream``: the card says no streaming; message/send returns WORKING, GetTask shows progress;
- ``pollstall``: no streaming, and the task stays WORKING without progress until cancelled;
- ``html``: the card URL serves an HTML page; ``http500``: every POST answers HTTP 500;
- ``json404``: every POST answers HTTP 404 with a JSON body that is no JSON-RPC answer;
- ``nonsse``: a streaming call answers 200 text/plain;
- ``badjson`` / ``nonutf8`` / ``longline``: one bad ``data:`` line among good ones, then completed;
- ``gzip``: streams with ``Content-Encoding: gzip``, each frame flushed as it is written;
- ``openend``: the stream stays open (keep-alive comments) after the task completed;
- ``notrpc``: GetTask answers 200 with JSON that is no JSON-RPC answer.
"""

from __future__ import annotations

import asyncio
import threading
import zlib
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response, StreamingResponse

from a2a_tape.recorder.demo_agent import AgentHost, Chunk, HostedTask, Status, encode_event, encode_task, sse_frame
from a2a_tape.store.observers import REPLAY_MARKER

MODES = (
    "cut",
    "stall",
    "stallonce",
    "ping",
    "nostream",
    "pollstall",
    "html",
    "http500",
    "json404",
    "nonsse",
    "badjson",
    "nonutf8",
    "longline",
    "gzip",
    "openend",
    "notrpc",
)
LONG_LINE = 4096


class FaultHost(AgentHost):
    def __init__(self, mode: str, step: float) -> None:
        self.mode = mode
        self.step = step
        self.streams = 0
        self.cancels = 0
        self.started = 0
        self.stream_started = threading.Event()  # set when a stream begins (tests wait on it)
        self.streamed: set[str] = set()
        super().__init__(self.run_task, name=f"fault-{mode}", streaming=mode not in ("nostream", "pollstall"))

    async def run_task(self, host: AgentHost, task: HostedTask) -> None:
        self.started += 1
        self.emit(task, Status("working"))
        if self.mode in ("stall", "pollstall") or (self.mode == "stallonce" and self.started == 1):
            self.emit(task, Chunk("answer", "chunk-0 "))
            await asyncio.Event().wait()  # never progresses; cancel() ends it
        n = 4
        for i in range(n):
            await asyncio.sleep(self.step)
            self.emit(task, Chunk("answer", f"chunk-{i} ", append=i > 0, last_chunk=i == n - 1))
        self.emit(task, Status("completed"))

    async def card_endpoint(self, request: Request) -> Response:
        if self.mode == "html":
            return HTMLResponse("<!doctype html><html><body><h1>Welcome to nginx!</h1></body></html>")
        return await super().card_endpoint(request)

    async def dispatch(self, op, req, dialect, request):  # type: ignore[override]
        if self.mode == "http500":
            return PlainTextResponse("Internal Server Error", status_code=500)
        if self.mode == "json404":
            return JSONResponse({"detail": "Not Found"}, status_code=404)
        if self.mode == "nonsse" and op == "stream":
            return PlainTextResponse("hello, I am not an event stream")
        if self.mode == "notrpc" and op == "get":
            return JSONResponse({"hello": "this is not a JSON-RPC answer"})
        if op == "cancel":
            self.cancels += 1
        resp = await super().dispatch(op, req, dialect, request)
        if self.mode == "gzip" and isinstance(resp, StreamingResponse):
            resp.body_iterator = _gzipped(resp.body_iterator)
            resp.headers["content-encoding"] = "gzip"
        return resp

    async def stream_frames(self, task, dialect, rpc_id, *, snapshot_first):  # type: ignore[override]
        self.streams += 1
        self.stream_started.set()
        first = task.id not in self.streamed  # each task's first stream gets the fault
        self.streamed.add(task.id)
        q = task.subscribe()
        self.run_job(task)
        sent = 0
        try:
            yield sse_frame(encode_task(task, dialect, rpc_id))
            if task.state in ("completed", "failed", "canceled", "rejected"):
                return
            while True:
                if self.mode in ("stall", "stallonce", "ping"):
                    try:
                        ev = await asyncio.wait_for(q.get(), timeout=self.step / 3)
                    except TimeoutError:
                        yield b": ping - keep-alive\r\n\r\n"
                        continue
                else:
                    ev = await q.get()
                if self.mode == "ping":
                    yield b": ping - before the event\r\n\r\n"
                if isinstance(ev, Chunk) and first and sent == 1:
                    if self.mode == "badjson":
                        yield b'data: {"jsonrpc": "2.0", "result": {not json at all\r\n\r\n'
                    elif self.mode == "nonutf8":
                        yield b"data: \xff\xfe not utf-8 \xc3\x28\r\n\r\n"
                    elif self.mode == "longline":
                        yield b"data: " + b"x" * LONG_LINE + b"\r\n\r\n"
                yield sse_frame(encode_event(ev, task, dialect, rpc_id))
                if isinstance(ev, Chunk):
                    sent += 1
                    if self.mode == "cut" and first and sent == 2:
                        raise ConnectionAbortedError("fault agent: cutting the stream mid-way")
                if isinstance(ev, Status) and ev.state in ("completed", "failed", "canceled", "input-required"):
                    while self.mode == "openend":  # the task settled; the stream does not end
                        await asyncio.sleep(self.step / 3)
                        yield b": ping - still here\r\n\r\n"
                    return
        finally:
            task.unsubscribe(q)


async def _gzipped(frames):
    z = zlib.compressobj(wbits=31)
    async for frame in frames:
        yield z.compress(frame) + z.flush(zlib.Z_SYNC_FLUSH)
    yield z.flush()


def make_fault_app(step: float = 0.1) -> tuple[Starlette, dict[str, FaultHost]]:
    hosts = {m: FaultHost(m, step) for m in MODES}
    routes = []
    for mode, host in hosts.items():
        routes += host.routes(f"/{mode}")
    return Starlette(routes=routes), hosts


# -- proxy faults (tests/recorder/proxy): one route per fault ------------------------------------------
# A real a2a-sdk agent cannot be made to answer a redirect, a non-JSON 405 on demand, a body
# whose gzip is corrupt, an SSE stream with ``id:``/``retry:`` fields and bare LF line endings,
# to go silent before or inside its answer, to set a cookie, nor to tell which headers and URL reached it: these
# routes do, and only that. ``make_proxy_fault_app()`` serves them (no task, no card logic).

PROXY_SSE_BYTES = (
    b": hello from the fault agent\n"
    b"id: 7\nretry: 1500\n"
    b'data: {"jsonrpc":"2.0","id":1,"result":{"kind":"status-update","taskId":"t-sse","contextId":"c",'
    b'"status":{"state":"working"},"final":false}}\n\n'
    b"event: message\r\n"
    b'data: {"jsonrpc":"2.0","id":1,\r\ndata: "result":{"kind":"status-update","taskId":"t-sse","contextId":"c",'
    b'"status":{"state":"completed"},"final":true}}\r\n\r\n'
)


def make_proxy_fault_app() -> Starlette:
    from starlette.routing import Route

    seen: list[dict] = []

    async def echo(request: Request) -> Response:
        """What reached the upstream: every header pair (repeats kept) and the raw path and query."""
        seen.append(
            {
                "headers": [[k.decode("latin-1"), v.decode("latin-1")] for k, v in request.scope["headers"]],
                "raw_path": request.scope.get("raw_path", b"").decode("latin-1"),
                "query": request.scope.get("query_string", b"").decode("latin-1"),
            }
        )
        return JSONResponse(seen[-1])

    async def set_cookie(request: Request) -> Response:
        """What a load balancer's stickiness or an agent's login does: a cookie for this client."""
        return JSONResponse(
            {"cookie": request.headers.get("cookie")},
            headers={"set-cookie": "session=for-the-first-client; Path=/"},
        )

    async def redirect(request: Request) -> Response:
        base = f"{request.url.scheme}://{request.url.netloc}"
        return Response(status_code=301, headers={"location": base + "/moved/here?x=1", "x-fault": "redirect"})

    async def redirect_relative(request: Request) -> Response:
        return Response(status_code=302, headers={"location": "/moved/relative"})

    async def plain405(request: Request) -> Response:
        return PlainTextResponse("Method Not Allowed", status_code=405, headers={"allow": "POST"})

    async def card_headers(request: Request) -> Response:
        return JSONResponse(
            {"name": "fault-card", "capabilities": {}},
            headers={"etag": 'W/"card-1"', "vary": "A2A-Version", "cache-control": "public, max-age=60"},
        )

    async def gzip_json(request: Request) -> Response:
        return Response(
            b"\x1f\x8b\x08\x00garbage, not deflate", media_type="application/json", headers={"content-encoding": "gzip"}
        )

    async def gzip_sse(request: Request) -> Response:
        async def frames():
            z = zlib.compressobj(wbits=31)
            yield z.compress(PROXY_SSE_BYTES[:60]) + z.flush(zlib.Z_SYNC_FLUSH)
            yield b"\x00\xffcorrupt deflate data here\x00\x00\xff" * 4

        return StreamingResponse(frames(), media_type="text/event-stream", headers={"content-encoding": "gzip"})

    async def sse_fields(request: Request) -> Response:
        async def frames():
            yield PROXY_SSE_BYTES[:40]  # split mid-line: the relay must not reframe
            yield PROXY_SSE_BYTES[40:]

        return StreamingResponse(frames(), media_type="text/event-stream", headers={"x-fault": "sse-fields"})

    async def silent(request: Request) -> Response:
        await asyncio.Event().wait()  # accepts the request, never answers
        raise AssertionError("unreachable")

    async def stall_body(request: Request) -> Response:
        async def frames():
            yield PROXY_SSE_BYTES[: PROXY_SSE_BYTES.index(b"\n\n") + 2]
            await asyncio.Event().wait()  # then silence, not even a keep-alive

        return StreamingResponse(frames(), media_type="text/event-stream")

    async def cut_sse(request: Request) -> Response:
        async def frames():
            yield PROXY_SSE_BYTES[: PROXY_SSE_BYTES.index(b"\n\n") + 2]
            raise ConnectionAbortedError("fault agent: cutting the stream")

        return StreamingResponse(frames(), media_type="text/event-stream")

    any_method = ["GET", "POST", "PUT", "DELETE"]
    app = Starlette(
        routes=[
            Route("/echo/{rest:path}", echo, methods=any_method),
            Route("/setcookie/", set_cookie, methods=any_method),
            Route("/redirect/", redirect, methods=any_method),
            Route("/redirect-rel/", redirect_relative, methods=any_method),
            Route("/plain405/", plain405, methods=any_method),
            Route("/cardheaders/.well-known/agent-card.json", card_headers),
            Route("/gzipjson/", gzip_json, methods=["POST"]),
            Route("/gzipsse/", gzip_sse, methods=["POST"]),
            Route("/ssefields/", sse_fields, methods=["POST"]),
            Route("/silent/", silent, methods=["POST"]),
            Route("/stallbody/", stall_body, methods=["POST"]),
            Route("/cutsse/", cut_sse, methods=["POST"]),
        ]
    )
    app.state.seen = seen
    return app


# -- byte-level faults: a scripted agent ---------------------------------------------------------
#
# What no real agent can be made to send on demand, byte for byte: a UTF-8 BOM before the first
# item, CR-only line ends, multi-line data, ``id:``/``retry:`` fields and comments, a last item
# cut by the close, invalid UTF-8, one item of another task, secrets in payloads and headers,
# silence after accepting the connection, 301 redirects, a corrupt gzip body. Every streaming
# call of a mode answers the same script (a fixed JSON-RPC id, task ``t-1``); unary calls
# (GetTask, message/send, CancelTask) answer the task COMPLETED. ``RawFaultAgent.sent(mode)``
# is the exact stream bytes, ``items(mode)`` the payloads a faithful recorder keeps.

RAW_ID = "f-1"
# credential headers known by their shape only (no configuration names them), both ways
SHAPED_HEADERS = {
    "ocp-apim-subscription-key": "SEKRET-SHAPE-KEY",
    "private-token": "SEKRET-SHAPE-TOKEN",
    "authentication": "Bearer SEKRET-SHAPE-BEARER",
    "x-forwarded-credential": "Token SEKRET-SHAPE-VALUE",
}
SECRETS = (
    "SEKRET-EVENT",
    "SEKRET-BYTES",
    "SEKRET-ANSWER",
    "SEKRET-HEADER",
    "SEKRET-REQ",
    "SEKRET-PW",
    "SEKRET-QUERY",
    "SEKRET-SHAPE",
)
SECRET_CONFIG = """[tool.a2a-tape]
redact_headers = ["x-agent-secret"]
redact_json_paths = [
    "result.metadata.token",
    "params.message.metadata.token",
    "message.metadata.token",
    "result.statusUpdate.metadata.token",  # a v1.0 answer (the gRPC paths' secret mode)
]
"""


def _rpc(result: str) -> bytes:
    return ('{"jsonrpc":"2.0","id":"' + RAW_ID + '","result":' + result + "}").encode()


TASK = _rpc('{"kind":"task","id":"t-1","contextId":"c-1","status":{"state":"working"}}')
ART = _rpc(
    '{"kind":"artifact-update","taskId":"t-1","contextId":"c-1",'
    '"artifact":{"artifactId":"a-1","parts":[{"kind":"text","text":"hello"}]}}'
)
DONE = _rpc('{"kind":"status-update","taskId":"t-1","contextId":"c-1","status":{"state":"completed"},"final":true}')
FOREIGN = _rpc('{"kind":"status-update","taskId":"t-other","contextId":"c-9","status":{"state":"working"}}')
NONUTF8 = _rpc(
    '{"kind":"artifact-update","taskId":"t-1","contextId":"c-1","artifact":{"artifactId":"a-2","parts":[{"kind":"text","text":"\xff\xfe"}]}}'.replace(
        "\xff\xfe", "@@"
    )
).replace(b"@@", b"\xff\xfe")
SECRET_EVENT = _rpc(
    '{"kind":"status-update","taskId":"t-1","contextId":"c-1","status":{"state":"working"},'
    '"metadata":{"token":"SEKRET-EVENT"}}'
)
SECRET_BYTES = b'{"jsonrpc":"2.0","id":"f-1","result":{"metadata":{"token":"SEKRET-BYTES"}},"junk":"\xff"}'
ANSWER = _rpc(
    '{"kind":"task","id":"t-1","contextId":"c-1","status":{"state":"completed"},'
    '"artifacts":[{"artifactId":"a-1","parts":[{"kind":"text","text":"hello"}]}],'
    '"metadata":{"token":"SEKRET-ANSWER"}}'
)
HUGE = _rpc('{"kind":"other","pad":"' + "x" * 200_000 + '"}')
DEPTH = 5000  # past the interpreter's recursion limit: msgspec raised RecursionError on it
DEEP = _rpc(
    '{"kind":"status-update","taskId":"t-1","contextId":"c-1","status":{"state":"working"},"final":false,'
    '"metadata":{"deep":' + "[" * DEPTH + "]" * DEPTH + "}}"
)


def _f(data: bytes, eol: bytes = b"\n") -> bytes:
    return b"data: " + data + eol + eol


RAW_STREAMS: dict[str, list[bytes]] = {
    "plain": [_f(TASK), _f(ART), _f(DONE)],
    "bom": [b"\xef\xbb\xbf" + _f(TASK), _f(ART), _f(DONE)],
    "cr": [_f(TASK, b"\r"), _f(ART, b"\r"), _f(DONE, b"\r")],
    "crlf": [_f(TASK, b"\r\n"), _f(ART, b"\r\n") + _f(DONE, b"\r\n")],
    "multiline": [_f(TASK), b"data: " + ART[:20] + b"\ndata: " + ART[20:] + b"\n\n", _f(DONE)],
    "fields": [
        b"id: 1\nretry: 500\n" + _f(TASK),
        b": a comment the client must see\n\n",
        b"id: 2\nevent: message\n" + _f(ART),
        _f(DONE),
    ],
    "nofinal": [_f(TASK), _f(ART), b"data: " + DONE],  # the close cuts the last item
    "nonutf8": [_f(TASK), _f(NONUTF8), _f(DONE)],
    "foreign": [_f(TASK), _f(ART), _f(FOREIGN), _f(DONE)],
    "secret": [_f(TASK), _f(SECRET_EVENT), _f(SECRET_BYTES), _f(ART), _f(DONE)],
    "huge": [_f(TASK), _f(HUGE), _f(DONE)],
    "deep": [_f(TASK), _f(DEEP), _f(ART), _f(DONE)],
}
RAW_EXTRA = ("silent", "silentcard", "redirect", "badgzip", "endless", "endlesscard", "endlessanswer", "marked")
"""``marked``: ``plain``, each answer (the card too) carrying serve's replay marker, as a replay's does."""
ENDLESS_LINE = b"data: " + b"x" * 65530 + b"\n"  # a line within any limit, and never the blank line ending its event


async def _endless(head: bytes) -> AsyncIterator[bytes]:
    """``head``, then bytes without end (a broken agent's body: a real one cannot be made to send it)."""
    yield head
    while True:
        yield ENDLESS_LINE
        await asyncio.sleep(0)


def raw_items(mode: str) -> list[bytes]:
    """The payloads of a mode's stream a faithful reader keeps (written out, not parsed)."""
    special = {
        "multiline": [TASK, ART[:20] + b"\n" + ART[20:], DONE],
        "nonutf8": [TASK, NONUTF8, DONE],
        "foreign": [TASK, ART, FOREIGN, DONE],
        "secret": [TASK, SECRET_EVENT, SECRET_BYTES, ART, DONE],
        "huge": [TASK, HUGE, DONE],
        "deep": [TASK, DEEP, ART, DONE],
    }
    return special.get(mode, [TASK, ART, DONE])


class RawFaultAgent:
    """The scripted agent: ``/{mode}/`` for each mode of :data:`RAW_STREAMS` and :data:`RAW_EXTRA`."""

    def __init__(self) -> None:
        self.hold = asyncio.Event()  # never set: ``silent`` modes wait on it
        self.requests: list[tuple[str, bytes]] = []  # (mode, request body) as received

    def sent(self, mode: str) -> bytes:
        return b"".join(RAW_STREAMS[mode])

    def app(self) -> Starlette:
        """Each mode at ``/{mode}/`` (JSON-RPC) and at ``/{mode}/rest`` (HTTP+JSON: :meth:`rest_routes`)."""
        from starlette.routing import Route

        routes = []
        for mode in (*RAW_STREAMS, *RAW_EXTRA):
            routes.append(Route(f"/{mode}/.well-known/agent-card.json", self._card(mode), methods=["GET"]))
            routes.append(Route(f"/{mode}/", self._rpc(mode), methods=["POST"]))
            routes.append(Route(f"/{mode}", self._rpc(mode), methods=["POST"]))
            routes += self.rest_routes(mode, f"/{mode}/rest")
        return Starlette(routes=routes)

    def root_app(self, mode: str) -> Starlette:
        """One mode served at the root (for a proxy, which forwards to its upstream's origin), in
        both bindings (HTTP+JSON routes beside the JSON-RPC ``POST /``)."""
        from starlette.routing import Route

        return Starlette(
            routes=[
                Route("/.well-known/agent-card.json", self._card(mode), methods=["GET"]),
                Route("/", self._rpc(mode), methods=["POST"]),
                *self.rest_routes(mode, "", card=False),
            ]
        )

    def rest_routes(self, mode: str, prefix: str, *, card: bool = True) -> list:
        """The mode as an HTTP+JSON agent under ``prefix`` (a card listing only that interface, 1.0):
        the same script and answers as its JSON-RPC side (the capture core is binding-free: what is
        checked is bytes), a stream for ``message:stream`` and ``:subscribe``, the answer otherwise."""
        from starlette.routing import Route

        rpc = self._rpc(mode, streaming=lambda request, body: request.url.path.endswith((":stream", ":subscribe")))
        routes = [
            Route(prefix + "/message:stream", rpc, methods=["POST"]),
            Route(prefix + "/message:send", rpc, methods=["POST"]),
            Route(prefix + "/tasks/{tid}:subscribe", rpc, methods=["GET", "POST"]),
            Route(prefix + "/tasks/{tid}:cancel", rpc, methods=["POST"]),
            Route(prefix + "/tasks/{tid}", rpc, methods=["GET"]),
        ]
        if card:
            routes.append(Route(prefix + "/.well-known/agent-card.json", self._card(mode, rest=True), methods=["GET"]))
        return routes

    def _card(self, mode: str, *, rest: bool = False):
        async def card(request: Request) -> Response:
            if mode == "silentcard":
                await self.hold.wait()
            if mode == "endlesscard":  # a JSON object that never closes
                return StreamingResponse(_endless(b'{"name":"raw-endless","pad":"'), media_type="application/json")
            if mode == "redirect":
                return Response(status_code=301, headers={"location": "http://127.0.0.1:9/moved/"})
            base = str(request.base_url).rstrip("/")
            at_root = request.url.path == "/.well-known/agent-card.json"
            if rest:
                url = f"{base}/{mode}/rest"
                interface = {"url": url, "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"}
                return JSONResponse(
                    {"name": f"raw-{mode}", "supportedInterfaces": [interface], "capabilities": {"streaming": True}},
                    headers={REPLAY_MARKER: "1"} if mode == "marked" else None,
                )
            return JSONResponse(
                {
                    "name": f"raw-{mode}",
                    "url": f"{base}/" if at_root else f"{base}/{mode}/",
                    "protocolVersion": "0.3.0",
                    "capabilities": {"streaming": True},
                },
                headers={REPLAY_MARKER: "1"} if mode == "marked" else None,
            )

        return card

    def _rpc(self, mode: str, streaming=None):
        """``streaming(request, body)``: whether the call is a stream (default: a JSON-RPC streaming method)."""

        async def rpc(request: Request) -> Response:
            body = await request.body()
            self.requests.append((mode, body))
            if mode == "silent":
                await self.hold.wait()
            if mode == "redirect":
                return Response(status_code=301, headers={"location": "http://127.0.0.1:9/moved/"})
            headers = {"x-agent-secret": "SEKRET-HEADER", **SHAPED_HEADERS} if mode == "secret" else {}
            if mode == "marked":
                headers = {REPLAY_MARKER: "1"}
            if mode == "endlessanswer":  # a JSON answer that never closes, to a stream request too
                return StreamingResponse(
                    _endless(b'{"jsonrpc":"2.0","id":1,"result":{"pad":"'), media_type="application/json"
                )
            streams = (
                streaming(request, body)
                if streaming is not None
                else b'"message/stream"' in body or b'"tasks/resubscribe"' in body
            )
            if not streams:
                return Response(
                    ANSWER if mode == "secret" else ANSWER.replace(b"SEKRET-ANSWER", b"none"),
                    media_type="application/json",
                    headers=headers,
                )
            if mode == "badgzip":
                return Response(
                    b"\x1f\x8b\x08\x00garbage, not a gzip stream" * 4,
                    media_type="text/event-stream",
                    headers={"content-encoding": "gzip"},
                )
            if mode == "endless":  # the task, then an event that never ends
                return StreamingResponse(_endless(_f(TASK)), media_type="text/event-stream")
            chunks = RAW_STREAMS.get(mode, RAW_STREAMS["plain"])

            async def script():
                for c in chunks:
                    yield c
                    await asyncio.sleep(0)

            return StreamingResponse(script(), media_type="text/event-stream", headers=headers)

        return rpc
