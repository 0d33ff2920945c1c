"""The gRPC recording paths as drivers of the promise matrix: the gRPC proxy (``proxy --grpc-listen``)
and ``RecordingInterceptor``, each running one SendStreamingMessage of the hand-written gRPC agent
(tests/support/grpc_fake.py: a real a2a-sdk agent cannot send unknown fields, secrets in its
metadata or stay silent on demand) the way its path does in real use, into a real SQLite file.

A matrix mode is the raw HTTP agent's (tests/support/fault_agent.py); :data:`GRPC_MODES` gives the
gRPC agent's mode for each that has a gRPC form, and :data:`NOT_GRPC` says why each other one
cannot apply to a gRPC call (its cells are skipped with that reason, never left out silently).
What the client received is kept as gRPC frames (a flag byte, the length, the message), so a
comparison sees the message boundaries.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from a2a_tape.store.redact import build_redactor
from tests.support.servers import closed_port

if TYPE_CHECKING:
    from tests.capture.drivers import Outcome

GRPC = "grpc"
"""A path's gRPC variant (``"proxy grpc"``)."""

GRPC_MODES = {"plain": "exact", "secret": "secret", "silent": "silent", "marked": "marked"}
"""The gRPC agent's mode for each matrix mode that has a gRPC form."""

_SSE = "gRPC answers are length-prefixed protobuf messages, not SSE: there is no {} to keep"
NOT_GRPC = {
    "bom": _SSE.format("byte-order mark"),
    "cr": _SSE.format("line end"),
    "crlf": _SSE.format("line end"),
    "multiline": _SSE.format("multi-line data field"),
    "fields": _SSE.format("id/retry field or comment"),
    "nofinal": "a message cut by the close is a transport error of gRPC's (UNAVAILABLE), never bytes a relay sees",
    "nonutf8": "proto3 strings are UTF-8 on the wire; a message that breaks that is the undecodable note "
    "(tests/grpc/test_non_finite.py has the messages JSON cannot hold)",
    "huge": "an SSE line limit; a gRPC message's size limit is gRPC's own (the proxy's MAX_MESSAGE), "
    "not run here: the gRPC agent has no such mode yet",
    "deep": "JSON nesting of an SSE payload; protobuf nesting has its own limit in the protobuf library, "
    "not run here: the gRPC agent has no such mode yet",
    "redirect": "gRPC has no redirects: every answer is a status",
    "badgzip": "gRPC decompresses each message itself (grpc-encoding) and answers INTERNAL before a relay sees it",
    "endless": "a message has a length prefix: no body without end; the size limit is gRPC's own",
    "endlessanswer": "a message has a length prefix: no body without end; the size limit is gRPC's own",
}

SECRET_METADATA = (
    ("authorization", "Bearer SEKRET-TOKEN"),
    ("x-agent-secret", "SEKRET-HEADER"),
    ("ocp-apim-subscription-key", "SEKRET-SHAPE-KEY"),
    ("x-forwarded-credential", "Token SEKRET-SHAPE-VALUE"),
)
CALL_TIMEOUT = 5.0  # the client's deadline: a silent agent is named within it


def frames(messages: list[bytes]) -> bytes:
    """Messages as gRPC frames (uncompressed): what crossed, boundaries included."""
    return b"".join(b"\x00" + len(m).to_bytes(4, "big") + m for m in messages)


def sent(mode: str) -> bytes:
    """What the gRPC agent sent in ``mode`` (a matrix mode), as frames."""
    from tests.support.grpc_fake import messages

    return frames(messages(GRPC_MODES[mode]))


def logged(mode: str) -> list[object]:
    """Each answer message of ``mode`` as the log keeps it: its proto3 JSON mapping."""
    from tests.grpc.clients import stream_response
    from tests.support.grpc_fake import messages

    return [stream_response(m) for m in messages(GRPC_MODES[mode])]


def _request() -> bytes:
    """A send whose message metadata holds a token at a configured path (``params.message.metadata.token``)."""
    from a2a.types import Message, Part, Role, SendMessageRequest
    from google.protobuf.struct_pb2 import Struct

    meta = Struct()
    meta.update({"token": "SEKRET-REQ"})
    msg = Message(message_id="m-1", role=Role.ROLE_USER, parts=[Part(text="hi")], metadata=meta)
    return SendMessageRequest(message=msg).SerializeToString()


def _call(target: str, mode: str, interceptors=None):
    from tests.grpc.clients import raw_call

    return raw_call(
        target,
        "SendStreamingMessage",
        _request(),
        streaming=True,
        metadata=(("x-fake-mode", GRPC_MODES[mode]), ("a2a-version", "1.0"), *SECRET_METADATA),
        timeout=CALL_TIMEOUT,
        interceptors=interceptors,
    )


def _outcome(db: Path, got, t0: float) -> Outcome:
    from tests.capture.drivers import Outcome  # the matrix's (drivers.py registers these paths)

    error = None if got.code == "OK" else f"gRPC status {got.code}: {got.details}"
    return Outcome(db, client=frames(got.messages), error=error, seconds=time.monotonic() - t0)


def run_grpc_proxy(base: str, mode: str, cwd: Path) -> Outcome:
    """The gRPC proxy in front of the gRPC agent (its HTTP side's upstream a closed port: unused)."""
    from tests.grpc.conftest import running_grpc_proxy
    from tests.support.grpc_fake import running_fake_grpc_agent

    db = cwd / "tape.db"
    t0 = time.monotonic()
    config = {
        "durability": "normal",
        "redactor": build_redactor(directory=cwd),
        "first_byte_timeout": 3.0,  # a silent agent is named before the client's deadline
    }
    with (
        running_fake_grpc_agent() as (target, _),
        running_grpc_proxy(f"http://127.0.0.1:{closed_port()}", target, db, **config) as proxy,
    ):
        got = _call(proxy.target, mode)
        for ex in proxy.store.exchanges():
            if ex.id is not None:
                proxy.wait_settled(ex.id)
    return _outcome(db, got, t0)


def run_grpc_interceptor(base: str, mode: str, cwd: Path) -> Outcome:
    """A grpc.aio client with ``RecordingInterceptor``'s interceptors, straight to the gRPC agent."""
    from a2a_tape import RecordingInterceptor
    from tests.support.grpc_fake import running_fake_grpc_agent

    db = cwd / "tape.db"
    t0 = time.monotonic()
    recording = RecordingInterceptor(db, redactor=build_redactor(directory=cwd))
    try:
        with running_fake_grpc_agent() as (target, _):
            got = _call(target, mode, recording.interceptors)
    finally:
        recording.close()
    return _outcome(db, got, t0)


def decoded(streams: list[list[bytes]]) -> list[list[object]]:
    return [[msgspec.json.decode(p) for p in s] for s in streams]
