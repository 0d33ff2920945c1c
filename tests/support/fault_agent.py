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
- ``gzip``: streams with ``Content-Encoding: gzip``, each frame flushed as it is written.
"""

from __future__ import annotations

import asyncio
import threading
import zlib

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response, StreamingResponse

from a2a_tape.recorder.demo_agent import AgentHost, Chunk, HostedTask, Status, encode_event, encode_task, sse_frame

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
