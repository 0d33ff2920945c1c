"""The proxy's push receiver (issue 33): an agent's webhook POSTs, recorded, then delivered.

Each POST an agent makes to a hook (:mod:`.push_configs`) is one exchange row of its own
(``role`` and ``rpc_method`` ``push``; ``url`` the client's webhook, redacted): the exact bytes
as the request body, the arrival time, the agent's headers redacted (the push token and any
credential never in clear), the task and context the StreamResponse names. The row is durable
before the POST goes on to the client's webhook (write-ahead); the webhook's answer (status,
headers, body) or why there was none completes the row, and is the agent's answer.

The receiver answers for itself only: a hook it does not know (404), a body past its limit
(413), a log it cannot write (503), a webhook that cannot be reached (502) or does not answer
in time (504). Everything else goes to the client's webhook and back as it answered, whatever
the POST holds: a body that is not A2A or a push without the config's token is the webhook's to
judge; the log says so in a local note on the row (``push-not-a2a``, ``push-token-missing``,
``push-token-wrong``), which doctor reads. A push for a task the log holds nothing of yet is no
fault (an agent pushes a non-streaming task's updates before it answers the send): its row names
the task it names. Each push that names a task also gets a ``push`` note in that task's log, in
the row's transaction (:func:`capture.notes.push_event`): its place among the task's events, so a
task known only by its pushes is a task like any other (listed, examined, searched).

``record --push-receiver`` runs the same receiver for its own send's webhook: a hook with no
client URL behind it (``Hook.url`` empty) is answered by the receiver itself (200, the row
complete), as the webhook the client is; ``on_push`` tells record each push as it is stored.
"""

from __future__ import annotations

import contextlib
import hmac
import socket
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass

import anyio
import httpx
import msgspec
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from a2a_tape import store
from a2a_tape.capture.sending import Capture, Outcome, store_fault
from a2a_tape.recorder.proxy.outcomes import log_fault_line
from a2a_tape.recorder.proxy.plumbing import request_headers, response_headers
from a2a_tape.recorder.proxy.push_configs import PUSH_PATH, Hook, Hooks
from a2a_tape.store.decode import decode_item
from a2a_tape.store.events import ErrorItem, Item, Other, StatusUpdate, TaskSnapshot, Undecodable
from a2a_tape.store.redact import Redactor
from a2a_tape.store.writer import writer_of
from a2a_tape.wire.http_client import BodyTooLarge, cookieless, read_body
from a2a_tape.wire.loopback import Guard, LoopbackGuard
from a2a_tape.wire.push_configs import PUSH, TOKEN_HEADER
from a2a_tape.wire.served import read_request

DELIVERY_TIMEOUT = 30.0  # seconds a client's webhook may take to answer a push


@dataclass(frozen=True)
class Verdict:
    """What a push is about, read from its bytes: its task, and what the log notes about it."""

    task_id: str | None
    context_id: str | None
    dialect: str | None
    notes: tuple[tuple[str, str], ...]
    state: str | None = None  # the task state the push carries (a status update, a task), if any


def read_push(body: bytes, token: str | None, hook: Hook) -> Verdict:
    """The task a push names and the notes it deserves (never the token's value)."""
    item = _item(body)
    notes: list[tuple[str, str]] = []
    if item is None:
        notes.append(("push-not-a2a", "the push body is not an A2A StreamResponse"))
    if hook.token is not None:
        if token is None:
            notes.append(("push-token-missing", "the push came without the config's token"))
        elif not hmac.compare_digest(token.encode(), hook.token.encode()):
            notes.append(("push-token-wrong", "the push came with another token than the config's"))
    if item is None:
        return Verdict(None, None, None, tuple(notes))
    state = item.body.state if isinstance(item.body, (StatusUpdate, TaskSnapshot)) else None
    return Verdict(item.task_id, item.context_id, "0.3" if item.dialect == "0.3" else "1.0", tuple(notes), state)


def _item(body: bytes) -> Item | None:
    """A push body as an A2A item: a v1.0 StreamResponse, or a v0.3 bare object (``kind``)."""
    item = decode_item(body)
    if isinstance(item.body, (Other, Undecodable, ErrorItem)):
        item = decode_item(b'{"jsonrpc":"2.0","id":null,"result":' + body + b"}")
        if isinstance(item.body, (Other, Undecodable, ErrorItem)):
            return None
    return item


def _answer(status: int, why: str) -> Response:
    """The receiver's own answer to the agent (its concerns only)."""
    return Response(msgspec.json.encode({"error": {"message": why}}), status, media_type="application/json")


def _unsaid(ex_id: int | None, exc: Exception, redactor: Redactor) -> None:
    """A push row the log could not take or complete: said once on stderr (the agent has its answer)."""
    what = f"push exchange {ex_id}" if ex_id is not None else "a refused push"
    print(
        f"a2a-tape proxy: {what} not recorded whole: {redactor.text(f'{type(exc).__name__}: {exc}')}", file=sys.stderr
    )


class PushReceiver:
    """Takes an agent's POSTs to the hooks of ``hooks``, for one proxy's log."""

    def __init__(self, st: store.RecordingStore, redactor: Redactor, max_body: int, hooks: Hooks | None = None) -> None:
        self.store = st
        self.redactor = redactor
        self.max_body = max_body
        self.hooks = hooks if hooks is not None else Hooks()
        self.http: httpx.AsyncClient | None = None
        # each push once its row is durable, with the events written with it (record)
        self.on_push: Callable[[Verdict, list[store.StoredEvent]], None] | None = None

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The client the webhooks are called with: its own (never the agent's credentials), no
        cookie jar, no redirects followed (a redirect is the webhook's answer)."""
        timeout = httpx.Timeout(DELIVERY_TIMEOUT, connect=10.0)
        async with httpx.AsyncClient(timeout=timeout, cookies=cookieless(), follow_redirects=False) as http:
            for name in ("user-agent", "accept"):  # the webhook sees the agent's own
                http.headers.pop(name, None)
            self.http = http
            try:
                yield
            finally:
                self.http = None

    async def handle(self, request: Request, hook_id: str) -> Response:
        arrived = time.time()
        hook = self.hooks.get(hook_id)
        body = await read_request(request.stream(), request.headers.get("content-length"), self.max_body)
        ex = store.Exchange(
            started_at=arrived,
            url=self.redactor.url(hook.url if hook and hook.url else str(request.url)),
            http_method=request.method,
            rpc_method=PUSH,
            request_headers=self.redactor.headers_dict(request.headers.items()),
            role=PUSH,
        )
        if hook is None or body is None:
            why = (
                "no push config registered through this proxy has this address (registered before a restart?)"
                if hook is None
                else f"push body larger than the receiver's limit of {self.max_body} bytes"
            )
            if body is not None:
                ex.request_body = self.redactor.json_bytes(body)
            ex.ended_at, ex.outcome, ex.error, ex.status = time.time(), "refused", why, 404 if hook is None else 413
            return await self._refuse(ex, why)
        verdict = read_push(body, request.headers.get(TOKEN_HEADER), hook)
        ex.request_body = self.redactor.json_bytes(body)
        ex.task_id, ex.context_id, ex.dialect = verdict.task_id, verdict.context_id, verdict.dialect
        # the capture core's one sequence: the row and its notes in one transaction, durable before
        # the push goes on (no observer: a push joins the run that relayed its task)
        cap = Capture(self.redactor, task_id=verdict.task_id)
        try:
            _, stored = await writer_of(self.store).run(
                cap.push_writes(self.store, ex, state=verdict.state, notes=verdict.notes)
            )
        except Exception as exc:
            fault = store_fault(exc)
            if fault is None:
                raise
            return _answer(503, self.redactor.text(log_fault_line(fault)))
        if self.on_push is not None:
            self.on_push(verdict, stored)
        if not hook.url:  # no client webhook behind the hook (record): the receiver is the webhook
            await self._end(cap, "ok", status=200)
            return Response(b"", 200)
        return await self._deliver(request, hook, body, cap)

    async def _end(self, cap: Capture, outcome: Outcome, error: str | None = None, **fields: object) -> None:
        """The push's row complete, whatever happens to the agent's request meanwhile."""
        with anyio.CancelScope(shield=True):
            try:
                await writer_of(self.store).run(cap.end_writes(self.store, outcome, error, **fields))
            except Exception as exc:  # noqa: BLE001 - the agent has its answer; the row stays begun
                _unsaid(cap.exchange_id, exc, self.redactor)

    async def _refuse(self, ex: store.Exchange, why: str) -> Response:
        try:
            await writer_of(self.store).run(Capture(self.redactor).whole_writes(self.store, ex, None))
        except Exception as exc:  # noqa: BLE001 - a refusal is answered whatever the log says
            _unsaid(None, exc, self.redactor)
        return _answer(ex.status or 400, why)

    async def _deliver(self, request: Request, hook: Hook, body: bytes, cap: Capture) -> Response:
        """The push to the client's webhook; its answer recorded, then given to the agent."""
        assert self.http is not None
        row: dict[str, object] = {}
        answer: Response
        error: str | None = None
        try:
            out = self.http.build_request(
                "POST", hook.url, content=body, headers=request_headers(request.headers.items(), None)
            )
            resp = await self.http.send(out, stream=True)  # the answer read bounded (read_body)
            try:
                data = await read_body(resp, "the webhook's answer")
            finally:
                await resp.aclose()
            outcome: Outcome = "ok" if resp.status_code < 300 else "error"
            row.update(
                status=resp.status_code,
                content_type=resp.headers.get("content-type"),
                response_headers=self.redactor.headers_dict(resp.headers.multi_items()),
                response_body=data or None,  # redacted by the row's end
            )
            answer = Response(data, resp.status_code)
            answer.raw_headers.extend(
                (k.encode("latin-1"), v.encode("latin-1")) for k, v in response_headers(resp.headers, "", "")
            )
        except (httpx.HTTPError, BodyTooLarge) as exc:
            timeout = isinstance(exc, httpx.TimeoutException)
            why = self.redactor.text(
                f"the client's webhook {'did not answer in time' if timeout else 'cannot be reached'}: "
                f"{type(exc).__name__}: {exc}"
            )
            outcome = "timeout" if timeout else "error"
            error = why
            answer = _answer(504 if timeout else 502, why)
        await self._end(cap, outcome, error, **row)
        return answer


def receiver_app(receiver: PushReceiver, guard: Guard) -> Starlette:
    """The receiver alone, for its own listener (``proxy --push-receiver HOST:PORT``): push paths only."""

    async def one(request: Request) -> Response:
        return await receiver.handle(request, request.path_params["hook"])

    return Starlette(
        routes=[Route(PUSH_PATH + "{hook}", one, methods=["POST"])],
        middleware=[Middleware(LoopbackGuard, guard=guard)],
    )


@contextlib.asynccontextmanager
async def listening(app: Starlette, sock: socket.socket) -> AsyncIterator[None]:
    """``app`` served on ``sock`` inside the caller's event loop while the block runs; the proxy's
    own server handles the signals (this one leaves them alone) and stops it on the way out."""
    import uvicorn

    class Inner(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    server = Inner(uvicorn.Config(app, log_level="warning", lifespan="off", timeout_graceful_shutdown=2))
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, [sock])
        try:
            yield
        finally:
            server.should_exit = True  # serve returns after its graceful shutdown
