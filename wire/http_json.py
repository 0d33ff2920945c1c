"""The HTTP+JSON binding, as a2a-sdk 1.3.0 serves it (``a2a.server.routes.rest_routes``).

Requests are routes under the interface URL's path (``""``, ``/v1``, ``/a2a/rest``, a tenant):

| route | method (v1.0) | params |
|---|---|---|
| ``POST /message:send``, ``POST /message:stream`` | SendMessage, SendStreamingMessage | the body |
| ``GET /tasks/{id}`` | GetTask | ``id``, the query (``historyLength``) |
| ``GET /tasks`` | ListTasks | the query (``contextId``, ``status``, ``pageSize``, ...) |
| ``POST /tasks/{id}:cancel`` | CancelTask | ``id``, the body (``metadata``) |
| ``GET|POST /tasks/{id}:subscribe`` | SubscribeToTask | ``id`` |
| ``POST|GET /tasks/{id}/pushNotificationConfigs`` | Create / ListTaskPushNotificationConfig(s) | ``taskId``, the body or query |
| ``GET|DELETE /tasks/{id}/pushNotificationConfigs/{cid}`` | Get / DeleteTaskPushNotificationConfig | ``taskId``, ``id`` |
| ``GET /extendedAgentCard`` | GetExtendedAgentCard | none |

The protocol version is the ``A2A-Version`` header's (none means 0.3, which a 1.3.0 agent refuses on
these routes). Answers are the JSON-RPC ``result`` alone (a bare Task, ``{"task"}`` / ``{"message"}``,
a ListTasks page); stream items are SSE ``data:`` lines of a bare StreamResponse (``{"task"}``,
``{"message"}``, ``{"statusUpdate"}``, ``{"artifactUpdate"}``); an error is an HTTP status with
``{"error": {"code": <HTTP status>, "status": <gRPC status name>, "message", "details": [ErrorInfo, ...]}}``
(``event: error`` inside a stream), as ``a2a.utils.error_handlers`` builds it.

:func:`read` turns a request into the JSON-RPC form the engine reads; :func:`to_jsonrpc` a recorded
answer item into a JSON-RPC response; :func:`render_body` and :func:`render_stream` the engine's
answers back into this binding; :data:`CLIENT` is the binding for a client of ours (``record``,
recovery, ``probe``: :mod:`wire.binding_client`), built on :func:`render_request`.
"""

from __future__ import annotations

import re
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit, urlunsplit

import msgspec

from a2a_tape.store.events import Item
from a2a_tape.store.json_values import Decoder, decode_json
from a2a_tape.store.methods import ALL_METHODS, HTTP_JSON, OPERATIONS, OTHER_OPERATIONS, STREAMING_OPERATIONS
from a2a_tape.wire import a2a_errors as errors
from a2a_tape.wire.binding_client import Answer, Head, Outgoing, classify, judge
from a2a_tape.wire.call import Call
from a2a_tape.wire.sse_frames import frame
from a2a_tape.wire.sse_reader import SseParser

NAME = HTTP_JSON
MEDIA_TYPE = "application/a2a+json"  # a2a-sdk 1.3.0's answers; its errors are application/json
ERROR_MEDIA_TYPE = "application/json"

_ID = r"(?P<id>[^/]+)"
_ROUTES: list[tuple[frozenset[str], re.Pattern[str], str]] = [
    (frozenset({"POST"}), re.compile(r"(?P<prefix>.*)/message:send"), "send"),
    (frozenset({"POST"}), re.compile(r"(?P<prefix>.*)/message:stream"), "stream"),
    (frozenset({"POST"}), re.compile(rf"(?P<prefix>.*)/tasks/{_ID}:cancel"), "cancel"),
    (frozenset({"GET", "POST"}), re.compile(rf"(?P<prefix>.*)/tasks/{_ID}:subscribe"), "resubscribe"),
    (frozenset({"GET"}), re.compile(rf"(?P<prefix>.*)/tasks/{_ID}/pushNotificationConfigs/(?P<cid>[^/]+)"), "push-get"),
    (
        frozenset({"DELETE"}),
        re.compile(rf"(?P<prefix>.*)/tasks/{_ID}/pushNotificationConfigs/(?P<cid>[^/]+)"),
        "push-delete",
    ),
    (frozenset({"POST"}), re.compile(rf"(?P<prefix>.*)/tasks/{_ID}/pushNotificationConfigs"), "push-set"),
    (frozenset({"GET"}), re.compile(rf"(?P<prefix>.*)/tasks/{_ID}/pushNotificationConfigs"), "push-list"),
    (frozenset({"GET"}), re.compile(rf"(?P<prefix>.*)/tasks/{_ID}"), "get"),
    (frozenset({"GET"}), re.compile(r"(?P<prefix>.*)/tasks"), "list"),
    (frozenset({"GET"}), re.compile(r"(?P<prefix>.*)/extendedAgentCard"), "extended-card"),
]

# query fields that are not strings, per operation (as the SDK's parse_params reads them)
_INTS = {"get": {"historyLength"}, "list": {"pageSize", "historyLength"}, "push-list": {"pageSize"}}
_QUERY_FIELDS = {
    "get": {"historyLength"},
    "list": {
        "contextId",
        "status",
        "pageSize",
        "pageToken",
        "historyLength",
        "statusTimestampAfter",
        "includeArtifacts",
    },
    "push-list": {"pageSize", "pageToken"},
}
_BOOLS = {"includeArtifacts"}

_encoder = msgspec.json.Encoder()


def sent_path(raw_path: bytes | None, path: str) -> str:
    """The path a request is routed by, everywhere (serve, the proxy, ``RecordingTransport``,
    ``ReplayTransport``): as the client sent it, percent-encoded, its query cut off, so a ``%2F`` is
    never a separator (:func:`read` decodes each field after routing). ``raw_path`` is the ASGI
    scope's ``raw_path`` or httpx's ``URL.raw_path``; ``path`` (decoded) only when there is none."""
    if not raw_path:
        return path
    return bytes(raw_path).split(b"?", 1)[0].decode("latin-1")


def route(http_method: str, path: str) -> tuple[str, dict[str, str]] | None:
    """The operation of an HTTP+JSON route and its path fields (``prefix``, ``id``, ``cid``), or None."""
    for methods, pattern, operation in _ROUTES:
        if http_method in methods:
            m = pattern.fullmatch(path)
            if m is not None and (not m["prefix"] or m["prefix"].startswith("/")):
                return operation, {k: v for k, v in m.groupdict().items() if v is not None}
    return None


def is_route(http_method: str, path: str) -> bool:
    return route(http_method, path) is not None


def version_of(headers: Mapping[str, str]) -> str:
    """The protocol version a request names: ``A2A-Version`` 1.x is 1.0; none (or another) is 0.3."""
    for k, v in headers.items():
        if k.lower() == "a2a-version":
            return "1.0" if v.strip().split(".")[0] == "1" else v.strip() or "0.3"
    return "0.3"


def _query(operation: str, query: str) -> dict[str, Any]:
    wanted = _QUERY_FIELDS.get(operation, set())
    ints = _INTS.get(operation, set())
    out: dict[str, Any] = {}
    for k, v in parse_qsl(query, keep_blank_values=False):
        if k not in wanted:
            continue  # the SDK reads only its own fields (and our ?fault= is ours)
        value: Any = v
        if k in ints and re.fullmatch(r"-?\d{1,19}", v):  # longer: no int64, left a string (a 400)
            value = int(v)
        elif k in _BOOLS and v in ("true", "false"):
            value = v == "true"
        out[k] = value  # the last one wins, as the SDK reads a repeated field
    return out


def _merged(body: bytes, fields: dict[str, Any]) -> Any:
    """The body's JSON object with the path's fields set (the path wins, as the SDK sets them)."""
    if not body.strip():
        return fields
    try:
        value = decode_json(body)
    except msgspec.DecodeError:
        return msgspec.Raw(body)  # not JSON: the engine refuses it as the agent does
    if not isinstance(value, dict):
        return msgspec.Raw(body)
    return {**value, **fields}


def read(http_method: str, path: str, query: str, headers: Mapping[str, str], body: bytes) -> Call | None:
    """An HTTP+JSON request as the JSON-RPC request it stands for (v1.0 method names); None when the
    path is none of the binding's routes. ``path`` as sent (percent-encoded): it is routed by its
    own ``/``s, and each field decoded after (``/tasks%2Fx`` is no route; ``/t%2Fa/tasks/x`` is
    task ``x`` under ``/t%2Fa``)."""
    found = route(http_method, path)
    if found is None:
        return None
    operation, fields = found
    fields = {k: unquote(v) for k, v in fields.items()}  # each path segment decoded on its own
    method = (OPERATIONS.get(operation) or OTHER_OPERATIONS[operation])["1.0"]
    params: Any
    if operation in ("send", "stream"):
        params = msgspec.Raw(body) if body.strip() else {}
    elif operation in ("get", "cancel", "resubscribe"):
        extra = _query(operation, query)
        params = (
            _merged(body, {**extra, "id": fields["id"]}) if operation == "cancel" else {**extra, "id": fields["id"]}
        )
    elif operation == "list":
        params = _query(operation, query)
    elif operation == "push-set":
        params = _merged(body, {"taskId": fields["id"]})
    elif operation in ("push-get", "push-delete"):
        params = {"taskId": fields["id"], "id": fields["cid"]}
    elif operation == "push-list":
        params = {**_query(operation, query), "taskId": fields["id"]}
    else:
        params = {}
    canonical = _encoder.encode({"jsonrpc": "2.0", "id": None, "method": method, "params": params})
    return Call(binding=NAME, body=canonical, version=version_of(headers), operation=operation)


_PATH_FIELDS = {
    "get": ("id",),
    "cancel": ("id",),
    "resubscribe": ("id",),
    "push-set": ("taskId",),
    "push-get": ("taskId", "id"),
    "push-delete": ("taskId", "id"),
    "push-list": ("taskId",),
}
_ROUTE_OF = {
    "send": ("POST", "/message:send"),
    "stream": ("POST", "/message:stream"),
    "get": ("GET", "/tasks/{0}"),
    "list": ("GET", "/tasks"),
    "cancel": ("POST", "/tasks/{0}:cancel"),
    "resubscribe": ("POST", "/tasks/{0}:subscribe"),
    "push-set": ("POST", "/tasks/{0}/pushNotificationConfigs"),
    "push-list": ("GET", "/tasks/{0}/pushNotificationConfigs"),
    "push-get": ("GET", "/tasks/{0}/pushNotificationConfigs/{1}"),
    "push-delete": ("DELETE", "/tasks/{0}/pushNotificationConfigs/{1}"),
    "extended-card": ("GET", "/extendedAgentCard"),
}


def render_request(method: str, params: Mapping[str, Any], prefix: str = "") -> tuple[str, str, bytes]:
    """A call (an A2A method of either version, its params as JSON-RPC spells them) as this binding
    sends it: (HTTP method, path under ``prefix`` with its query, body). The inverse of :func:`read`:
    path fields leave the params (percent-encoded in the path), a GET's params go in the query."""
    operation = ALL_METHODS[method][0]
    http_method, template = _ROUTE_OF[operation]
    names = _PATH_FIELDS.get(operation, ())
    path = prefix.rstrip("/") + template.format(*(quote(str(params.get(n, "")), safe="") for n in names))
    rest = {k: v for k, v in params.items() if k not in names}
    if http_method in ("GET", "DELETE"):
        query = urlencode([(k, _query_value(v)) for k, v in rest.items() if v is not None])
        return http_method, path + ("?" + query if query else ""), b""
    return http_method, path, _encoder.encode(rest) if rest or operation in ("send", "stream") else b""


def _query_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def method_of(operation: str) -> str | None:
    """The v1.0 method an HTTP+JSON route stands for (the exchange row's ``rpc_method``)."""
    names = OPERATIONS.get(operation) or OTHER_OPERATIONS.get(operation)
    return names["1.0"] if names else None


# -- answers: HTTP+JSON <-> the engine's JSON-RPC form -------------------------------------------------


class _Envelope(msgspec.Struct):
    jsonrpc: Any = None
    id: Any = None
    result: msgspec.Raw = msgspec.Raw(b"")  # empty: absent
    error: Any = None


class _RestError(msgspec.Struct):
    error: Any = None


_envelope = Decoder(_Envelope)
_rest_error = Decoder(_RestError)


def _rest_error_of(payload: bytes) -> dict[str, Any] | None:
    """The ``error`` object of an HTTP+JSON error payload (``{"error": {"code", "status", ...}}``)."""
    try:
        err = _rest_error.decode(payload).error
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    if isinstance(err, dict) and isinstance(err.get("status"), str):
        return err
    return None


def to_jsonrpc(payload: bytes) -> bytes:
    """A recorded HTTP+JSON item (a bare StreamResponse, a Task, an error) as a JSON-RPC response
    with id null: the result is the recorded bytes themselves; an error takes its JSON-RPC code (its
    ErrorInfo reason, else its HTTP status) with the ``details`` as ``data``, as a2a-sdk sends them."""
    err = _rest_error_of(payload)
    if err is not None:
        rpc_error: dict[str, Any] = {
            "code": errors.code_from(err.get("code"), err.get("details")),
            "message": err.get("message", ""),
        }
        if err.get("details") is not None:
            rpc_error["data"] = err["details"]
        return _encoder.encode({"jsonrpc": "2.0", "id": None, "error": rpc_error})
    return b'{"jsonrpc":"2.0","id":null,"result":' + payload + b"}"


def error_payload(error: Any) -> tuple[int, bytes]:
    """A JSON-RPC error object as this binding's (HTTP status, body): a2a-sdk's shape, the agent's
    ``data`` as the ``details`` when it is a list, else the ErrorInfo of the code's reason."""
    err = error if isinstance(error, dict) else {}
    kind = errors.kind_of(err.get("code"))
    data = err.get("data")
    details = data if isinstance(data, list) else [errors.error_info(kind.reason)]
    body = {"code": kind.http, "status": kind.status, "message": err.get("message", ""), "details": details}
    return kind.http, _encoder.encode({"error": body})


def from_jsonrpc(payload: bytes) -> tuple[int, bytes, bool] | None:
    """A JSON-RPC response as (HTTP status, HTTP+JSON body, is an error); None when ``payload`` is not
    a JSON-RPC response (already this binding's, or not JSON: served as it is)."""
    try:
        env = _envelope.decode(payload)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    if env.jsonrpc is None:
        return None
    if env.error is not None:
        status, body = error_payload(env.error)
        return status, body, True
    if env.result:
        return 200, bytes(env.result), False
    return None


def render_body(status: int, content_type: str, body: bytes) -> tuple[int, str, bytes]:
    """A whole answer of the engine (a JSON-RPC response, or an answer recorded in this binding) as
    this binding sends it."""
    if not content_type.startswith("application/") or "json" not in content_type:
        return status, content_type, body
    out = from_jsonrpc(body)
    if out is None:
        return status, content_type, body
    code, rendered, failed = out
    if failed:
        return code, ERROR_MEDIA_TYPE, rendered
    return status, MEDIA_TYPE if content_type == "application/json" else content_type, rendered


async def render_stream(chunks: AsyncIterator[bytes]) -> AsyncGenerator[bytes, None]:
    """The engine's SSE stream (JSON-RPC responses) as this binding's: each item's ``result`` alone,
    an error as ``event: error`` with the error body; comments and items of this binding as they are."""
    parser = SseParser()
    try:
        async for chunk in chunks:
            out = [_item(it.data, it.event, it.comment, it.raw) for it in parser.feed(chunk)]
            if out:
                yield b"".join(out)
        rest = [_item(it.data, it.event, it.comment, it.raw) for it in parser.close()]
        if rest:
            yield b"".join(rest)
    finally:
        aclose = getattr(chunks, "aclose", None)
        if aclose is not None:
            await aclose()


def _item(data: bytes, event: str | None, comment: bool, raw: bytes) -> bytes:
    if comment:
        return raw
    out = from_jsonrpc(data)
    if out is None:
        return raw
    _, rendered, failed = out
    return frame(rendered, "error" if failed else event)


# -- the client side: a call of ours on this binding (wire.binding_client) --------------------------


class HttpJsonClient:
    """The HTTP+JSON binding for a client of ours: a call in the JSON-RPC form goes out as its route
    under the interface URL's path (:func:`render_request`: ``POST .../message:stream``,
    ``GET .../tasks/{id}``, ...), with ``A2A-Version: 1.0`` (the binding is A2A 1.0's; a 1.3.0
    agent refuses a request without it); the query of the interface URL (a key the agent wants)
    stays on every route. Answers are bare (a Task, ``{"task"}``, a StreamResponse per SSE item);
    an error is an HTTP status with its JSON error body, a whole answer like any other."""

    name = NAME
    json_media = frozenset({ERROR_MEDIA_TYPE, MEDIA_TYPE})

    def request(self, op: str, dialect: str | None, url: str, body: bytes) -> Outgoing:
        rpc = _rpc_of.decode(body)
        parts = urlsplit(url)
        http_method, route_path, out = render_request(rpc.method, rpc.params, parts.path)
        path, _, query = route_path.partition("?")
        url = urlunsplit((parts.scheme, parts.netloc, path, "&".join(q for q in (parts.query, query) if q), ""))
        headers = [("A2A-Version", "1.0")]
        if out:
            headers.append(("Content-Type", "application/json"))
        if op in STREAMING_OPERATIONS:
            headers.append(("Accept", "text/event-stream"))
        return http_method, url, headers, out

    def answer(self, head: Head) -> Answer:
        return classify(head, self.json_media)

    def judge(self, head: Head, item: Item) -> str | None:
        return judge(head, item)


class _Rpc(msgspec.Struct):
    method: str
    params: dict[str, Any] = {}


_rpc_of = Decoder(_Rpc)

CLIENT = HttpJsonClient()
