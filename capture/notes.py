"""A decision of a2a-tape's, on its way to the log: the one builder of an ``origin="local"`` event.

Every driver (record and recovery, the proxies, the push receiver, a gRPC call, the capture core)
writes what it decided or found as a local event built here, and each builder takes the scrubber of
the exchange it belongs to (a :class:`~a2a_tape.capture.exchange.Capture`, or the path's
:class:`~a2a_tape.store.redact.Redactor`): the free text passes through it before it is encoded, so no
path can write a credential it was told into a note. A builder without a scrubber does not exist.
(The one other local event is the removal note, written inside the store's own transaction by
:mod:`a2a_tape.store.removal`: its detail is task ids read from the log, already redacted.)
"""

from __future__ import annotations

import time

from a2a_tape.store import NewEvent
from a2a_tape.store.decode import local_failed, local_note
from a2a_tape.wire.http_client import Scrubs
from a2a_tape.wire.push_configs import PUSH

__all__ = ["Scrubs", "failed_event", "note_event", "push_event"]


def note_event(
    scrub: Scrubs,
    action: str,
    detail: str = "",
    *,
    task_id: str | None = None,
    exchange_id: int | None = None,
    received_at: float | None = None,
) -> NewEvent:
    """A note of ours (``action``, why in ``detail``), its detail redacted by ``scrub``."""
    return NewEvent(
        payload=local_note(action, scrub.text(detail) if detail else detail, task_id),
        task_id=task_id,
        exchange_id=exchange_id,
        received_at=time.time() if received_at is None else received_at,
        origin="local",
    )


def failed_event(scrub: Scrubs, task_id: str, context_id: str | None, reason: str) -> NewEvent:
    """A synthetic FAILED status update of ours, so the log never leaves a task WORKING; the reason
    (the client's status message) redacted by ``scrub``."""
    return NewEvent(
        payload=local_failed(task_id, context_id, scrub.text(reason)),
        task_id=task_id,
        received_at=time.time(),
        origin="local",
    )


def push_event(
    scrub: Scrubs,
    task_id: str,
    exchange_id: int,
    received_at: float,
    *,
    state: str | None = None,
    context_id: str | None = None,
) -> NewEvent:
    """The note that gives a push (its exchange row, ``exchange_id``) its place in its task's log:
    action ``push``, with the state and context the push carried. A note is never folded as an
    update (the push is not counted twice beside the stream); it makes the task known to every
    index (a task the log knows only by its pushes is listed, examined, searched) and moves their
    cursors when a push arrives after the task's last event (docs/design.md, section 12)."""
    detail = f"the agent pushed {f'state {state}' if state else 'an update'} to the webhook (exchange {exchange_id})"
    return NewEvent(
        payload=local_note(PUSH, scrub.text(detail), task_id, state=state, context_id=context_id),
        task_id=task_id,
        exchange_id=exchange_id,
        received_at=received_at,
        origin="local",
    )
