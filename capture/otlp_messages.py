"""The OTLP trace messages as plain data: a span as the fields of opentelemetry-proto's ``Span`` message
(opentelemetry/proto/trace/v1/trace.proto; common.proto for the values), with the proto field names, ids
as bytes and times as integer nanoseconds, ready for the official generated class to take in one
construction (:func:`capture.otlp.request`). The values and flags are written as the official encoder
(``opentelemetry.exporter.otlp.proto.common``) writes them from the SDK's spans.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol, TypedDict


class ArrayValue(TypedDict):
    values: list[AnyValue]


class AnyValue(TypedDict, total=False):
    """One of its fields (an empty one: no value, as the official encoder writes None)."""

    string_value: str
    bool_value: bool
    int_value: int
    double_value: float
    bytes_value: bytes
    array_value: ArrayValue
    kvlist_value: KeyValueList


class KeyValue(TypedDict):
    key: str
    value: AnyValue


class KeyValueList(TypedDict):
    values: list[KeyValue]


class SpanEvent(TypedDict):
    name: str
    time_unix_nano: int
    attributes: list[KeyValue]


class SpanLink(TypedDict):
    trace_id: bytes
    span_id: bytes
    attributes: list[KeyValue]
    flags: int


class SpanStatus(TypedDict, total=False):
    code: int  # 0 unset, 2 error
    message: str


class Span(TypedDict, total=False):
    """An OTLP ``Span`` message's fields (those the export sets; the rest keep their defaults)."""

    trace_id: bytes
    span_id: bytes
    trace_state: str
    parent_span_id: bytes
    flags: int
    name: str
    kind: int
    start_time_unix_nano: int
    end_time_unix_nano: int
    attributes: list[KeyValue]
    events: list[SpanEvent]
    dropped_events_count: int
    links: list[SpanLink]
    status: SpanStatus


class Scope(TypedDict):
    name: str
    version: str
    attributes: list[KeyValue]


class ProtoMessage(Protocol):
    """What is used of a generated protobuf message (the classes are typed only for messages as input)."""

    def SerializeToString(self) -> bytes: ...


KIND_INTERNAL, KIND_SERVER, KIND_CLIENT = 1, 2, 3
"""``Span.SpanKind``."""
FLAGS_LOCAL, FLAGS_REMOTE = 0x100, 0x300
"""``Span.flags`` as the official encoder writes them: whether the parent (or a link's span) is remote
is known (``SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK``), and it is (``..._IS_REMOTE_MASK``). The W3C trace
flags are not in the low byte: the encoder does not write them."""
STATUS_UNSET, STATUS_ERROR = 0, 2

_VALUE_FIELD: dict[type, str] = {
    str: "string_value",
    bool: "bool_value",
    int: "int_value",
    float: "double_value",
    bytes: "bytes_value",
}


def key_values(attrs: Mapping[str, Any]) -> list[KeyValue]:
    """Attributes as OTLP ``KeyValue``\\ s, in their order, each value as the official encoder writes it (a
    value of a plain type by a table of its type: the common case, on the live export's path)."""
    field = _VALUE_FIELD.get
    out: list[Any] = [
        {"key": k, "value": {name: v} if (name := field(type(v))) else _any_value(v)} for k, v in attrs.items()
    ]
    return out


def _any_value(value: Any) -> AnyValue:
    """A value of no plain type (a list, a subclass, None) by the official encoder's rule, in its order."""
    if value is None:
        return {}
    if isinstance(value, bool):
        return {"bool_value": value}
    if isinstance(value, str):
        return {"string_value": value}
    if isinstance(value, int):
        return {"int_value": value}
    if isinstance(value, float):
        return {"double_value": value}
    if isinstance(value, bytes):
        return {"bytes_value": value}
    if isinstance(value, Sequence):
        return {"array_value": {"values": [_any_value(v) for v in value]}}
    if isinstance(value, Mapping):
        return {"kvlist_value": {"values": [{"key": str(k), "value": _any_value(v)} for k, v in value.items()]}}
    raise TypeError(f"no OTLP value for {type(value).__name__}")


def values(kvs: Iterable[KeyValue]) -> dict[str, Any]:
    """``KeyValue``\\ s read back as plain values (arrays as lists): for a reader of a built span."""
    return {kv["key"]: _plain(kv["value"]) for kv in kvs}


def _plain(v: AnyValue) -> Any:
    if "array_value" in v:
        return [_plain(x) for x in v["array_value"]["values"]]
    if "kvlist_value" in v:
        return values(v["kvlist_value"]["values"])
    return next(iter(v.values()), None)


def trace_id_bytes(trace_id: int) -> bytes:
    return trace_id.to_bytes(16, "big")


def span_id_bytes(span_id: int) -> bytes:
    return span_id.to_bytes(8, "big")
