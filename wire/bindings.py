"""One module per A2A binding: how a request and an answer look on its wire (docs/design.md section 15).

- :mod:`.jsonrpc`: ``POST`` of a JSON-RPC request (v0.3 and v1.0 method names), JSON-RPC answers;
- :mod:`.http_json`: the HTTP+JSON routes (``/message:send``, ``/tasks/{id}``, ...) under any path
  prefix, bare answers, errors as an HTTP status with a2a-sdk's error body;
- :mod:`.errors`: the one table of errors across bindings (JSON-RPC code, HTTP status, gRPC status,
  ErrorInfo reason), which a gRPC module reads too.

The replay engine reads and writes one form, the JSON-RPC one: :func:`read` turns any request into a
:class:`Call` holding it, :func:`recorded_call` does the same for a recorded exchange, and a binding's
``render_body`` / ``render_stream`` put the engine's answer back on that binding's wire. Matching,
shapes and the fold never see a binding. A new binding (gRPC: ``lf.a2a.v1.A2AService/<Method>``) is a
new module with ``read``, ``to_jsonrpc`` and the two renderers, and a line in :data:`READERS`.

A client of ours (``record``, recovery, ``probe``) calls an agent through a binding's ``CLIENT``
(:mod:`.client`: the request of an operation, how an answer comes): :data:`CLIENTS`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from urllib.parse import unquote, urlsplit

from a2a_tape.store import Exchange
from a2a_tape.store.methods import GRPC, HTTP_JSON, JSONRPC, binding_and_version
from a2a_tape.wire import http_json, jsonrpc
from a2a_tape.wire.binding_client import Binding
from a2a_tape.wire.call import Call

Reader = Callable[[str, str, str, Mapping[str, str], bytes], Call | None]

READERS: tuple[Reader, ...] = (http_json.read, jsonrpc.read)
"""Asked in order: the first binding that claims a request reads it (routes before the catch-all)."""

CLIENTS: dict[str, Binding] = {JSONRPC: jsonrpc.CLIENT, HTTP_JSON: http_json.CLIENT}
"""The bindings a client of ours speaks (``record``, recovery, ``probe``), by the exchange row's name."""

__all__ = [
    "CLIENTS",
    "HTTP_JSON",
    "JSONRPC",
    "READERS",
    "Binding",
    "Call",
    "client_of",
    "http_json",
    "jsonrpc",
    "read",
    "recorded_call",
]


def client_of(name: str | None) -> Binding:
    """The client side of the binding ``name`` (an exchange row's; None or gRPC: JSON-RPC, the one
    every agent of ours is asked in when it was recorded otherwise)."""
    return CLIENTS.get(name or JSONRPC, jsonrpc.CLIENT)


def read(http_method: str, path: str, query: str, headers: Mapping[str, str], body: bytes) -> Call | None:
    """The A2A request of an HTTP request, in whichever binding it came; None when it is none (a
    card, a ``GET`` of no route)."""
    for reader in READERS:
        call = reader(http_method, path, query, headers, body)
        if call is not None:
            return call
    return None


def recorded_call(ex: Exchange) -> Call:
    """A recorded exchange's request as the engine reads it (its binding from the row)."""
    binding, _ = binding_and_version(ex.binding, ex.dialect)
    if binding == HTTP_JSON or (binding is None and http_json.is_route(ex.http_method, urlsplit(ex.url).path)):
        url = urlsplit(ex.url)
        path = unquote(url.path)  # as a server reads it (the recorded URL is as sent)
        call = http_json.read(ex.http_method, path, url.query, ex.request_headers, ex.request_body or b"")
        if call is not None:
            return call
    if binding == GRPC and ex.rpc_method:  # its request's proto3 JSON is the v1.0 params (wire.grpc)
        from a2a_tape.wire.grpc import jsonrpc_request  # here: grpc_wire reads this package's error table

        return Call(binding=GRPC, body=jsonrpc_request(ex.rpc_method, ex.request_body or b"{}"), version="1.0")
    return Call(binding=JSONRPC, body=ex.request_body or b"")
