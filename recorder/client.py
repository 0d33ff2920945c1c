"""The A2A client side: agent card, which interface to call (binding, version), request bodies.

Requests are built in the JSON-RPC form, the one every layer reads; the binding chosen
(:func:`choose_interface`) puts them on its wire (:mod:`wire.binding_client`).

It builds requests and classifies responses; it does not decide anything (that is
:mod:`recorder.record`) and does not write anything (that is :mod:`recorder.session`).
Both dialects of docs/design.md section 3 are spoken; v1.0 requests carry ``A2A-Version: 1.0``.
"""

from __future__ import annotations

import base64
import itertools
import uuid
from collections.abc import Sequence
from typing import Any, Literal, NamedTuple
from urllib.parse import urlsplit, urlunsplit

import httpx
import msgspec

from a2a_tape.store.errors import A2ATapeError
from a2a_tape.store.headers import media_type_of
from a2a_tape.store.json_values import Decoder
from a2a_tape.store.methods import CARD_BINDINGS, CARD_PATH, HTTP_JSON, JSONRPC, OPERATIONS, STREAMING_OPERATIONS
from a2a_tape.wire.dialects import part_to_v03, part_to_v1

Dialect = Literal["1.0", "0.3"]
ProtocolChoice = Literal["auto", "1.0", "0.3"]  # what --protocol asks for


class NotAnAgent(A2ATapeError):
    """The URL does not behave like an A2A agent (closed port, HTML page, HTTP 500, ...): exit 2."""


# -- the agent card ------------------------------------------------------------------------


class Capabilities(msgspec.Struct, frozen=True, omit_defaults=True):
    streaming: bool | None = None


class Interface(msgspec.Struct, omit_defaults=True):
    url: str | None = None
    protocolBinding: str | None = None
    protocolVersion: str | None = None
    transport: str | None = None  # v0.3 additionalInterfaces spelling


class AgentCard(msgspec.Struct, omit_defaults=True):
    """The fields of an agent card the recorder reads (unknown fields are ignored)."""

    name: str = ""
    url: str | None = None
    capabilities: Capabilities = Capabilities()
    supportedInterfaces: list[Interface] = []
    additionalInterfaces: list[Interface] = []
    protocolVersion: str | None = None
    preferredTransport: str | None = None

    @property
    def streaming(self) -> bool:
        return bool(self.capabilities.streaming)


_card_decoder = Decoder(AgentCard)


def parse_card(body: bytes, where: str) -> AgentCard:
    try:
        card = _card_decoder.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise NotAnAgent(f"{where} is not an A2A agent card ({str(exc)[:80]})") from None
    return card


def choose_endpoint(card: AgentCard, base_url: str, protocol: ProtocolChoice) -> tuple[Dialect, str]:
    """The dialect and JSON-RPC URL to use: ``auto`` prefers 1.0 when the card offers it."""
    offered: dict[Dialect, str] = {}
    for itf in card.supportedInterfaces + card.additionalInterfaces:
        binding = (itf.protocolBinding or itf.transport or "JSONRPC").upper()
        if binding not in ("JSONRPC", "JSON-RPC"):
            continue
        version = (itf.protocolVersion or "").strip()
        dialect: Dialect = "1.0" if version.startswith("1.") or version == "1" else "0.3"
        if version and dialect not in offered:
            offered[dialect] = itf.url or card.url or base_url
    fallback = card.url or base_url
    if protocol == "auto":
        if "1.0" in offered:
            return "1.0", offered["1.0"]
        return "0.3", offered.get("0.3", fallback)
    return protocol, offered.get(protocol, fallback)


# -- which interface: the binding and its URL ---------------------------------------------------


BindingChoice = Literal["auto", "jsonrpc", "http+json"]  # what --binding asks for


class Endpoint(NamedTuple):
    """Where and how to call the agent: the binding (:data:`store.methods.BINDINGS`), the
    protocol version and the interface URL."""

    binding: str
    dialect: Dialect
    url: str
    listed: bool = True  # False: the card does not list it (asked for by name, tried at the card's URL)


def interfaces(card: AgentCard) -> list[Interface]:
    """The interfaces a card lists, in its order of preference (v1.0 ``supportedInterfaces``, then
    v0.3 ``additionalInterfaces``)."""
    return card.supportedInterfaces + card.additionalInterfaces


def _spoken(card: AgentCard) -> list[tuple[str, Dialect, str | None]]:
    """The card's interfaces a2a-tape speaks, in the card's order of preference: (binding,
    version, URL). HTTP+JSON only as A2A 1.0 (a v0.3 card's REST routes are another API)."""
    out: list[tuple[str, Dialect, str | None]] = []
    for itf in interfaces(card):
        binding = CARD_BINDINGS.get((itf.protocolBinding or itf.transport or "JSONRPC").upper())
        version = (itf.protocolVersion or "").strip()
        v1 = version.startswith("1.") or version == "1"
        if binding == JSONRPC:
            out.append((JSONRPC, "1.0" if v1 else "0.3", itf.url))
        elif binding == HTTP_JSON and (v1 or (not version and itf.protocolBinding is not None)):
            out.append((HTTP_JSON, "1.0", itf.url))
    return out


def choose_interface(card: AgentCard, base_url: str, protocol: ProtocolChoice, binding: BindingChoice) -> Endpoint:
    """The interface to call: ``auto`` takes the card's first interface a2a-tape speaks (JSON-RPC
    of the version ``protocol`` allows, or HTTP+JSON 1.0); a binding asked for by name is the
    card's interface of it, else tried at the card's URL (``listed`` False: the user knows the
    agent, the agent's answer will say). :class:`NotAnAgent`: HTTP+JSON with ``--protocol 0.3``."""
    spoken = _spoken(card)
    if binding == "auto":
        first = next((s for s in spoken if s[0] == JSONRPC or protocol != "0.3"), None)
        binding = "http+json" if first is not None and first[0] == HTTP_JSON else "jsonrpc"
    if binding == "jsonrpc":
        dialect, url = choose_endpoint(card, base_url, protocol)
        return Endpoint(JSONRPC, dialect, url)
    if protocol == "0.3":
        raise NotAnAgent("HTTP+JSON is a binding of A2A 1.0: --binding http+json does not go with --protocol 0.3")
    rest = next((s for s in spoken if s[0] == HTTP_JSON), None)
    if rest is None:
        return Endpoint(HTTP_JSON, "1.0", card.url or base_url, listed=False)
    return Endpoint(HTTP_JSON, "1.0", rest[2] or card.url or base_url)


def card_url(base_url: str) -> str:
    """The agent card's URL under ``base_url``; a query string of the base URL (an API key the
    agent wants) stays the query, it is never part of the path."""
    return join_path(base_url, CARD_PATH)


def join_path(base_url: str, path: str) -> str:
    """``path`` appended to the path of ``base_url``, its query and fragment kept where they are."""
    parts = urlsplit(base_url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/") + path, parts.query, ""))


# -- requests ------------------------------------------------------------------------------


class _Message(msgspec.Struct, omit_defaults=True):
    messageId: str
    role: str
    parts: list[dict[str, Any]]
    contextId: str | None = None
    taskId: str | None = None
    referenceTaskIds: list[str] | None = None
    kind: str | None = None


def text_part(text: str) -> dict[str, Any]:
    """A text part, in the v1.0 shape (:func:`send_request` writes each part in the request's dialect)."""
    return {"text": text}


def file_part(content: bytes, filename: str, media_type: str) -> dict[str, Any]:
    """A file part with its bytes inline (base64), in the v1.0 shape (v0.3: ``kind: file``)."""
    return {"raw": base64.b64encode(content).decode("ascii"), "filename": filename, "mediaType": media_type}


def data_part(value: Any) -> dict[str, Any]:
    """A data part (any JSON value; v0.3 carries a non-object as ``{"value": ...}``, flagged)."""
    return {"data": value, "mediaType": "application/json"}


class _SendParams(msgspec.Struct, omit_defaults=True):
    message: _Message
    configuration: dict[str, Any] | None = None  # a webhook to register (record --push-receiver)


class _IdParams(msgspec.Struct, omit_defaults=True):
    id: str


class _Request(msgspec.Struct):
    jsonrpc: str
    id: str | int
    method: str
    params: _SendParams | _IdParams


_encoder = msgspec.json.Encoder()
_ids = itertools.count(1)


def new_id() -> str:
    return str(uuid.uuid4())


class Request(msgspec.Struct, frozen=True):
    """One JSON-RPC request ready to post: method, body, headers to add."""

    op: str
    method: str
    dialect: Dialect
    body: bytes
    rpc_id: str | int
    message_id: str | None = None

    @property
    def streaming(self) -> bool:
        return self.op in STREAMING_OPERATIONS


def dialect_headers(dialect: Dialect) -> dict[str, str]:
    return {"A2A-Version": "1.0"} if dialect == "1.0" else {}


def send_request(
    dialect: Dialect,
    text: str,
    *,
    stream: bool,
    message_id: str | None = None,
    context_id: str | None = None,
    task_id: str | None = None,
    rpc_id: str | int | None = None,
    parts: Sequence[dict[str, Any]] = (),
    reference_task_ids: Sequence[str] = (),
    webhook: dict[str, Any] | None = None,
) -> Request:
    """A send (``stream``: a streaming one) of a user message: ``text`` (left out when empty and
    other ``parts`` follow it), then ``parts`` (:func:`file_part`, :func:`data_part`, in the v1.0
    shape), in ``dialect``'s shape. ``task_id``: continue that task; ``reference_task_ids``: the
    tasks a new task in the same context follows from (A2A's ``referenceTaskIds``); ``webhook`` (a
    push config: ``url``, ``token``) registered in its configuration, under the dialect's name for it."""
    mid = message_id or new_id()
    every = ([text_part(text)] if text or not parts else []) + list(parts)
    refs = list(reference_task_ids) or None
    v1 = dialect == "1.0"
    msg = _Message(
        messageId=mid,
        role="ROLE_USER" if v1 else "user",
        parts=[part_to_v1(p) if v1 else part_to_v03(p) for p in every],
        contextId=context_id,
        taskId=task_id,
        referenceTaskIds=refs,
        kind=None if v1 else "message",
    )
    op = "stream" if stream else "send"
    configuration = None
    if webhook is not None:
        configuration = {("taskPushNotificationConfig" if dialect == "1.0" else "pushNotificationConfig"): webhook}
    params = _SendParams(message=msg, configuration=configuration)
    return _request(op, dialect, params, message_id=mid, rpc_id=rpc_id)


def task_request(op: str, dialect: Dialect, task_id: str, *, rpc_id: str | int | None = None) -> Request:
    """``get`` / ``cancel`` / ``resubscribe`` for one task."""
    return _request(op, dialect, _IdParams(id=task_id), rpc_id=rpc_id)


def _request(
    op: str,
    dialect: Dialect,
    params: _SendParams | _IdParams,
    message_id: str | None = None,
    rpc_id: str | int | None = None,
) -> Request:
    method = OPERATIONS[op][dialect]
    if rpc_id is None:
        rpc_id = f"a2a-tape-{next(_ids)}"
    body = _encoder.encode(_Request(jsonrpc="2.0", id=rpc_id, method=method, params=params))
    return Request(op=op, method=method, dialect=dialect, body=body, rpc_id=rpc_id, message_id=message_id)


# -- what comes back -----------------------------------------------------------------------


def media_type(response: httpx.Response) -> str:
    return media_type_of(response.headers.get("content-type"))


def explain_not_json(response: httpx.Response, what: str) -> str:
    """The one line for a response that is not what an A2A agent sends."""
    ct = media_type(response) or "no content type"
    if response.status_code >= 400:
        return f"{what} answered HTTP {response.status_code} ({ct}): not a working A2A agent"
    if ct in ("text/html", "application/xhtml+xml"):
        return f"{what} returned an HTML page, not A2A JSON: is this an A2A agent?"
    return f"{what} returned {ct}, not A2A JSON"


def describe_http_error(exc: httpx.HTTPError, url: str) -> str:
    if isinstance(exc, httpx.ConnectError):
        return f"cannot connect to {url}: {_short(exc) or 'connection refused'}"
    if isinstance(exc, httpx.TimeoutException):
        return f"{url} did not answer in time ({type(exc).__name__})"
    if isinstance(exc, httpx.UnsupportedProtocol):
        return f"not an http(s) URL: {url}"
    return f"{url}: {type(exc).__name__}: {_short(exc)}"


def _short(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0][:160] if str(exc).strip() else ""
