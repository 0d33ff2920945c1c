"""The JSON-RPC binding: ``POST`` of ``{"jsonrpc", "id", "method", "params"}`` (v0.3 and v1.0 method
names, :mod:`store.methods`); answers are JSON-RPC responses, stream items SSE ``data:`` lines each
holding one, errors a JSON-RPC ``error`` with HTTP 200.

:data:`CLIENT` is the binding for a client of ours (:mod:`wire.binding_client`).

It is the form the replay engine reads and writes (a request of another binding is read into it,
an answer written out of it: :mod:`wire.http_json`), so reading and rendering here is
the identity; what this module knows is which requests are its own.
"""

from __future__ import annotations

from collections.abc import Mapping

from a2a_tape.store.events import Item
from a2a_tape.store.methods import JSONRPC, STREAMING_OPERATIONS
from a2a_tape.wire.binding_client import Answer, Head, Outgoing, classify, judge
from a2a_tape.wire.call import Call

NAME = JSONRPC


def read(http_method: str, path: str, query: str, headers: Mapping[str, str], body: bytes) -> Call | None:
    """A JSON-RPC request is any ``POST`` no other binding claims (the card's URL may be any path)."""
    if http_method != "POST":
        return None
    return Call(binding=NAME, body=body)


class JsonRpcClient:
    """The JSON-RPC binding for a client of ours: every request a ``POST`` of its JSON-RPC body to
    the interface URL; answers are JSON-RPC responses, whole (``application/json``, errors
    included) or as SSE ``data``. A v1.0 request says so (``A2A-Version``: without it a v1.0
    server assumes 0.3)."""

    name = NAME
    json_media = frozenset({"application/json"})

    def request(self, op: str, dialect: str | None, url: str, body: bytes) -> Outgoing:
        headers = [("A2A-Version", "1.0")] if dialect == "1.0" else []
        headers.append(("Content-Type", "application/json"))
        if op in STREAMING_OPERATIONS:
            headers.append(("Accept", "text/event-stream"))
        return "POST", url, headers, body

    def answer(self, head: Head) -> Answer:
        return classify(head, self.json_media)

    def judge(self, head: Head, item: Item) -> str | None:
        return judge(head, item)


CLIENT = JsonRpcClient()
