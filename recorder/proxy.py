"""The recording reverse proxy: clients talk to it as to the agent; it records everything.

Why a proxy: an existing client and agent can be recorded without changing either. The rules
it keeps (DESIGN sections 2, 3, 5):

- write-ahead: each SSE item is appended to the log (group commit, so ``--durability full``
  stays fast with many streams) and only then forwarded; nothing is held back beyond that;
- the upstream is read by a task of the proxy, not of the client's request: when the client
  disconnects, the proxy keeps reading to the end so the recording is complete;
- one exchange row per request, with status, content type and outcome;
- duplicate messages are answered from the log (:mod:`recorder.idempotency`);
- security: bearer ``--token`` compared in constant time, ``--max-body`` refusal, client
  credentials forwarded upstream but redacted before the disk (:mod:`store.redact`).

A relayed response is a :class:`recorder.relay.Live`: the items published so far plus a
wake-up event. The first client and any duplicate attached to it read the same one.
"""

from __future__ import annotations

import contextlib
import hmac
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import anyio
import httpx
from anyio.abc import TaskGroup
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from a2a_tape import store
from a2a_tape.replay import sse
from a2a_tape.store.redact import Redactor
from a2a_tape.store.sse import SseItem

from . import client as a2a
from .capture import CUT, Capture
from .idempotency import (
    STREAM_METHODS,
    BadRequest,
    Gateway,
    conflict_message,
    idempotency_key,
    parse_params,
    parse_request,
    recorded_items,
    request_hash,
    rpc_error,
)
from .recovery import mark_proxy, recover, unmark_proxy
from .relay import Live

DEFAULT_MAX_BODY = 10 * 1024 * 1024
CARD_SUFFIXES = ("/.well-known/agent-card.json", "/.well-known/agent.json")
_HOP_HEADERS = frozenset(
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
    }
)
_JSON = "application/json"
_SSE_HEADERS = {"cache-control": "no-store", "x-accel-buffering": "no"}


@dataclass
class ProxyConfig:
    upstream: str
    durability: store.Durability = "full"
    token: str | None = None
    max_body: int = DEFAULT_MAX_BODY
    idempotency_ttl: float = 24 * 3600.0
    recover_on_start: bool = True
    stall_timeout: float = 30.0
    redactor: Redactor = field(default_factory=Redactor)

    @property
    def origin(self) -> str:
        parts = urlsplit(self.upstream)
        return f"{parts.scheme}://{parts.netloc}"


def _media(content_type: str | None) -> str:
    return (content_type or "").split(";", 1)[0].strip().lower()


class Proxy:
    """The proxy's state: store, writer, HTTP client, live responses, the idempotency gateway."""

    def __init__(self, st: store.Store, config: ProxyConfig) -> None:
        self.store = st
        self.config = config
        self.gateway = Gateway(st, ttl=config.idempotency_ttl)
        self.writer: store.GroupCommitWriter | None = None
        self.http: httpx.AsyncClient | None = None
        self._tg: TaskGroup | None = None
        self.by_key: dict[str, Live] = {}
        self.by_exchange: dict[int, Live] = {}
        self.recovery_done = anyio.Event()
        self.recovered = threading.Event()  # the same, for callers on other threads
        self.recovery_report = None
        # called (on the proxy's event loop) with each exchange id once its row is final: lets a
        # caller wait for "the recording of this exchange is complete" without polling
        self.on_settled: Callable[[int], None] | None = None

    # -- the ASGI app -------------------------------------------------------------------------

    def app(self) -> Starlette:
        methods = ["GET", "POST", "PUT", "PATCH", "DELETE"]
        return Starlette(routes=[Route("/{path:path}", self.handle, methods=methods)], lifespan=self._lifespan)

    @contextlib.asynccontextmanager
    async def _lifespan(self, _app) -> AsyncIterator[None]:
        timeout = httpx.Timeout(connect=10.0, read=None, write=30.0, pool=None)
        limits = httpx.Limits(max_connections=1000, max_keepalive_connections=100)
        mark = mark_proxy(self.store)
        try:
            async with httpx.AsyncClient(timeout=timeout, limits=limits) as http:
                async with store.GroupCommitWriter(self.store) as writer:
                    async with anyio.create_task_group() as tg:
                        self.http, self.writer, self._tg = http, writer, tg
                        if self.config.recover_on_start:
                            tg.start_soon(self._recover, self.store.last_position())
                        else:
                            self.recovery_done.set()
                            self.recovered.set()
                        try:
                            yield
                        finally:
                            tg.cancel_scope.cancel()
        finally:
            unmark_proxy(self.store, mark)

    async def _recover(self, up_to: int) -> None:
        try:
            report = await recover(
                self.store,
                self.config.upstream,
                http=self.http,
                stall_timeout=self.config.stall_timeout,
                up_to=up_to,
                redactor=self.config.redactor,
                roles=frozenset({"proxy", "recovery"}),
            )
            self.recovery_report = report
            if report.resumed or report.failed or report.replayed:
                print(
                    f"a2a-tape proxy: startup recovery: {len(report.resumed)} resumed, {len(report.failed)} failed, "
                    f"{len(report.replayed)} keys ready to replay",
                    file=sys.stderr,
                )
        except Exception as exc:  # noqa: BLE001 - the proxy keeps serving; say why recovery did not run
            print(f"a2a-tape proxy: startup recovery did not complete: {type(exc).__name__}: {exc}", file=sys.stderr)
        finally:
            self.recovery_done.set()
            self.recovered.set()

    async def handle(self, request: Request) -> Response:
        path = request.url.path
        if request.method == "GET" and path.endswith(CARD_SUFFIXES):
            return await self._card(request)
        auth_header = self._authorized(request)
        if auth_header is False:
            return Response(
                rpc_error(b"null", -32600, "missing or wrong proxy token (send 'Authorization: Bearer <token>')"),
                401,
                media_type=_JSON,
                headers={"www-authenticate": "Bearer"},
            )
        body = await self._read_body(request)
        if body is None:
            return Response(
                rpc_error(
                    b"null", -32600, f"request body larger than the proxy's limit of {self.config.max_body} bytes"
                ),
                413,
                media_type=_JSON,
            )
        headers = self._forward_headers(request, drop_authorization=auth_header == "authorization")
        if request.method == "POST" and not _is_rest(path):
            return await self._jsonrpc(request, body, headers)
        return await self._rest(request, body, headers)

    # -- pieces of handle -----------------------------------------------------------------------

    def _authorized(self, request: Request) -> str | bool | None:
        """False when a token is required and missing/wrong; else the header that carried it."""
        token = self.config.token
        if not token:
            return None
        expected = token.encode()
        for name in ("proxy-authorization", "authorization"):
            value = request.headers.get(name, "")
            if value[:7].lower() == "bearer " and hmac.compare_digest(value[7:].strip().encode(), expected):
                return name
        return False

    async def _read_body(self, request: Request) -> bytes | None:
        limit = self.config.max_body
        declared = request.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > limit:
            return None
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                return None
            chunks.append(chunk)
        return b"".join(chunks)

    def _forward_headers(self, request: Request, *, drop_authorization: bool) -> dict[str, str]:
        out = {}
        for k, v in request.headers.items():
            low = k.lower()
            if low in _HOP_HEADERS or (drop_authorization and low == "authorization"):
                continue
            out[k] = v
        return out

    def _target(self, request: Request) -> str:
        url = self.config.origin + request.url.path
        if request.url.query:
            url += "?" + request.url.query
        return url

    async def _card(self, request: Request) -> Response:
        assert self.http is not None
        url = self._target(request)
        started = time.time()
        try:
            carried = self._authorized(request)  # the card is public, but never forward our own token
            resp = await self.http.get(
                url, headers=self._forward_headers(request, drop_authorization=carried == "authorization")
            )
        except httpx.HTTPError as exc:
            msg = a2a.describe_http_error(exc, url)
            await self._exchange_row(
                store.Exchange(
                    started_at=started,
                    ended_at=time.time(),
                    url=url,
                    http_method="GET",
                    outcome="error",
                    error=msg,
                    role="proxy",
                )
            )
            return Response(rpc_error(b"null", -32603, f"upstream agent unreachable: {msg}"), 502, media_type=_JSON)
        body = resp.content
        if resp.status_code == 200 and _media(resp.headers.get("content-type")) == _JSON:
            body = self._rewrite_card(body, f"{request.url.scheme}://{request.headers.get('host', request.url.netloc)}")
        await self._exchange_row(
            store.Exchange(
                started_at=started,
                ended_at=time.time(),
                url=url,
                http_method="GET",
                status=resp.status_code,
                content_type=resp.headers.get("content-type"),
                response_body=resp.content,
                outcome="ok" if resp.status_code == 200 else "error",
                role="proxy",
            )
        )
        return Response(body, resp.status_code, media_type=resp.headers.get("content-type"))

    def _rewrite_card(self, body: bytes, proxy_origin: str) -> bytes:
        """The card with every upstream URL pointing at the proxy (a byte replacement of origins)."""
        origins = {self.config.origin}
        try:
            card = a2a.parse_card(body, "upstream")
            for u in [card.url, *(i.url for i in card.supportedInterfaces + card.additionalInterfaces)]:
                if u:
                    p = urlsplit(u)
                    if p.scheme and p.netloc:
                        origins.add(f"{p.scheme}://{p.netloc}")
        except a2a.NotAnAgent:
            pass
        for origin in sorted(origins, key=len, reverse=True):
            body = body.replace(origin.encode(), proxy_origin.encode())
        return body

    async def _exchange_row(self, ex: store.Exchange) -> int:
        redactor = self.config.redactor
        ex.url = redactor.url(ex.url)  # a token in the query string stays off the disk
        if ex.error:
            ex.error = redactor.text(ex.error)
        return await anyio.to_thread.run_sync(self.store.begin_exchange, ex)

    async def _jsonrpc(self, request: Request, body: bytes, headers: dict[str, str]) -> Response:
        try:
            rpc = parse_request(body)
        except BadRequest as exc:
            return Response(rpc_error(b"null", exc.code, str(exc)), 400, media_type=_JSON)
        method = rpc.method
        v1 = request.headers.get("a2a-version", "").startswith("1") or method[:1].isupper()
        return await self._relay(
            request,
            body,
            headers,
            name=method,
            key_name=method,
            params_raw=rpc.params,
            rpc_id=bytes(rpc.id),
            dialect="1.0" if v1 else "0.3",
            streaming=method in STREAM_METHODS,
        )

    async def _rest(self, request: Request, body: bytes, headers: dict[str, str]) -> Response:
        """The HTTP+JSON binding: same recording and idempotency; the body is the params."""
        path = request.url.path
        return await self._relay(
            request,
            body,
            headers,
            name=path.rsplit("/", 1)[-1],
            key_name=path,
            params_raw=body if request.method == "POST" and body else b"null",
            rpc_id=None,
            dialect="rest",
            streaming=path.endswith((":stream", ":subscribe")),
            http_method=request.method,
        )

    async def _relay(
        self,
        request: Request,
        body: bytes,
        headers: dict[str, str],
        *,
        name: str,
        key_name: str,
        params_raw: bytes,
        rpc_id: bytes | None,
        dialect: str,
        streaming: bool,
        http_method: str = "POST",
    ) -> Response:
        """One request: an exchange row, then relay it (or answer a repeated key from the log)."""
        params = parse_params(params_raw)
        low_headers = {k.lower(): v for k, v in request.headers.items()}
        key = idempotency_key(low_headers, key_name, params)
        req_hash = request_hash(key_name, params_raw) if key else None
        msg = params.message
        url = self._target(request)
        ex = store.Exchange(
            started_at=time.time(),
            url=url,
            http_method=http_method,
            rpc_method=name,
            dialect=dialect,
            streaming=streaming,
            request_headers=self.config.redactor.headers_dict(request.headers.items()),
            request_body=self.config.redactor.json_bytes(body),
            task_id=params.id or (msg.taskId if msg else None),
            context_id=msg.contextId if msg else None,
            message_id=msg.messageId if msg else None,
            idempotency_key=key,
            role="proxy",
        )
        if key is None:
            ex_id = await self._exchange_row(ex)
            live = self._start(ex_id, None, rpc_id, url, headers, body, None, method=http_method)
            return await self._respond(live, rpc_id)

        live = self.by_key.get(key)
        if live is not None:  # a duplicate of a request this proxy is relaying (or has relayed)
            ex_id = await self._exchange_row(ex)
            return await self._duplicate(live, req_hash, key, ex_id, rpc_id)
        live = Live(None, req_hash, rpc_id)
        self.by_key[key] = live  # before any await: a concurrent duplicate attaches to this one
        ex_id, record, claimed = await anyio.to_thread.run_sync(self._begin_and_claim, ex, key, req_hash)
        live.exchange_id = ex_id
        if claimed:
            self.by_exchange[ex_id] = live
            assert self._tg is not None
            self._tg.start_soon(self._pump, live, ex_id, url, headers, body, key, http_method)
            return await self._respond(live, rpc_id)
        # held by an earlier request (in the log, or by another process): answer from the log
        if record.request_hash != req_hash:
            self.by_key.pop(key, None)
            live.set_body(200, _JSON, b"")
            live.finish()
            await self._finish_row(ex_id, outcome="refused", error="idempotency key reused for another request")
            return Response(
                rpc_error(rpc_id or b"null", -32600, conflict_message(key)), 200 if rpc_id else 409, media_type=_JSON
            )
        live.req_hash = record.request_hash
        live.rpc_id = None
        assert self._tg is not None
        self._tg.start_soon(self._replay_from_log, live, record, streaming, key)
        await self._finish_row(ex_id, outcome="replayed")
        return await self._respond(live, rpc_id)

    def _begin_and_claim(
        self, ex: store.Exchange, key: str, req_hash: str
    ) -> tuple[int, store.IdempotencyRecord, bool]:
        """The exchange row and the key's claim in one write transaction: one fsync before forwarding."""
        with self.store.transaction():
            ex_id = self.store.begin_exchange(ex)
            record, claimed = self.gateway.claim(key, req_hash, ex_id)
        return ex_id, record, claimed

    async def _duplicate(
        self, live: Live, req_hash: str | None, key: str, ex_id: int, rpc_id: bytes | None
    ) -> Response:
        if live.req_hash != req_hash:
            await self._finish_row(ex_id, outcome="refused", error="idempotency key reused for another request")
            return Response(
                rpc_error(rpc_id or b"null", -32600, conflict_message(key)), 200 if rpc_id else 409, media_type=_JSON
            )
        await self._finish_row(ex_id, outcome="replayed")
        return await self._respond(live, rpc_id)

    async def _finish_row(self, ex_id: int, **fields: object) -> None:
        if isinstance(fields.get("error"), str):
            fields["error"] = self.config.redactor.text(fields["error"])  # type: ignore[arg-type]
        await anyio.to_thread.run_sync(lambda: self.store.update_exchange(ex_id, ended_at=time.time(), **fields))

    def _start(self, ex_id, req_hash, rpc_id, url, headers, body, key, method: str = "POST") -> Live:
        live = Live(ex_id, req_hash, rpc_id, single_reader=key is None)
        self.by_exchange[ex_id] = live
        assert self._tg is not None
        self._tg.start_soon(self._pump, live, ex_id, url, headers, body, key, method)
        return live

    async def _respond(self, live: Live, rpc_id: bytes | None) -> Response:
        await live.ready.wait()
        if live.mode == "sse":
            headers = dict(_SSE_HEADERS)
            return StreamingResponse(live.follow(rpc_id), live.status, headers=headers, media_type=live.content_type)
        await live.finished.wait()
        body = live.body
        if rpc_id is not None and (live.rpc_id is None or live.rpc_id != rpc_id):
            body = sse.split_id(body).with_id(rpc_id)
        return Response(body, live.status, media_type=live.content_type)

    # -- the upstream side ----------------------------------------------------------------------

    async def _pump(
        self,
        live: Live,
        ex_id: int,
        url: str,
        headers: dict[str, str],
        body: bytes,
        key: str | None,
        method: str = "POST",
    ) -> None:
        """Relay one request upstream; runs in the proxy's task group (outlives the client)."""
        assert self.http is not None
        cap = Capture(self.config.redactor)  # the capture core: SSE items, redaction, task ids
        cap.exchange_id = ex_id
        row: dict[str, object] = {}
        release = False
        task_ids: list[str | None] = [None, None]
        try:
            req = self.http.build_request(method, url, headers=headers, content=body)
            resp = await self.http.send(req, stream=True)
            try:
                ct = resp.headers.get("content-type", "")
                row.update(status=resp.status_code, content_type=ct or None)
                if _media(ct) == "text/event-stream":
                    live.start_sse(resp.status_code, ct)
                    await self._tee(resp, live, cap, task_ids)
                    row["outcome"] = "closed"
                    if cap.cut:
                        row.update(outcome="incomplete", error=CUT)
                else:
                    data = await resp.aread()
                    media = _media(ct)
                    if media == _JSON or media.endswith("+json"):
                        new, item = cap.answer(data)  # redacted as configured (a JSON answer is an event)
                        if new is None:  # JSON, but not an A2A item: kept (redacted) on the row
                            row["response_body"] = cap.response_body(data)
                        else:
                            assert self.writer is not None
                            await self.writer.append(new)
                            task_ids[:] = [cap.task_id, cap.context_id]
                        failed = resp.status_code >= 400 or isinstance(item.body, store.ErrorItem)
                        row["outcome"] = "error" if failed else "ok"
                        live.set_body(resp.status_code, ct, data)
                    elif not data and resp.status_code < 400:  # an empty answer (HTTP+JSON DELETE, 204)
                        row["outcome"] = "ok"
                        live.set_body(resp.status_code, ct or _JSON, data)
                    else:
                        why = a2a.explain_not_json(resp, "the upstream agent")
                        row.update(outcome="error", error=why, response_body=data)
                        release = True
                        live.set_body(502, _JSON, rpc_error(live.rpc_id or b"null", -32603, why))
            finally:
                await resp.aclose()
        except httpx.HTTPError as exc:
            why = a2a.describe_http_error(exc, url)
            if live.mode == "sse" and live.ready.is_set():
                row.update(outcome="dropped", error=why)
            else:
                row.update(outcome="error", error=f"upstream agent unreachable: {why}")
                release = True
                live.set_body(
                    502, _JSON, rpc_error(live.rpc_id or b"null", -32603, f"upstream agent unreachable: {why}")
                )
        except anyio.get_cancelled_exc_class():
            row.setdefault("outcome", "incomplete")  # the proxy is shutting down: recovery resumes the task
            raise
        except Exception as exc:  # noqa: BLE001 - one bad relay must not take the proxy down
            row.update(outcome="error", error=f"proxy error: {type(exc).__name__}: {exc}")
            if not live.ready.is_set():
                release = True
                live.set_body(
                    502, _JSON, rpc_error(live.rpc_id or b"null", -32603, f"proxy error: {type(exc).__name__}")
                )
        finally:
            live.finish()
            with anyio.CancelScope(shield=True):
                await self._settle(ex_id, row, task_ids, key, live, release)

    async def _settle(self, ex_id, row, task_ids, key, live, release) -> None:
        def work() -> None:
            fields = dict(row, ended_at=time.time())
            if task_ids[0]:
                fields.update(task_id=task_ids[0], context_id=task_ids[1])
            with self.store.transaction():
                self._settle_rows(ex_id, fields, key, release, task_ids[0])

        try:
            await anyio.to_thread.run_sync(work)
        finally:
            self.by_exchange.pop(ex_id, None)
            if key is not None and self.by_key.get(key) is live:
                self.by_key.pop(key, None)
            if self.on_settled is not None:
                self.on_settled(ex_id)

    def _settle_rows(self, ex_id: int, fields: dict, key: str | None, release: bool, task_id: str | None) -> None:
        if isinstance(fields.get("error"), str):
            fields["error"] = self.config.redactor.text(fields["error"])
        self.store.update_exchange(ex_id, **fields)
        if key is not None:
            if release:
                self.gateway.release(key, ex_id)
            else:
                self.gateway.done(key, task_id)

    async def _tee(self, resp: httpx.Response, live: Live, cap: Capture, task_ids: list) -> None:
        """Parse the upstream SSE with the capture core, append each item, then publish it.

        Reading the socket and committing are two tasks sharing a plain list: the reader never
        yields to the loop for an item it already has, so the items that arrive while a commit
        is on its way to disk form the next batch (one thread hop and one fsync per batch, not
        per item). Nothing is published before its batch is durable. Each item is published
        with its exact bytes (``raw``: ``id``/``retry`` fields, comments, a BOM, the agent's line
        ends), so the client reads what the agent sent; a last item cut by the close is kept."""
        writer = self.writer
        assert writer is not None
        pending: list[SseItem] = []
        state = {"wake": anyio.Event(), "drained": anyio.Event(), "eof": False}

        failure: list[BaseException] = []

        async def read() -> None:
            try:
                async for chunk in resp.aiter_bytes():
                    items = cap.feed(chunk)
                    if items:
                        pending.extend(items)
                        state["wake"].set()
                        if len(pending) >= 4096:  # the disk is behind: stop reading a moment
                            state["drained"] = anyio.Event()
                            await state["drained"].wait()
                pending.extend(cap.close())
                tail = cap.parser.tail if cap.parser is not None else b""
                if tail:
                    pending.append(SseItem(b"", None, True, raw=tail))
            except Exception as exc:  # noqa: BLE001 - raised below, outside the task group (no exception group)
                failure.append(exc)
            finally:
                state["eof"] = True
                state["wake"].set()

        async def commit() -> None:
            while True:
                if not pending:
                    if state["eof"]:
                        return
                    await state["wake"].wait()
                    state["wake"] = anyio.Event()
                    continue
                batch = pending[:]
                pending.clear()
                state["drained"].set()
                events, _ = cap.events(batch)  # redacted payloads, task ids learnt, comments skipped
                if events:
                    await writer.append_many(events)
                    if task_ids[0] is None and cap.task_id is not None:
                        task_ids[:] = [cap.task_id, cap.context_id]
                live.publish([(it.event, it.data, it.comment, it.raw) for it in batch])

        async with anyio.create_task_group() as tg:
            tg.start_soon(commit)
            await read()
        if failure:
            raise failure[0]

    async def _replay_from_log(self, live: Live, record: store.IdempotencyRecord, streaming: bool, key: str) -> None:
        """Serve a repeated request from the log (the first one ran in an earlier process)."""
        try:
            events = await anyio.to_thread.run_sync(recorded_items, self.store, record)
            if not events:
                live.set_body(
                    200,
                    _JSON,
                    rpc_error(
                        b"null",
                        -32603,
                        (
                            f"the first request with this key ({key}) was interrupted before any reply was recorded; "
                            "its outcome is unknown, send a new messageId to try again"
                        ),
                    ),
                )
            elif streaming:
                live.start_sse(200, "text/event-stream; charset=utf-8")
                live.publish([(e.sse_event, bytes(e.payload), False, None) for e in events])
            else:
                live.set_body(200, _JSON, bytes(events[0].payload))
        finally:
            live.finish()
            if self.by_key.get(key) is live:
                self.by_key.pop(key, None)


def _is_rest(path: str) -> bool:
    """An HTTP+JSON binding path (``/message:send``, ``/tasks/ID``, ``/v1/...``), not JSON-RPC."""
    return path.startswith(("/v1/", "/tasks")) or ":" in path.rsplit("/", 1)[-1]


def build_app(st: store.Store, config: ProxyConfig) -> tuple[Starlette, Proxy]:
    proxy = Proxy(st, config)
    return proxy.app(), proxy


def check_listen(listen: str, allow_remote: bool) -> tuple[str, int]:
    """``HOST:PORT`` -> (host, port); a non-loopback host needs ``allow_remote``."""
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"--listen must be HOST:PORT, got '{listen}'")
    host = host.strip("[]") or "127.0.0.1"
    if host not in ("127.0.0.1", "localhost", "::1") and not host.startswith("127.") and not allow_remote:
        raise ValueError(f"refusing to listen on {host}: the proxy forwards credentials; add --allow-remote to mean it")
    return host, int(port)
