"""Talking to an agent, recorded: every exchange and every item it answers goes to the log first.

Used by the startup recovery and ``a2a-tape recover`` (:mod:`recorder.recovery`) and by
``a2a-tape probe`` (:mod:`recorder.probe`).
"""

from __future__ import annotations

import time
from urllib.parse import urlsplit

import anyio
import httpx

from a2a_tape import store
from a2a_tape.replay.http import BodyTooLarge, read_body
from a2a_tape.store.errors import A2ATapeError
from a2a_tape.store.redact import Redactor
from a2a_tape.store.sse import SseLineTooLong

from . import client as a2a
from .sending import (
    Capture,
    DecodingError,
    Outcome,
    Timeouts,
    body_chunks,
    describe,
    is_redirect,
    redirect_message,
    send,
)


class Unreachable(A2ATapeError):
    """The upstream agent cannot be used (down, not an agent)."""


# -- talking to the upstream, recorded ------------------------------------------------------


_PROTOCOL_OF: dict[str | None, a2a.ProtocolChoice] = {"0.3": "0.3", "1.0": "1.0"}
"""A recorded dialect as the protocol to ask the card for."""


class Upstream:
    """Calls one agent and records every exchange and every item it answers (write-ahead)."""

    def __init__(
        self,
        st: store.ExchangeLog,
        base_url: str,
        http: httpx.AsyncClient,
        writer: store.GroupCommitWriter,
        *,
        role: str = "recovery",
        redactor: Redactor | None = None,
    ) -> None:
        self.store = st
        self.redactor = redactor or Redactor()  # URLs and error texts: no token from a query string on disk
        self.base_url = base_url.rstrip("/")
        self.http = http
        self.writer = writer
        self.role = role
        self.card: a2a.AgentCard | None = None
        self.call_timeout = 30.0  # a request/response call never waits forever (streams use ``stall``)

    async def load_card(self) -> a2a.AgentCard:
        url = a2a.card_url(self.base_url)
        try:
            resp = await send(self.http, self.http.build_request("GET", url), self.timeouts())
            try:
                content = await read_body(resp, "the agent card")
            finally:
                await resp.aclose()
        except (httpx.HTTPError, BodyTooLarge) as exc:
            raise Unreachable(describe(exc, url, Capture(self.redactor))) from None
        if is_redirect(resp):
            raise Unreachable(redirect_message(resp, url, self.redactor))
        if resp.status_code != 200 or a2a.media_type(resp) != "application/json":
            raise Unreachable(a2a.explain_not_json(resp, url))
        try:
            self.card = a2a.parse_card(content, url)
        except a2a.NotAnAgent as exc:
            raise Unreachable(str(exc)) from None
        return self.card

    def endpoint(self, dialect: str | None) -> tuple[a2a.Dialect, str]:
        assert self.card is not None
        proto = _PROTOCOL_OF.get(dialect, "auto")  # the task's recorded dialect, else what the card prefers
        d, url = a2a.choose_endpoint(self.card, self.base_url + "/", proto)
        # the card may name the agent by another host name: keep the scheme/host we were given
        p = urlsplit(url)
        return d, self.base_url + (p.path or "/")

    async def _begin(self, req: a2a.Request, url: str, task_id: str | None) -> Capture:
        """The exchange row, begun through the capture core (URL, headers, body redacted)."""
        cap = Capture(self.redactor, task_id=task_id)
        ex = cap.request(
            url=url,
            rpc_method=req.method,
            dialect=req.dialect,
            streaming=req.streaming,
            headers=self._headers(req),
            body=req.body,
            message_id=req.message_id,
            role=self.role,
        )
        cap.exchange_id = await anyio.to_thread.run_sync(self.store.begin_exchange, ex)
        return cap

    async def _end(self, cap: Capture, outcome: Outcome, error: str | None = None, **fields: object) -> None:
        done = cap.end(outcome, error, **fields)
        ex_id = cap.exchange_id
        assert ex_id is not None
        await anyio.to_thread.run_sync(lambda: self.store.update_exchange(ex_id, **done))
        for note in dict.fromkeys(cap.notes):  # a payload that was not JSON and had to be redacted
            await self.writer.append(
                store.NewEvent(
                    payload=store.local_note("redacted", note, cap.task_id),
                    task_id=cap.task_id,
                    exchange_id=cap.exchange_id,
                    received_at=time.time(),
                    origin="local",
                )
            )

    def _headers(self, req: a2a.Request) -> dict[str, str]:
        h = {"content-type": "application/json", **a2a.dialect_headers(req.dialect)}
        if req.streaming:
            h["accept"] = "text/event-stream"
        return h

    def timeouts(self, *, stream_first_byte: float | None = None) -> Timeouts:
        """Every call: connect 10 s, the head within ``call_timeout`` (a stream's: its stall
        timeout when it has one), reads within ``call_timeout`` (a stream's: none, its stall
        deadline decides)."""
        if stream_first_byte is not None:
            return Timeouts(connect=10.0, first_byte=stream_first_byte, read=None, write=self.call_timeout)
        return Timeouts(connect=10.0, first_byte=self.call_timeout, read=self.call_timeout, write=self.call_timeout)

    async def call(self, req: a2a.Request, url: str, task_id: str | None = None) -> store.Item:
        """One request/response call; the answer is recorded and returned decoded."""
        cap = await self._begin(req, url, task_id)
        request = self.http.build_request("POST", url, content=req.body, headers=self._headers(req))
        try:
            resp = await send(self.http, request, self.timeouts())
            try:
                data = await read_body(resp, f"the answer to {req.method}")
            finally:
                await resp.aclose()
        except (httpx.HTTPError, BodyTooLarge) as exc:
            why = describe(exc, url, cap)
            await self._end(cap, "timeout" if isinstance(exc, httpx.TimeoutException) else "error", why)
            raise Unreachable(why) from None
        cap.head(resp.status_code, resp.headers.get("content-type"), resp.headers.multi_items())
        if is_redirect(resp):
            why = redirect_message(resp, url, self.redactor)
            await self._end(cap, "error", why)
            raise Unreachable(cap.text(why))
        new, item = cap.answer(data)
        if new is None:
            why = a2a.explain_not_json(resp, url)
            await self._end(cap, "error", why, response_body=cap.response_body(data))
            raise Unreachable(cap.text(why))
        await self.writer.append(new)
        await self._end(cap, "error" if isinstance(item.body, store.ErrorItem) else "ok")
        return item

    async def stream(
        self, req: a2a.Request, url: str, task_id: str | None, *, stall: float | None, stop_after: int | None = None
    ) -> tuple[list[store.Item], Outcome]:
        """A streaming call, each item recorded as it arrives. Ends when the server closes, after
        ``stop_after`` items (a deliberate drop), or after ``stall`` seconds without an item.
        Returns (items, outcome) with outcome ok / closed / incomplete / dropped / stalled /
        timeout / error."""
        cap = await self._begin(req, url, task_id)
        items: list[store.Item] = []
        outcome: Outcome = "closed"
        error: str | None = None
        fields: dict[str, object] = {}
        request = self.http.build_request("POST", url, content=req.body, headers=self._headers(req))
        try:
            with anyio.CancelScope() as scope:
                resp = await send(self.http, request, self.timeouts(stream_first_byte=stall or self.call_timeout))
                try:
                    if stall is not None:
                        scope.deadline = anyio.current_time() + stall
                    cap.head(resp.status_code, resp.headers.get("content-type"), resp.headers.multi_items())
                    if is_redirect(resp):
                        outcome, error = "error", redirect_message(resp, url, self.redactor)
                        return items, outcome
                    if not cap.sse:
                        data = await read_body(resp, f"the answer to {req.method}")
                        new, item = cap.answer(data)
                        if new is None:
                            fields.update(response_body=cap.response_body(data))
                            outcome = "error"
                        else:
                            await self.writer.append(new)
                            items.append(item)
                            outcome = "error" if isinstance(item.body, store.ErrorItem) else "ok"
                        return items, outcome
                    async for chunk in body_chunks(resp):
                        got = [it for it in cap.feed(chunk) if not it.comment]  # a keep-alive is not progress
                        if not got:
                            continue
                        if stop_after is not None:
                            got = got[: stop_after - len(items)]
                        batch, decoded = cap.events(got)
                        await self.writer.append_many(batch)
                        items += decoded
                        if stall is not None:
                            scope.deadline = anyio.current_time() + stall
                        if stop_after is not None and len(items) >= stop_after:
                            outcome = "dropped"
                            error = f"closed by a2a-tape after {len(items)} item(s), on purpose (a dropped stream)"
                            return items, outcome
                    rest = [it for it in cap.close() if not it.comment]  # a cut last item: kept, marked
                    if rest:
                        batch, decoded = cap.events(rest)
                        await self.writer.append_many(batch)
                        items += decoded
                finally:
                    with anyio.CancelScope(shield=True):
                        await resp.aclose()
            if scope.cancelled_caught:
                outcome = "stalled"
        except (httpx.HTTPError, DecodingError, SseLineTooLong, BodyTooLarge) as exc:
            outcome = "timeout" if isinstance(exc, httpx.TimeoutException) else "error"
            error = describe(exc, url, cap)
        finally:
            with anyio.CancelScope(shield=True):
                await self._end(cap, outcome, error, **fields)
        return items, outcome
