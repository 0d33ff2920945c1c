"""The idempotency gateway: a repeated message is answered from the log, not run twice.

Why: a2a-sdk 1.3.0 agents create a second task when a client retries the same message
(same ``messageId``). Behind the proxy, the first request with a key claims it in the store
(``idem_claim``, one write transaction, so two processes cannot both win); a repeat with the
same request is served what the first one got (or attached to it while it is still running)
and the upstream is not called again. A repeat with the same key but a *different* request is,
by default, forwarded as the new request it is (an agent is not made stricter than it is) and the
conflict is written to the log as a local note; ``--on-key-conflict reject`` refuses it with a
JSON-RPC error instead. Keys expire after a configurable time. ``--idempotency off`` turns the
gateway off: every request goes upstream, as a client that reuses its messageIds on purpose
(the official TCK 1.0 does) expects of the agent itself.

The key is the ``Idempotency-Key`` header when present, else the message's ``messageId``.
The request hash covers the method and the params (canonical JSON) but not the JSON-RPC id:
a client retrying with a new id is still the same request.

A recording answers only the caller that made it (docs/design.md, "Trust boundaries"): the hash
also holds the caller's *scope*, a keyed hash (HMAC-SHA256, with a random key kept in the log's
meta table, so every proxy on one log agrees) of the request's path and query and of its
credential headers (those :class:`~a2a_tape.store.redact.Redactor` calls secrets: by shape,
``Authorization``, ``Cookie``, ``X-Api-Key``, ...). No secret is stored, only the digest. A repeat
from another scope (no credentials, other credentials, another path) is the same key with a
different request: forwarded as new, or refused under ``reject``; it is never answered with what
another caller was answered.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import secrets
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

import msgspec

from a2a_tape import store
from a2a_tape.store.errors import A2ATapeError
from a2a_tape.store.json_values import Decoder, decode_json
from a2a_tape.store.methods import SEND_METHODS
from a2a_tape.store.methods import STREAMING_METHODS as STREAM_METHODS  # noqa: F401 - the proxy asks it here

# methods (both dialects, and the HTTP+JSON binding paths) whose side effect must run once
REST_SEND_SUFFIXES = ("/message:send", "/message:stream")

DEFAULT_TTL = 24 * 3600.0


class MessageRef(msgspec.Struct):
    """The parts of a message the gateway needs (everything else stays opaque)."""

    messageId: str | None = None
    taskId: str | None = None
    contextId: str | None = None


class RpcParams(msgspec.Struct):
    """``params`` of a JSON-RPC call, or the body of an HTTP+JSON ``message:send``."""

    message: MessageRef | None = None
    id: str | None = None  # tasks/get, tasks/resubscribe, GetTask, ...


class RpcRequest(msgspec.Struct):
    """A JSON-RPC request envelope; ``params`` kept as raw bytes for hashing and forwarding."""

    method: str
    jsonrpc: str | None = None
    id: msgspec.Raw = msgspec.Raw(b"null")
    params: msgspec.Raw = msgspec.Raw(b"null")


_request_decoder = Decoder(RpcRequest)  # store.json_values: a body nested too deep is a DecodeError
_params_decoder = Decoder(RpcParams)
_encoder = msgspec.json.Encoder(order="sorted")


class OnKeyConflict(enum.StrEnum):
    """What the proxy does with a reused key whose request differs from the first one's."""

    forward = "forward"  # run it as the new request it is; a local note records the reuse
    reject = "reject"  # refuse it (-32600), as a strict gateway would


class Idempotency(enum.StrEnum):
    """Whether the gateway answers repeats from the log (``--idempotency``)."""

    on = "on"
    off = "off"


class _IdOnly(msgspec.Struct):
    id: msgspec.Raw = msgspec.Raw(b"null")


_id_decoder = Decoder(_IdOnly)


def request_id(body: bytes) -> bytes:
    """The JSON-RPC id of a request body as raw JSON, ``null`` when it has none we can read."""
    try:
        raw = bytes(_id_decoder.decode(body).id)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return b"null"
    return raw if raw[:1] in (b'"', b"n") or raw[:1].isdigit() or raw[:1] == b"-" else b"null"


class BadRequest(A2ATapeError):
    """The client's request is not JSON-RPC we can handle; ``code`` is the JSON-RPC error code."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def parse_request(body: bytes) -> RpcRequest:
    """Decode a JSON-RPC request or raise :class:`BadRequest` (-32700 / -32600)."""
    try:
        return _request_decoder.decode(body)
    except msgspec.ValidationError as exc:
        raise BadRequest(-32600, f"invalid JSON-RPC request: {exc}") from None
    except msgspec.DecodeError as exc:
        raise BadRequest(-32700, f"parse error: request body is not JSON ({exc})") from None


def parse_params(raw: bytes | msgspec.Raw) -> RpcParams:
    """The params we read (lenient: a shape we do not know yields empty params)."""
    try:
        return _params_decoder.decode(raw)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return RpcParams()


def request_hash(method: str, params: bytes | msgspec.Raw) -> str:
    """sha256 of the method and the canonical params (key order and spacing do not matter)."""
    try:
        canonical = _encoder.encode(decode_json(params))
    except msgspec.DecodeError:
        canonical = bytes(params)
    h = hashlib.sha256(method.encode())
    h.update(b"\0")
    h.update(canonical)
    return h.hexdigest()


def idempotency_key(headers: Mapping[str, str], method: str, params: RpcParams) -> str | None:
    """``hdr:<Idempotency-Key>`` or ``msg:<messageId>`` for a sending call; None otherwise."""
    if method not in SEND_METHODS and not method.endswith(REST_SEND_SUFFIXES):
        return None
    header = headers.get("idempotency-key")
    if header:
        return "hdr:" + header.strip()
    if params.message is not None and params.message.messageId:
        return "msg:" + params.message.messageId
    return None


class _ErrorBody(msgspec.Struct):
    code: int
    message: str


class _ErrorReply(msgspec.Struct):
    jsonrpc: str
    id: msgspec.Raw
    error: _ErrorBody


def rpc_error(rpc_id: bytes, code: int, message: str) -> bytes:
    """A JSON-RPC error response (the id as raw JSON bytes)."""
    return msgspec.json.encode(_ErrorReply("2.0", msgspec.Raw(rpc_id or b"null"), _ErrorBody(code, message)))


SCOPE_KEY = "idempotency-scope-key"  # the meta row holding the scope's HMAC key (hex)


class GatewayStore(store.IdempotencyStore, store.LeasesAndMeta, store.StoreHandle, Protocol):
    """What the gateway uses: the keys, and the meta table that holds the scope's key."""


def caller_scope(
    secret: bytes, target: str, headers: Iterable[tuple[str, str]], is_credential: Callable[[str, str], bool]
) -> str:
    """Who asks: a keyed hash of the request's target (raw path and query) and of its credential
    headers (names lower-cased, in order; the values as received). Never the secret itself."""
    h = hmac.new(secret, target.encode("latin-1", "replace"), hashlib.sha256)
    for name, value in sorted((n.lower(), v) for n, v in headers if is_credential(n, v)):
        h.update(b"\0" + name.encode("latin-1", "replace") + b"\0" + value.encode("latin-1", "replace"))
    return h.hexdigest()[:32]


def scoped(scope: str, req_hash: str) -> str:
    """The hash a key is claimed with: the caller's scope, then the request's."""
    return f"{scope}.{req_hash}"


def same_caller(a: str, b: str) -> bool:
    """Whether two claimed hashes come from the same scope (the part before the dot)."""
    return a.partition(".")[0] == b.partition(".")[0]


class Gateway:
    """Claims keys in the store and tells the proxy what to do with a request."""

    def __init__(self, st: GatewayStore, *, ttl: float = DEFAULT_TTL) -> None:
        self.store = st
        self.ttl = ttl
        self._last_expire = 0.0
        self._secret: bytes | None = None

    @property
    def secret(self) -> bytes:
        """The scope's HMAC key: made once per log (in one write transaction), then read."""
        if self._secret is None:
            with self.store.transaction():
                held = self.store.get_meta(SCOPE_KEY)
                if held is None:
                    held = secrets.token_hex(32)
                    self.store.set_meta(SCOPE_KEY, held)
            self._secret = bytes.fromhex(held)
        return self._secret

    def scope(self, target: str, headers: Iterable[tuple[str, str]], is_credential: Callable[[str, str], bool]) -> str:
        return caller_scope(self.secret, target, headers, is_credential)

    def claim(self, key: str, req_hash: str, exchange_id: int) -> tuple[store.IdempotencyRecord, bool]:
        """Register the key for this exchange, or return the record already holding it."""
        now = time.time()
        if now - self._last_expire > 60:
            self._last_expire = now
            self.store.idem_expire(now)
        record = store.IdempotencyRecord(
            key=key, request_hash=req_hash, exchange_id=exchange_id, created_at=now, expires_at=now + self.ttl
        )
        return self.store.idem_claim(record)

    def release(self, key: str, exchange_id: int) -> None:
        """Forget a key whose request provably never reached the agent: a retry may run."""
        held = self.store.idem_get(key)
        if held is not None and held.exchange_id == exchange_id:
            self.store.idem_release(key)

    def done(self, key: str, task_id: str | None) -> None:
        self.store.idem_update(key, task_id=task_id, state="done")


def _key_words(key: str) -> tuple[str, str]:
    kind, _, value = key.partition(":")
    return ("Idempotency-Key" if kind == "hdr" else "messageId"), value


def conflict_message(key: str, other_caller: bool = False) -> str:
    what, value = _key_words(key)
    if other_caller:
        return f"{what} '{value}' is in use by another caller; send a new {what} for a new request"
    return f"{what} '{value}' was already used for a different request; send a new {what} for a new request"


def conflict_note(key: str, first_exchange: int | None, other_caller: bool = False) -> str:
    """The local note's text for a reused key forwarded as a new request."""
    what, value = _key_words(key)
    first = f"exchange {first_exchange}" if first_exchange is not None else "an earlier request"
    how = "another caller (other credentials or path)" if other_caller else "a different request"
    return (
        f"{what} '{value}' was first used by {first} for {how}; forwarded as a new request (--on-key-conflict forward)"
    )


def recorded_items(st: store.EventLog, record: store.IdempotencyRecord) -> list[store.StoredEvent]:
    """What to re-serve for a repeated key: the first exchange's events, then (when the task is
    known) the task's later events up to its first terminal or interrupted state (a recovery
    may have finished it after the first stream dropped). Local notes are not wire items."""
    events: list[store.StoredEvent] = []
    if record.exchange_id is not None:
        events = st.read_exchange(record.exchange_id)
    task_id = record.task_id or next((e.task_id for e in events if e.task_id), None)
    if task_id is None:
        return [e for e in events if not _is_note(e)]
    first = events[0].position if events else 0
    seen = {e.position for e in events}
    merged = list(events) + [e for e in st.read_task(task_id) if e.position >= first and e.position not in seen]
    merged.sort(key=lambda e: e.position)
    out = []
    for e in merged:
        item = store.decode_item(e.payload)
        if isinstance(item.body, store.Note):
            continue
        out.append(e)
        state = _state_of(item)
        if state in store.SETTLED_STATES:
            break
    return out


def _is_note(e: store.StoredEvent) -> bool:
    return isinstance(store.decode_item(e.payload).body, store.Note)


def _state_of(item: store.Item) -> str | None:
    body: Any = item.body
    if isinstance(body, (store.TaskSnapshot, store.StatusUpdate)):
        return body.state
    return None
