"""The write-ahead session: every raw item reaches the log before anyone looks at it.

A :class:`Session` owns one store and records exchanges (requests, status, content type,
outcome) and the items they carried, each exchange a :class:`store.capture.Capture` (the capture
core: redaction, SSE items, the append plan, the outcome); the session adds what a run shares:
the task and context ids across exchanges, the fold, group commit. ``record_items`` appends a whole chunk's worth of items
in one transaction, then folds them: the caller renders or decides only after that returns,
so nothing the user saw is missing from the log. Task ids come from the decoded items; items
that arrive before the task is known belong to their exchange. Decisions the recorder takes
are appended as ``origin="local"`` events (:func:`store.local_note`, :func:`store.local_failed`).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Literal, cast, overload

from a2a_tape import store
from a2a_tape.store import ErrorItem, Item, NewEvent, StoredEvent, TaskSnapshot
from a2a_tape.store.capture import Capture, Outcome, plan_events
from a2a_tape.store.decode import TextChunk
from a2a_tape.store.redact import Redactor
from a2a_tape.store.writer import Writes, writing_now

from .live import LiveFold
from .sending import store_fault


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
        self._caps: dict[int, Capture] = {}
        self._open: set[int] = set()  # exchanges begun and not finished
        self.secrets: list[str] = []  # header values the user gave that must not leak into error text

    @property
    def state(self) -> str:
        return self.fold.state

    # -- exchanges: each one a :class:`store.capture.Capture` ------------------------------

    def begin_writes(
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
    ) -> Writes[int]:
        """Open an exchange: its row, written (redacted) before the request goes out. Returns its id."""
        cap = Capture(self.redactor, task_id=self.task_id, context_id=self.context_id, secrets=self.secrets)
        ex = cap.request(
            url=url,
            rpc_method=rpc_method,
            dialect=dialect,
            streaming=streaming,
            headers=headers,
            body=body,
            http_method=http_method,
            message_id=message_id,
            role=role,
        )
        self.secrets += [s for s in cap.secrets if s not in self.secrets]  # a URL token: never in a text either
        ex_id: int = yield functools.partial(self.store.begin_exchange, ex)
        cap.exchange_id = ex_id
        self._caps[ex_id] = cap
        self._open.add(ex_id)
        self.exchange_ids.append(ex_id)
        return ex_id

    begin = writing_now(begin_writes)

    def capture(self, ex_id: int) -> Capture:
        """The capture core of an exchange of this session."""
        cap = self._caps.get(ex_id)
        if cap is None:
            cap = self._caps[ex_id] = Capture(self.redactor, secrets=self.secrets)
            cap.exchange_id = ex_id
        return cap

    def response(
        self, ex_id: int, status: int, content_type: str | None, headers: Mapping[str, str] | Sequence[tuple[str, str]]
    ) -> None:
        """Remember the response line; written with the first events (one transaction, not two)."""
        self.capture(ex_id).head(status, content_type, headers)

    def finish_writes(
        self, ex_id: int, outcome: Outcome, *, error: str | None = None, response_body: bytes | None = None
    ) -> Writes[None]:
        """Close an exchange: its outcome, error (redacted) and what it learnt, then its notes."""
        self._open.discard(ex_id)
        cap = self.capture(ex_id)
        cap.task_id, cap.context_id = self.task_id, self.context_id
        cap.secrets = self.secrets
        extra: dict[str, object] = {} if response_body is None else {"response_body": response_body}
        yield functools.partial(self.store.update_exchange, ex_id, **cap.end(outcome, error, **extra))
        notes, cap.notes = cap.notes, []
        for note in dict.fromkeys(notes):  # a payload that was not JSON and had to be redacted
            yield from self.note_writes("redacted", note, ex_id)

    finish = writing_now(finish_writes)

    # -- events ------------------------------------------------------------------------------

    def record_items_writes(
        self, ex_id: int, raw: Sequence[tuple[bytes, str | None]]
    ) -> Writes[list[tuple[StoredEvent, Item]]]:
        """Append ``(payload, sse_event)`` items in one transaction, then fold them. Write-ahead.
        Returns each stored event with its decoded item (for a caller that looks at them)."""
        if not raw:
            return []
        new, items = self.prepare(ex_id, raw, peek=False)
        stored = yield from self.commit_writes(ex_id, new)
        self.apply(stored, items)
        return list(zip(stored, items))

    record_items = writing_now(record_items_writes)

    def record_stream_writes(self, ex_id: int, raw: Sequence[tuple[bytes, str | None]]) -> Writes[list[ErrorItem]]:
        """:meth:`record_items` for a stream's items: returns only the errors among them."""
        if not raw:
            return []
        new, items = self.prepare(ex_id, raw)
        stored = yield from self.commit_writes(ex_id, new)
        return self.apply(stored, items)

    record_stream = writing_now(record_stream_writes)

    @overload
    def prepare(
        self,
        ex_id: int,
        raw: Sequence[tuple[bytes, str | None]],
        arrived: Sequence[float] | None = None,
        *,
        peek: Literal[False],
    ) -> tuple[list[NewEvent], list[Item]]: ...

    @overload
    def prepare(
        self,
        ex_id: int,
        raw: Sequence[tuple[bytes, str | None]],
        arrived: Sequence[float] | None = None,
        *,
        peek: bool = True,
    ) -> tuple[list[NewEvent], list[Item | TextChunk]]: ...

    def prepare(
        self,
        ex_id: int,
        raw: Sequence[tuple[bytes, str | None]],
        arrived: Sequence[float] | None = None,
        *,
        peek: bool = True,
    ) -> tuple[list[NewEvent], list[Item]] | tuple[list[NewEvent], list[Item | TextChunk]]:
        """The append plan of the items (:func:`store.capture.plan_events`: redacted, task ids
        learnt by the session, arrival times); nothing is shown or decided yet. ``peek``: a
        plain text chunk is handed to :meth:`apply` as it is, not as an :class:`~store.Item`."""
        cap = self.capture(ex_id)
        return plan_events(
            self, raw, ex_id, self.redactor, start=cap.start, arrived=arrived, peek=peek, notes=cap.notes
        )

    def commit_writes(self, ex_id: int, new: Sequence[NewEvent]) -> Writes[list[StoredEvent]]:
        """One transaction: the exchange's pending response fields and the events. Thread-safe.
        A log that cannot be written raises the :class:`store.StoreError` naming why."""
        pending = self.capture(ex_id).pending_head()
        self.commits += 1
        stored: list[StoredEvent] = yield functools.partial(self._commit, ex_id, pending, new)
        return stored

    commit = writing_now(commit_writes)

    def _commit(self, ex_id: int, pending: dict[str, object], new: Sequence[NewEvent]) -> list[StoredEvent]:
        try:
            with self.store.transaction():
                if pending:
                    self.store.update_exchange(ex_id, **pending)
                return self.store.append_batch(new)
        except Exception as exc:
            fault = store_fault(exc)
            if fault is None or fault is exc:
                raise
            raise fault from None

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
        run = 0  # where the peeked text chunks since the last decoded item begin
        for k, item in enumerate(items):
            if type(item) is not Item:  # a peeked text chunk: folded with the ones next to it
                continue
            if run < k:
                progress = True
                fold.apply_texts(stored[run:k], cast("Sequence[TextChunk]", items[run:k]))
            run = k + 1
            body = item.body
            if not isinstance(body, TaskSnapshot):
                progress = True
            fold.apply(stored[k], item)
            if isinstance(body, ErrorItem):
                errors.append(body)
        if run < len(items):
            progress = True
            fold.apply_texts(stored[run:], cast("Sequence[TextChunk]", items[run:]))
        self.errors += errors
        self.events += len(stored)
        if progress or (has_snapshot and self._signature() != before):
            self.last_progress = time.monotonic()
        if self.on_change is not None:
            self.on_change(self)
        return errors

    def _signature(self) -> tuple[object, ...]:
        """What a poll must change to count as progress (a repeated snapshot is not)."""
        return self.fold.signature()

    def note_writes(self, action: str, detail: str = "", ex_id: int | None = None) -> Writes[StoredEvent]:
        """Record a decision of ours (origin ``local``) in the task's log."""
        payload = store.local_note(action, self.redactor.text(detail, self.secrets), self.task_id)
        new = NewEvent(
            payload=payload, task_id=self.task_id, exchange_id=ex_id, received_at=time.time(), origin="local"
        )
        ev: StoredEvent = yield functools.partial(self.store.append, new)
        self.local_events += 1
        if self.on_change is not None:
            self.on_change(self)
        return ev

    note = writing_now(note_writes)

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
