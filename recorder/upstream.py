"""One agent, called through recorded calls: the recorder's face of the recorded-upstream client.

``record`` (:mod:`recorder.record`), the startup recovery and ``a2a-tape recover``
(:mod:`recorder.recovery`) and ``a2a-tape probe`` (:mod:`recorder.probe`) talk to their agent
through an :class:`Upstream`: it reads the card, picks the interface (the binding and its URL),
builds each request (:mod:`recorder.client`; the binding puts it on its wire:
:mod:`wire.binding_client`) and makes the call a :class:`capture.upstream_call.UpstreamCall` (the
row first, every item in the log before anyone sees it, one outcome, timeouts on everything).
Serve's recording modes make the same calls from ``replay/`` (:mod:`replay.serve.forward`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from urllib.parse import urlsplit, urlunsplit

import httpx

from a2a_tape import store
from a2a_tape.capture.exchange import Capture, Outcome, TaskContext
from a2a_tape.capture.upstream_call import (
    CLOSE_GRACE,
    FAULTS,
    JSON_RPC,
    Batching,
    Collect,
    Ended,
    HttpSource,
    Sink,
    StallWatch,
    UpstreamCall,
    not_an_answer,
)
from a2a_tape.recorder import client as a2a
from a2a_tape.store.errors import A2ATapeError
from a2a_tape.store.observers import Observer
from a2a_tape.store.redact import Redactor
from a2a_tape.store.writer import GroupCommitWriter, writer_of
from a2a_tape.wire.binding_client import Binding
from a2a_tape.wire.http_client import Timeouts, describe, redirect_message
from a2a_tape.wire.sse_reader import DEFAULT_MAX_LINE


class Unreachable(A2ATapeError):
    """The upstream agent cannot be used (down, not an agent)."""


_PROTOCOL_OF: dict[str | None, a2a.ProtocolChoice] = {"0.3": "0.3", "1.0": "1.0"}
"""A recorded dialect as the protocol to ask the card for."""


class Upstream:
    """Calls one agent and records every exchange and every item it answers (write-ahead).

    ``headers``: added to every request (the user's ``--header``); ``secrets``: values never to
    appear in a stored or printed text; ``ctx``: learns the task ids across calls (a session);
    ``max_line``: the longest SSE line or event read; ``binding``: how requests and answers look
    on the wire (:class:`capture.upstream_call.Binding`); ``observer``: whose run the exchanges
    are (None: the process's own for ``role``); ``filed_under``: the task every exchange and item
    is filed under, whatever id the agent gives it (a verify run of a recorded task).
    """

    def __init__(
        self,
        st: store.RecordingStore,
        base_url: str,
        http: httpx.AsyncClient,
        writer: GroupCommitWriter | None = None,
        *,
        role: str = "recovery",
        redactor: Redactor | None = None,
        headers: Sequence[tuple[str, str]] = (),
        secrets: Sequence[str] = (),
        ctx: TaskContext | None = None,
        max_line: int = DEFAULT_MAX_LINE,
        binding: Binding = JSON_RPC,
        observer: Observer | None = None,
        filed_under: str | None = None,
    ) -> None:
        self.store = st
        self.observer = observer
        self.filed_under = filed_under
        self.redactor = redactor or Redactor()  # URLs and error texts: no token from a query string on disk
        self.base_url = base_url if "?" in base_url else base_url.rstrip("/")
        self.http = http
        self.writer = writer or writer_of(st)
        self.role = role
        self.headers = list(headers)
        self.secrets = secrets if isinstance(secrets, list) else list(secrets)  # a session's: shared
        self.ctx = ctx
        self.max_line = max_line
        self.binding = binding  # how a request is built and an answer read, unless a call says otherwise
        self.ended: Callable[[int], None] | None = None  # each call's exchange id once its row is final
        self.card: a2a.AgentCard | None = None
        self.connect_timeout = 10.0
        self.call_timeout = 30.0  # a request/response call never waits forever (streams use their stall timeout)
        self.first_byte: float | None = None  # the head of any call (None: ``call_timeout``)
        self.close_grace = CLOSE_GRACE  # a stream kept open after its task settled is closed after it

    def timeouts(self, *, stream_first_byte: float | None = None) -> Timeouts:
        """Every call: connect, the head within ``first_byte`` (a stream's: ``stream_first_byte``
        when given), reads within ``call_timeout`` (a stream's: none, its stall watch decides)."""
        first = self.first_byte if self.first_byte is not None else self.call_timeout
        if stream_first_byte is not None:
            return Timeouts(self.connect_timeout, stream_first_byte, None, self.call_timeout)
        return Timeouts(self.connect_timeout, first, self.call_timeout, self.call_timeout)

    def learn(self, cap: Capture) -> None:
        """A secret found in a call's URL (a token parameter) is never shown in any later text."""
        self.secrets += [s for s in cap.secrets if s not in self.secrets]

    def capture(self, task_id: str | None = None) -> Capture:
        ctx = self.ctx
        return Capture(
            self.redactor,
            max_line=self.max_line,
            task_id=task_id if ctx is None else ctx.task_id,
            context_id=None if ctx is None else ctx.context_id,
            secrets=self.secrets,
            filed_under=self.filed_under,
        )

    # -- the card --------------------------------------------------------------------------

    async def load_card(self, *, recorded: bool = False) -> a2a.AgentCard:
        """The agent card at the base URL (:class:`Unreachable` when it is none). ``recorded``: its
        exchange goes to the log too (``record`` keeps it; recovery and probe do not)."""
        url = a2a.card_url(self.base_url)
        cap = self.capture()
        call = UpstreamCall(
            self.store,
            self.writer,
            cap,
            HttpSource(self.http, self.http.build_request("GET", url, headers=self.headers), self.timeouts()),
            url=url,
            what="the agent card",
            ctx=self.ctx,
            on_end=self.ended,
        )
        if recorded:
            await call.begin(
                cap.request(
                    url=url,
                    rpc_method="agent-card",
                    dialect=None,
                    streaming=False,
                    headers=self.headers,
                    http_method="GET",
                    role=self.role,
                ),
                self.observer,
            )
            self.learn(cap)
        ended = Ended("error")
        try:
            self.card = await self._card(call, url, ended)
            ended.outcome = "ok"
            return self.card
        finally:
            await call.source.aclose()
            if recorded:
                await call.end(ended.outcome, ended.error, response_body=ended.body[: 1 << 20])

    async def _card(self, call: UpstreamCall, url: str, ended: Ended) -> a2a.AgentCard:
        try:
            answer = await call.send()
            head = call.head
            assert head is not None
            if answer == "redirect":
                where = f"the agent card URL {url}"
                ended.error = redirect_message(head.status, head.header("location"), where, self.redactor)
                raise Unreachable(call.capture.text(ended.error))
            ended.body = await call.source.body("the agent card")
        except FAULTS as exc:
            ended.error = describe(exc, url, call.capture)
            ended.outcome = "timeout" if isinstance(exc, httpx.TimeoutException) else "error"
            raise Unreachable(ended.error) from None
        if head.status == 404:
            ended.error = f"no agent card at {url} (HTTP 404): is this an A2A agent?"
        elif head.status >= 400 or "json" not in (head.content_type or "").lower():
            ended.error = not_an_answer(head, url)
        if ended.error is not None:
            raise Unreachable(call.capture.text(ended.error))
        try:
            return a2a.parse_card(ended.body, url)
        except a2a.NotAnAgent as exc:
            ended.error = str(exc)
            raise Unreachable(ended.error) from None

    def endpoint(self, dialect: str | None, binding: a2a.BindingChoice = "auto") -> a2a.Endpoint:
        """The interface for a task of ``dialect`` recorded over ``binding`` (None, ``auto``: what
        the card prefers; :func:`recorder.client.choose_interface`, :class:`recorder.client.NotAnAgent`
        when the card does not offer it)."""
        assert self.card is not None
        proto = _PROTOCOL_OF.get(dialect, "auto")  # the task's recorded dialect, else what the card prefers
        ep = a2a.choose_interface(self.card, a2a.join_path(self.base_url, "/"), proto, binding)
        # the card may name the agent by another host name: its path, on the scheme, host and
        # query we were given (an agent under a path prefix keeps it, once)
        base = urlsplit(self.base_url)
        return ep._replace(url=urlunsplit((base.scheme, base.netloc, urlsplit(ep.url).path or "/", base.query, "")))

    # -- calls -----------------------------------------------------------------------------

    async def exchange(
        self,
        req: a2a.Request,
        url: str,
        sink: Sink,
        *,
        task_id: str | None = None,
        timeouts: Timeouts | None = None,
        watch: StallWatch | None = None,
        batching: Batching = Batching(),
        limit: int | None = None,
        binding: Binding | None = None,
    ) -> Ended:
        """One call, recorded, in ``binding`` (default: :attr:`binding`); its items go to ``sink``;
        how it ended (never raises for the upstream's faults: they are in
        :class:`capture.upstream_call.Ended`)."""
        binding = binding or self.binding
        method, url, wire_headers, body = binding.request(req.op, req.dialect, url, req.body)
        headers = [*self.headers, *wire_headers]
        request = self.http.build_request(method, url, content=body, headers=headers)
        call = UpstreamCall(
            self.store,
            self.writer,
            self.capture(task_id),
            HttpSource(self.http, request, timeouts or self.timeouts()),
            url=url,
            what=req.method,
            binding=binding,
            ctx=self.ctx,
            on_end=self.ended,
        )
        await call.begin(
            call.capture.request(
                url=url,
                rpc_method=req.method,
                dialect=req.dialect,
                streaming=req.streaming,
                headers=headers,
                body=body,
                http_method=method,
                message_id=req.message_id,
                role=self.role,
                binding=binding.name,
            ),
            self.observer,
        )
        self.learn(call.capture)
        return await call.run(sink, batching=batching, watch=watch, limit=limit)

    async def call(
        self, req: a2a.Request, url: str, task_id: str | None = None, *, binding: Binding | None = None
    ) -> store.Item:
        """One request/response call; the answer is recorded and returned decoded."""
        sink = Collect()
        ended = await self.exchange(req, url, sink, task_id=task_id, binding=binding)
        if ended.item is None:
            raise Unreachable(ended.error or ended.outcome)
        return ended.item

    async def stream(
        self,
        req: a2a.Request,
        url: str,
        task_id: str | None,
        *,
        stall: float | None,
        stop_after: int | None = None,
        binding: Binding | None = None,
    ) -> tuple[list[store.Item], Outcome]:
        """A streaming call, each item recorded as it arrives. Ends when the server closes, after
        ``stop_after`` items (a deliberate drop), or after ``stall`` seconds without an item.
        Returns (items, outcome): ok / closed / incomplete / dropped / stalled / timeout / error."""
        sink = Collect()
        watch = None
        if stall is not None:  # no item for `stall` s, or open `close_grace` s after the task settled
            watch = StallWatch(stall, settled=sink.settled, grace=self.close_grace)
        ended = await self.exchange(
            req,
            url,
            sink,
            task_id=task_id,
            timeouts=self.timeouts(stream_first_byte=stall or self.call_timeout),
            watch=watch,
            limit=stop_after,
            binding=binding,
        )
        if ended.item is not None and not sink.items:
            sink.items.append(ended.item)
        return sink.items, ended.outcome
