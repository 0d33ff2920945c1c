"""The JSON-RPC binding: ``POST`` of ``{"jsonrpc", "id", "method", "params"}`` (v0.3 and v1.0 method
names, :mod:`store.methods`); answers are JSON-RPC responses, stream items SSE ``data:`` lines each
holding one, errors a JSON-RPC ``error`` with HTTP 200.

It is the form the replay engine reads and writes (a request of another binding is read into it,
an answer written out of it: :mod:`replay.bindings.http_json`), so reading and rendering here is
the identity; what this module knows is which requests are its own.
"""

from __future__ import annotations

from collections.abc import Mapping

from a2a_tape.store.methods import JSONRPC

from .call import Call

NAME = JSONRPC


def read(http_method: str, path: str, query: str, headers: Mapping[str, str], body: bytes) -> Call | None:
    """A JSON-RPC request is any ``POST`` no other binding claims (the card's URL may be any path)."""
    if http_method != "POST":
        return None
    return Call(binding=NAME, body=body)
