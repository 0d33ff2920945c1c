"""One relayed gRPC call as it goes (:class:`GrpcLive`), read by the call that made it and by any
duplicate attached to it: the gRPC side of :mod:`recorder.proxy.relay`, whose bounded window holds
its messages. :mod:`recorder.proxy.grpc_server` makes one per call it relays."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio

from a2a_tape.recorder.proxy.relay import DEFAULT_SLOW_CLIENT_TIMEOUT, DEFAULT_STREAM_BUFFER, Reader, Window

OK, DEADLINE_EXCEEDED, INVALID_ARGUMENT, UNAUTHENTICATED, UNAVAILABLE, RESOURCE_EXHAUSTED = 0, 4, 3, 16, 14, 8


def grpc_status(code: int) -> Any:
    """grpc's StatusCode for a numeric status (UNKNOWN for one it does not name)."""
    import grpc

    return next((s for s in grpc.StatusCode if s.value[0] == code), grpc.StatusCode.UNKNOWN)


class GrpcLive:
    """One relayed call as it goes: the head, the messages published so far (durable first), the
    end. The client's handler and any duplicate attached to it read the same one; the messages are
    held as the HTTP relay's items are (:class:`recorder.proxy.relay.Window`: bounded, back-pressure,
    a client too far behind for too long dropped)."""

    def __init__(
        self, *, keep: bool = True, limit: int = DEFAULT_STREAM_BUFFER, patience: float = DEFAULT_SLOW_CLIENT_TIMEOUT
    ) -> None:
        self.exchange_id: int | None = None
        self.head: tuple[Any, ...] | None = None
        self.window: Window[bytes] = Window(_message_size, keep=keep, limit=limit, patience=patience)
        self._first = self.window.join()  # the call that made this relay: in from the start
        self.end: tuple[int, str, tuple[Any, ...]] | None = None
        self.ended = anyio.Event()
        self._wake = anyio.Event()

    def set_head(self, metadata: Any) -> None:
        self.head = tuple(metadata or ())
        self._poke()

    def publish(self, raws: list[bytes]) -> None:
        self.window.put(raws)
        self._poke()

    async def make_room(self, in_flight: Callable[[], int]) -> int:
        dropped = await self.window.make_room(in_flight)
        if dropped:
            self._poke()
        return dropped

    def finish(self, code: int, details: str, trailers: Any = ()) -> None:
        if self.end is None:
            self.end = (code, details, tuple(trailers or ()))
        self.ended.set()
        self._poke()

    def _poke(self) -> None:
        self._wake.set()
        self._wake = anyio.Event()

    def reader(self, first: bool = True) -> Reader | None:
        """``first``: the place made with this relay for the call that made it; else a new one
        from the first message (None once those are gone)."""
        if first and self._first is not None:
            place, self._first = self._first, None
            return place
        return self.window.join()

    async def follow(self, context: Any, place: Reader, per_client: Any = None) -> AsyncIterator[bytes]:
        """The messages as they are published, then the status on ``context``. ``per_client``: a test
        of a metadata entry that belongs to the call the agent answered (a cookie, a session token),
        left out of the head and trailers for any other call."""
        sent_head = False
        window = self.window
        try:
            while True:
                wake = self._wake
                if not sent_head and (self.head is not None or self.end is not None):
                    head = _own(self.head or (), per_client)
                    if head:  # an empty head goes with the first message or the status, as gRPC sends it itself
                        await context.send_initial_metadata(head)
                    sent_head = True
                if place.dropped:
                    await context.abort(grpc_status(RESOURCE_EXHAUSTED), TOO_SLOW)
                while place.at < window.end and not place.dropped:
                    (raw,) = window.take(place, 1)
                    yield raw
                if self.end is not None and place.at >= window.end:
                    break
                if not place.dropped:
                    await wake.wait()
        finally:
            window.leave(place)
        assert self.end is not None
        code, details, trailers = self.end
        trailers = _own(trailers, per_client)
        if trailers:
            context.set_trailing_metadata(trailers)
        if code != OK:
            context.set_code(grpc_status(code))
            context.set_details(details)


TOO_SLOW = "the client read too slowly: it stayed more than --stream-buffer behind past --slow-client-timeout"


def _message_size(raw: bytes) -> int:
    return len(raw) + 64


def _own(metadata: Any, per_client: Any) -> tuple[Any, ...]:
    if per_client is None:
        return tuple(metadata)
    return tuple((k, v) for k, v in metadata if not per_client(k, v))
