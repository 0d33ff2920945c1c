"""What an a2a-sdk 1.3.0 agent refuses in a request whose params could be read (its required
fields), checked on the request's bytes: the replay refuses the same, with the same codes."""

from __future__ import annotations

from typing import Any

import msgspec

from a2a_tape.store.json_values import Decoder

from . import rpc


class _PresentMessage(msgspec.Struct):
    messageId: Any = msgspec.UNSET
    role: Any = msgspec.UNSET
    parts: Any = msgspec.UNSET


class _PresentParams(msgspec.Struct):
    message: _PresentMessage | None = None


class _Present(msgspec.Struct):
    params: _PresentParams | None = None


_present = Decoder(_Present)
_V1_ROLES = frozenset({"ROLE_USER", "ROLE_AGENT"})


def send_problem(body: bytes, dialect: str) -> tuple[int, str] | None:
    """What an a2a-sdk 1.3.0 agent refuses in a send whose params we could read: a message with
    a messageId, a role and at least one part. v0.3 (its adapter validates the request as one
    model): a missing field is -32600; an empty one (``parts: []``) reaches the core and is
    -32602, as every v1.0 refusal is."""
    try:
        params = _present.decode(body).params
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    msg = params.message if params is not None else None
    if msg is None:
        return rpc.bad_params_code(dialect), "Validation failed: message is required"
    names = ("messageId", "role", "parts")
    if dialect != "1.0":
        absent = [n for n in names if getattr(msg, n) in (msgspec.UNSET, None)]
        if absent:
            return rpc.INVALID_REQUEST, f"Invalid Request: message.{', message.'.join(absent)} required"
        if msg.role not in ("user", "agent"):
            return rpc.INVALID_REQUEST, "Invalid Request: message.role must be 'user' or 'agent'"
    empty = [n for n in names if getattr(msg, n) in (msgspec.UNSET, None, "", [])]
    if dialect == "1.0" and "role" not in empty and msg.role not in _V1_ROLES:
        empty.append("role")
    if empty:
        return rpc.INVALID_PARAMS, f"Validation failed: message.{', message.'.join(empty)} required"
    return None
