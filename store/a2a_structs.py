"""msgspec Structs for what A2A agents put on the wire, in both dialects.

One struct family covers v0.3 (bare objects with ``kind``), v1.0 (items wrapped in
``{"task"|"message"|"statusUpdate"|"artifactUpdate": ...}``) and the HTTP+JSON binding
(the v1.0 wrapper without a JSON-RPC envelope). Every field is optional so one decode
pass reads any of them; :mod:`store.decode` turns the result into the internal model.
Unknown fields are ignored, as the protocol asks of readers.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from a2a_tape.store.json_values import Decoder


class OpencodeMeta(msgspec.Struct, omit_defaults=True):
    channel: str | None = None
    source: str | None = None
    message_id: str | None = None
    event_type: str | None = None
    role: str | None = None


class StreamHints(msgspec.Struct, omit_defaults=True):
    block_type: str | None = None
    source: str | None = None
    message_id: str | None = None
    event_id: str | None = None
    sequence: int | float | None = None
    role: str | None = None


class SharedMeta(msgspec.Struct, omit_defaults=True):
    stream: StreamHints | None = None


class Metadata(msgspec.Struct, omit_defaults=True):
    """The parts of artifact / event metadata that contract profiles read."""

    opencode: OpencodeMeta | None = None
    shared: SharedMeta | None = None


class WireFile(msgspec.Struct, omit_defaults=True):
    name: str | None = None
    mimeType: str | None = None
    uri: str | None = None
    bytes: str | None = None


class WirePart(msgspec.Struct, omit_defaults=True):
    kind: str | None = None
    text: str | None = None
    data: Any = None
    file: WireFile | None = None
    url: str | None = None
    raw: str | None = None
    mediaType: str | None = None
    filename: str | None = None
    metadata: Any = None


class WireMessage(msgspec.Struct, omit_defaults=True):
    messageId: str | None = None
    role: str | None = None
    parts: list[WirePart] = []
    contextId: str | None = None
    taskId: str | None = None
    kind: str | None = None
    metadata: Metadata | None = None


class WireStatus(msgspec.Struct, omit_defaults=True):
    state: str | None = None
    message: WireMessage | None = None
    timestamp: str | None = None


class WireArtifact(msgspec.Struct, omit_defaults=True):
    artifactId: str | None = None
    name: str | None = None
    description: str | None = None
    parts: list[WirePart] = []
    metadata: Metadata | None = None


class WireTask(msgspec.Struct, omit_defaults=True):
    id: str | None = None
    contextId: str | None = None
    status: WireStatus | None = None
    artifacts: list[WireArtifact] = []
    history: list[WireMessage] = []
    kind: str | None = None
    metadata: Metadata | None = None


class WireStatusUpdate(msgspec.Struct, omit_defaults=True):
    taskId: str | None = None
    contextId: str | None = None
    status: WireStatus | None = None
    final: bool | None = None
    kind: str | None = None
    metadata: Metadata | None = None


class WireArtifactUpdate(msgspec.Struct, omit_defaults=True):
    taskId: str | None = None
    contextId: str | None = None
    artifact: WireArtifact | None = None
    append: bool | None = None
    lastChunk: bool | None = None
    kind: str | None = None
    metadata: Metadata | None = None


class WireError(msgspec.Struct, omit_defaults=True):
    code: int | None = None
    message: str | None = None
    data: Any = None
    status: str | None = None  # HTTP+JSON binding errors


class LocalNote(msgspec.Struct, omit_defaults=True):
    """Payload of a decision a2a-tape took itself (origin ``local``)."""

    action: str
    detail: str = ""
    task_id: str | None = None
    state: str | None = None  # a push's note: the task state the push carried (lowercase), if any
    context_id: str | None = None  # and the context it named


class WireResult(msgspec.Struct, omit_defaults=True):
    """A JSON-RPC ``result``: a v1.0 wrapper, or a bare v0.3 object with ``kind``.

    The v0.3 fields of task, message, status-update and artifact-update share this struct
    (``kind`` says which); the v1.0 wrapper keys hold their own structs.
    """

    # v1.0 wrappers
    task: WireTask | None = None
    message: WireMessage | None = None
    statusUpdate: WireStatusUpdate | None = None
    artifactUpdate: WireArtifactUpdate | None = None
    # v0.3 bare objects
    kind: str | None = None
    id: str | None = None
    contextId: str | None = None
    taskId: str | None = None
    status: WireStatus | None = None
    artifacts: list[WireArtifact] = []
    history: list[WireMessage] = []
    artifact: WireArtifact | None = None
    append: bool | None = None
    lastChunk: bool | None = None
    final: bool | None = None
    messageId: str | None = None
    role: str | None = None
    parts: list[WirePart] = []
    metadata: Metadata | None = None


class WireFrame(msgspec.Struct, omit_defaults=True, rename={"note": "a2a-tape"}):
    """One SSE ``data:`` payload or one JSON response body, whatever the binding."""

    jsonrpc: str | None = None
    id: Any = None
    result: WireResult | None = None
    error: WireError | None = None
    # HTTP+JSON binding: the v1.0 wrapper without an envelope
    task: WireTask | None = None
    message: WireMessage | None = None
    statusUpdate: WireStatusUpdate | None = None
    artifactUpdate: WireArtifactUpdate | None = None
    # HTTP+JSON binding: a bare Task (GET /tasks/{id}, POST /tasks/{id}:cancel); ``id`` is its id
    contextId: str | None = None
    status: WireStatus | None = None
    artifacts: list[WireArtifact] = []
    history: list[WireMessage] = []
    # our own decisions
    note: LocalNote | None = None


FRAME_DECODER = Decoder(WireFrame)  # a number out of range in an Any field is read (store.json_values)


# -- the peek: a strict, narrow decode of the hot case (a plain text chunk) -------------------
#
# A projection rebuild reads millions of artifact chunks. These structs hold only what a plain
# text chunk carries (as a2a-sdk sends it, in either dialect) and FORBID every other field: a
# payload with anything more (metadata, a file part, an error, a note, a Task...) fails this
# decode and is read by ``FRAME_DECODER`` instead. Every field declared here has the type
# ``WireFrame`` gives it or a narrower one (a part's ``text`` required, its ``kind`` only "text",
# an update's ``artifact`` required), so a payload this decoder accepts is one ``FRAME_DECODER``
# accepts too, with the same values (``store.decode.peek_text_chunk`` relies on that).


class PeekPart(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """A text part and nothing else: narrower types than ``WirePart`` (never wider)."""

    text: str
    kind: Literal["text"] | None = None


class PeekArtifact(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    artifactId: str | None = None
    name: str | None = None
    description: str | None = None
    parts: list[PeekPart] = []


class PeekArtifactUpdate(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    artifact: PeekArtifact
    taskId: str | None = None
    contextId: str | None = None
    append: bool | None = None
    lastChunk: bool | None = None
    kind: str | None = None


class PeekResult(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    # v1.0 wrapper
    artifactUpdate: PeekArtifactUpdate | None = None
    # v0.3 bare artifact-update
    kind: str | None = None
    taskId: str | None = None
    contextId: str | None = None
    artifact: PeekArtifact | None = None
    append: bool | None = None
    lastChunk: bool | None = None


class PeekFrame(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    jsonrpc: str | None = None
    id: Any = None
    result: PeekResult | None = None
    artifactUpdate: PeekArtifactUpdate | None = None  # HTTP+JSON: the bare StreamResponse


PEEK_DECODER = msgspec.json.Decoder(PeekFrame)
