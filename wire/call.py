"""One A2A request as the replay reads it, whatever binding carried it."""

from __future__ import annotations

import msgspec


class Call(msgspec.Struct, frozen=True):
    """A request read by its binding's module.

    ``body`` is the request as a JSON-RPC request (the one form the replay engine, matching and
    shapes compare): a JSON-RPC request as sent, or an HTTP+JSON route read into the v1.0 method it
    stands for, its path and query fields among the params. ``version`` is the protocol version the
    binding's own signal names (HTTP+JSON: the ``A2A-Version`` header; JSON-RPC: None, the method
    name says it)."""

    binding: str
    body: bytes
    version: str | None = None
    operation: str | None = None  # the binding's route, when it has routes (send, get, push-set, ...)
