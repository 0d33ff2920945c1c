"""Every searchable field of an event, as ``(where, text)``: what ``a2a-tape grep`` scans and what
the search index (:mod:`inspection.search_index`) keeps, one rule for both."""

from __future__ import annotations

from collections.abc import Iterator

import msgspec

from a2a_tape.store import (
    ArtifactUpdate,
    ErrorItem,
    Item,
    Message,
    MessageItem,
    Note,
    Part,
    StatusUpdate,
    StoredEvent,
    TaskSnapshot,
    Undecodable,
    decode_item,
)


def _parts(where: str, parts: tuple[Part, ...]) -> Iterator[tuple[str, str]]:
    for p in parts:
        if p.text is not None:
            yield where, p.text
        elif p.kind == "data" and p.data is not None:
            yield where + " data", msgspec.json.encode(p.data).decode()
        elif p.file_name:
            yield where + " file", p.file_name


def _message(where: str, m: Message | None) -> Iterator[tuple[str, str]]:
    if m is not None:
        yield from _parts(where, m.parts)


def fields(ev: StoredEvent) -> Iterator[tuple[str, str]]:
    """(where, text) for every searchable field of one event."""
    payload = bytes(ev.payload)
    return item_fields(decode_item(payload), payload)


def item_fields(item: Item, payload: bytes) -> Iterator[tuple[str, str]]:
    """(where, text) for every searchable field of a decoded item (``payload``: its raw bytes)."""
    b = item.body
    if isinstance(b, ArtifactUpdate):
        art = b.artifact
        yield from _parts(f"artifact {art.artifact_id}", art.parts)
        meta = msgspec.structs.asdict(art.meta)
        for k, v in meta.items():
            if isinstance(v, str):
                yield f"artifact {art.artifact_id} metadata {k}", v
        if art.name:
            yield f"artifact {art.artifact_id} name", art.name
    elif isinstance(b, StatusUpdate):
        yield from _message("status message", b.message)
    elif isinstance(b, TaskSnapshot):
        yield from _message("status message", b.status_message)
        for art in b.artifacts:
            yield from _parts(f"snapshot artifact {art.artifact_id}", art.parts)
        for m in b.history:
            yield from _message(f"history {m.role or 'message'}", m)
    elif isinstance(b, MessageItem):
        yield from _message(f"message {b.message.role or ''}".strip(), b.message)
    elif isinstance(b, ErrorItem):
        yield "error", b.message
        if b.data is not None:
            yield "error data", msgspec.json.encode(b.data).decode()
    elif isinstance(b, Note):
        yield f"note {b.action}", b.detail
    elif isinstance(b, Undecodable):
        yield "raw payload", payload.decode("utf-8", "replace")
