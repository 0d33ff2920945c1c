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
from itertools import repeat
from typing import Any

import msgspec

from a2a_tape.store.json_values import Decoder

_ID_KEY = re.compile(rb'"id"\s*:\s*')


class _Envelope(msgspec.Struct):
    id: msgspec.Raw = msgspec.Raw(b"")
    result: msgspec.Raw = msgspec.Raw(b"")
    error: msgspec.Raw = msgspec.Raw(b"")


_env_decoder = Decoder(_Envelope)
_PROBE = b'"~a2a-tape-probe~"'


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
    if not raw_id or not (bytes(env.result) or bytes(env.error)):
        return Split(payload)  # not a JSON-RPC response (a bare Task's "id" is the task's)
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
        if (
            bytes(probe.id) == _PROBE
            and bytes(probe.result) == bytes(env.result)
            and bytes(probe.error) == bytes(env.error)
        ):
            return Split(head, tail)
    return Split(payload)


class Splitter:
    """:func:`split_id` for the items of one stream, fast after the first.

    The items of one recorded stream carry the same id in the same place: the v1.0 a2a-sdk
    puts it last (``..., "id": 1, "jsonrpc": "2.0"}``), the v0.3 one first (``{"id":1,...``).
    Once an item was split the careful way, the next ones are checked against that place with
    two bytes comparisons; a tail that closes only the top-level object (no other brace) proves
    the id is the top-level one. Anything else takes the careful way.
    """

    __slots__ = ("_suffix", "_tail", "_prefix", "_raw_len")

    def __init__(self) -> None:
        self._raw_len = 0
        self._suffix: bytes | None = None  # b'"id": 1' (key and value) before the tail
        self._tail: bytes | None = None
        self._prefix: bytes | None = None  # b'{"id":1' (opening, key and value) before a comma

    def cut(self, payload: bytes) -> tuple[bytes, bytes | None]:
        """``(head, tail)`` as :meth:`split`, without building a Split (the hot path)."""
        tail, suffix = self._tail, self._suffix  # learnt together: both None or both set
        if tail is not None and suffix is not None and payload.endswith(tail):
            end = len(payload) - len(tail)
            if payload.endswith(suffix, 0, end):
                return payload[: end - self._raw_len], tail
        sp = self.split(payload)
        return sp.head, sp.tail

    def split(self, payload: bytes) -> Split:
        tail, suffix = self._tail, self._suffix  # learnt together: both None or both set
        if tail is not None and suffix is not None and payload.endswith(tail):
            end = len(payload) - len(tail)
            if payload.endswith(suffix, 0, end):
                raw_len = self._raw_len
                return Split(payload[: end - raw_len], tail)
        prefix = self._prefix
        if prefix is not None and payload.startswith(prefix) and payload[len(prefix) : len(prefix) + 1] == b",":
            cut = len(prefix) - self._raw_len
            return Split(payload[:cut], payload[len(prefix) :])
        sp = split_id(payload)
        if sp.tail is not None:
            self._learn(payload, sp)
        return sp

    def _learn(self, payload: bytes, sp: Split) -> None:
        head, tail = sp.head, sp.tail
        assert tail is not None
        raw = payload[len(head) : len(payload) - len(tail)]
        key = _ID_KEY.search(head[-16:] if len(head) > 16 else head)
        if key is None:
            return
        key_bytes = (head[-16:] if len(head) > 16 else head)[key.start() :]
        self._raw_len = len(raw)
        if tail.endswith(b"}") and tail.count(b"{") == 0 and tail.count(b"}") == 1 and b'"id"' not in tail:
            self._tail = tail
            self._suffix = key_bytes + raw
        elif head.startswith(b"{") and head[1:].lstrip().startswith(b'"id"') and tail.startswith(b","):
            self._prefix = head + raw


def render_frames(
    payloads: list[bytes], sse_events: list[str | None], encoded_id: bytes, splitter: Splitter
) -> list[bytes]:
    """SSE frames for a batch of recorded payloads answering the request with ``encoded_id``.

    The hot loop of serving a long recording. When every item of the batch has the id where
    ``splitter`` learnt it sits (and no SSE event name, no line break), the whole batch is cut
    in one comprehension; otherwise each item takes the careful way.
    """
    tail = splitter._tail
    suffix = splitter._suffix
    if tail is not None and suffix is not None and sse_events.count(None) == len(sse_events):
        end = suffix + tail
        if all(map(bytes.endswith, payloads, repeat(end))):
            joined = b"".join(payloads)
            if b"\n" not in joined and b"\r" not in joined:
                cut = splitter._raw_len + len(tail)
                closing = encoded_id + tail + b"\r\n\r\n"
                return [b"data: " + p[: len(p) - cut] + closing for p in payloads]
    out: list[bytes] = []
    for payload, event in zip(payloads, sse_events):
        head, t = splitter.cut(payload)
        out.append(frame(head if t is None else head + encoded_id + t, event))
    return out


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
