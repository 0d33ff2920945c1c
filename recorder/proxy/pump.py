"""One relayed request's upstream side, in the proxy's task group (it outlives the client): sent on
the proxy's pool, the answer recorded then relayed (an SSE stream item by item through
:mod:`recorder.proxy.tee`, else the whole body), then the row ended through the write seam
(:mod:`recorder.proxy.write_seam`) and the relay forgotten. A failure is an answer
(:mod:`recorder.proxy.outcomes`): the client gets a JSON-RPC error, never a clean end.
"""

from __future__ import annotations

import sys
from typing import Protocol, cast

import anyio
import httpx

from a2a_tape import store
from a2a_tape.capture.sending import CUT, Capture, Outcome, Timeouts, body_chunks, store_fault
from a2a_tape.recorder import client as a2a
from a2a_tape.recorder.proxy.idempotency import rpc_error
from a2a_tape.recorder.proxy.outcomes import classify, log_fault_line
from a2a_tape.recorder.proxy.outgoing import Outgoing, error_event
from a2a_tape.recorder.proxy.plumbing import response_headers
from a2a_tape.recorder.proxy.push_configs import restore
from a2a_tape.recorder.proxy.push_receiver import PushReceiver
from a2a_tape.recorder.proxy.relay import Cut as _Cut
from a2a_tape.recorder.proxy.relay import Live
from a2a_tape.recorder.proxy.tee import tee
from a2a_tape.recorder.proxy.write_seam import WriteSeam
from a2a_tape.store.headers import is_json_type, media_type_of
from a2a_tape.wire.http_client import read_body

KEPT = 1 << 20
"""Bytes of an answer that is no A2A item kept on the exchange row (redacted by its end)."""


class Forward(Protocol):
    """How the proxy sends a client's request upstream (its pool, the upstream's credentials)."""

    async def __call__(
        self,
        method: str,
        url: str,
        headers: list[tuple[str, str]],
        content: bytes | None = None,
        out: Outgoing | None = None,
    ) -> httpx.Response: ...


class Pump:
    """The upstream side of every relay of one proxy."""

    def __init__(
        self,
        seam: WriteSeam,
        forward: Forward,
        timeouts: Timeouts,
        push: PushReceiver | None,
        by_exchange: dict[int, Live],
        by_key: dict[tuple[str, str], Live],
    ) -> None:
        self.seam = seam
        self.forward = forward
        self.timeouts = timeouts
        self.push = push
        self.by_exchange = by_exchange  # the proxy's: the relays in flight, by exchange and by key
        self.by_key = by_key

    async def run(
        self,
        live: Live,
        cap: Capture,
        out: Outgoing,
        proxy_origin: str,
        settle_key: str | None,
        slot: tuple[str, str] | None,
    ) -> None:
        """Relay one request upstream; runs in the proxy's task group (outlives the client). ``cap``:
        the capture core (SSE items, redaction of the credentials sent upstream too, task ids) of
        the row begun."""
        row: dict[str, object] = {}
        release = False
        try:
            resp = await self.forward(out.method, out.url, out.headers, out.body, out)
            try:
                # an answer with no A2A reply in it (a redirect, a 405, an HTML page) leaves nothing
                # to replay: the key is released, so a retry goes upstream again
                release = not await self._answer(resp, live, cap, row, proxy_origin)
            finally:
                await resp.aclose()
        except anyio.get_cancelled_exc_class():
            row.setdefault("outcome", "incomplete")  # the proxy is shutting down: recovery resumes the task
            row.setdefault("error", "the proxy stopped before the upstream's answer ended")
            raise
        except _Cut as exc:  # the upstream cut its stream: cut for the client too
            row.update(outcome="dropped", error=str(exc))
            live.cut()
        except Exception as exc:  # noqa: BLE001 - one bad relay must not take the proxy down
            fault = store_fault(exc)
            if fault is not None:  # the log cannot take what the agent sent: the client is told
                why = log_fault_line(fault)
                row.update(outcome="error", error=why)
                status = 503
            else:
                relay_fault = classify(exc, out.url, self.timeouts, sent=live.ready.is_set())
                why, status = relay_fault.why, relay_fault.status
                row.update(outcome=relay_fault.outcome, error=why)
                # the key goes when the request provably never left (unreachable, or failed before
                # its head was written): the agent never saw it, a retry may run
                release = (relay_fault.release or not out.departure.left) and not live.ready.is_set()
            live.fail(status, rpc_error(out.rpc_id or b"null", -32603, cap.text(why)), error_event(out))
        finally:
            live.finish()
            with anyio.CancelScope(shield=True):
                await self._settle(row, cap, settle_key, slot, live, release)

    async def _answer(
        self, resp: httpx.Response, live: Live, cap: Capture, row: dict[str, object], proxy_origin: str
    ) -> bool:
        """The upstream's answer, recorded then relayed: an SSE stream item by item, else the body.
        True when an A2A reply (a stream, or a JSON-RPC answer) is in the log."""
        cfg = self.seam.config
        ct = resp.headers.get("content-type", "")
        headers = response_headers(resp.headers, cfg.origin, proxy_origin)
        row.update(
            status=resp.status_code, content_type=ct or None, response_headers=self.seam.stored_headers(resp.headers)
        )
        cap.answered_by(resp.headers.multi_items())  # a replay's answer: the run is a replay's (with the first commit)
        if media_type_of(ct) == "text/event-stream":
            live.start_sse(resp.status_code, headers)
            assert self.seam.writer is not None
            await tee(resp, live, cap, self.seam.writer, self.seam.write_notes, self._too_slow)
            row["outcome"] = "closed"
            if cap.cut:  # the last item came without its blank line: kept, and relayed as it came
                row.update(outcome="incomplete", error=CUT)
            return True
        data = await read_body(resp, "the answer", body_chunks(resp))
        if self.push is not None:  # a config the agent echoes names the client's webhook, never the receiver
            data = restore(data, self.push.hooks)
        recorded = False
        if is_json_type(ct):
            new, item = cap.answer(data)  # redacted as configured (a JSON answer is an event)
            if new is None:  # JSON, but not an A2A item: kept on the row (redacted by its end)
                row["response_body"] = data[:KEPT]
            else:
                assert self.seam.writer is not None
                await self.seam.writer.run(cap.commit_writes(self.seam.store, [new]))
                recorded = True
            failed = resp.status_code >= 400 or isinstance(item.body, store.ErrorItem)
            row["outcome"] = "error" if failed else "ok"
        elif resp.status_code < 400 and (not data or 300 <= resp.status_code < 400):
            row["outcome"] = "ok"  # an empty answer (HTTP+JSON DELETE, 204) or a redirect
            if data:
                row["response_body"] = data[:KEPT]
        else:
            row.update(
                outcome="error",
                error=a2a.explain_not_json(resp, "the upstream agent"),
                response_body=data[:KEPT],
            )
        await self.seam.write_notes(cap)
        live.set_body(resp.status_code, headers, data)
        return recorded

    async def _too_slow(self, cap: Capture, dropped: int) -> None:
        await self.seam.client_too_slow(cap, dropped, "its stream was closed")

    async def _settle(
        self,
        row: dict[str, object],
        cap: Capture,
        settle_key: str | None,
        slot: tuple[str, str] | None,
        live: Live,
        release: bool,
    ) -> None:
        ex_id = cap.exchange_id
        assert ex_id is not None
        outcome = cast("Outcome", row.pop("outcome", "incomplete"))
        error = cast("str | None", row.pop("error", None))
        also = self.seam.key_fate(settle_key, release, cap)
        try:
            await anyio.to_thread.run_sync(
                self.seam.settle, cap, cap.end_writes(self.seam.store, outcome, error, also, **row)
            )
        except Exception as exc:
            fault = store_fault(exc)
            if fault is None:
                raise
            # the client has its answer; the row stays as it was, said once
            print(f"a2a-tape proxy: exchange {ex_id} not finalised: {cap.text(log_fault_line(fault))}", file=sys.stderr)
        finally:
            self.by_exchange.pop(ex_id, None)
            if slot is not None and self.by_key.get(slot) is live:
                self.by_key.pop(slot, None)
            self.seam.row_settled(ex_id, cap)
