"""Typed JSON-RPC requests, error responses and agent cards for the replay side.

The replay server reads requests with these Structs (never raw dicts) and writes its own
answers (errors, ListTasks pages, cards) with them. Stream items themselves are never built
here: they are served from the log as recorded (:mod:`wire.sse_frames`) or converted between
dialects (:mod:`replay.serve.convert`).
"""

from __future__ import annotations

from typing import Any

import msgspec

from a2a_tape.store.a2a_structs import WireMessage, WireTask
from a2a_tape.store.errors import A2ATapeError
from a2a_tape.store.json_values import Decoder
from a2a_tape.store.methods import METHODS as METHODS  # re-exported: (operation, dialect) per method
from a2a_tape.store.methods import SEND_OPERATIONS as SEND_OPERATIONS
from a2a_tape.wire.grpc import rewrite_grpc_urls

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
    status: str | int | None = None  # a TaskState name (or number); others are no filter
    statusTimestampAfter: str | None = None  # RFC 3339
    includeArtifacts: bool | None = None


class RpcRequest(msgspec.Struct, omit_defaults=True):
    jsonrpc: str | None = None
    id: str | int | float | None = None
    method: str | None = None
    params: Params | None = None


class _Envelope(msgspec.Struct):
    """A JSON-RPC request with its params unread (read on their own: a bad param is -32602)."""

    jsonrpc: Any = None
    id: Any = None
    method: Any = None
    params: msgspec.Raw = msgspec.Raw(b"null")


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
    """The card made up for recordings that hold none (:func:`card_for`)."""

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
_envelope_decoder = Decoder(_Envelope)
_params_decoder: Decoder[Params | None] = Decoder(Params | None)  # type: ignore[arg-type]  # a union is a type to msgspec, not to mypy


class BadRequest(A2ATapeError):
    """A request we cannot read: carries the JSON-RPC error code to answer with."""

    def __init__(self, code: int, message: str, rpc_id: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.rpc_id = rpc_id


class BadParams(BadRequest):
    """A JSON-RPC request whose params do not fit its method: answered with the request's id
    (-32602 in v1.0; an a2a-sdk 1.3.0 agent answers -32600 in v0.3, see :func:`bad_params_code`)."""

    def __init__(self, message: str, rpc_id: Any, method: str) -> None:
        super().__init__(INVALID_PARAMS, message, rpc_id)
        self.method = method


def bad_params_code(dialect: str) -> int:
    """What an a2a-sdk 1.3.0 agent answers to params it cannot read: v1.0 -32602 (protobuf
    parsing), v0.3 -32600 (the v0.3 adapter validates the whole request as one model)."""
    return INVALID_PARAMS if dialect == "1.0" else INVALID_REQUEST


def _id_of(raw: Any) -> str | int | float | None:
    return raw if isinstance(raw, (str, int, float)) and not isinstance(raw, bool) else None


def parse_request(body: bytes) -> RpcRequest:
    """Read one JSON-RPC request. Raise :class:`BadRequest` (-32700 / -32600, id null when the
    request has none we can read) or :class:`BadParams` (the request's id, its method)."""
    try:
        env = _envelope_decoder.decode(body)
    except msgspec.ValidationError as exc:
        raise BadRequest(INVALID_REQUEST, f"Invalid Request: {exc}") from None
    except msgspec.DecodeError:
        raise BadRequest(PARSE_ERROR, "Parse error: the body is not JSON") from None
    rpc_id = _id_of(env.id)
    if env.jsonrpc != "2.0" or not env.method or not isinstance(env.method, str):
        raise BadRequest(INVALID_REQUEST, "Invalid Request: expected jsonrpc '2.0' and a method", rpc_id)
    if env.id is not None and rpc_id is None:
        raise BadRequest(INVALID_REQUEST, "Invalid Request: id must be a string, a number or null")
    try:
        params = _params_decoder.decode(env.params)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise BadParams(f"Invalid params: {exc}", rpc_id, env.method) from None
    return RpcRequest(jsonrpc="2.0", id=rpc_id, method=env.method, params=params)


def error_body(code: int, message: str, rpc_id: Any = None, data: Any = None) -> bytes:
    return _encoder.encode(RpcError("2.0", rpc_id, RpcErrorBody(code, message, data)))


def list_tasks_body(rpc_id: Any, tasks: list[WireTask], next_page_token: str, page_size: int, total_size: int) -> bytes:
    return _encoder.encode(
        ListTasksResponse("2.0", rpc_id, ListTasksResult(tasks, next_page_token, page_size, total_size))
    )


def encode_id(rpc_id: Any) -> bytes:
    return _encoder.encode(rpc_id)


def card_for(base_url: str, grpc_address: str | None = None) -> bytes:
    """The card made up for recordings that hold none: both JSON-RPC dialects and HTTP+JSON at
    ``base_url``, and the gRPC replay server at ``grpc_address`` (serve --grpc-listen, the pytest
    plugin's ``grpc_target``) added as a recorded card gets it (:func:`grpc_wire.rewrite_grpc_urls`)."""
    url = base_url.rstrip("/") + "/"
    card = AgentCard(
        url=url,
        supportedInterfaces=[
            *(CardInterface(url=url, protocolBinding="JSONRPC", protocolVersion=v) for v in ("1.0", "0.3")),
            CardInterface(url=url.rstrip("/"), protocolBinding="HTTP+JSON", protocolVersion="1.0"),  # its routes
        ],
        preferredTransport="JSONRPC",
        protocolVersion="0.3",
    )
    return rewrite_grpc_urls(_encoder.encode(card), grpc_address)[0]
