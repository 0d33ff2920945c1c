"""The methods of A2A in both dialects (docs/design.md section 3) and its bindings (section 15): one table for every layer.

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

OTHER_OPERATIONS: dict[str, dict[str, str]] = {
    "push-set": {"0.3": "tasks/pushNotificationConfig/set", "1.0": "CreateTaskPushNotificationConfig"},
    "push-get": {"0.3": "tasks/pushNotificationConfig/get", "1.0": "GetTaskPushNotificationConfig"},
    "push-list": {"0.3": "tasks/pushNotificationConfig/list", "1.0": "ListTaskPushNotificationConfigs"},
    "push-delete": {"0.3": "tasks/pushNotificationConfig/delete", "1.0": "DeleteTaskPushNotificationConfig"},
    "extended-card": {"0.3": "agent/getAuthenticatedExtendedCard", "1.0": "GetExtendedAgentCard"},
}
"""The other methods of A2A (push-notification configs, the extended card): a replay answers them
from the recording only, so they stay out of :data:`METHODS`; the bindings name them."""

ALL_METHODS: dict[str, tuple[str, str]] = {
    name: (op, dialect)
    for table in (OPERATIONS, OTHER_OPERATIONS)
    for op, names in table.items()
    for dialect, name in names.items()
}
"""Every A2A method name -> (operation, dialect)."""

SEND_OPERATIONS = frozenset({"send", "stream"})
STREAMING_OPERATIONS = frozenset({"stream", "resubscribe"})
SEND_METHODS = frozenset(m for m, (op, _) in METHODS.items() if op in SEND_OPERATIONS)
STREAMING_METHODS = frozenset(m for m, (op, _) in METHODS.items() if op in STREAMING_OPERATIONS)

# -- bindings (docs/design.md section 15) ------------------------------------------------------

JSONRPC = "jsonrpc"
HTTP_JSON = "http+json"
GRPC = "grpc"
BINDINGS: tuple[str, ...] = (JSONRPC, HTTP_JSON, GRPC)
"""How an exchange went on the wire, as the ``binding`` column spells it."""

CARD_BINDINGS: dict[str, str] = {"JSONRPC": JSONRPC, "HTTP+JSON": HTTP_JSON, "GRPC": GRPC}
"""An agent card's ``protocolBinding`` (``transport`` in v0.3 cards) -> our spelling."""

BINDING_NAMES: dict[str, str] = {v: k for k, v in CARD_BINDINGS.items()}
"""Our spelling -> the card's (shown to people: ``JSONRPC``, ``HTTP+JSON``, ``GRPC``)."""

LEGACY_REST = "rest"
"""The ``dialect`` the proxy wrote for HTTP+JSON exchanges before the ``binding`` column existed."""


def binding_and_version(binding: str | None, dialect: str | None) -> tuple[str | None, str | None]:
    """An exchange row's (binding, protocol version), old rows included: a row written before the
    ``binding`` column has none; its ``dialect`` says it (``rest`` was HTTP+JSON 1.0, a version
    was JSON-RPC). Every reader of the two columns goes through here."""
    if dialect == LEGACY_REST:
        return binding or HTTP_JSON, "1.0"
    if binding is None and dialect in ("0.3", "1.0"):
        return JSONRPC, dialect
    return binding, dialect


def binding_label(binding: str | None, dialect: str | None) -> str | None:
    """How people read an exchange's binding: ``HTTP+JSON 1.0``, ``JSONRPC 0.3`` (None: not an A2A call)."""
    name, version = binding_and_version(binding, dialect)
    if name is None:
        return None
    return f"{BINDING_NAMES.get(name, name)} {version}" if version else BINDING_NAMES.get(name, name)


CARD_PATHS = ("/.well-known/agent-card.json", "/.well-known/agent.json")
"""Where an agent serves its card: the path of today's spec first (a client of ours asks for it),
then the v0.2 path some agents still serve. The proxy, the replay and the log's "anything
recorded?" query read this tuple."""
CARD_PATH = CARD_PATHS[0]
