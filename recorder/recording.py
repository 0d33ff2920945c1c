"""The write-ahead session: every raw item reaches the log before anyone looks at it.

A :class:`Session` owns one store and records exchanges (requests, status, content type,
outcome) and the items they carried. ``record_items`` appends a whole chunk's worth of items
in one transaction, then folds them: the caller renders or decides only after that returns,
so nothing the user saw is missing from the log. Task ids come from the decoded items; items
that arrive before the task is known belong to their exchange. Decisions the recorder takes
are appended as ``origin="local"`` events (:func:`store.local_note`, :func:`store.local_failed`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

from a2a_tape import store
from a2a_tape.store import ErrorItem, Item, NewEvent, StoredEvent, TaskSnapshot
from a2a_tape.store.decode import TextChunk, peek_text_chunk
from a2a_tape.store.redact import Redactor

from .live import LiveFold


def _no_chunk(payload: bytes) -> None:
    return None


class Session:
    def __init__(
        self,
        st: store.RecordingStore,
        redactor: Redactor | None = None,
        *,
        on_change: Callable[[Session], None] | None = None,
        folding: bool = True,
    ) -> None:
        self.store = st
        self.folding = folding  # False: record only (a transport has no view to draw)
        self.redactor = redactor or Redactor()
        self.on_change = on_change
        self.task_id: str | None = None
        self.context_id: str | None = None
        self.fold = LiveFold()
        self.events = 0  # upstream events recorded
        self.local_events = 0
        self.commits = 0  # transactions that carried events (group commit: fewer than events)
        self.errors: list[ErrorItem] = []
        self.last_progress = time.monotonic()
        self.exchange_ids: list[int] = []
        self._t0: dict[int, float] = {}
        self._pending: dict[int, dict[str, object]] = {}
        self._open: set[int] = set()  # exchanges begun and not finished
        self.secrets: list[str] = []  # header values the user gave that must not leak into error text

    @property
    def state(self) -> str:
        return self.fold.state

    # -- exchanges ---------------------------------------------------------------------------

    def begin(
        self,
        *,
        url: str,
        rpc_method: str | None,
        dialect: str | None,
        streaming: bool,
        headers: Mapping[str, str] | Sequence[tuple[str, str]],
        body: bytes = b"",
        http_method: str = "POST",
        message_id: str | None = None,
        role: str = "client",
    ) -> int:
        url, found = self.redactor.url_secrets(url)
        self.secrets += found  # a token in the URL must not come back in an error text either
        ex = store.Exchange(
            started_at=time.time(),
            url=url,
            http_method=http_method,
            rpc_method=rpc_method,
            dialect=dialect,
            streaming=streaming,
            request_headers=self.redactor.headers_dict(headers),
            request_body=self.redactor.json_bytes(body),
            task_id=self.task_id,
            context_id=self.context_id,
            message_id=message_id,
            role=role,
        )
        ex_id = self.store.begin_exchange(ex)
        self._t0[ex_id] = time.monotonic()
        self._open.add(ex_id)
        self.exchange_ids.append(ex_id)
        return ex_id

    def response(
        self, ex_id: int, status: int, content_type: str | None, headers: Mapping[str, str] | Sequence[tuple[str, str]]
    ) -> None:
        """Remember the response line; written with the first events (one transaction, not two)."""
        self._pending[ex_id] = {
            "status": status,
            "content_type": content_type,
            "response_headers": self.redactor.headers_dict(headers),
        }

    def finish(self, ex_id: int, outcome: str, *, error: str | None = None, response_body: bytes | None = None) -> None:
        self._open.discard(ex_id)
        fields: dict[str, object] = self._pending.pop(ex_id, None) or {}
        fields.update(ended_at=time.time(), outcome=outcome)
        if error is not None:
            fields["error"] = self.redactor.text(error, self.secrets)
        if response_body is not None:
            fields["response_body"] = self.redactor.json_bytes(response_body)
        if self.task_id is not None:
            fields["task_id"] = self.task_id
        if self.context_id is not None:
            fields["context_id"] = self.context_id
        self.store.update_exchange(ex_id, **fields)

    # -- events ------------------------------------------------------------------------------

    def record_items(self, ex_id: int, raw: Sequence[tuple[bytes, str | None]]) -> list[tuple[StoredEvent, Item]]:
        """Append ``(payload, sse_event)`` items in one transaction, then fold them. Write-ahead.
        Returns each stored event with its decoded item (for a caller that looks at them)."""
        if not raw:
            return []
        new, items = self.prepare(ex_id, raw, peek=False)
        stored = self.commit(ex_id, new)
        self.apply(stored, items)
        return list(zip(stored, items))  # type: ignore[arg-type] - no peeked chunks without peek

    def record_stream(self, ex_id: int, raw: Sequence[tuple[bytes, str | None]]) -> list[ErrorItem]:
        """:meth:`record_items` for a stream's items: returns only the errors among them."""
        if not raw:
            return []
        new, items = self.prepare(ex_id, raw)
        return self.apply(self.commit(ex_id, new), items)

    def prepare(
        self,
        ex_id: int,
        raw: Sequence[tuple[bytes, str | None]],
        arrived: Sequence[float] | None = None,
        *,
        peek: bool = True,
    ) -> tuple[list[NewEvent], list[Item | TextChunk]]:
        """Decode items (task id, arrival time); nothing is shown or decided yet.

        ``arrived``: the monotonic clock when each item came off the socket (default: now).
        ``peek``: a plain text chunk (the bulk of a stream) is read with the narrow decoder
        (:func:`store.decode.peek_text_chunk`) and handed to :meth:`apply` as it is, not as an
        :class:`~store.Item`.
        """
        start = self._t0.get(ex_id)
        if start is None:
            start = self._t0[ex_id] = time.monotonic()
        wall0 = time.time() - (time.monotonic() - start)  # the wall clock at the exchange's start
        now = time.monotonic()
        redact = self.redactor.json_bytes if self.redactor.json_paths else None
        items: list[Item | TextChunk] = []
        new: list[NewEvent] = []
        decode = store.decode_item
        narrow = peek_text_chunk if peek else _no_chunk
        for k, (payload, sse_event) in enumerate(raw):
            if redact is not None:
                payload = redact(payload)
            item: Item | TextChunk | None = narrow(payload)
            if item is None:
                item = decode(payload)
                tid = item.task_id or None
            else:
                tid = item.taskId or None
            if tid is None:
                tid = self.task_id  # an error, a message or an undecodable line inside the task's stream
            elif self.task_id is None or self.context_id is None:
                self._learn(item)
            mono = (arrived[k] if arrived is not None else now) - start
            items.append(item)
            # positional (payload, task_id, exchange_id, seq, sse_event, received_at, mono): per event
            new.append(NewEvent(payload, tid, ex_id, None, sse_event, wall0 + mono, mono))
        return new, items

    def commit(self, ex_id: int, new: Sequence[NewEvent]) -> list[StoredEvent]:
        """One transaction: the exchange's pending response fields and the events. Thread-safe."""
        pending = self._pending.pop(ex_id, None)
        self.commits += 1
        with self.store.transaction():
            if pending:
                self.store.update_exchange(ex_id, **pending)
            return self.store.append_batch(new)

    def apply(self, stored: Sequence[StoredEvent], items: Sequence[Item | TextChunk]) -> list[ErrorItem]:
        """The log has them: now (and only now) fold, decide and render. Returns the errors
        among them (also kept in :attr:`errors`)."""
        errors: list[ErrorItem] = []
        if not self.folding:
            for item in items:
                if type(item) is Item and isinstance(item.body, ErrorItem):
                    errors.append(item.body)
            self.errors += errors
            self.events += len(stored)
            if self.on_change is not None:
                self.on_change(self)
            return errors
        has_snapshot = any(type(i) is Item and isinstance(i.body, TaskSnapshot) for i in items)
        before = self._signature() if has_snapshot else None
        progress = False
        fold = self.fold
        for ev, item in zip(stored, items):
            if type(item) is not Item:  # a peeked text chunk
                progress = True
                fold.apply_text(ev, item)
                continue
            body = item.body
            if not isinstance(body, TaskSnapshot):
                progress = True
            fold.apply(ev, item)
            if isinstance(body, ErrorItem):
                errors.append(body)
        self.errors += errors
        self.events += len(stored)
        if progress or (has_snapshot and self._signature() != before):
            self.last_progress = time.monotonic()
        if self.on_change is not None:
            self.on_change(self)
        return errors

    def _signature(self) -> tuple:
        """What a poll must change to count as progress (a repeated snapshot is not)."""
        return self.fold.signature()

    def _learn(self, item: Item | TextChunk) -> None:
        tid, ctx = (item.task_id, item.context_id) if type(item) is Item else (item.taskId, item.contextId)
        if tid and self.task_id is None:
            self.task_id = tid
        if ctx and self.context_id is None:
            self.context_id = ctx

    def note(self, action: str, detail: str = "", ex_id: int | None = None) -> StoredEvent:
        """Record a decision of ours (origin ``local``) in the task's log."""
        payload = store.local_note(action, self.redactor.text(detail, self.secrets), self.task_id)
        ev = self.store.append(
            NewEvent(payload=payload, task_id=self.task_id, exchange_id=ex_id, received_at=time.time(), origin="local")
        )
        self.local_events += 1
        if self.on_change is not None:
            self.on_change(self)
        return ev

    def fail_locally(self, reason: str) -> None:
        """A synthetic FAILED (origin ``local``), so the log never leaves the task WORKING."""
        if self.task_id is None:
            return
        payload = store.local_failed(self.task_id, self.context_id, self.redactor.text(reason, self.secrets))
        ev = self.store.append(NewEvent(payload=payload, task_id=self.task_id, received_at=time.time(), origin="local"))
        self.fold.apply(ev, store.decode_item(payload))
        self.local_events += 1

    def abandon(self, reason: str) -> None:
        """The run stops early (Ctrl-C): close open exchanges with ``reason`` and say so in the log."""
        for ex_id in sorted(self._open):
            self.finish(ex_id, "interrupted", error=reason)
        if self.task_id is not None:
            self.note("interrupted", reason)

    def reset_for_new_task(self) -> None:
        """``--on-stall resend``: the next items belong to a new task in the same context."""
        self.task_id = None
        self.fold = LiveFold()
        self.errors = []
        self.last_progress = time.monotonic()
