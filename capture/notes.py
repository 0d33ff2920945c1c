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

__all__ = ["Scrubs", "failed_event", "note_event"]


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
