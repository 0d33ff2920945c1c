"""The gRPC binding on the wire (docs/design.md section 15): A2A's ``lf.a2a.v1.A2AService``.

What a gRPC call looks like, for every layer that meets one (the recording proxy, the
client interceptor, the replay server): the method table (path -> operation, cardinality,
message types), a message's exact protobuf bytes <-> its proto3 JSON mapping (which is the
v1.0 JSON shape the log, the fold and every inspection read), and a gRPC status <-> the error
item the log keeps (``{"error": {"code", "status", "message", "details"}}``: ``google.rpc.Status``
in the JSON mapping, the shape HTTP+JSON errors have).

The message types are a2a-sdk's generated code (``a2a.types.a2a_pb2``), loaded on first use:
``import a2a_tape`` and every path that does not speak gRPC never import grpc or protobuf
(docs/design.md section 15 says why a2a-sdk's code and not a descriptor of our own). Without the
``grpc`` extra, :func:`require` raises :class:`GrpcUnavailable` with the line to install it.
"""

from __future__ import annotations

import base64
import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import msgspec

from a2a_tape.store.errors import A2ATapeError
from a2a_tape.store.methods import METHODS
from a2a_tape.wire import a2a_errors as errors
from a2a_tape.wire import grpc_json

SERVICE = "lf.a2a.v1.A2AService"
PREFIX = f"/{SERVICE}/"
STATUS_DETAILS_KEY = "grpc-status-details-bin"
"""The trailer holding a ``google.rpc.Status`` with the error's details (ErrorInfo, BadRequest)."""

STATUS_NAMES = (
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
)
"""gRPC status codes by number (the numbers are the protocol's, stable)."""


class GrpcUnavailable(A2ATapeError):
    """gRPC was asked for and the ``grpc`` extra is not installed."""


def require() -> Any:
    """``grpc``, or :class:`GrpcUnavailable` naming the extra to install."""
    try:
        import grpc

        _pb2()
    except ImportError as exc:
        raise GrpcUnavailable(
            f"gRPC needs the grpc extra (pip install 'a2a-tape[grpc]'): {exc.name or exc} is not installed"
        ) from None
    return grpc


@functools.cache
def _pb2() -> ModuleType:
    from a2a.types import a2a_pb2

    return a2a_pb2


@dataclass(frozen=True, slots=True)
class Method:
    """One method of the A2A service: its path, what it does, how many answers it sends."""

    name: str  # "SendStreamingMessage": also the v1.0 JSON-RPC method name
    path: str  # "/lf.a2a.v1.A2AService/SendStreamingMessage"
    streaming: bool  # server-streaming (StreamResponse items)
    request_type: str  # "lf.a2a.v1.SendMessageRequest"
    response_type: str

    @property
    def operation(self) -> str | None:
        """``send``, ``stream``, ``get``, ... (:data:`store.methods.METHODS`); None for the others."""
        known = METHODS.get(self.name)
        return known[0] if known else None


@functools.cache
def methods() -> dict[str, Method]:
    """Every method of the service by path (from the descriptor of a2a-sdk's generated code)."""
    service = _pb2().DESCRIPTOR.services_by_name["A2AService"]
    return {
        PREFIX + m.name: Method(
            m.name, PREFIX + m.name, m.server_streaming, m.input_type.full_name, m.output_type.full_name
        )
        for m in service.methods
    }


def method(path: str) -> Method | None:
    """The A2A method at ``path``; None for a path that is not one (forwarded all the same)."""
    return methods().get(path)


def by_name(name: str) -> Method | None:
    return methods().get(PREFIX + name)


@functools.cache
def _message_class(full_name: str) -> Any:
    from google.protobuf import message_factory
    from google.protobuf.descriptor_pool import Default

    _pb2()  # registers the A2A messages in the default pool
    from google.protobuf import empty_pb2  # noqa: F401 - DeleteTaskPushNotificationConfig answers Empty

    return message_factory.GetMessageClass(Default().FindMessageTypeByName(full_name))


_json = msgspec.json.Encoder()


class NotTheMessage(A2ATapeError):
    """Bytes that do not parse as the method's message type (kept as they came, not as JSON)."""


def to_json(full_name: str, raw: bytes, notes: list[str] | None = None) -> bytes:
    """The proto3 JSON mapping of a message's exact bytes (camelCase names, enum names, defaults
    left out: the v1.0 JSON shape). Raises :class:`NotTheMessage` for bytes that do not parse.
    A number a ``google.protobuf.Value`` holds that JSON cannot (NaN, Infinity: valid protobuf,
    no JSON mapping) is written as the string proto3 JSON gives a double (``"NaN"``,
    ``"Infinity"``, ``"-Infinity"``), and a line saying where goes to ``notes``."""
    from google.protobuf.message import DecodeError

    msg = _message_class(full_name)()
    try:
        msg.ParseFromString(raw)
    except DecodeError as exc:
        raise NotTheMessage(f"not a {full_name}: {exc}") from None
    return message_json(msg, notes)


def message_json(message: Any, notes: list[str] | None = None) -> bytes:
    """The JSON mapping of a message object (what a client's stub hands over): :func:`to_json`
    without the parse. A message that has no JSON mapping even so (a timestamp out of range)
    raises :class:`NotTheMessage`: never an exception of protobuf's into a caller."""
    try:  # json_format's mapping from a plan made once per message type (wire.grpc_json: equal output)
        return _json.encode(grpc_json.to_dict(message))
    except Exception:  # noqa: BLE001 - anything the plan does not cover: json_format below says what it is
        pass
    from google.protobuf import json_format

    try:
        return _json.encode(json_format.MessageToDict(message))
    except (json_format.Error, ValueError):
        pass
    copy = type(message)()
    copy.CopyFrom(message)
    found: list[str] = []
    _finite(copy, "", found)
    try:
        out = _json.encode(json_format.MessageToDict(copy))
    except (json_format.Error, ValueError) as exc:
        raise NotTheMessage(f"{message.DESCRIPTOR.full_name} has no JSON mapping: {exc}") from None
    if notes is not None:
        notes.append(
            "a number JSON cannot hold (NaN or Infinity) is stored as a string at "
            + ", ".join(found[:10])
            + (f" and {len(found) - 10} more" if len(found) > 10 else "")
        )
    return out


_NON_FINITE = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}


def _finite(msg: Any, path: str, found: list[str]) -> None:
    """Each non-finite number of a ``google.protobuf.Value`` in ``msg`` made its proto3 JSON string,
    its JSON path added to ``found``."""
    name = msg.DESCRIPTOR.full_name
    if name == "google.protobuf.Value":
        kind = msg.WhichOneof("kind")
        if kind == "number_value" and not math.isfinite(msg.number_value):
            found.append(path or "$")
            msg.string_value = _NON_FINITE[repr(msg.number_value)]
        elif kind in ("struct_value", "list_value"):
            _finite(getattr(msg, kind), path, found)
        return
    if name == "google.protobuf.Struct":
        for key, item in msg.fields.items():
            _finite(item, f"{path}.{key}", found)
        return
    if name == "google.protobuf.ListValue":
        for k, item in enumerate(msg.values):
            _finite(item, f"{path}[{k}]", found)
        return
    for fd, value in msg.ListFields():
        if fd.message_type is None:
            continue
        here = f"{path}.{fd.json_name}" if path else fd.json_name
        if fd.message_type.GetOptions().map_entry:
            if fd.message_type.fields_by_name["value"].message_type is not None:
                for key, item in value.items():
                    _finite(item, f"{here}.{key}", found)
        elif fd.is_repeated:
            for k, item in enumerate(value):
                _finite(item, f"{here}[{k}]", found)
        else:
            _finite(value, here, found)


def from_json(full_name: str, data: bytes | str) -> bytes:
    """A message's bytes from its JSON (a recording, whatever binding made it): fields the
    proto does not know are left out; raises :class:`NotTheMessage` for JSON that does not fit."""
    from google.protobuf import json_format

    msg = _message_class(full_name)()
    try:
        json_format.Parse(data, msg, ignore_unknown_fields=True)
    except json_format.ParseError as exc:
        raise NotTheMessage(f"not a {full_name}: {exc}") from None
    return bytes(msg.SerializeToString())


# -- status <-> the log's error item -------------------------------------------------------------


def status_name(code: int) -> str:
    return STATUS_NAMES[code] if 0 <= code < len(STATUS_NAMES) else str(code)


def status_code(name: str | int | None) -> int:
    """A status code from its number or name (UNKNOWN for anything else)."""
    if isinstance(name, int):
        return name if 0 <= name < len(STATUS_NAMES) else 2
    try:
        return STATUS_NAMES.index(str(name))
    except ValueError:
        return 2


def _details(raw: bytes) -> list[Any]:
    """The details of a ``grpc-status-details-bin`` trailer in the JSON mapping (a detail whose
    type is not known here is kept as its ``@type`` and base64 ``value``)."""
    from google.protobuf import json_format
    from google.rpc import error_details_pb2, status_pb2  # noqa: F401 - registers ErrorInfo, BadRequest, ...

    status = status_pb2.Status()
    try:
        status.ParseFromString(raw)
    except Exception:  # noqa: BLE001 - a broken trailer is kept whole, below
        return [{"@type": "grpc-status-details-bin", "value": base64.b64encode(raw).decode()}]
    out: list[Any] = []
    for any_ in status.details:
        try:
            out.append(json_format.MessageToDict(any_))
        except (TypeError, KeyError, json_format.Error):
            out.append({"@type": any_.type_url, "value": base64.b64encode(any_.value).decode()})
    return out


def error_item(code: int, message: str | None, trailers: Sequence[tuple[str, str | bytes]] = ()) -> bytes:
    """The log's item for a call that ended with a non-OK status: ``google.rpc.Status`` in the
    JSON mapping, under ``error`` (``code`` is the gRPC code; ``status`` its name)."""
    error: dict[str, Any] = {"code": code, "status": status_name(code), "message": message or ""}
    for key, value in trailers:
        if key == STATUS_DETAILS_KEY and isinstance(value, bytes):
            error["details"] = _details(value)
    return _json.encode({"error": error})


def status_details(code: int, message: str, details: Sequence[Any]) -> bytes | None:
    """A ``grpc-status-details-bin`` trailer for recorded details (None when there are none we
    can encode): a replayed error carries the ErrorInfo the agent sent."""
    if not details:
        return None
    from google.protobuf import any_pb2, json_format
    from google.rpc import error_details_pb2, status_pb2  # noqa: F401

    status = status_pb2.Status(code=code, message=message)
    for d in details:
        if not isinstance(d, dict):
            continue
        any_ = any_pb2.Any()
        try:
            json_format.ParseDict(d, any_)
        except (json_format.ParseError, TypeError, KeyError):
            value, type_url = d.get("value"), d.get("@type")
            if not isinstance(value, str) or not isinstance(type_url, str):
                continue
            try:
                any_ = any_pb2.Any(type_url=type_url, value=base64.b64decode(value))
            except ValueError:
                continue
        status.details.append(any_)
    return bytes(status.SerializeToString()) if status.details else None


# -- a JSON-RPC error as a gRPC status (wire.a2a_errors: a2a-sdk 1.3.0's table) ------------------


def status_of_error(error: dict[str, Any], *, jsonrpc: bool) -> tuple[int, str, bytes | None]:
    """(gRPC code, details, ``grpc-status-details-bin``) answering a recorded error item: a gRPC
    recording's own status as it was; a JSON-RPC error as a2a-sdk's gRPC server maps it (an
    ErrorInfo with its reason, or the details the agent sent)."""
    message = str(error.get("message") or "")
    code = error.get("code")
    details = error.get("details")
    if not jsonrpc and isinstance(error.get("status"), str) and isinstance(code, int) and 0 <= code < 17:
        return code, message, status_details(code, message, details if isinstance(details, list) else [])
    kind = errors.kind_of(code)  # an unknown code is an internal error, as on the other bindings
    grpc_code = status_code(kind.status)
    data = error.get("data")
    recorded = [d for d in data if isinstance(d, dict) and "@type" in d] if isinstance(data, list) else []
    if not recorded:
        recorded = [errors.error_info(kind.reason)]
    return grpc_code, message, status_details(grpc_code, message, recorded)


def jsonrpc_request(method: str, params: bytes, rpc_id: int = 1) -> bytes:
    """A v1.0 JSON-RPC request carrying a gRPC request's JSON as its params (how replay asks its
    engine, and reads a gRPC recording's request)."""
    return b'{"jsonrpc":"2.0","id":%d,"method":%s,"params":%s}' % (rpc_id, _json.encode(method), params or b"{}")


# -- the gRPC interfaces of an agent card -------------------------------------------------------


class _Interface(msgspec.Struct):
    url: str | None = None
    protocolBinding: str | None = None
    transport: str | None = None  # v0.3 spelling


class _Card(msgspec.Struct):
    url: str | None = None
    supportedInterfaces: list[_Interface] = []
    additionalInterfaces: list[_Interface] = []


_card = msgspec.json.Decoder(_Card)


def _is_grpc(i: _Interface) -> bool:
    return (i.protocolBinding or i.transport or "").upper() == "GRPC"


def _read_card(body: bytes) -> _Card | None:
    try:
        return _card.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None


def card_grpc_urls(body: bytes) -> list[str]:
    """The URLs of a card's gRPC interfaces, in the card's order of preference ([] for a body
    that is not a card)."""
    card = _read_card(body)
    if card is None:
        return []
    return [i.url for i in card.supportedInterfaces + card.additionalInterfaces if i.url and _is_grpc(i)]


def rewrite_grpc_urls(body: bytes, ours: str | None) -> tuple[bytes, set[str]]:
    """A card whose gRPC interfaces name ``ours`` (``HOST:PORT``: a gRPC proxy or replay server),
    in the form the card wrote them (with a scheme, or none); a card with none gets ours added.
    Returns the new body and the URLs only gRPC interfaces use, which an HTTP origin rewrite must
    leave alone. With no gRPC server of ours (``ours`` None) the card's gRPC interfaces are left
    out: the agent's own address would send a gRPC client around the recorder (or a replay test
    to the live agent), the HTTP server's would send it to no gRPC server. The bytes are replaced
    where they stand; a URL that a gRPC interface shares with another (one port for both) is set
    in the gRPC entries alone."""
    card = _read_card(body)
    if card is None:
        return body, set()
    interfaces = card.supportedInterfaces + card.additionalInterfaces
    urls = [i.url for i in interfaces if i.url and _is_grpc(i)]
    if not urls:
        return (_with_grpc_interface(body, ours) if ours is not None else body), set()
    if ours is None:
        return _edit_grpc_interfaces(body, None), set()
    others = {card.url} | {i.url for i in interfaces if not _is_grpc(i)}
    if ours is not None:
        if others.intersection(urls):
            body = _set_grpc_urls(body, ours)
        else:
            for url in urls:
                body = body.replace(_json.encode(url), _json.encode(_ours_as(url, ours)))
    return body, set(urls) - others


def _ours_as(url: str, ours: str) -> str:
    """``ours`` in the form ``url`` is written: with its scheme, or none."""
    scheme, sep, _rest = url.partition("://")
    return f"{scheme}://{ours}" if sep else ours


def _set_grpc_urls(body: bytes, ours: str) -> bytes:
    """The card with each gRPC interface's URL set to ``ours`` (decoded and encoded again)."""
    return _edit_grpc_interfaces(body, ours)


def _edit_grpc_interfaces(body: bytes, ours: str | None) -> bytes:
    """The card with each gRPC interface's URL set to ``ours``, or (None) each left out (decoded
    and encoded again)."""
    doc = msgspec.json.decode(body)
    for key in ("supportedInterfaces", "additionalInterfaces"):
        kept = []
        for itf in doc.get(key) or []:
            grpc = (
                isinstance(itf, dict)
                and str(itf.get("protocolBinding") or itf.get("transport") or "").upper() == "GRPC"
            )
            if grpc and ours is None:
                continue
            if grpc and isinstance(itf.get("url"), str):
                itf["url"] = _ours_as(itf["url"], ours or "")
            kept.append(itf)
        if isinstance(doc.get(key), list):
            doc[key] = kept
    return _json.encode(doc)


def _with_grpc_interface(body: bytes, ours: str) -> bytes:
    """A card that names no gRPC interface, with ours added last (a recording made over JSON-RPC or
    HTTP+JSON served to gRPC clients too: a client that follows the card finds it). A body that
    is not a card object is left as it is."""
    try:
        card = msgspec.json.decode(body)
    except (msgspec.DecodeError, RecursionError):
        return body
    if not isinstance(card, dict) or not isinstance(card.get("supportedInterfaces", []), list):
        return body
    interfaces = card.setdefault("supportedInterfaces", [])
    interfaces.append({"url": ours, "protocolBinding": "GRPC", "protocolVersion": "1.0"})
    return _json.encode(card)


def to_jsonrpc(payload: bytes) -> bytes:
    """A recorded gRPC item (a message's JSON, or the error item of a status) as a JSON-RPC response
    with id null, as the replay engine serves every binding's items: the result is the recorded
    bytes themselves; an error takes the JSON-RPC code of its ErrorInfo reason (else of its status,
    as a2a-sdk maps them) with the ``details`` as ``data``."""
    try:
        doc = msgspec.json.decode(payload)
    except msgspec.DecodeError:
        doc = None
    error = doc.get("error") if isinstance(doc, dict) else None
    if isinstance(error, dict):
        details = error.get("details")
        code = _jsonrpc_code(error.get("status"), details)
        rpc_error: dict[str, Any] = {"code": code, "message": error.get("message", "")}
        if details is not None:
            rpc_error["data"] = details
        return _json.encode({"jsonrpc": "2.0", "id": None, "error": rpc_error})
    return b'{"jsonrpc":"2.0","id":null,"result":' + payload + b"}"


def _jsonrpc_code(status: Any, details: Any) -> int:
    """The JSON-RPC code of a gRPC error: its ErrorInfo reason names one error; else the first code
    a2a-sdk maps to its status (NOT_FOUND: task not found), else internal error."""
    by_reason = errors.code_from(None, details)
    if by_reason != errors.INTERNAL.code or not isinstance(status, str):
        return by_reason
    return next((k.code for k in errors.BY_CODE.values() if k.status == status), errors.INTERNAL.code)
