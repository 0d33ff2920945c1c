"""The recording reverse proxy: clients talk to it as to the agent; it records everything.

Why a proxy: an existing client and agent can be recorded without changing either. It is
transparent (docs/design.md, "The proxy is transparent"): it answers only for its own concerns
(its token, its body limit, its own errors when the upstream cannot be reached or its log
cannot be written); everything else goes to the agent and back as the agent answered it, and
is recorded: malformed JSON-RPC, non-JSON answers, redirects, response headers (hop-by-hop
aside, :mod:`recorder.proxy.plumbing`), SSE fields and comments.

- write-ahead: each SSE item is appended to the log (group commit, so ``--durability full``
  stays fast with many streams) and only then forwarded; nothing is held back beyond that;
- the upstream is read by a task of the proxy, not of the client's request: when the client
  disconnects, the proxy keeps reading to the end so the recording is complete;
- one exchange row per request, with status, headers, content type and outcome;
- an exact duplicate (same key, same request less its JSON-RPC id, same caller: path and
  credentials) is answered from the log, without the per-client headers of the first answer; a
  reused key with another request or from another caller is forwarded with a local note, or
  refused under ``--on-key-conflict reject``; ``--idempotency off`` relays every request
  (:mod:`recorder.proxy.idempotency`);
- loopback clients only, not web pages: a foreign ``Host`` or a browser's cross-site request is
  refused before anything else (:mod:`wire.loopback`);
- faults are answers: a log that cannot be written, an upstream that cannot be reached, that
  goes silent past a timeout or sends an undecodable body, gets the client a JSON-RPC error (the
  whole answer, or the last item of a stream under way), never a clean end that looks like
  success; a stream the upstream cuts is cut for the client too;
- secrets: the token never crosses; URLs, headers and configured JSON paths are redacted
  before the disk (:mod:`store.redact`), and in every line printed.

A relayed response is a :class:`recorder.proxy.relay.Live`: the head and items published so far plus
a wake-up event. The first client and any duplicate attached to it read the same one.

This module holds the relay's state and its steps; the pieces around it are
:mod:`recorder.proxy.proxy_config` (what the proxy is told), :mod:`recorder.proxy.outgoing` (a request
as it goes upstream, and its trace context), :mod:`recorder.proxy.write_seam` (every row both proxies
write: begun, claimed, noted, ended), :mod:`recorder.proxy.pump` (a relay's upstream side: the answer
recorded then relayed), :mod:`recorder.proxy.plumbing` (which requests are public, which headers
cross, the relayed response), :mod:`recorder.proxy.tee` (an SSE answer, write-ahead, item by item) and
:mod:`recorder.proxy.outcomes` (what a failure means for the row and the client).
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
import time
from collections.abc import AsyncIterator
from functools import cached_property
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx
import msgspec
from anyio.abc import TaskGroup
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from a2a_tape import store
from a2a_tape.capture.lineage import with_metadata_trace
from a2a_tape.capture.sending import Capture, DecodingError, Timeouts, body_chunks, send, store_fault
from a2a_tape.recorder import client as a2a
from a2a_tape.recorder.listen import url_of
from a2a_tape.recorder.proxy.idempotency import (
    BadRequest,
    Idempotency,
    OnKeyConflict,
    RpcParams,
    conflict_message,
    conflict_note,
    idempotency_key,
    parse_params,
    parse_request,
    recorded_items,
    request_hash,
    request_id,
    rpc_error,
    same_caller,
    scoped,
)
from a2a_tape.recorder.proxy.outcomes import classify, log_fault_line
from a2a_tape.recorder.proxy.outgoing import Outgoing, carry_trace_context, with_injected
from a2a_tape.recorder.proxy.plumbing import (
    QUIET_CUT,
    RelayedStream,
    encoded,
    is_public,
    request_headers,
    response_headers,
    token_presented,
    wire,
    without_userinfo,
)
from a2a_tape.recorder.proxy.proxy_config import (
    ProxyConfig as ProxyConfig,  # recorder.proxy.grpc_server imports it from here
)
from a2a_tape.recorder.proxy.pump import Pump
from a2a_tape.recorder.proxy.push_configs import hook_of_path, rewrite
from a2a_tape.recorder.proxy.push_receiver import PushReceiver, listening, receiver_app
from a2a_tape.recorder.proxy.relay import Headers, Live
from a2a_tape.recorder.proxy.write_seam import WriteSeam
from a2a_tape.recorder.recovery import RecoveryReport, mark_proxy, recover, unmark_proxy
from a2a_tape.store.errors import StoreError
from a2a_tape.store.headers import is_json_type
from a2a_tape.store.json_values import decode_json
from a2a_tape.store.methods import ALL_METHODS, HTTP_JSON, JSONRPC, SEND_METHODS
from a2a_tape.store.methods import STREAMING_METHODS as STREAM_METHODS
from a2a_tape.wire import http_json
from a2a_tape.wire import sse_frames as frames
from a2a_tape.wire.grpc import rewrite_grpc_urls
from a2a_tape.wire.http_client import BodyTooLarge, cookieless, read_body
from a2a_tape.wire.loopback import LoopbackGuard
from a2a_tape.wire.push_configs import config_task
from a2a_tape.wire.served import read_request

_JSON = "application/json"
_JSON_HEADERS: Headers = [("content-type", _JSON)]


class Proxy(WriteSeam):
    """The proxy's state: store, writer, HTTP client, live responses, the idempotency gateway."""

    def __init__(self, st: store.Store, config: ProxyConfig) -> None:
        super().__init__(st, config)
        self.http: httpx.AsyncClient | None = None
        self._pool: httpx.AsyncBaseTransport | None = None  # the client's transport (see _forward)
        self._tg: TaskGroup | None = None
        self.by_key: dict[tuple[str, str], Live] = {}  # (key, request hash) -> the relay in flight
        self.by_exchange: dict[int, Live] = {}
        self.recovery_done = anyio.Event()
        self.recovered = threading.Event()  # the same, for callers on other threads
        self.recovery_report: RecoveryReport | None = None
        self.grpc_address: str | None = None  # HOST:PORT of the gRPC proxy beside this one (proxy --grpc-listen)
        # the agent's webhook POSTs (recorder.proxy.push_receiver), at push_base, else at the proxy's own address
        self.push = PushReceiver(st, config.redactor, config.max_body) if config.push else None
        self.push_base: str | None = url_of(config.push_socket) if config.push_socket is not None else None
        # where this proxy listens (``http://HOST:PORT``), once bound: the receiver's address for a
        # webhook registered over gRPC (no HTTP request names an origin there) when push_base is None
        self.listen_url: str | None = None
        # the upstream side of each relay (recorder.proxy.pump): in the task group, past its client
        self.pump = Pump(self, self._forward, self._timeouts, self.push, self.by_exchange, self.by_key)

    def push_address(self) -> str | None:
        """The push receiver's origin for a config registered outside an HTTP request (gRPC):
        its own listener's, else the proxy's own address once bound (None: not known yet)."""
        return self.push_base or self.listen_url

    # -- the ASGI app -------------------------------------------------------------------------

    def app(self) -> Starlette:
        methods = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
        return Starlette(
            routes=[Route("/{path:path}", self.handle, methods=methods)],
            lifespan=self._lifespan,
            middleware=[Middleware(LoopbackGuard, guard=self.config.guard)],
        )

    @contextlib.asynccontextmanager
    async def _lifespan(self, _app: Starlette) -> AsyncIterator[None]:
        cfg = self.config
        # the first-byte and read limits are ours (anyio deadlines), so httpx waits as long as we say
        timeout = httpx.Timeout(connect=cfg.connect_timeout, read=None, write=30.0, pool=None)
        limits = httpx.Limits(max_connections=1000, max_keepalive_connections=100)
        mark = mark_proxy(self.store)
        if cfg.idempotency is Idempotency.on:
            self.gateway.secret  # noqa: B018 - the scope's key, read (or made) before any request waits on it
        logging.getLogger("uvicorn.error").addFilter(QUIET_CUT)
        try:
            # one pool for every client: the relays use it as it is (no cookie jar, no auth flow:
            # see _forward), recovery through a client on it that keeps no cookies either
            self._pool = pool = httpx.AsyncHTTPTransport(limits=limits)
            async with httpx.AsyncClient(
                transport=pool, timeout=timeout, auth=cfg.target.auth, cookies=cookieless()
            ) as http:
                for name in ("user-agent", "accept"):  # httpx's defaults: the agent sees the client's own
                    http.headers.pop(name, None)
                async with store.GroupCommitWriter(self.store) as writer, self._receiving():
                    async with anyio.create_task_group() as tg:
                        self.http, self.writer, self._tg = http, writer, tg
                        if cfg.recover_on_start:
                            tg.start_soon(self._recover, self.store.last_position())
                        else:
                            self.recovery_done.set()
                            self.recovered.set()
                        try:
                            yield
                        finally:
                            tg.cancel_scope.cancel()
        finally:
            logging.getLogger("uvicorn.error").removeFilter(QUIET_CUT)
            unmark_proxy(self.store, mark)

    @contextlib.asynccontextmanager
    async def _receiving(self) -> AsyncIterator[None]:
        """The push receiver's client, and its own listener when it has one."""
        if self.push is None:
            yield
            return
        async with self.push.running():
            if self.config.push_socket is None:
                yield
                return
            async with listening(receiver_app(self.push, self.config.guard), self.config.push_socket):
                yield

    async def _recover(self, up_to: int) -> None:
        try:
            report = await recover(
                self.store,
                without_userinfo(self.config.upstream),  # no credentials in what recovery records: on the client
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
                    f"{len(report.replayed)} {'key' if len(report.replayed) == 1 else 'keys'} ready to replay",
                    file=sys.stderr,
                )
        except Exception as exc:  # noqa: BLE001 - the proxy keeps serving; say why recovery did not run
            why = self.config.redactor.text(f"{type(exc).__name__}: {exc}")
            print(f"a2a-tape proxy: startup recovery did not complete: {why}", file=sys.stderr)
        finally:
            self.recovery_done.set()
            self.recovered.set()

    async def handle(self, request: Request) -> Response:
        raw_path: bytes = request.scope.get("raw_path") or request.scope["path"].encode()
        path = http_json.sent_path(raw_path, request.scope["path"])  # routed as sent (serve's rule)
        hook = hook_of_path(path) if self.push is not None else None
        if hook is not None and self.push is not None and request.method == "POST":  # an agent's push: no token
            return await self.push.handle(request, hook)
        if is_public(request.method, raw_path.split(b"?", 1)[0]):
            return await self._card(request)
        token = self.config.token
        if token and not token_presented(request.headers.items(), token):
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
        jsonrpc = request.method == "POST" and not http_json.is_route(request.method, path)
        out = Outgoing(
            method=request.method,
            url=self._target(request),
            headers=request_headers(request.headers.items(), token),
            body=body,
            rpc_id=request_id(body) if jsonrpc else None,
            dialect=None,
        )
        carry_trace_context(self.config, request, out)
        try:
            if jsonrpc:
                return await self._jsonrpc(request, out)
            return await self._rest(request, out)
        except Exception as exc:
            fault = store_fault(exc)
            if fault is None:
                raise
            # the log cannot take the exchange: nothing was forwarded
            return self._fault_answer(out.rpc_id, 503, log_fault_line(fault))

    # -- pieces of handle -----------------------------------------------------------------------

    def _fault_answer(self, rpc_id: bytes | None, status: int, why: str) -> Response:
        why = self.config.redactor.text(why)
        return Response(rpc_error(rpc_id or b"null", -32603, why), status, media_type=_JSON)

    async def _read_body(self, request: Request) -> bytes | None:
        return await read_request(request.stream(), request.headers.get("content-length"), self.config.max_body)

    def _target(self, request: Request) -> str:
        """The upstream URL of a request: the raw path and query as the client sent them."""
        return self.config.origin + _raw_target(request)

    @cached_property
    def _timeouts(self) -> Timeouts:
        cfg = self.config
        return Timeouts(connect=cfg.connect_timeout, first_byte=cfg.first_byte_timeout, read=cfg.read_timeout)

    def _proxy_origin(self, request: Request) -> str:
        """What the proxy names itself as in a card or a ``Location``: never a Host a client made up."""
        return self.config.guard.base_url(request.scope)

    async def _card(self, request: Request) -> Response:
        """The agent card (public): the upstream's answer with its URLs pointing at the proxy."""
        assert self.http is not None
        url = self._target(request)
        started = time.time()
        redactor = self.config.redactor
        try:
            resp = await self._forward(request.method, url, request_headers(request.headers.items(), self.config.token))
            try:
                content = await read_body(resp, "the agent card", body_chunks(resp))
            finally:
                await resp.aclose()
        except (httpx.HTTPError, DecodingError, BodyTooLarge) as exc:
            fault = classify(exc, url, self._timeouts)
            failed = store.Exchange(
                started_at=started,
                ended_at=time.time(),
                url=self.stored_url(url),
                http_method=request.method,
                outcome=fault.outcome,
                error=fault.why,
                role="proxy",
            )
            with contextlib.suppress(StoreError):
                await self.whole_row(failed)
            if self.on_line is not None:
                self.on_line(failed)
            return self._fault_answer(None, fault.status, fault.why)
        body = content
        if resp.status_code == 200 and is_json_type(resp.headers.get("content-type")):
            body = self._rewrite_card(body, self._proxy_origin(request))
        card = store.Exchange(
            started_at=started,
            ended_at=time.time(),
            url=self.stored_url(url),
            http_method=request.method,
            status=resp.status_code,
            content_type=resp.headers.get("content-type"),
            # the asking dialect (A2A-Version): replay serves the card of each dialect
            request_headers=redactor.headers_dict(request.headers.items()),
            response_headers=self.stored_headers(resp.headers),
            response_body=redactor.json_bytes(content),
            outcome="ok" if resp.status_code < 400 else "error",
            role="proxy",
        )
        with contextlib.suppress(StoreError):  # the card is read-only: a full disk does not hide it
            await self.whole_row(card)
        if self.on_line is not None:
            self.on_line(card)
        answer = Response(body, resp.status_code)
        answer.raw_headers.extend(
            encoded(response_headers(resp.headers, self.config.origin, self._proxy_origin(request)))
        )
        return answer

    def _rewrite_card(self, body: bytes, proxy_origin: str) -> bytes:
        """The card with every upstream URL pointing at the proxy (a byte replacement of origins)."""
        origins = {self.config.origin}
        try:
            card = a2a.parse_card(body, "upstream")
            # the gRPC interfaces name the gRPC proxy, or stay the agent's (never the HTTP proxy)
            body, grpc_urls = rewrite_grpc_urls(body, self.grpc_address)
            for u in [card.url, *(i.url for i in card.supportedInterfaces + card.additionalInterfaces)]:
                if u and u not in grpc_urls:
                    p = urlsplit(u)
                    if p.scheme and p.netloc:
                        origins.add(f"{p.scheme}://{p.netloc}")
        except a2a.NotAnAgent:
            pass
        for origin in sorted(origins, key=len, reverse=True):
            body = body.replace(origin.encode(), proxy_origin.encode())
        return body

    async def _forward(
        self,
        method: str,
        url: str,
        headers: list[tuple[str, str]],
        content: bytes | None = None,
        out: Outgoing | None = None,
    ) -> httpx.Response:
        """A client's request sent upstream on the pool itself: built as the proxy's client builds
        it (its default headers under the client's, ``Accept-Encoding`` ours; the client's as the
        bytes it sent), the upstream's credentials on it, and none of the client's per-response
        work (a cookie jar to fill, an auth flow, redirect checks) on the relay's path. ``out``'s
        departure learns whether the request may have left (:class:`recorder.proxy.plumbing.Departure`)."""
        assert self.http is not None and self._pool is not None
        req = self.config.target.authorize(self.http.build_request(method, url, headers=wire(headers), content=content))
        if out is not None:
            req.extensions["trace"] = out.departure.trace
        return await send(self._pool, req, self._timeouts)

    def capture(self, out: Outgoing) -> Capture:
        """The capture core of a relayed request: the redactor, and the credentials sent upstream
        (scrubbed if the agent echoes them); the request row's redaction notes to write."""
        cfg = self.config
        sent = cfg.redactor.secret_values(out.headers) + cfg.redactor.url_secrets(out.url)[1]
        sent += [cfg.upstream_auth[1]] if cfg.upstream_auth else []
        cap = Capture(cfg.redactor, secrets=sent)
        cap.notes += out.notes
        return cap

    async def _jsonrpc(self, request: Request, out: Outgoing) -> Response:
        v1 = request.headers.get("a2a-version", "").startswith("1")
        out.binding = JSONRPC
        try:
            rpc = parse_request(out.body)
        except BadRequest:  # not ours to judge: the agent answers it, and it is recorded
            out.dialect = "1.0" if v1 else "0.3"
            return await self._relay(request, out, name=None, key_name=None, params_raw=b"null", streaming=False)
        method = rpc.method
        out.dialect = "1.0" if v1 or method[:1].isupper() else "0.3"
        return await self._relay(
            request, out, name=method, key_name=method, params_raw=rpc.params, streaming=method in STREAM_METHODS
        )

    async def _rest(self, request: Request, out: Outgoing) -> Response:
        """The HTTP+JSON binding (and anything else that is not a JSON-RPC POST): the body is the params."""
        path = http_json.sent_path(request.scope.get("raw_path"), request.scope["path"])
        found = http_json.route(request.method, path)
        if found is not None:
            out.binding, out.dialect = HTTP_JSON, http_json.version_of(request.headers)
        return await self._relay(
            request,
            out,
            name=http_json.method_of(found[0]) if found else None,
            key_name=path if found else None,
            params_raw=out.body if request.method == "POST" and out.body else b"null",
            streaming=found is not None and found[0] in ("stream", "resubscribe"),
            path_task=found[1].get("id") if found is not None and found[0].startswith("push-") else None,
        )

    async def _relay(
        self,
        request: Request,
        out: Outgoing,
        *,
        name: str | None,
        key_name: str | None,
        params_raw: bytes,
        streaming: bool,
        path_task: str | None = None,
    ) -> Response:
        """One request: an exchange row, then relay it (or answer an exact repeat from the log).
        ``path_task``: the task an HTTP+JSON push-config route names in its path."""
        params = parse_params(params_raw)
        low_headers = {k.lower(): v for k, v in request.headers.items()}
        key = idempotency_key(low_headers, key_name, params) if key_name else None
        req_hash = None
        if key and key_name and self.config.idempotency is Idempotency.on:
            # whose request: the target and the credentials the agent sees (our token is not one)
            scope = self.gateway.scope(_raw_target(request), out.headers, self.config.redactor.is_secret)
            req_hash = scoped(scope, request_hash(key_name, params_raw))
        ex = self._exchange_of(request, out, params, name=name, key=key, streaming=streaming)
        op, dialect = ALL_METHODS.get(name or "", ("", None))
        if op.startswith("push-"):  # the config's task, never the config's id
            ex.task_id = path_task or config_task(dialect, _decoded(params_raw))
        proxy_origin = self._proxy_origin(request)
        if self.push is not None:  # the log keeps the client's webhook; the agent is given the receiver
            out.body = rewrite(out.body, params_raw, name, self.push.hooks, self.push_base or proxy_origin)[0]
        if out.injected is not None and out.to_metadata is not None and name in SEND_METHODS:
            out.body = with_metadata_trace(out.body, out.injected, out.to_metadata or None) or out.body
        rpc_id = out.rpc_id
        cap = self.capture(out)
        if key is None or req_hash is None:
            ex_id = await self.begin_row(cap, ex)
            live = self._live(ex_id, None, rpc_id, single_reader=True)
            self._start(live, cap, out, proxy_origin, settle_key=None, slot=None)
            return await self._respond(live, rpc_id, owner=True)

        slot = (key, req_hash)
        attached = self.by_key.get(slot)
        if attached is not None:  # an exact duplicate (same caller) of a request this proxy is relaying
            await self.begin_row(cap, ex)
            await self.finish_row(cap, "replayed")
            return await self._respond(attached, rpc_id, owner=False, first=False)
        live = self._live(None, req_hash, rpc_id)
        self.by_key[slot] = live  # before any await: a concurrent duplicate attaches to this one
        try:
            # on the loop when the log's lock is free, else on a worker thread (the group-commit writer)
            ex_id, record, claimed = await self.begin_and_claim(cap, ex, key, req_hash)
        except BaseException as exc:
            self.by_key.pop(slot, None)
            fault = store_fault(exc) if isinstance(exc, Exception) else None
            why = log_fault_line(fault) if fault is not None else "the proxy could not take the request"
            live.fail(503, rpc_error(b"null", -32603, why))
            live.finish()  # duplicates attached meanwhile get the same answer
            raise
        live.exchange_id = ex_id
        if claimed:
            self._start(live, cap, out, proxy_origin, settle_key=key, slot=slot)
            return await self._respond(live, rpc_id, owner=True)
        if record.request_hash == req_hash:  # held by an earlier request (in the log, or another process)
            live.req_hash = record.request_hash
            live.rpc_id = None
            assert self._tg is not None
            self._tg.start_soon(self._replay_from_log, live, record, streaming, slot)
            await self.finish_row(cap, "replayed")
            return await self._respond(live, rpc_id, owner=False)
        # the same key, another request (or another caller's)
        other = not same_caller(record.request_hash, req_hash)
        if self.config.on_key_conflict is OnKeyConflict.reject:
            self.by_key.pop(slot, None)
            refusal = rpc_error(rpc_id or b"null", -32600, conflict_message(key, other))
            live.set_body(200 if rpc_id else 409, list(_JSON_HEADERS), refusal)
            live.finish()
            why = "idempotency key in use by another caller" if other else "idempotency key reused for another request"
            await self.finish_row(cap, "refused", why)
            return Response(refusal, 200 if rpc_id else 409, media_type=_JSON)
        await self.note(cap, "idempotency-key-reused", conflict_note(key, record.exchange_id, other))
        self._start(live, cap, out, proxy_origin, settle_key=None, slot=slot)  # the key stays the first's
        return await self._respond(live, rpc_id, owner=True)

    def _exchange_of(
        self, request: Request, out: Outgoing, params: RpcParams, *, name: str | None, key: str | None, streaming: bool
    ) -> store.Exchange:
        """The exchange row of a client's request, redacted (its URL, headers and JSON paths)."""
        msg = params.message
        redactor = self.config.redactor
        body, note = redactor.request_payload(out.body, request.headers.get("content-encoding"))
        if note is not None:
            out.notes.append(note)
        return store.Exchange(
            started_at=time.time(),
            url=self.stored_url(out.url),
            http_method=out.method,
            rpc_method=name,
            dialect=out.dialect,
            binding=out.binding,
            streaming=streaming,
            request_headers=with_injected(
                redactor.headers_dict(request.headers.items()), out.injected, out.in_metadata
            ),
            request_body=body,
            task_id=params.id or (msg.taskId if msg else None),
            context_id=msg.contextId if msg else None,
            message_id=msg.messageId if msg else None,
            idempotency_key=key,
            role="proxy",
        )

    def _start(
        self,
        live: Live,
        cap: Capture,
        out: Outgoing,
        proxy_origin: str,
        *,
        settle_key: str | None,
        slot: tuple[str, str] | None,
    ) -> None:
        assert cap.exchange_id is not None
        self.by_exchange[cap.exchange_id] = live
        assert self._tg is not None
        self._tg.start_soon(self.pump.run, live, cap, out, proxy_origin, settle_key, slot)

    async def _respond(self, live: Live, rpc_id: bytes | None, *, owner: bool, first: bool = True) -> Response:
        """``live`` for one client; ``owner``: the client whose request went upstream. Any other
        (a duplicate attached, a repeat answered from the log) gets no per-client header: a
        cookie, a session or a token the agent set is for the client it answered. ``first``: this
        request made ``live`` (False: a duplicate attached to another request's)."""
        await live.ready.wait()
        headers = live.headers if owner else [(k, v) for k, v in live.headers if not self._per_client(k, v)]
        if live.mode == "sse":
            place = live.reader(first)
            if place is None:  # a late duplicate: the first items left memory (--stream-buffer)
                return await self._respond(self._after(live, rpc_id), rpc_id, owner=False)
            # the place is given up when the response ends, however it ends (a client gone before its
            # body started never runs the generator's own cleanup): it must not hold the relay back
            stream = RelayedStream(
                live.follow(rpc_id, place), live.status, place.gone, on_close=lambda: live.window.leave(place)
            )
            stream.raw_headers.extend(encoded(headers))
            return stream
        await live.finished.wait()
        answer = Response(live.body_for(rpc_id), live.status)
        answer.raw_headers.extend(encoded(headers))
        return answer

    def _live(self, exchange_id: int | None, req_hash: str | None, rpc_id: bytes | None, **kw: bool) -> Live:
        cfg = self.config
        return Live(exchange_id, req_hash, rpc_id, limit=cfg.stream_buffer, patience=cfg.slow_client_timeout, **kw)

    def _after(self, live: Live, rpc_id: bytes | None) -> Live:
        """A duplicate of a relay whose first items this proxy no longer holds (its stream passed
        ``--stream-buffer``): answered from the log, as a repeat is after a restart, once the relay ends."""
        late = self._live(live.exchange_id, live.req_hash, None)  # recorded items: each spliced to rpc_id
        record = store.IdempotencyRecord(
            key="", request_hash=live.req_hash or "", exchange_id=live.exchange_id, created_at=0.0, expires_at=0.0
        )

        async def answer() -> None:
            await live.finished.wait()
            await self._replay_from_log(late, record, True, None)

        assert self._tg is not None
        self._tg.start_soon(answer)
        return late

    def _per_client(self, name: str, value: str) -> bool:
        """An answer header that belongs to one client: a credential by its shape (``Set-Cookie``,
        ``X-Session-Token``, ``Authentication-Info``, a ``Bearer`` value; :mod:`store.redact`)."""
        return self.config.redactor.is_secret(name, value)

    async def _replay_from_log(
        self, live: Live, record: store.IdempotencyRecord, streaming: bool, slot: tuple[str, str] | None
    ) -> None:
        """Serve a repeated request from the log (the first one ran in an earlier process)."""
        key = slot[0] if slot is not None else record.key
        try:
            events = await anyio.to_thread.run_sync(recorded_items, self.store, record)
            if not events:
                live.set_body(
                    200,
                    list(_JSON_HEADERS),
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
                live.start_sse(200, [("content-type", "text/event-stream; charset=utf-8")])
                live.publish(
                    [(frames.frame(bytes(e.payload), e.sse_event), bytes(e.payload), e.sse_event) for e in events]
                )
            else:
                live.set_body(200, list(_JSON_HEADERS), bytes(events[0].payload))
        except Exception as exc:
            fault = store_fault(exc)
            if fault is None:
                raise
            live.fail(503, rpc_error(b"null", -32603, self.config.redactor.text(log_fault_line(fault))))
        finally:
            live.finish()
            if slot is not None and self.by_key.get(slot) is live:
                self.by_key.pop(slot, None)


def _decoded(raw: bytes) -> Any:
    """JSON params as values (None when they are not JSON: the agent judges them)."""
    try:
        return decode_json(raw)
    except (msgspec.DecodeError, RecursionError):
        return None


def _raw_target(request: Request) -> str:
    """The raw path and query of a request, as the client sent them."""
    raw_path = request.scope.get("raw_path")
    target: str = raw_path.decode("latin-1") if raw_path else request.scope["path"]
    query = request.scope.get("query_string", b"")
    return f"{target}?{query.decode('latin-1')}" if query else target


def build_app(st: store.Store, config: ProxyConfig) -> tuple[Starlette, Proxy]:
    proxy = Proxy(st, config)
    return proxy.app(), proxy
