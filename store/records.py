"""The rows of the event log, as typed records (what the store API takes and returns)."""

from __future__ import annotations

import msgspec

from a2a_tape.store.events import Origin


# Events hold only bytes, strings and numbers (no reference cycles possible): ``gc=False`` keeps
# the tens of thousands a stream creates out of the cycle collector's generations.
class NewEvent(msgspec.Struct, gc=False, array_like=True, tag="event"):
    """An event to append. ``seq`` is assigned by the store unless given (imports, retries).

    Encoded (msgpack, between an import and its tape reader process) as an array: "event", then
    the fields in order.

    ``task_id`` is ``None`` while the task is not known yet (an error before the first event):
    such events are keyed by their exchange instead.
    """

    payload: bytes
    task_id: str | None = None
    exchange_id: int | None = None
    seq: int | None = None
    sse_event: str | None = None
    received_at: float = 0.0  # wall clock, unix seconds
    mono: float | None = None  # seconds since the exchange started (monotonic clock)
    origin: Origin = "upstream"


class StoredEvent(msgspec.Struct, frozen=True, gc=False):
    position: int
    task_id: str | None
    seq: int
    exchange_id: int | None
    sse_event: str | None
    payload: bytes
    received_at: float
    mono: float | None
    origin: Origin


class Exchange(msgspec.Struct):
    """One HTTP request and its response (a stream, a JSON body, or a failure)."""

    id: int | None = None
    started_at: float = 0.0
    ended_at: float | None = None
    url: str = ""
    http_method: str = "POST"
    rpc_method: str | None = None
    dialect: str | None = None  # the protocol version: "0.3", "1.0" ("rest" in logs before the binding column)
    streaming: bool = False
    request_headers: dict[str, str] = {}
    request_body: bytes = b""
    status: int | None = None
    content_type: str | None = None
    response_headers: dict[str, str] = {}
    response_body: bytes | None = None  # a non-event body (an HTML error page, a card)
    outcome: str | None = None  # ok / closed / dropped / timeout / error / incomplete
    error: str | None = None
    task_id: str | None = None
    context_id: str | None = None
    message_id: str | None = None
    idempotency_key: str | None = None
    role: str = "client"  # client / proxy / replay / import
    binding: str | None = None  # jsonrpc / http+json / grpc (store.methods.BINDINGS); None: not A2A, or an old row
    observer: str | None = None  # who recorded it (store.observers): the run it belongs to; None joins the latest
    source: str | None = None  # how that observer saw it: client / proxy / in-process / replay / import / probe
    host: str | None = None  # the host the observer ran on


class IdempotencyRecord(msgspec.Struct):
    key: str
    request_hash: str
    exchange_id: int | None
    task_id: str | None = None
    state: str = "in_flight"  # in_flight / done
    created_at: float = 0.0
    expires_at: float | None = None


class TaskEvents(msgspec.Struct, frozen=True):
    """How many events a task has and when they arrived (no decoding)."""

    task_id: str
    events: int
    first_at: float
    last_at: float
    first_position: int
    last_position: int
