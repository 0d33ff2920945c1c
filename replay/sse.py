"""Render stored events as SSE frames, exactly as they were recorded.

A frame is ``data: <payload>\\r\\n\\r\\n`` (preceded by ``event: <name>\\r\\n`` when the recorded
item had an SSE event name, such as ``event: error``). The payload bytes are the recorded ones;
only the top-level JSON-RPC ``id`` is rewritten to the id of the request being answered, so a
client sees its own id and every other byte as the agent sent it.

The id is found once per payload (:func:`split_id`) and the result cached, so serving a long
recording costs one bytes join per item.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

_ID_KEY = re.compile(rb'"id"\s*:\s*')


class _Envelope(msgspec.Struct):
    id: msgspec.Raw = msgspec.Raw(b"")
    result: msgspec.Raw = msgspec.Raw(b"")
    error: msgspec.Raw = msgspec.Raw(b"")


_env_decoder = msgspec.json.Decoder(_Envelope)
_PROBE = b'"\x00a2a-tape-probe\x00"'.replace(b"\x00", b"~")


class Split(msgspec.Struct, frozen=True, gc=False):
    """A payload cut around its JSON-RPC id value: ``head + <id> + tail``; whole when no id."""

    head: bytes
    tail: bytes | None = None  # None: no id to rewrite (served as is)

    def with_id(self, encoded_id: bytes) -> bytes:
        if self.tail is None:
            return self.head
        return self.head + encoded_id + self.tail


def split_id(payload: bytes) -> Split:
    """Locate the top-level ``"id"`` value of a JSON-RPC payload.

    Nested objects (a Task) have ``"id"`` keys too: each candidate is checked by decoding the
    payload with a probe id in its place and comparing the other top-level members.
    Undecodable payloads are served as recorded.
    """
    try:
        env = _env_decoder.decode(payload)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return Split(payload)
    raw_id = bytes(env.id)
    if not raw_id:
        return Split(payload)
    for m in _ID_KEY.finditer(payload):
        start = m.end()
        end = start + len(raw_id)
        if payload[start:end] != raw_id:
            continue
        head, tail = payload[:start], payload[end:]
        try:
            probe = _env_decoder.decode(head + _PROBE + tail)
        except (msgspec.DecodeError, msgspec.ValidationError):
            continue
        if bytes(probe.id) == _PROBE and bytes(probe.result) == bytes(env.result) and bytes(probe.error) == bytes(env.error):
            return Split(head, tail)
    return Split(payload)


def rewrite_id(payload: bytes, rpc_id: Any) -> bytes:
    """The payload with its top-level JSON-RPC id replaced (unchanged when it has none)."""
    return split_id(payload).with_id(msgspec.json.encode(rpc_id))


def frame(data: bytes, event: str | None = None) -> bytes:
    """One SSE frame. A payload with line breaks becomes several ``data:`` lines, as SSE requires."""
    head = b"event: " + event.encode() + b"\r\n" if event and event != "message" else b""
    if b"\n" in data or b"\r" in data:
        lines = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
        return head + b"".join(b"data: " + line + b"\r\n" for line in lines) + b"\r\n"
    return head + b"data: " + data + b"\r\n\r\n"


def comment(text: str) -> bytes:
    """A keep-alive comment line (``: ping - ...``), which is not an item."""
    return b": " + text.encode() + b"\r\n\r\n"
