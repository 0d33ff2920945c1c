"""What the recorder's paths import to talk upstream, in one place, and the log's faults as errors.

The capture core (begin -> head -> body bytes -> SSE items -> redaction -> append plan ->
outcome) is :mod:`capture.exchange`; its HTTP side (timeouts on connect, first byte and reads,
redirects named and never followed, decoded body bytes, transport errors as one line) is
:mod:`wire.http_client`, where serve's recording modes reach it too; the recorded-upstream client
made of them is :mod:`capture.upstream_call`. This module re-exports them for ``recorder/``, with
:func:`store_fault` (defined in :mod:`store.driver_errors`, where the command line's error handler
finds it without importing httpx).
"""

from __future__ import annotations

from a2a_tape.capture.exchange import CUT, OUTCOMES, Capture, Outcome, TaskContext, plan_events
from a2a_tape.store.driver_errors import store_fault
from a2a_tape.wire.codings import DecodingError
from a2a_tape.wire.http_client import (
    FirstByteTimeout,
    Timeouts,
    body_chunks,
    describe,
    redirect_message,
    send,
)

__all__ = [
    "CUT",
    "OUTCOMES",
    "Capture",
    "DecodingError",
    "FirstByteTimeout",
    "Outcome",
    "TaskContext",
    "Timeouts",
    "body_chunks",
    "describe",
    "plan_events",
    "redirect_message",
    "send",
    "store_fault",
]
