"""The one write seam of both proxies (the HTTP relay, :mod:`recorder.proxy.server`, and the gRPC one,
:mod:`recorder.proxy.grpc_server`): every exchange row they write is begun (and its key claimed),
noted and ended here, through the capture core's one sequence (:mod:`capture.exchange`), stamped
with the proxy's observer; each row's final line is told (``on_line``) and each relay's end
(``on_settled``). Rows keep URLs and headers redacted (:meth:`WriteSeam.stored_url`,
:meth:`WriteSeam.stored_headers`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import anyio
import httpx
import msgspec

from a2a_tape import store
from a2a_tape.capture.sending import Capture, Outcome
from a2a_tape.recorder.proxy.idempotency import Gateway
from a2a_tape.recorder.proxy.proxy_config import ProxyConfig
from a2a_tape.store.observers import new_observer
from a2a_tape.store.writer import Writes, run_writes, writer_of


class WriteSeam:
    """The rows of one proxy: its store, writer, observer and idempotency gateway."""

    def __init__(self, st: store.Store, config: ProxyConfig) -> None:
        self.store = st
        self.config = config
        self.observer = new_observer("proxy")  # this proxy's relays are one run of each task
        self.gateway = Gateway(st, ttl=config.idempotency_ttl)
        self.writer: store.GroupCommitWriter | None = None
        # called (on the proxy's event loop) with each exchange id once its row is final: lets a caller
        # wait for "the recording of this exchange is complete" without polling, and the live OTLP
        # export hand the id to its process (recorder.otlp_process). Set before the proxy serves.
        self.on_settled: Callable[[int], None] | None = None
        # given each exchange's final row (on a worker thread): proxy's line per request
        self.on_line: Callable[[store.Exchange], None] | None = None
        self._begun: dict[int, store.Exchange] = {}  # with on_line: each open row as begun (no read back)

    def stored_url(self, url: str) -> str:
        return self.config.redactor.url(url)

    def stored_headers(self, headers: httpx.Headers) -> dict[str, str]:
        """An answer's headers for the exchange row: secrets redacted, URLs in them too."""
        redactor = self.config.redactor
        pairs = [
            (k, redactor.url(v) if k.lower() in ("location", "content-location") else v)
            for k, v in headers.multi_items()
        ]
        return redactor.headers_dict(pairs)

    async def whole_row(self, ex: store.Exchange) -> None:
        """A row begun and ended at once (a card fetch), through the capture core's one sequence."""
        ex.url = self.stored_url(ex.url)  # a token in the query string stays off the disk
        await writer_of(self.store).run(Capture(self.config.redactor).whole_writes(self.store, ex, self.observer))

    async def begin_row(self, cap: Capture, ex: store.Exchange) -> int:
        """An exchange row (redacted: :meth:`_exchange_of`, :meth:`capture.grpc_calls.GrpcCapture.request`)
        begun through the capture core's one sequence, stamped with this proxy's observer. Both
        proxies begin a call without a key here (with one: :meth:`begin_and_claim`)."""
        ex_id = await writer_of(self.store).run(cap.begin_writes(self.store, ex, self.observer))
        if self.on_line is not None:  # a row still open: its line comes at its end
            self._begun[ex_id] = ex
        return ex_id

    async def begin_and_claim(
        self, cap: Capture, ex: store.Exchange, key: str, req_hash: str
    ) -> tuple[int, store.IdempotencyRecord, bool]:
        """The exchange row and the key's claim in one write transaction, through the capture core's
        one sequence: one fsync before forwarding (both proxies begin a keyed call here, the HTTP
        relay and :mod:`.grpc_server`)."""
        claim = functools.partial(self.gateway.claim, key, req_hash)
        ex_id, (record, claimed) = await writer_of(self.store).run(
            cap.claim_writes(self.store, ex, self.observer, claim)
        )
        if self.on_line is not None:
            self._begun[ex_id] = ex
        return ex_id, record, claimed

    async def note(self, cap: Capture, action: str, detail: str) -> None:
        """A decision of ours, in the exchange's log (origin ``local``, scrubbed); the gRPC proxy's too."""
        assert self.writer is not None
        await self.writer.run(cap.note_writes(self.store, action, detail))

    async def write_notes(self, cap: Capture) -> None:
        """The capture core's redaction notes (a payload that was not JSON), as local notes."""
        if cap.notes:
            assert self.writer is not None
            await self.writer.run(cap.notes_writes(self.store))

    async def finish_row(self, cap: Capture, outcome: Outcome, error: str | None = None) -> None:
        """The end of a row no relay of its own ends (a repeat, a refusal); the gRPC proxy's too."""
        await anyio.to_thread.run_sync(self.settle, cap, cap.end_writes(self.store, outcome, error))

    def settle(self, cap: Capture, end: Writes[dict[str, object] | None]) -> None:
        """An exchange's end (:meth:`capture.exchange.Capture.end_writes`: written once), on a worker
        thread, and its line told. Both proxies end every row here."""
        fields = run_writes(end)
        if fields is not None and cap.exchange_id is not None:
            self.tell_line(cap.exchange_id, fields)

    def key_fate(self, key: str | None, release: bool, cap: Capture) -> Callable[[], None] | None:
        """What becomes of an exchange's idempotency key, in its end's transaction: released (a
        retry may run) or done. One rule for the HTTP relay and the gRPC one (:mod:`.grpc_server`)."""
        if key is None:
            return None
        held = key

        def fate() -> None:
            if release:
                assert cap.exchange_id is not None
                self.gateway.release(held, cap.exchange_id)
            else:
                self.gateway.done(held, cap.task_id)

        return fate

    def tell_line(self, ex_id: int, fields: dict[str, object]) -> None:
        """Hand :attr:`on_line` the exchange's final row: as begun, with ``fields`` (what was
        updated at its end); read back when it was begun elsewhere."""
        if self.on_line is None:
            return
        begun = self._begun.pop(ex_id, None)
        row = self.store.get_exchange(ex_id) if begun is None else msgspec.structs.replace(begun, **fields)
        if row is not None:
            self.on_line(row)

    def row_settled(self, ex_id: int, cap: Capture) -> None:
        """A relayed exchange is over, its row final or not (a fault said so): forget it, tell the
        watcher. Both proxies end a relay here."""
        self._begun.pop(ex_id, None)
        if self.on_settled is not None:
            self.on_settled(ex_id)

    async def client_too_slow(self, cap: Capture, dropped: int, ended: str) -> None:
        """The local note of clients a relay dropped (:meth:`recorder.proxy.relay.Window.make_room`):
        how their answer ``ended``. Both proxies say it here."""
        cfg = self.config
        who = "a client" if dropped == 1 else f"{dropped} clients"
        await self.note(
            cap,
            "client-too-slow",
            f"{who} stayed more than {cfg.stream_buffer} bytes behind the agent for {cfg.slow_client_timeout:g} s "
            f"(--stream-buffer, --slow-client-timeout): {ended}; the recording goes on",
        )
