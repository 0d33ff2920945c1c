"""What an a2a-sdk 1.3.0 agent refuses in a request whose params could be read (its required
fields), checked on the request's bytes: the replay refuses the same, with the same codes."""

from __future__ import annotations

from typing import Any

import msgspec

from a2a_tape.replay.serve import rpc
from a2a_tape.store.json_values import Decoder
from a2a_tape.wire.a2a_errors import BAD_REQUEST_TYPE, error_info


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


class Problem(msgspec.Struct, frozen=True):
    """What the agent refuses in a send: the code, the message and, in v1.0, the fields it names
    (``(field, why)``; a2a-sdk sends them in its ErrorInfo's metadata and a BadRequest detail)."""

    code: int
    message: str
    fields: tuple[tuple[str, str], ...] = ()

    def data(self) -> Any:
        """The error's ``data`` as a2a-sdk 1.3.0 sends it (v1.0), None when there are no fields."""
        if not self.fields:
            return None
        info = error_info("INVALID_PARAMS")
        info["metadata"] = {"errors": [{"field": f, "message": why} for f, why in self.fields]}
        violations = [{"field": f, "description": why} for f, why in self.fields]
        return [info, {"@type": BAD_REQUEST_TYPE, "fieldViolations": violations}]


_REQUIRED = "Field is required."
_NOT_EMPTY = "Field must contain at least one element."


def send_problem(body: bytes, dialect: str) -> Problem | None:
    """What an a2a-sdk 1.3.0 agent refuses in a send whose params we could read: a message with
    a messageId, a role and at least one part. v0.3 (its adapter validates the request as one
    model): a missing field is -32600; an empty one (``parts: []``) reaches the core and is
    -32602, as every v1.0 refusal is (``Validation failed``, naming the fields)."""
    try:
        params = _present.decode(body).params
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    msg = params.message if params is not None else None
    names = ("messageId", "role", "parts")
    if dialect != "1.0":
        if msg is None:
            return Problem(rpc.INVALID_REQUEST, "Validation failed: message is required")
        absent = [n for n in names if getattr(msg, n) in (msgspec.UNSET, None)]
        if absent:
            return Problem(rpc.INVALID_REQUEST, f"Invalid Request: message.{', message.'.join(absent)} required")
        if msg.role not in ("user", "agent"):
            return Problem(rpc.INVALID_REQUEST, "Invalid Request: message.role must be 'user' or 'agent'")
        empty = [n for n in names if getattr(msg, n) in ("", [])]
        if empty:
            return Problem(rpc.INVALID_PARAMS, f"Validation failed: message.{', message.'.join(empty)} required")
        return None
    if msg is None:
        return Problem(rpc.INVALID_PARAMS, "Validation failed", (("message", _REQUIRED),))
    fields = []
    for n in names:
        value = getattr(msg, n)
        if n == "parts" and value in (msgspec.UNSET, None, []):  # a repeated field: absent is empty
            fields.append((f"message.{n}", _NOT_EMPTY))
        elif value in (msgspec.UNSET, None, "") or (n == "role" and value not in _V1_ROLES):
            fields.append((f"message.{n}", _REQUIRED))
    return Problem(rpc.INVALID_PARAMS, "Validation failed", tuple(fields)) if fields else None
