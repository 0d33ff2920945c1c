"""A small A2A agent of our own (starlette, no a2a-sdk at runtime), for ``a2a-tape demo``.

It speaks both JSON-RPC dialects on ``/`` (v1.0 when the request carries ``A2A-Version: 1.0``),
serves its card at ``/.well-known/agent-card.json``, keeps tasks in memory, and streams an
answer in the opencode *channels* contract of docs/design.md section 4: reasoning, one tool call and
a final answer, every chunk with ``metadata.opencode.message_id``, then a ``final_snapshot``
of the whole answer (sent with ``append: true``, the trap a correct projection must handle).

:class:`AgentHost` is the reusable part: tasks run as background jobs that outlive the HTTP
stream (a dropped client does not stop the work), ``tasks/get`` / ``tasks/resubscribe`` /
``tasks/cancel`` see them. The test fault agent builds on it.

A send that carries a push config (v1.0 ``configuration.taskPushNotificationConfig``, v0.3
``pushNotificationConfig``) gets its task's updates POSTed to that webhook too, in order, with the
config's token in ``X-A2A-Notification-Token``: the task as created, then each update as a
``StreamResponse`` (the send's dialect), until the task settles. Config calls are not served.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import httpx
import msgspec
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from a2a_tape.store.a2a_structs import (
    Metadata,
    OpencodeMeta,
    WireArtifact,
    WireArtifactUpdate,
    WireError,
    WireMessage,
    WirePart,
    WireResult,
    WireStatus,
    WireStatusUpdate,
    WireTask,
)
from a2a_tape.store.decode import state_in
from a2a_tape.store.events import SETTLED_STATES, TERMINAL_STATES
from a2a_tape.store.json_values import Decoder
from a2a_tape.store.methods import CARD_PATH, METHODS
from a2a_tape.wire.loopback import LOOPBACK_ONLY, Guard, LoopbackGuard

TERMINAL = TERMINAL_STATES


# -- requests we read ----------------------------------------------------------------------


class _InPart(msgspec.Struct):
    text: str | None = None


class _InMessage(msgspec.Struct):
    messageId: str | None = None
    contextId: str | None = None
    taskId: str | None = None
    parts: list[_InPart] = []


class _InPush(msgspec.Struct, frozen=True):
    url: str = ""
    token: str | None = None


class _InConfiguration(msgspec.Struct, frozen=True):
    taskPushNotificationConfig: _InPush | None = None  # v1.0
    pushNotificationConfig: _InPush | None = None  # v0.3


class _InParams(msgspec.Struct, frozen=True):
    message: _InMessage | None = None
    id: str | None = None
    configuration: _InConfiguration | None = None


class _InRequest(msgspec.Struct):
    method: str = ""
    id: str | int | None = None
    params: _InParams = _InParams()


_request_decoder = Decoder(_InRequest)


# -- responses we write ---------------------------------------------------------------------


RpcId = str | int | None


class _Frame(msgspec.Struct, omit_defaults=True):
    jsonrpc: str = "2.0"
    id: RpcId = None
    result: WireResult | None = None
    error: WireError | None = None


_encoder = msgspec.json.Encoder()


def _state_on_wire(state: str, dialect: str) -> str:
    return state_in(state, dialect)


def _part(text: str, dialect: str) -> WirePart:
    return WirePart(text=text) if dialect == "1.0" else WirePart(kind="text", text=text)


def _message(text: str, role: str, dialect: str, task: HostedTask, message_id: str | None = None) -> WireMessage:
    return WireMessage(
        messageId=message_id or str(uuid.uuid4()),
        role=("ROLE_" + role.upper()) if dialect == "1.0" else role,
        parts=[_part(text, dialect)],
        contextId=task.context_id,
        taskId=task.id,
        kind=None if dialect == "1.0" else "message",
    )


@dataclass
class Chunk:
    """One artifact update as the agent means it (dialect-free)."""

    artifact_id: str
    text: str
    append: bool = False
    last_chunk: bool = False
    name: str | None = None
    meta: OpencodeMeta | None = None


@dataclass
class Status:
    state: str
    text: str | None = None


Event = Chunk | Status


@dataclass
class Webhook:
    """Where a task's pushes go: the config of its send, in its dialect; the bodies still to POST."""

    url: str
    token: str | None
    dialect: str
    outbox: asyncio.Queue[bytes | None] = field(default_factory=asyncio.Queue)  # None: no more
    sender: asyncio.Task[None] | None = None


@dataclass
class HostedTask:
    id: str
    context_id: str
    user_text: str
    user_message_id: str
    state: str = "submitted"
    status_text: str | None = None
    artifacts: dict[str, Chunk] = field(default_factory=dict)
    subscribers: list[asyncio.Queue[Event]] = field(default_factory=list)
    job: asyncio.Task[None] | None = None
    webhook: Webhook | None = None  # the push config its send carried

    def apply(self, ev: Event) -> None:
        if isinstance(ev, Status):
            self.state = ev.state
            self.status_text = ev.text
            return
        held = self.artifacts.get(ev.artifact_id)
        if held is None or not ev.append or (ev.meta is not None and ev.meta.source == "final_snapshot"):
            self.artifacts[ev.artifact_id] = Chunk(ev.artifact_id, ev.text, False, ev.last_chunk, ev.name, ev.meta)
        else:
            held.text += ev.text
            held.last_chunk = ev.last_chunk

    def subscribe(self) -> asyncio.Queue[Event]:
        q: asyncio.Queue[Event] = asyncio.Queue()
        self.subscribers.append(q)
        return q

    def unsubscribe(self, q: asyncio.Queue[Event]) -> None:
        if q in self.subscribers:
            self.subscribers.remove(q)


def encode_event(ev: Event, task: HostedTask, dialect: str, rpc_id: RpcId) -> bytes:
    return _encoder.encode(_Frame(id=rpc_id, result=event_result(ev, task, dialect)))


def event_result(ev: Event, task: HostedTask, dialect: str) -> WireResult:
    """One update as the ``result`` of a stream's frame (and a push's body)."""
    if isinstance(ev, Status):
        msg = _message(ev.text, "agent", dialect, task) if ev.text else None
        status = WireStatus(state=_state_on_wire(ev.state, dialect), message=msg)
        if dialect == "1.0":
            result = WireResult(statusUpdate=WireStatusUpdate(taskId=task.id, contextId=task.context_id, status=status))
        else:
            result = WireResult(
                kind="status-update",
                taskId=task.id,
                contextId=task.context_id,
                status=status,
                final=ev.state in TERMINAL,
            )
    else:
        art = WireArtifact(
            artifactId=ev.artifact_id,
            name=ev.name,
            parts=[_part(ev.text, dialect)],
            metadata=Metadata(opencode=ev.meta) if ev.meta is not None else None,
        )
        if dialect == "1.0":
            result = WireResult(
                artifactUpdate=WireArtifactUpdate(
                    taskId=task.id,
                    contextId=task.context_id,
                    artifact=art,
                    append=True if ev.append else None,
                    lastChunk=True if ev.last_chunk else None,
                )
            )
        else:
            result = WireResult(
                kind="artifact-update",
                taskId=task.id,
                contextId=task.context_id,
                artifact=art,
                append=ev.append,
                lastChunk=ev.last_chunk,
            )
    return result


def encode_task(task: HostedTask, dialect: str, rpc_id: RpcId) -> bytes:
    return _encoder.encode(_Frame(id=rpc_id, result=task_result(task, dialect)))


def task_result(task: HostedTask, dialect: str) -> WireResult:
    """The task as a ``result`` (and a push's body): v1.0 wraps it in ``task``, v0.3 is the bare object."""
    arts = [
        WireArtifact(
            artifactId=a.artifact_id,
            name=a.name,
            parts=[_part(a.text, dialect)],
            metadata=Metadata(opencode=a.meta) if a.meta is not None else None,
        )
        for a in task.artifacts.values()
    ]
    status_msg = _message(task.status_text, "agent", dialect, task) if task.status_text else None
    wt = WireTask(
        id=task.id,
        contextId=task.context_id,
        status=WireStatus(state=_state_on_wire(task.state, dialect), message=status_msg),
        artifacts=arts,
        history=[_message(task.user_text, "user", dialect, task, task.user_message_id)],
        kind=None if dialect == "1.0" else "task",
    )
    if dialect == "1.0":
        return WireResult(task=wt)
    # v0.3: a bare Task object with kind
    return WireResult(
        kind="task", id=wt.id, contextId=wt.contextId, status=wt.status, artifacts=wt.artifacts, history=wt.history
    )


def encode_error(code: int, message: str, rpc_id: RpcId) -> bytes:
    return _encoder.encode(_Frame(id=rpc_id, error=WireError(code=code, message=message)))


def sse_frame(payload: bytes, event: str | None = None) -> bytes:
    head = f"event: {event}\r\n".encode() if event else b""
    return head + b"data: " + payload + b"\r\n\r\n"


Script = Callable[["AgentHost", HostedTask], Awaitable[None]]


class InterfaceOut(msgspec.Struct):
    url: str
    protocolVersion: str
    protocolBinding: str = "JSONRPC"


class CapabilitiesOut(msgspec.Struct):
    streaming: bool
    pushNotifications: bool = True


class CardOut(msgspec.Struct):
    """The agent card we serve (the fields a v0.3 or v1.0 client looks for)."""

    name: str
    description: str
    url: str
    supportedInterfaces: list[InterfaceOut]
    capabilities: CapabilitiesOut
    version: str = "1.0.0"
    protocolVersion: str = "0.3"
    preferredTransport: str = "JSONRPC"
    defaultInputModes: list[str] = msgspec.field(default_factory=lambda: ["text"])
    defaultOutputModes: list[str] = msgspec.field(default_factory=lambda: ["text"])
    skills: list[str] = msgspec.field(default_factory=list)


class AgentHost:
    """The JSON-RPC plumbing of a small in-memory A2A agent; ``script`` decides what a task does."""

    def __init__(
        self, script: Script, *, name: str = "a2a-tape demo agent", streaming: bool = True, description: str = ""
    ) -> None:
        self.script = script
        self.name = name
        self.streaming = streaming
        self.description = description
        self.tasks: dict[str, HostedTask] = {}
        self.base_url = ""
        self._http: httpx.AsyncClient | None = None  # the pushes' client, made on the first one

    def routes(self, prefix: str = "") -> list[Route]:
        return [
            Route(prefix + CARD_PATH, self.card_endpoint, methods=["GET"]),
            Route(prefix + "/", self.rpc_endpoint, methods=["POST"]),
        ]

    def app(self) -> Starlette:
        return Starlette(routes=self.routes())

    # -- card --------------------------------------------------------------------------------

    def card(self, request: Request) -> CardOut:
        url = str(request.url).split("/.well-known/")[0] + "/"
        return CardOut(
            name=self.name,
            description=self.description or "streams reasoning, a tool call and a final answer",
            url=url,
            supportedInterfaces=[InterfaceOut(url=url, protocolVersion=v) for v in ("1.0", "0.3")],
            capabilities=CapabilitiesOut(streaming=self.streaming),
        )

    async def card_endpoint(self, request: Request) -> Response:
        return Response(_encoder.encode(self.card(request)), media_type="application/json")

    # -- JSON-RPC ----------------------------------------------------------------------------

    async def rpc_endpoint(self, request: Request) -> Response:
        body = await request.body()
        try:
            req = _request_decoder.decode(body)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return self.json(encode_error(-32700, "parse error", None))
        dialect = "1.0" if request.headers.get("a2a-version", "").startswith("1") else "0.3"
        op, method_dialect = METHODS.get(req.method, (None, None))
        if op is None or op == "list" or method_dialect != dialect:
            return self.json(encode_error(-32601, f"method not found: {req.method}", req.id))
        return await self.dispatch(op, req, dialect, request)

    async def dispatch(self, op: str, req: _InRequest, dialect: str, request: Request) -> Response:
        if op in ("send", "stream"):
            msg = req.params.message or _InMessage()
            text = "".join(p.text or "" for p in msg.parts)
            if op == "stream" and not self.streaming:
                return self.json(encode_error(-32004, "streaming is not supported", req.id))
            new = self.start(text, msg.messageId or str(uuid.uuid4()), msg.contextId, defer=op == "stream")
            self.push_to(new, req.params.configuration, dialect)
            if op == "stream":
                return self.sse(self.stream_frames(new, dialect, req.id, snapshot_first=True))
            return self.json(encode_task(new, dialect, req.id))
        task = self.tasks.get(req.params.id or "")
        if task is None:
            return self.json(encode_error(-32001, "task not found", req.id))
        if op == "get":
            return self.json(encode_task(task, dialect, req.id))
        if op == "cancel":
            if task.state in TERMINAL:
                return self.json(encode_error(-32002, "task cannot be canceled", req.id))
            if task.job is not None:
                task.job.cancel()
            self.emit(task, Status("canceled"))
            return self.json(encode_task(task, dialect, req.id))
        # resubscribe
        if task.state in TERMINAL:
            return self.json(encode_error(-32004, "task is in a terminal state", req.id))
        return self.sse(self.stream_frames(task, dialect, req.id, snapshot_first=True))

    def start(self, text: str, message_id: str, context_id: str | None, *, defer: bool = False) -> HostedTask:
        """Create a task; its job starts now, or (``defer``) once the stream has subscribed."""
        task = HostedTask(
            id=str(uuid.uuid4()), context_id=context_id or str(uuid.uuid4()), user_text=text, user_message_id=message_id
        )
        self.tasks[task.id] = task
        if not defer:
            self.run_job(task)
        return task

    def run_job(self, task: HostedTask) -> None:
        if task.job is None:
            task.job = asyncio.get_running_loop().create_task(self._run(task))

    async def _run(self, task: HostedTask) -> None:
        try:
            await self.script(self, task)
        except asyncio.CancelledError:
            pass

    def emit(self, task: HostedTask, ev: Event) -> None:
        task.apply(ev)
        for q in list(task.subscribers):
            q.put_nowait(ev)
        hook = task.webhook
        if hook is not None and hook.sender is not None:
            hook.outbox.put_nowait(_encoder.encode(event_result(ev, task, hook.dialect)))
            if isinstance(ev, Status) and ev.state in SETTLED_STATES:
                hook.outbox.put_nowait(None)

    # -- push notifications ------------------------------------------------------------------

    def push_to(self, task: HostedTask, config: _InConfiguration | None, dialect: str) -> None:
        """The webhook a send's config names: the task as it is now, then each update (:meth:`emit`)."""
        push = None if config is None else config.taskPushNotificationConfig or config.pushNotificationConfig
        if push is None or not push.url:
            return
        hook = task.webhook = Webhook(push.url, push.token, dialect)
        hook.outbox.put_nowait(_encoder.encode(task_result(task, dialect)))
        hook.sender = asyncio.get_running_loop().create_task(self._send_pushes(hook))

    async def _send_pushes(self, hook: Webhook) -> None:
        """POST a task's pushes in order (one at a time); a webhook that fails misses that one."""
        if self._http is None:
            self._http = httpx.AsyncClient(timeout=10.0)
        headers = {"content-type": "application/json"}
        if hook.token:
            headers["x-a2a-notification-token"] = hook.token
        while (body := await hook.outbox.get()) is not None:
            with contextlib.suppress(httpx.HTTPError):
                await self._http.post(hook.url, content=body, headers=headers)

    async def stream_frames(
        self, task: HostedTask, dialect: str, rpc_id: RpcId, *, snapshot_first: bool
    ) -> AsyncIterator[bytes]:
        """The SSE frames of one stream: a Task snapshot, then live events until the task settles."""
        q = task.subscribe()
        self.run_job(task)  # after subscribing: the stream sees every event the job emits
        try:
            yield sse_frame(encode_task(task, dialect, rpc_id))
            if task.state in SETTLED_STATES:
                return
            while True:
                ev = await q.get()
                yield sse_frame(encode_event(ev, task, dialect, rpc_id))
                if isinstance(ev, Status) and ev.state in SETTLED_STATES:
                    return
        finally:
            task.unsubscribe(q)

    @staticmethod
    def json(body: bytes, status: int = 200) -> Response:
        return Response(body, status_code=status, media_type="application/json")

    @staticmethod
    def sse(frames: AsyncIterator[bytes]) -> StreamingResponse:
        return StreamingResponse(
            frames, media_type="text/event-stream", headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
        )


# -- the demo script -----------------------------------------------------------------------

REASONING = [
    "The user wants to know what a2a-tape records. ",
    "I should look at the project file first, ",
    "then answer in two sentences.",
]
ANSWER = [
    "a2a-tape keeps every raw A2A stream event in one SQLite file, ",
    "exactly as it arrived, ",
    "and rebuilds the final answer, reasoning and tool calls from it.",
]


async def demo_script(host: AgentHost, task: HostedTask, delay: float = 0.08) -> None:
    """Reasoning, a tool call, the answer in chunks, then a final snapshot and COMPLETED."""
    mid = f"msg-{task.id[:8]}"

    def oc(channel: str, source: str | None = None) -> OpencodeMeta:
        return OpencodeMeta(channel=channel, message_id=mid, source=source)

    host.emit(task, Status("working"))
    for i, text in enumerate(REASONING):
        await asyncio.sleep(delay)
        host.emit(task, Chunk(f"{task.id}:stream:reasoning", text, append=i > 0, meta=oc("reasoning")))
    await asyncio.sleep(delay)
    host.emit(
        task,
        Chunk(
            f"{task.id}:stream:tool_call",
            'read_file(path="pyproject.toml") -> 42 lines',
            meta=oc("tool_call"),
            last_chunk=True,
        ),
    )
    for i, text in enumerate(ANSWER):
        await asyncio.sleep(delay)
        host.emit(task, Chunk(f"{task.id}:stream", text, append=i > 0, meta=oc("final_answer")))
    await asyncio.sleep(delay)
    host.emit(
        task,
        Chunk(
            f"{task.id}:stream",
            "".join(ANSWER),
            append=True,
            last_chunk=True,
            meta=oc("final_answer", "final_snapshot"),
        ),
    )
    host.emit(task, Status("completed"))


def make_demo_app(delay: float = 0.08, guard: Guard = LOOPBACK_ONLY) -> LoopbackGuard:
    """The demo agent, behind the loopback guard every local server of ours has
    (:mod:`wire.loopback`): programs on this machine, not web pages, may drive it."""

    async def script(host: AgentHost, task: HostedTask) -> None:
        await demo_script(host, task, delay)

    return LoopbackGuard(AgentHost(script).app(), guard)
