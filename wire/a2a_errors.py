"""One table of A2A's errors across the bindings: a JSON-RPC code, an HTTP status, a gRPC status
name and the reason ``google.rpc.ErrorInfo`` carries, as a2a-sdk 1.3.0 maps them
(``a2a.utils.errors``: ``JSON_RPC_ERROR_CODE_MAP``, ``A2A_ERROR_MAPPING``).

A binding that renders an error in its own shape reads the row of the error's code here; one that
reads an agent's error (an HTTP status and an ``ErrorInfo`` reason) finds the code back the same way.
"""

from __future__ import annotations

from typing import Any

import msgspec


class ErrorKind(msgspec.Struct, frozen=True):
    code: int  # JSON-RPC
    http: int  # HTTP+JSON
    status: str  # gRPC status name (also the HTTP+JSON body's ``status``)
    reason: str  # google.rpc.ErrorInfo.reason


_KINDS = [
    ErrorKind(-32001, 404, "NOT_FOUND", "TASK_NOT_FOUND"),
    ErrorKind(-32002, 400, "FAILED_PRECONDITION", "TASK_NOT_CANCELABLE"),
    ErrorKind(-32003, 400, "FAILED_PRECONDITION", "PUSH_NOTIFICATION_NOT_SUPPORTED"),
    ErrorKind(-32004, 400, "FAILED_PRECONDITION", "UNSUPPORTED_OPERATION"),
    ErrorKind(-32005, 400, "INVALID_ARGUMENT", "CONTENT_TYPE_NOT_SUPPORTED"),
    ErrorKind(-32006, 500, "INTERNAL", "INVALID_AGENT_RESPONSE"),
    ErrorKind(-32007, 400, "FAILED_PRECONDITION", "EXTENDED_AGENT_CARD_NOT_CONFIGURED"),
    ErrorKind(-32008, 400, "FAILED_PRECONDITION", "EXTENSION_SUPPORT_REQUIRED"),
    ErrorKind(-32009, 400, "FAILED_PRECONDITION", "VERSION_NOT_SUPPORTED"),
    ErrorKind(-32602, 400, "INVALID_ARGUMENT", "INVALID_PARAMS"),
    ErrorKind(-32600, 400, "INVALID_ARGUMENT", "INVALID_REQUEST"),
    ErrorKind(-32601, 404, "NOT_FOUND", "METHOD_NOT_FOUND"),
    ErrorKind(-32603, 500, "INTERNAL", "INTERNAL_ERROR"),
    ErrorKind(-32700, 400, "INVALID_ARGUMENT", "INVALID_REQUEST"),  # the SDK's REST side: a protobuf ParseError
]
BY_CODE: dict[int, ErrorKind] = {k.code: k for k in _KINDS}
BY_REASON: dict[str, ErrorKind] = {}
for _k in _KINDS:
    BY_REASON.setdefault(_k.reason, _k)
INTERNAL = BY_CODE[-32603]

A2A_CODES = frozenset(range(-32009, -32000))
"""The A2A-specific codes: a2a-sdk 1.3.0 sends ``data`` (the ErrorInfo details) with each in v1.0."""

ERROR_INFO_TYPE = "type.googleapis.com/google.rpc.ErrorInfo"
BAD_REQUEST_TYPE = "type.googleapis.com/google.rpc.BadRequest"
A2A_DOMAIN = "a2a-protocol.org"


def kind_of(code: Any) -> ErrorKind:
    """The row of a JSON-RPC code (an unknown one is an internal error on the other bindings)."""
    return BY_CODE.get(code, INTERNAL) if isinstance(code, int) else INTERNAL


def error_info(reason: str) -> dict[str, Any]:
    """The ``google.rpc.ErrorInfo`` detail a2a-sdk puts first in every error it sends."""
    return {"@type": ERROR_INFO_TYPE, "reason": reason, "domain": A2A_DOMAIN, "metadata": {}}


def code_from(http: int | None, details: Any) -> int:
    """The JSON-RPC code of an agent's error in another binding: its ErrorInfo reason first (a
    reason names one error), else its HTTP status (404 is TASK_NOT_FOUND, 400 invalid params, ...)."""
    if isinstance(details, list):
        for d in details:
            if isinstance(d, dict) and d.get("@type") == ERROR_INFO_TYPE and isinstance(d.get("reason"), str):
                found = BY_REASON.get(d["reason"])
                if found is not None:
                    return found.code
    return {404: -32001, 400: -32602, 405: -32601, 415: -32005}.get(http or 500, -32603)
