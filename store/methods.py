"""The JSON-RPC methods of A2A in both dialects (docs/design.md section 3): one table for every layer.

An *operation* is what a method does whatever its dialect: ``send``, ``stream``, ``get``,
``cancel``, ``resubscribe``, ``list`` (v1.0 only).
"""

from __future__ import annotations

OPERATIONS: dict[str, dict[str, str]] = {
    "send": {"0.3": "message/send", "1.0": "SendMessage"},
    "stream": {"0.3": "message/stream", "1.0": "SendStreamingMessage"},
    "get": {"0.3": "tasks/get", "1.0": "GetTask"},
    "cancel": {"0.3": "tasks/cancel", "1.0": "CancelTask"},
    "resubscribe": {"0.3": "tasks/resubscribe", "1.0": "SubscribeToTask"},
    "list": {"1.0": "ListTasks"},
}
"""operation -> dialect -> JSON-RPC method name."""

METHODS: dict[str, tuple[str, str]] = {
    name: (op, dialect) for op, names in OPERATIONS.items() for dialect, name in names.items()
}
"""JSON-RPC method name -> (operation, dialect)."""

SEND_OPERATIONS = frozenset({"send", "stream"})
STREAMING_OPERATIONS = frozenset({"stream", "resubscribe"})
SEND_METHODS = frozenset(m for m, (op, _) in METHODS.items() if op in SEND_OPERATIONS)
STREAMING_METHODS = frozenset(m for m, (op, _) in METHODS.items() if op in STREAMING_OPERATIONS)
