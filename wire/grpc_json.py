"""The proto3 JSON mapping of a message (``json_format.MessageToDict`` with its defaults), from a plan
made once per message type.

The gRPC proxy and interceptor map every message they relay (docs/performance.md section 13):
``json_format`` works out per call and per field what depends only on the type (a printer object,
the well-known-type check by name, the field's kind, map-entry options, the enum's names), and that
was most of a relayed message's mapping. Here a message type's plan is made on first use (each
field's JSON name and converter), and a message is one pass over ``ListFields()`` with them.

The promise is equal output: :func:`to_dict` gives what ``MessageToDict`` gives, so the bytes the
log keeps do not change (tests/grpc/test_json_mapping.py compares the two on every shape of a
``StreamResponse`` and on every message type of the A2A service). What a plan does not cover raises
:class:`Unplanned` and the caller uses ``json_format`` itself: an extension field, a closed enum's
unknown number, a number a ``google.protobuf.Value`` holds that JSON cannot (NaN, Infinity), and enum
names customised by protobuf's ``pb.enumvalue.json`` option. ``Any`` and the wrapper types are
handed to ``json_format`` where they stand (no A2A message has them).
"""

from __future__ import annotations

import base64
import math
from collections.abc import Callable
from typing import Any

from a2a_tape.store.errors import A2ATapeError

Convert = Callable[[Any], Any]


class Unplanned(A2ATapeError):
    """A message this module does not map: the caller maps it with ``json_format``."""


def to_dict(message: Any) -> Any:
    """``json_format.MessageToDict(message)``, from the plan of its type; :class:`Unplanned` when
    the plan does not cover it (the caller then asks ``json_format``)."""
    return _message(message.DESCRIPTOR)(message)


_plans: dict[Any, Convert] = {}  # by message descriptor


def _message(desc: Any) -> Convert:
    """The converter of a message type (made once)."""
    convert = _plans.get(desc)
    if convert is not None:
        return convert
    name = desc.full_name
    if name in _WELL_KNOWN:
        convert = _WELL_KNOWN[name]
    elif name == "google.protobuf.Any" or desc.file.name == "google/protobuf/wrappers.proto":
        convert = _by_json_format
    else:
        fields: dict[Any, tuple[str, Convert | None]] = {}
        convert = _regular(fields)
        _plans[desc] = convert  # before its fields: a type that holds itself finds its plan
        for fd in desc.fields:
            field = _field(fd)
            fields[fd] = (fd.json_name, None if field is _same else field)  # None: the value as it is
    _plans[desc] = convert
    return convert


def _regular(fields: dict[Any, tuple[str, Convert | None]]) -> Convert:
    def convert(message: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for fd, value in message.ListFields():
            plan = fields.get(fd)
            if plan is None:  # an extension
                raise Unplanned(fd.full_name)
            name, field = plan
            out[name] = value if field is None else field(value)
        return out

    return convert


def _field(fd: Any) -> Convert:
    """The converter of a field's value as ``ListFields`` hands it (a map, a list, or one value)."""
    entry = fd.message_type
    if entry is not None and entry.has_options and entry.GetOptions().map_entry:
        value = _single(entry.fields_by_name["value"])

        def a_map(m: Any) -> dict[str, Any]:
            return {_map_key(k): value(m[k]) for k in m}

        return a_map
    one = _single(fd)
    repeated = fd.is_repeated if hasattr(fd, "is_repeated") else fd.label == fd.LABEL_REPEATED  # an older protobuf
    if not repeated:
        return one
    if one is _same:
        return _items

    def many(values: Any) -> list[Any]:
        return [one(v) for v in values[:]]

    return many


def _map_key(key: Any) -> str:
    if isinstance(key, bool):
        return "true" if key else "false"
    return str(key)


def _single(fd: Any) -> Convert:
    """The converter of one value of field ``fd``."""
    from google.protobuf.descriptor import FieldDescriptor as FD

    kind = fd.cpp_type
    if kind == FD.CPPTYPE_MESSAGE:
        return _message(fd.message_type)
    if kind == FD.CPPTYPE_ENUM:
        return _enum(fd.enum_type)
    if kind == FD.CPPTYPE_STRING:
        return _bytes if fd.type == FD.TYPE_BYTES else _same
    if kind in (FD.CPPTYPE_INT64, FD.CPPTYPE_UINT64):
        return str
    if kind == FD.CPPTYPE_DOUBLE:
        return _double
    if kind == FD.CPPTYPE_FLOAT:
        return _float
    return _same  # bool, 32-bit integers: as they are


def _same(value: Any) -> Any:
    return value


def _items(values: Any) -> list[Any]:
    """A repeated field's values as a list, by a slice: upb's containers have no iterator of their own,
    so iterating one indexes it until an IndexError (a message formatted and dropped, per field of
    each message: docs/performance.md section 31)."""
    out: list[Any] = values[:]
    return out


def _bytes(value: bytes) -> str:
    return base64.b64encode(value).decode("utf-8")


_NON_FINITE = {math.inf: "Infinity", -math.inf: "-Infinity"}


def _double(value: float) -> Any:
    if math.isfinite(value):
        return value
    return "NaN" if math.isnan(value) else _NON_FINITE[value]


def _float(value: float) -> Any:
    from google.protobuf.internal import type_checkers

    if math.isfinite(value):
        return type_checkers.ToShortestFloat(value)
    return _double(value)


def _enum(enum: Any) -> Convert:
    if enum.full_name == "google.protobuf.NullValue":
        return _null
    if _custom_enum_names():
        return _unplanned
    names = {number: value.name for number, value in enum.values_by_number.items()}
    closed = getattr(enum, "is_closed", False)

    def convert(number: int) -> Any:
        name = names.get(number)
        if name is not None:
            return name
        if closed:  # json_format refuses it
            raise Unplanned(f"{enum.full_name} has no value {number}")
        return number

    return convert


def _custom_enum_names() -> bool:
    """Whether protobuf's ``pb.enumvalue.json`` option (JSON names of enum values) is known here."""
    from google.protobuf import descriptor_pool

    try:
        descriptor_pool.Default().FindExtensionByName("pb.enumvalue.json")
    except KeyError:
        return False
    return True


def _null(_value: Any) -> None:
    return None


def _unplanned(value: Any) -> Any:
    raise Unplanned(repr(value))


def _by_json_format(message: Any) -> Any:
    from google.protobuf import json_format

    return json_format.MessageToDict(message)


# -- the well-known types of a Struct's JSON ----------------------------------------------------


def _value(v: Any) -> Any:
    which = v.WhichOneof("kind")
    if which == "string_value":
        return v.string_value
    if which == "number_value":
        number = v.number_value
        if not math.isfinite(number):  # json_format refuses it; message_json writes a string and a note
            raise Unplanned("a number JSON cannot hold")
        return number
    if which == "struct_value":
        return _struct(v.struct_value)
    if which == "bool_value":
        return v.bool_value
    if which == "list_value":
        return [_value(item) for item in v.list_value.values[:]]
    return None  # null_value, or nothing set


def _struct(s: Any) -> dict[str, Any]:
    fields = s.fields
    return {key: _value(fields[key]) for key in fields}


def _list(values: Any) -> list[Any]:
    return [_value(item) for item in values.values[:]]


def _json_string(message: Any) -> Any:
    return message.ToJsonString()


_WELL_KNOWN: dict[str, Convert] = {
    "google.protobuf.Struct": _struct,
    "google.protobuf.Value": _value,
    "google.protobuf.ListValue": _list,
    "google.protobuf.Timestamp": _json_string,
    "google.protobuf.Duration": _json_string,
    "google.protobuf.FieldMask": _json_string,
}
