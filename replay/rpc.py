"""Typed JSON-RPC requests, error responses and agent cards for the replay side.

The replay server reads requests with these Structs (never raw dicts) and writes its own
answers (errors, ListTasks pages, cards) with them. Stream items themselves are never built
here: they are served from the log as recorded (:mod:`replay.sse`) or converted between
dialects (:mod:`replay.convert`).
"""

from __future__ import annotations

from typing import Any

import msgspec

from a2a_tape.store.errors import A2ATapeError
from a2a_tape.store.methods import METHODS, SEND_OPERATIONS  # noqa: F401 - (operation, dialect) per method
from a2a_tape.store.wire import WireMessage, WireTask

# JSON-RPC / A2A error codes
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
TASK_NOT_FOUND = -32001
TASK_NOT_CANCELABLE = -32002
UNSUPPORTED_OPERATION = -32004
VERSION_NOT_SUPPORTED = -32009  # a v1.0 method without the A2A-Version header (a2a-sdk 1.3.0)
NO_RECORDING = -32099  # a2a-tape: no recording matches (record mode none)


class Params(msgspec.Struct, omit_defaults=True):
    """The params of every method we answer (unknown fields ignored)."""

    message: WireMessage | None = None
    configuration: Any = None
    metadata: Any = None
    id: str | None = None  # GetTask / CancelTask / SubscribeToTask
    historyLength: int | None = None
    contextId: str | None = None  # ListTasks
    pageSize: int | None = None
    pageToken: str | None = None


class RpcRequest(msgspec.Struct, omit_defaults=True):
    jsonrpc: str | None = None
    id: str | int | float | None = None
    method: str | None = None
    params: Params | None = None


class RpcErrorBody(msgspec.Struct, omit_defaults=True):
    code: int
    message: str
    data: Any = None


class RpcError(msgspec.Struct):
    """A JSON-RPC error response (``id`` is always present, null when unknown)."""

    jsonrpc: str
    id: str | int | float | None
    error: RpcErrorBody


class ListTasksResult(msgspec.Struct):
    tasks: list[WireTask]
    nextPageToken: str = ""
    pageSize: int = 0
    totalSize: int = 0


class ListTasksResponse(msgspec.Struct):
    jsonrpc: str
    id: str | int | float | None
    result: ListTasksResult


class CardInterface(msgspec.Struct):
    url: str = ""
    protocolBinding: str = "JSONRPC"
    protocolVersion: str | None = None


class CardCapabilities(msgspec.Struct):
    streaming: bool = True
    pushNotifications: bool = False


class AgentCard(msgspec.Struct):
    """The fields of an agent card we read or rewrite; others are not kept."""

    name: str = "a2a-tape replay"
    description: str = "Recorded A2A sessions served by a2a-tape"
    version: str = "1.0.0"
    url: str | None = None
    supportedInterfaces: list[CardInterface] = []
    capabilities: CardCapabilities = msgspec.field(default_factory=CardCapabilities)
    defaultInputModes: list[str] = msgspec.field(default_factory=lambda: ["text"])
    defaultOutputModes: list[str] = msgspec.field(default_factory=lambda: ["text"])
    skills: list[Any] = []
    preferredTransport: str | None = None
    protocolVersion: str | None = None


_encoder = msgspec.json.Encoder()
_request_decoder = msgspec.json.Decoder(RpcRequest)
_card_decoder = msgspec.json.Decoder(AgentCard)


class BadRequest(A2ATapeError):
    """A request we cannot read: carries the JSON-RPC error code to answer with."""

    def __init__(self, code: int, message: str, rpc_id: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.rpc_id = rpc_id


def parse_request(body: bytes) -> RpcRequest:
    """Read one JSON-RPC request; raise :class:`BadRequest` (-32700 / -32600) otherwise."""
    try:
        req = _request_decoder.decode(body)
    except msgspec.ValidationError as exc:
        try:
            msgspec.json.decode(body)
        except msgspec.DecodeError:
            raise BadRequest(PARSE_ERROR, "Parse error: the body is not JSON") from None
        raise BadRequest(INVALID_REQUEST, f"Invalid Request: {exc}") from None
    except msgspec.DecodeError:
        raise BadRequest(PARSE_ERROR, "Parse error: the body is not JSON") from None
    if req.jsonrpc != "2.0" or not req.method:
        raise BadRequest(INVALID_REQUEST, "Invalid Request: expected jsonrpc '2.0' and a method", req.id)
    return req


def error_body(code: int, message: str, rpc_id: Any = None, data: Any = None) -> bytes:
    return _encoder.encode(RpcError("2.0", rpc_id, RpcErrorBody(code, message, data)))


def list_tasks_body(rpc_id: Any, tasks: list[WireTask]) -> bytes:
    return _encoder.encode(ListTasksResponse("2.0", rpc_id, ListTasksResult(tasks, "", len(tasks), len(tasks))))


def encode_id(rpc_id: Any) -> bytes:
    return _encoder.encode(rpc_id)


def card_for(base_url: str, recorded: bytes | None) -> bytes:
    """The recorded card with its URLs pointing at us, or a card made up for the recordings."""
    card = AgentCard()
    if recorded:
        try:
            card = _card_decoder.decode(recorded)
        except (msgspec.DecodeError, msgspec.ValidationError):
            card = AgentCard()
    url = base_url.rstrip("/") + "/"
    card.url = url
    card.supportedInterfaces = [
        CardInterface(url=url, protocolBinding="JSONRPC", protocolVersion=v) for v in ("1.0", "0.3")
    ]
    card.preferredTransport = card.preferredTransport or "JSONRPC"
    card.protocolVersion = card.protocolVersion or "0.3"
    card.capabilities = msgspec.structs.replace(card.capabilities, streaming=True)
    return _encoder.encode(card)
