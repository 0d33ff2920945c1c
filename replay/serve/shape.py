"""The shape of a request, as matching compares it: ids removed, protocol defaults normalised.

Two requests that an A2A agent treats alike have the same shape, whatever their dialect and
whichever defaults the client spelt out:

- the JSON-RPC id's value is left out, but whether there is one counts (a notification is not a
  request), and so does a ``jsonrpc`` other than ``"2.0"`` (a malformed envelope is its own request);
  the message's ``messageId``, ``taskId`` and ``contextId`` count
  only by being there (any non-empty string is the same; absent or empty is not);
- roles are spelt as in v0.3 (``ROLE_USER`` -> ``user``), part and message ``kind`` is left out,
  a v0.3 file part (``file.uri`` / ``file.bytes``, ``mimeType``, ``name``) takes the v1.0 names
  (``url`` / ``raw``, ``mediaType``, ``filename``);
- a field that is null, an empty object or an empty list is absent (an empty ``configuration``
  equals none), except ``params.message`` itself (a message with no fields is not no message); in ``configuration``, v0.3's ``blocking: true`` and v1.0's
  ``returnImmediately: false`` are the defaults and are left out, and ``blocking: false`` is
  ``returnImmediately: true``.

Free-form values (``metadata``, a data part's ``data``) are compared as sent. A request that is
not a JSON object, or whose params are not an object, keeps its shape as sent: an exact
malformed request still finds the agent's recorded answer to it.

This is the one place of the replay side that reads a request as plain JSON rather than through
a typed model: matching has to compare fields no model knows, and malformed requests.
"""

from __future__ import annotations

from typing import Any

import msgspec

from a2a_tape.store.json_values import Decoder, decode_json

_sorted = msgspec.json.Encoder(order="sorted")

_MESSAGE_IDS = frozenset({"messageId", "taskId", "contextId"})
ID = "<id>"  # an id's value does not matter, whether there is one does (a send without messageId is refused)
_V03_FILE = {"uri": "url", "bytes": "raw", "mimeType": "mediaType", "name": "filename"}


class Shape(msgspec.Struct, frozen=True):
    """A request less its ids and defaults: ``method`` as sent, ``params`` normalised, and ``key``,
    their canonical bytes (sorted keys; a body that is not JSON is its own key): equal keys,
    equal requests."""

    method: str | None
    params: Any
    key: bytes


def _shape(method: str | None, params: Any, envelope: dict[str, Any] | None = None) -> Shape:
    key = _sorted.encode(params) if not envelope else _sorted.encode({"<envelope>": envelope, "params": params})
    return Shape(method, params, key)


class _Envelope(msgspec.Struct):
    method: Any = None
    params: Any = None
    jsonrpc: Any = "2.0"
    id: Any = msgspec.UNSET


_envelope = Decoder(_Envelope)


def shape_of(body: bytes) -> Shape:
    """The shape of a request body (never raises: a body that is not JSON is its own shape)."""
    try:
        env = _envelope.decode(body)
    except msgspec.ValidationError:  # JSON, but not an object
        try:
            return _shape(None, decode_json(body))
        except msgspec.DecodeError:
            return Shape(None, None, b"raw:" + body)
    except msgspec.DecodeError:
        return Shape(None, None, b"raw:" + body)
    method = env.method if isinstance(env.method, str) else None
    envelope: dict[str, Any] = {}
    if env.jsonrpc != "2.0":
        envelope["jsonrpc"] = env.jsonrpc
    if env.id is msgspec.UNSET:
        envelope["id"] = "absent"
    return _shape(method, normalise_params(env.params), envelope)


def normalise_params(params: Any) -> Any:
    if not isinstance(params, dict):
        return params
    out: dict[str, Any] = {}
    for k, v in params.items():
        if k == "message":
            v = _message(v)
            if v is not None:  # present, even with no fields: the agent tells the two apart
                out[k] = v
                continue
        elif k == "configuration":
            v = _configuration(v)
        if not _absent(v):
            out[k] = v
    return out


def _absent(v: Any) -> bool:
    return v is None or (isinstance(v, (dict, list)) and not v)


def _role(v: Any) -> Any:
    if isinstance(v, str):
        low = v.lower()
        return low[5:] if low.startswith("role_") else low
    return v


def _message(m: Any) -> Any:
    if not isinstance(m, dict):
        return m
    out: dict[str, Any] = {}
    for k, v in m.items():
        if k == "kind" and v == "message":
            continue
        if k in _MESSAGE_IDS and isinstance(v, str) and v:
            v = ID
        elif k == "role":
            v = _role(v)
        elif k == "parts" and isinstance(v, list):
            v = [_part(p) for p in v]
        if not _absent(v):
            out[k] = v
    return out


def _part(p: Any) -> Any:
    if not isinstance(p, dict):
        return p
    out: dict[str, Any] = {}
    kind = p.get("kind")
    for k, v in p.items():
        if k == "kind" and v in ("text", "data", "file"):
            continue
        if k == "file" and kind == "file" and isinstance(v, dict):
            for fk, fv in v.items():
                if not _absent(fv):
                    key: str = fk  # a JSON object's member name
                    out[_V03_FILE.get(key, key)] = fv
            continue
        if not _absent(v):
            out[k] = v
    return out


def _configuration(c: Any) -> Any:
    if not isinstance(c, dict):
        return c
    out: dict[str, Any] = {}
    for k, v in c.items():
        if k == "blocking":
            if v is True:
                continue
            if v is False:
                k, v = "returnImmediately", True
        elif k == "returnImmediately" and v is False:
            continue
        if not _absent(v):
            out[k] = v
    return out


def _show(v: Any) -> str:
    text = msgspec.json.encode(v).decode()
    return text if len(text) <= 60 else text[:57] + "..."


def first_difference(got: Any, want: Any, path: str = "params") -> str | None:
    """The first field (in sorted key order) where the request ``got`` differs from the recorded
    ``want``, as ``path: got != want`` (``absent`` for a missing field); None when equal."""
    if isinstance(got, dict) and isinstance(want, dict):
        for k in sorted(set(got) | set(want)):
            sub = f"{path}.{k}"
            if k not in got:
                if isinstance(want[k], dict) and want[k]:  # name the field inside, not the object
                    return first_difference({}, want[k], sub)
                return f"{sub}: absent != {_show(want[k])}"
            if k not in want:
                if isinstance(got[k], dict) and got[k]:
                    return first_difference(got[k], {}, sub)
                return f"{sub}: {_show(got[k])} != absent"
            d = first_difference(got[k], want[k], sub)
            if d is not None:
                return d
        return None
    if isinstance(got, list) and isinstance(want, list):
        for i in range(max(len(got), len(want))):
            sub = f"{path}[{i}]"
            if i >= len(got):
                return f"{sub}: absent != {_show(want[i])}"
            if i >= len(want):
                return f"{sub}: {_show(got[i])} != absent"
            d = first_difference(got[i], want[i], sub)
            if d is not None:
                return d
        return None
    if _sorted.encode(got) != _sorted.encode(want):  # 1 and true are not equal here
        return f"{path}: {_show(got)} != {_show(want)}"
    return None


def common_fields(a: Any, b: Any) -> int:
    """How many leaf fields two shapes share (equal values at the same path): a closeness score."""
    if isinstance(a, dict) and isinstance(b, dict):
        return sum(common_fields(a[k], b[k]) for k in a.keys() & b.keys())
    if isinstance(a, list) and isinstance(b, list):
        return sum(common_fields(x, y) for x, y in zip(a, b))
    return 1 if _sorted.encode(a) == _sorted.encode(b) else 0
