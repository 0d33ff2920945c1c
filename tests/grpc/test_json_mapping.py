"""wire/grpc_json.py: the planned proto3 JSON mapping gives json_format's bytes, for every shape.

The log keeps a gRPC message as ``json_format.MessageToDict``'s mapping; the relay maps each message
from a plan made once per type instead (docs/performance.md section 18). These compare the two on
messages Hypothesis builds from the descriptors themselves: every ``StreamResponse`` shape (a task, a
message, a status update, an artifact update, with each kind of part, Struct metadata, timestamps,
unknown enum numbers), and every request and answer type of the A2A service. A field a2a-sdk adds
is drawn too, and a well-known type no strategy here draws fails the test that lists them.
"""

from __future__ import annotations

import math

import msgspec
import pytest
from google.protobuf import json_format, message_factory, struct_pb2
from google.protobuf.descriptor import FieldDescriptor as FD
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from a2a_tape.wire import grpc as grpc_wire
from a2a_tape.wire import grpc_json

_json = msgspec.json.Encoder()
STREAM = "lf.a2a.v1.StreamResponse"
MAX_DEPTH = 5

texts = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)  # protobuf strings are UTF-8
json_values = st.recursive(
    st.none() | st.booleans() | texts | st.floats(allow_nan=False, allow_infinity=False) | st.integers(-(2**53), 2**53),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=12,
)


def _struct(d: dict) -> struct_pb2.Struct:
    s = struct_pb2.Struct()
    s.update(d)
    return s


def _value(v: object) -> struct_pb2.Value:
    holder = struct_pb2.Struct()
    holder.update({"v": v})
    return holder.fields["v"]


def _timestamp(draw: st.DrawFn, cls: type) -> object:
    ts = cls()
    ts.seconds = draw(st.integers(-62135596800, 253402300799))
    ts.nanos = draw(st.sampled_from([0, 1_000_000, 123_456_000, 999_999_999]))
    return ts


WELL_KNOWN = {
    "google.protobuf.Struct": lambda draw, cls: _struct(draw(st.dictionaries(texts, json_values, max_size=4))),
    "google.protobuf.Value": lambda draw, cls: _value(draw(json_values)),
    "google.protobuf.Timestamp": _timestamp,
}


def _scalar(fd) -> st.SearchStrategy:
    if fd.type == FD.TYPE_ENUM:  # proto3 enums are open: a number the enum does not name is kept as it is
        return st.sampled_from([*fd.enum_type.values_by_number, 1234])
    return {
        FD.TYPE_STRING: texts,
        FD.TYPE_BYTES: st.binary(max_size=12),
        FD.TYPE_BOOL: st.booleans(),
        FD.TYPE_INT32: st.integers(-(2**31), 2**31 - 1),
        FD.TYPE_SINT32: st.integers(-(2**31), 2**31 - 1),
        FD.TYPE_SFIXED32: st.integers(-(2**31), 2**31 - 1),
        FD.TYPE_UINT32: st.integers(0, 2**32 - 1),
        FD.TYPE_FIXED32: st.integers(0, 2**32 - 1),
        FD.TYPE_INT64: st.integers(-(2**63), 2**63 - 1),
        FD.TYPE_SINT64: st.integers(-(2**63), 2**63 - 1),
        FD.TYPE_SFIXED64: st.integers(-(2**63), 2**63 - 1),
        FD.TYPE_UINT64: st.integers(0, 2**64 - 1),
        FD.TYPE_FIXED64: st.integers(0, 2**64 - 1),
        FD.TYPE_DOUBLE: st.floats(),
        FD.TYPE_FLOAT: st.floats(width=32),
    }[fd.type]


def _is_map(fd) -> bool:
    return fd.message_type is not None and fd.message_type.GetOptions().map_entry


@st.composite
def messages(draw: st.DrawFn, desc, depth: int = 0):
    """A message of type ``desc`` with any of its fields set (nested messages to MAX_DEPTH)."""
    cls = message_factory.GetMessageClass(desc)
    if desc.full_name in WELL_KNOWN:
        return WELL_KNOWN[desc.full_name](draw, cls)
    msg = cls()
    for fd in desc.fields:
        nested = fd.message_type is not None and not _is_map(fd)
        if (nested and depth >= MAX_DEPTH) or not draw(st.booleans()):
            continue
        target = getattr(msg, fd.name)
        if _is_map(fd):
            key_fd, value_fd = fd.message_type.fields_by_name["key"], fd.message_type.fields_by_name["value"]
            for key in draw(st.lists(_scalar(key_fd), max_size=3, unique=True)):
                if value_fd.message_type is not None:
                    target[key].CopyFrom(draw(messages(value_fd.message_type, depth + 1)))
                else:
                    target[key] = draw(_scalar(value_fd))
        elif fd.is_repeated and nested:
            for item in draw(st.lists(messages(fd.message_type, depth + 1), max_size=3)):
                target.add().CopyFrom(item)
        elif fd.is_repeated:
            target.extend(draw(st.lists(_scalar(fd), max_size=3)))
        elif nested:
            target.CopyFrom(draw(messages(fd.message_type, depth + 1)))
        else:
            setattr(msg, fd.name, draw(_scalar(fd)))
    return msg


def _desc(full_name: str):
    return grpc_wire._message_class(full_name).DESCRIPTOR


def _service_types() -> list[str]:
    names = {STREAM}
    for m in grpc_wire.methods().values():
        names.update((m.request_type, m.response_type))
    return sorted(names)


def _json_format_bytes(msg) -> bytes:
    return _json.encode(json_format.MessageToDict(msg))


def _assert_same(msg) -> None:
    assert _json.encode(grpc_json.to_dict(msg)) == _json_format_bytes(msg)
    # the path the proxy takes: the message's exact bytes in, the log's bytes out (compared with json_format
    # on the message those bytes parse to: a map's order is the parsed map's, not the one first built)
    raw = msg.SerializeToString()
    parsed = type(msg)()
    parsed.ParseFromString(raw)
    assert grpc_wire.to_json(msg.DESCRIPTOR.full_name, raw) == _json_format_bytes(parsed)


PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(messages(_desc(STREAM)))
def test_every_stream_response_maps_to_json_formats_bytes(msg):
    _assert_same(msg)


@pytest.mark.parametrize("full_name", _service_types())
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_every_message_type_of_the_service_maps_to_json_formats_bytes(full_name, data):
    _assert_same(data.draw(messages(_desc(full_name))))


@pytest.mark.parametrize(
    "payload",
    ["task", "message", "status_update", "artifact_update"],
)
@pytest.mark.parametrize("part", ["text", "raw", "url", "data"])
def test_each_stream_response_shape_with_each_part_kind(payload, part):
    """One golden example per shape: a StreamResponse of each payload, with a part of each kind,
    Struct metadata, a timestamp, a state and a role, an unknown enum number."""
    from a2a.types import a2a_pb2 as pb

    value = {"text": "héllo\n", "raw": b"\x00\xff", "url": "https://x.invalid/a", "data": _value({"k": [1.5, None]})}[
        part
    ]
    one = pb.Part(**{part: value}, filename="f.txt", media_type="text/plain", metadata=_struct({"n": 2, "t": True}))
    message = pb.Message(message_id="m", context_id="c", task_id="t", role=pb.ROLE_AGENT, parts=[one])
    message.extensions.append("urn:x")
    message.reference_task_ids.extend(["a", "b"])
    status = pb.TaskStatus(state=pb.TASK_STATE_WORKING, message=message)
    status.timestamp.FromNanoseconds(1_764_000_000_123_456_789)
    artifact = pb.Artifact(artifact_id="a", name="n", description="d", parts=[one, one])
    shapes = {
        "task": lambda: pb.StreamResponse(
            task=pb.Task(id="t", context_id="c", status=status, artifacts=[artifact], history=[message, message])
        ),
        "message": lambda: pb.StreamResponse(message=message),
        "status_update": lambda: pb.StreamResponse(
            status_update=pb.TaskStatusUpdateEvent(task_id="t", context_id="c", status=pb.TaskStatus(state=77))
        ),
        "artifact_update": lambda: pb.StreamResponse(
            artifact_update=pb.TaskArtifactUpdateEvent(task_id="t", artifact=artifact, append=True, last_chunk=True)
        ),
    }
    _assert_same(shapes[payload]())


def test_the_strategies_draw_every_well_known_type_the_service_uses():
    """A well-known type a2a-sdk starts to use (Any, Duration, a wrapper) needs a strategy here, and
    wire/grpc_json.py's handling of it checked: this lists them."""
    seen: set[str] = set()
    todo = [_desc(name) for name in _service_types()]
    while todo:
        desc = todo.pop()
        if desc.full_name in seen:
            continue
        seen.add(desc.full_name)
        if not desc.full_name.startswith("google.protobuf."):
            todo += [fd.message_type for fd in desc.fields if fd.message_type is not None]  # map entries too
    well_known = {n for n in seen if n.startswith("google.protobuf.")}
    plain = {"google.protobuf.Empty"}  # no fields: a plain message to json_format, to the plan and to the strategies
    assert well_known <= set(WELL_KNOWN) | plain, well_known - set(WELL_KNOWN) - plain


@pytest.mark.parametrize("number", [math.nan, math.inf, -math.inf])
def test_a_number_json_cannot_hold_is_left_to_json_format_and_its_note(number):
    """A Value holding NaN or Infinity has no JSON mapping: the plan says so, and message_json writes it
    as the string proto3 JSON gives a double, with a note (tests/grpc/test_non_finite.py)."""
    from a2a.types import a2a_pb2 as pb

    msg = pb.StreamResponse(
        message=pb.Message(message_id="m", parts=[pb.Part(data=struct_pb2.Value(number_value=number))])
    )
    with pytest.raises(grpc_json.Unplanned):
        grpc_json.to_dict(msg)
    notes: list[str] = []
    out = grpc_wire.message_json(msg, notes)
    assert msgspec.json.decode(out)["message"]["parts"][0]["data"] == {
        math.inf: "Infinity",
        -math.inf: "-Infinity",
    }.get(number, "NaN")
    assert notes and "message.parts[0].data" in notes[0]
