"""One gRPC call on its way to the log: what the gRPC recording paths (the proxy and the client
interceptor) share, on top of the capture core (:mod:`capture.exchange`).

- the exchange row of a call: the method, its request in the proto3 JSON mapping (the v1.0 JSON
  shape: what the replay's matching, the idempotency gateway and every inspection read), the
  request metadata as headers (redacted by header name, ``-bin`` values in base64);
- each answer message as an event: its JSON mapping, redacted and filed under its task by
  :class:`capture.exchange.Capture` (the exact protobuf bytes go on to the client as they came);
- the call's end: the status (an error item in the log for a non-OK status, ``google.rpc.Status``
  with its details), trailers on the row beside the initial metadata, one outcome word;
- its writes: the capture core's one sequence (begin, commit, end once, notes scrubbed), as every
  other recording path writes its row.

Why here and not in ``store/``: the capture core stays binding-free (no protobuf); this module
is the gRPC side of it, as :mod:`capture.sending` is the HTTP side.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from a2a_tape import store
from a2a_tape.capture.exchange import Capture, Outcome
from a2a_tape.store.decode import TextChunk
from a2a_tape.store.json_values import decode_json
from a2a_tape.store.methods import GRPC
from a2a_tape.store.redact import Redactor
from a2a_tape.wire import grpc as grpc_wire

if TYPE_CHECKING:
    from a2a_tape.store.interface import RecordingStore
    from a2a_tape.store.writer import Writes

GRPC_CONTENT_TYPE = "application/grpc"
DEADLINE_EXCEEDED = 4
CLIENT_DEADLINE = "the client's deadline passed before the agent's answer ended"
DIALECT = "1.0"  # gRPC exists in A2A 1.0 only
_SKIP = frozenset({"user-agent", "grpc-timeout", "grpc-accept-encoding", "grpc-encoding", "te", "content-type"})
"""Request metadata the gRPC library sets itself on every call (a forwarded copy would be refused
or doubled): recorded, not forwarded."""


def metadata_pairs(metadata: Iterable[Any] | None) -> list[tuple[str, str]]:
    """gRPC metadata as header pairs for the log: ``-bin`` values (bytes) in base64."""
    out: list[tuple[str, str]] = []
    for key, value in metadata or ():
        if isinstance(value, bytes):
            value = base64.b64encode(value).decode()
        out.append((key, value))
    return out


def forwardable(metadata: Iterable[Any] | None, drop: frozenset[str] = frozenset()) -> list[tuple[str, Any]]:
    """The metadata a relay passes on: all of it but what gRPC sets itself and ``drop``."""
    return [(k, v) for k, v in metadata or () if k not in _SKIP and k not in drop and not k.startswith(":")]


def target_url(target: str, path: str) -> str:
    """The URL an exchange row names for a call: ``grpc://HOST:PORT/package.Service/Method``."""
    host = target.split("://", 1)[-1].rstrip("/")
    return f"grpc://{host}{path}"


class GrpcCapture:
    """The capture of one gRPC call (request, messages, status), for a path that moves the bytes."""

    def __init__(self, redactor: Redactor, path: str, *, role: str) -> None:
        self.redactor = redactor
        self.path = path
        self.method = grpc_wire.method(path)
        self.role = role
        self.cap = Capture(redactor)
        self.request_json: bytes | None = None
        self.undecodable: list[str] = []  # answer messages that are not the method's message type
        self.unmapped: list[str] = []  # numbers with no JSON mapping (NaN, Infinity), where
        self.deadline: float | None = None  # the client's own deadline (monotonic), when it set one

    def set_deadline(self, timeout: float | None) -> None:
        """The client's deadline, ``timeout`` seconds from now (None: it set none)."""
        self.deadline = None if timeout is None else time.monotonic() + timeout

    def deadline_passed(self, code: int) -> bool:
        """A DEADLINE_EXCEEDED that is the client's own deadline passing (gRPC ends the call at both
        ends then): not an answer of the agent's, and never recorded as one (a replay would answer
        every later client with it)."""
        return code == DEADLINE_EXCEEDED and self.deadline is not None and time.monotonic() >= self.deadline - 0.01

    @property
    def streaming(self) -> bool:
        return self.method.streaming if self.method is not None else False

    def request(self, target: str, raw: bytes | None, metadata: Iterable[Any] | None) -> store.Exchange:
        """The exchange row to begin (redacted). ``raw``: the request message's exact bytes
        (None for a client-streaming call the relay does not read ahead)."""
        m = self.method
        body = b""
        if m is not None and raw is not None:
            try:
                self.request_json = grpc_wire.to_json(m.request_type, raw, self.unmapped)
                body = redacted_as(self.redactor, b"params", self.request_json)
            except grpc_wire.NotTheMessage:
                body = raw  # kept as it came: the agent judges it
        ids = _request_ids(self.request_json)
        self.cap.task_id = ids.get("task_id")
        ex = self.cap.request(
            url=target_url(target, self.path),
            rpc_method=m.name if m is not None else self.path.rsplit("/", 1)[-1],
            dialect=DIALECT if m is not None else None,
            streaming=self.streaming,
            headers=metadata_pairs(metadata),
            body=body,
            message_id=ids.get("message_id"),
            role=self.role,
        )
        ex.context_id = ids.get("context_id")
        ex.task_id = self.cap.task_id
        ex.content_type = GRPC_CONTENT_TYPE
        ex.binding = GRPC
        return ex

    def head(self, initial: Iterable[Any] | None) -> None:
        """The answer's initial metadata, once known (before the first message's commit): who
        answered (:meth:`capture.exchange.Capture.answered_by`: a replay's marker makes the row's
        source replay)."""
        if initial:
            self.cap.answered_by(metadata_pairs(initial))

    def message_events(self, raws: Sequence[Any], arrived: Sequence[float] | None = None) -> list[store.NewEvent]:
        """The rows of answer messages (exact bytes, or the message objects a client's stub
        made of them): each in its JSON mapping. A message that does not parse as the method's
        answer is not an A2A item: a note says so; a method we do not know records no items."""
        return self.message_items(raws, arrived)[0]

    def message_items(
        self, raws: Sequence[Any], arrived: Sequence[float] | None = None
    ) -> tuple[list[store.NewEvent], list[store.Item | TextChunk]]:
        """:meth:`message_events`, with each row's item as the capture decoded it (a plain text
        chunk as it was peeked), for a caller that reads them (verify's contract)."""
        m = self.method
        if m is None:
            return [], []
        kind = "lf.a2a.v1.StreamResponse" if m.streaming else m.response_type
        items: list[tuple[bytes, str | None]] = []
        for raw in raws:
            try:
                if isinstance(raw, bytes):
                    payload = grpc_wire.to_json(kind, raw, self.unmapped)
                else:
                    payload = grpc_wire.message_json(raw, self.unmapped)
                payload = redacted_as(self.redactor, b"result", payload)
            except grpc_wire.NotTheMessage as exc:
                self.undecodable.append(str(exc))
            else:
                items.append((payload, None))
        if not items:
            return [], []
        return self.cap.events(items, arrived, peek=True)

    def status_event(self, code: int, details: str | None, trailers: Iterable[Any] | None) -> store.NewEvent | None:
        """The error item of a call that ended with a non-OK status (None for OK)."""
        if code == 0:
            return None
        payload = grpc_wire.error_item(code, details, list(trailers or ()))
        new, _ = self.cap.events([(payload, None)])
        return new[0]

    def commit_writes(self, log: RecordingStore, events: Sequence[store.NewEvent]) -> Writes[list[store.StoredEvent]]:
        """Answer messages' rows (:meth:`message_events`, :meth:`status_event`), through the
        exchange's one sequence (:meth:`capture.exchange.Capture.commit_writes`)."""
        stored: list[store.StoredEvent] = yield from self.cap.commit_writes(log, events)
        return stored

    def end_writes(
        self,
        log: RecordingStore,
        outcome: Outcome,
        *,
        code: int | None,
        details: str | None,
        initial: Iterable[Any] | None,
        trailers: Iterable[Any] | None,
        error: str | None = None,
        also: Callable[[], object] | None = None,
    ) -> Writes[dict[str, object] | None]:
        """The row's end through the exchange's one sequence (:meth:`capture.exchange.Capture.end_writes`,
        written once; ``also``: the caller's, in the same transaction): the response metadata and
        trailers (``grpc-status`` and ``grpc-message`` among them, as a gRPC server sends them),
        the outcome; then the local notes the call left: payloads redacted at byte level, answers
        that were not the method's message type, numbers JSON cannot hold (the client got them as
        sent). The fields written (None: the row had ended already)."""
        headers = metadata_pairs(initial) + metadata_pairs(trailers)
        if code is not None:
            headers.append(("grpc-status", str(code)))
            if details:
                headers.append(("grpc-message", details))
        fields: dict[str, object] = {
            "status": 200 if code is not None else None,
            "content_type": GRPC_CONTENT_TYPE if code is not None else None,
            "response_headers": self.redactor.headers_dict(headers),
        }
        ended = yield from self.cap.end_writes(log, outcome, error, also, **fields)
        if ended is None:
            return None
        found = [("undecodable", n) for n in dict.fromkeys(self.undecodable)]
        found += [("not-json", n) for n in dict.fromkeys(self.unmapped)]
        self.undecodable, self.unmapped = [], []
        for action, detail in found:
            yield from self.cap.note_writes(log, action, detail)
        return ended


def redacted_as(redactor: Redactor, member: bytes, payload: bytes) -> bytes:
    """A gRPC message's JSON with the configured JSON paths redacted as they are written for the
    JSON-RPC form (``params.message.metadata.token``, ``result.artifact...``): the message read as
    the ``params`` of a request or the ``result`` of an answer, so one ``[tool.a2a-tape]`` table
    covers every binding. (The capture core then applies the paths to the bare JSON as well.)"""
    if not redactor.redacts(payload):
        return payload
    wrapped = b'{"' + member + b'":' + payload + b"}"
    out, _ = redactor.payload(wrapped)
    if out is wrapped:
        return payload
    return msgspec.json.encode(decode_json(out)[member.decode()])


def outcome_of(code: int, streaming: bool, messages: int) -> Outcome:
    """The outcome word of a call that ended with ``code`` (docs/tape-format.md)."""
    if code == 0:
        return "closed" if streaming else "ok"
    if code == 14 and messages:  # UNAVAILABLE mid-stream: the connection went
        return "dropped"
    if code == 4:
        return "timeout"
    return "error"


def _request_ids(request_json: bytes | None) -> dict[str, str]:
    """The ids a request names (``message.messageId``/``taskId``/``contextId``, or a task ``id``)."""
    if not request_json:
        return {}
    try:
        doc = msgspec.json.decode(request_json)
    except msgspec.DecodeError:
        return {}
    out: dict[str, str] = {}
    msg = doc.get("message") if isinstance(doc, dict) else None
    if isinstance(msg, dict):
        for key, name in (("messageId", "message_id"), ("taskId", "task_id"), ("contextId", "context_id")):
            if isinstance(msg.get(key), str):
                out[name] = msg[key]
    if isinstance(doc, dict):
        for key in ("taskId", "id"):  # a push config names its task taskId, its own id id
            if isinstance(doc.get(key), str) and "task_id" not in out:
                out["task_id"] = doc[key]
    return out
