"""One ``record`` run: what its calls learn and what the user watches, written ahead of it.

A :class:`Session` is the context of a run's calls (:class:`recorder.upstream.Upstream` makes
them, each a :class:`capture.upstream_call.UpstreamCall`): the task and context ids learnt across
them (it is their :class:`capture.exchange.TaskContext`), the secrets never to print, the fold the
live view draws (:class:`recorder.live.LiveFold`), and the decisions the recorder takes, appended
as ``origin="local"`` events (:mod:`capture.notes`, scrubbed by :meth:`Session.text`), through
the one commit mechanism (:class:`store.writer.GroupCommitWriter`). Its
:meth:`Session.apply` runs only once a batch is in the log: nothing the user saw is missing from it.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from typing import cast

from a2a_tape import store
from a2a_tape.capture.notes import failed_event, note_event
from a2a_tape.recorder.live import LiveFold
from a2a_tape.store import ErrorItem, Item, StoredEvent, TaskSnapshot
from a2a_tape.store.decode import TextChunk
from a2a_tape.store.redact import Redactor
from a2a_tape.store.writer import Writes, run_writes, writer_of


class Session:
    def __init__(
        self,
        st: store.RecordingStore,
        redactor: Redactor | None = None,
        *,
        on_change: Callable[[Session], None] | None = None,
    ) -> None:
        self.store = st
        self.redactor = redactor or Redactor()
        self.on_change = on_change
        self.task_id: str | None = None
        self.context_id: str | None = None
        self.fold = LiveFold()
        self.events = 0  # the task's events this run put in the log: see :meth:`kept`
        self.local_events = 0  # of them, our own (origin local)
        self.commits = 0  # transactions that carried events (group commit: fewer than events)
        self.errors: list[ErrorItem] = []
        self.last_progress = time.monotonic()
        self.secrets: list[str] = []  # header values the user gave that must not leak into error text

    @property
    def state(self) -> str:
        return self.fold.state

    def text(self, value: str) -> str:
        """A text for the log or the screen with the run's secrets replaced (what scrubs its notes)."""
        return self.redactor.text(value, self.secrets)

    # -- what the calls recorded -------------------------------------------------------------

    def apply(self, stored: Sequence[StoredEvent], items: Sequence[Item | TextChunk]) -> list[ErrorItem]:
        """The log has them: now (and only now) fold, decide and render. Returns the errors
        among them (also kept in :attr:`errors`)."""
        errors: list[ErrorItem] = []
        self.commits += 1
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
        self.kept(stored)
        if progress or (has_snapshot and self._signature() != before):
            self.last_progress = time.monotonic()
        if self.on_change is not None:
            self.on_change(self)
        return errors

    def kept(self, stored: Sequence[StoredEvent]) -> None:
        """Count events this run put in the log. The one definition of a task's (run's) events:
        every row the log holds for it, the agent's and ours (LOCAL notes, a synthetic FAILED, the
        GetTask answer kept beside the stream), as ``show`` lists them and ``tasks``, ``channels``
        and the UI count them (the fold counts each row it folds: :attr:`fold.views.TaskView.events`).
        A lone Message reply has no task: its events are its exchange's. A note of ours filed under
        neither (before the send) is nobody's."""
        for ev in stored:
            if ev.task_id is not None or ev.exchange_id is not None:
                self.events += 1
                if ev.origin == "local":
                    self.local_events += 1

    def _signature(self) -> tuple[object, ...]:
        """What a poll must change to count as progress (a repeated snapshot is not)."""
        return self.fold.signature()

    def note_writes(self, action: str, detail: str = "", ex_id: int | None = None) -> Writes[StoredEvent]:
        """Record a decision of ours (origin ``local``) in the task's log, before it is acted on."""
        new = note_event(self, action, detail, task_id=self.task_id, exchange_id=ex_id)
        ev: StoredEvent = yield functools.partial(self.store.append, new)
        self.kept([ev])
        if self.on_change is not None:
            self.on_change(self)
        return ev

    async def note(self, action: str, detail: str = "", ex_id: int | None = None) -> StoredEvent:
        """:meth:`note_writes` through the one commit mechanism (the loop never waits for the lock)."""
        return await writer_of(self.store).run(self.note_writes(action, detail, ex_id))

    def fail_locally_writes(self, reason: str) -> Writes[None]:
        """A synthetic FAILED (origin ``local``), so the log never leaves the task WORKING."""
        if self.task_id is None:
            return
        new = failed_event(self, self.task_id, self.context_id, reason)
        ev: StoredEvent = yield functools.partial(self.store.append, new)
        self.fold.apply(ev, store.decode_item(new.payload))
        self.kept([ev])

    async def fail_locally(self, reason: str) -> None:
        """:meth:`fail_locally_writes` through the one commit mechanism."""
        await writer_of(self.store).run(self.fail_locally_writes(reason))

    def abandon(self, reason: str) -> None:
        """The run stops early (Ctrl-C), outside its event loop: say so in the task's log, at once
        (each call open then ended its own exchange as ``interrupted``)."""
        if self.task_id is not None:
            run_writes(self.note_writes("interrupted", reason))

    def reset_for_new_task(self) -> None:
        """``--on-stall resend``: the next items belong to a new task in the same context."""
        self.task_id = None
        self.events = self.local_events = 0  # the new task's, from here
        self.fold = LiveFold()
        self.errors = []
        self.last_progress = time.monotonic()
