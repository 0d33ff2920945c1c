"""A hand-written gRPC agent on raw bytes, for what a real one cannot be made to send on demand.

a2a-sdk's server encodes its messages itself (canonical bytes, no unknown fields), sets no
metadata of its own, never stalls or goes silent: to check that the proxy passes the exact bytes,
every piece of metadata, the status, its details and the trailers, and that its timeouts answer,
this agent sends them as told by the request metadata ``x-fake-mode`` (``echo-held``: the ``echo``
answer's head and first message, then the call stays live until the test calls ``release()``):

- ``exact``: initial metadata (text and ``-bin``), two StreamResponse messages with an unknown
  field (number 999) and fields in a non-canonical order, trailers, OK;
- ``error``: NOT_FOUND with a ``grpc-status-details-bin`` trailer holding an ErrorInfo;
- ``stall``: initial metadata, one message, then nothing until the call is cancelled;
- ``silent``: nothing at all (no initial metadata) until cancelled;
- ``echo``: echoes the metadata it was sent as its initial metadata (``echo-`` prefixed), one
  message, OK;
- ``marked``: as ``exact``, serve's replay marker in the initial metadata (as a replay sends it);
- ``secret``: as ``exact``, with secrets where a recording must redact them: a configured header
  and credential-shaped ones in the initial metadata and the trailers, a first message whose
  metadata holds a token (``SEKRET-EVENT``, at ``result.statusUpdate.metadata.token`` in the
  JSON-RPC form the redaction paths are written in).

Any other path (``/other.Echo/Reverse``) is a bidirectional echo of reversed messages.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

from a2a.types import a2a_pb2
from google.rpc import error_details_pb2, status_pb2

from a2a_tape.store.observers import REPLAY_MARKER
from tests.support.grpc_loop import loop_in_thread, stop_serving

TASK = "t-fake"


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def exact_messages() -> list[bytes]:
    """Two StreamResponse messages as no protobuf library writes them: an unknown field 999 and
    the status update's fields in reverse order."""
    first = a2a_pb2.StreamResponse(
        status_update=a2a_pb2.TaskStatusUpdateEvent(
            task_id=TASK, context_id="c-fake", status=a2a_pb2.TaskStatus(state=a2a_pb2.TASK_STATE_WORKING)
        )
    ).SerializeToString()
    unknown = _varint((999 << 3) | 2) + _varint(5) + b"extra"
    status = a2a_pb2.TaskStatus(state=a2a_pb2.TASK_STATE_COMPLETED).SerializeToString()
    # TaskStatusUpdateEvent: status (3) first, then context_id (2), then task_id (1)
    inner = (
        _varint((3 << 3) | 2)
        + _varint(len(status))
        + status
        + _varint((2 << 3) | 2)
        + _varint(6)
        + b"c-fake"
        + _varint((1 << 3) | 2)
        + _varint(len(TASK))
        + TASK.encode()
    )
    field = a2a_pb2.StreamResponse.DESCRIPTOR.fields_by_name["status_update"].number
    second = _varint((field << 3) | 2) + _varint(len(inner)) + inner + unknown
    return [first + unknown, second]


SECRET_METADATA = (
    ("x-agent-secret", "SEKRET-HEADER"),
    ("private-token", "SEKRET-SHAPE-TOKEN"),
    ("authentication", "Bearer SEKRET-SHAPE-BEARER"),
)


def secret_message() -> bytes:
    """A status update whose metadata holds a token (``SEKRET-EVENT``)."""
    from google.protobuf.struct_pb2 import Struct

    meta = Struct()
    meta.update({"token": "SEKRET-EVENT", "keep": "shown"})
    return a2a_pb2.StreamResponse(
        status_update=a2a_pb2.TaskStatusUpdateEvent(
            task_id=TASK,
            context_id="c-fake",
            status=a2a_pb2.TaskStatus(state=a2a_pb2.TASK_STATE_WORKING),
            metadata=meta,
        )
    ).SerializeToString()


def messages(mode: str) -> list[bytes]:
    """The answer messages of ``mode``, as sent (``stall`` sends the first, then waits)."""
    return [secret_message(), *exact_messages()] if mode == "secret" else exact_messages()


def error_details() -> bytes:
    info = error_details_pb2.ErrorInfo(reason="TASK_NOT_FOUND", domain="a2a-protocol.org", metadata={"taskId": "nope"})
    status = status_pb2.Status(code=5, message="task nope not found")
    status.details.add().Pack(info)
    return status.SerializeToString()


class _Handler:
    def __init__(self) -> None:
        self.calls = 0
        self.loop: asyncio.AbstractEventLoop | None = None
        self.held: asyncio.Event | None = None  # ``echo-held`` calls wait for it after their first message

    def release(self) -> None:
        """Let every ``echo-held`` call end (from any thread)."""
        assert self.loop is not None and self.held is not None
        self.loop.call_soon_threadsafe(self.held.set)

    def service(self, details):
        import grpc

        if details.method.startswith("/lf.a2a.v1."):

            async def a2a(request: bytes, context):
                self.calls += 1
                md = dict(context.invocation_metadata())
                mode = md.get("x-fake-mode", "exact")
                if mode == "silent":
                    await asyncio.Event().wait()
                if mode in ("echo", "echo-held"):
                    echoed = [(f"echo-{k}", v) for k, v in context.invocation_metadata() if k != "user-agent"]
                    await context.send_initial_metadata(echoed)
                    # one message after: grpc 1.85 can lose the initial metadata of an answer
                    # that ends right after it with no message (seen directly, without the proxy)
                    yield exact_messages()[0]
                    if mode == "echo-held":  # live until the test releases it; trailers echo too
                        assert self.held is not None
                        await self.held.wait()
                        context.set_trailing_metadata(echoed)
                    return
                initial = (("x-agent", "fake"), ("x-agent-bin", b"\x00\x01\xff"))
                extra = SECRET_METADATA if mode == "secret" else ((REPLAY_MARKER, "1"),) if mode == "marked" else ()
                await context.send_initial_metadata(initial + extra)
                if mode == "error":
                    context.set_trailing_metadata(
                        (("x-trailer", "after"), ("grpc-status-details-bin", error_details()))
                    )
                    context.set_code(grpc.StatusCode.NOT_FOUND)
                    context.set_details("task nope not found")
                    return
                for k, m in enumerate(messages(mode)):
                    yield m
                    if mode == "stall" and k == 0:
                        await asyncio.Event().wait()
                trailers = (("x-trailer", "after"), ("x-trailer-bin", b"\xfe"))
                context.set_trailing_metadata(trailers + (SECRET_METADATA[:1] if mode == "secret" else ()))

            return grpc.unary_stream_rpc_method_handler(a2a)

        async def echo(requests, context):
            # the metadata it got, echoed (what reached the agent: a test of what the proxy forwards)
            await context.send_initial_metadata(
                [(f"echo-{k}", v) for k, v in context.invocation_metadata() if k != "user-agent"]
            )
            async for r in requests:
                yield r[::-1]

        return grpc.stream_stream_rpc_method_handler(echo)


@contextlib.contextmanager
def running_fake_grpc_agent() -> Iterator[tuple[str, _Handler]]:
    """(HOST:PORT, the handler: its ``calls``)."""
    import grpc

    loop, thread = loop_in_thread()
    handler = _Handler()
    box: dict[str, object] = {}

    async def start() -> None:
        handler.loop, handler.held = loop, asyncio.Event()
        server = grpc.aio.server()
        server.add_generic_rpc_handlers((handler,))
        box["port"] = server.add_insecure_port("127.0.0.1:0")
        box["server"] = server
        await server.start()

    asyncio.run_coroutine_threadsafe(start(), loop).result(timeout=10)
    try:
        yield f"127.0.0.1:{box['port']}", handler
    finally:
        stop_serving(box["server"], loop, thread)  # no task left pending on the loop (tests.support.grpc_loop)
