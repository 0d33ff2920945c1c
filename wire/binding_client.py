"""What a client of ours needs of a binding: how a call goes out, how its answer comes back.

Every call a2a-tape makes to an agent itself (``record``, recovery, ``probe``; the recorded-upstream
client, :mod:`capture.upstream_call`) is built in the JSON-RPC form (:mod:`recorder.client`), the one
form every layer reads, and put on the wire by a :class:`Binding`: :data:`wire.jsonrpc.CLIENT`
or :data:`wire.http_json.CLIENT` (:func:`wire.bindings.client_of` by name). A binding says

- the request of an operation: HTTP method, URL (under the interface's URL), headers, body;
- how an answer comes, by its head (:class:`Head`): a stream, a whole JSON answer, a redirect (never
  followed: it is the agent's answer), or something else;
- whether a whole answer's item is one of its own (an error answer is one).

The rest (the exchange row first, every item in the log before anyone sees it, timeouts, the outcome)
is the client's and the same for every binding.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from a2a_tape.store.events import Item
from a2a_tape.store.headers import media_type_of

Answer = Literal["stream", "json", "redirect", "other"]
"""How an answer comes, by its head: an SSE stream, a whole JSON body, a redirect, anything else."""

REDIRECTS = frozenset({301, 302, 303, 307, 308})

Outgoing = tuple[str, str, list[tuple[str, str]], bytes]
"""A request as it goes on the wire: HTTP method, URL, headers (besides the user's), body."""


@dataclass(frozen=True)
class Head:
    """The response line of an answer."""

    status: int
    content_type: str | None
    headers: list[tuple[str, str]]

    def header(self, name: str) -> str | None:
        name = name.lower()
        return next((v for k, v in self.headers if k.lower() == name), None)


class Binding(Protocol):
    """How one A2A binding looks on the wire, for a client of ours."""

    name: str  # the exchange row's ``binding`` (store.methods.BINDINGS)

    def request(self, op: str, dialect: str | None, url: str, body: bytes) -> Outgoing:
        """An operation (``send``, ``stream``, ``get``, ...; :mod:`store.methods`) of ``dialect`` at
        the interface ``url``, its request in the JSON-RPC form ``body``: as this binding sends it."""

    def answer(self, head: Head) -> Answer:
        """How the answer comes, by its head."""

    def judge(self, head: Head, item: Item) -> str | None:
        """Why a whole answer is not one of this binding (None: it is; an error answer is one)."""


def classify(head: Head, json_media: frozenset[str]) -> Answer:
    """An answer by its head: a redirect, a whole answer of one of ``json_media`` (an error
    answer too, whatever its status), a stream (``text/event-stream`` below 400), or other."""
    media = media_type_of(head.content_type)
    if head.status in REDIRECTS:
        return "redirect"
    if media in json_media:
        return "json"
    if media == "text/event-stream" and head.status < 400:
        return "stream"
    return "other"


def judge(head: Head, item: Item) -> str | None:
    """A whole answer is an A2A item, or an A2A error (the only thing an HTTP error status may carry)."""
    if item.kind == "undecodable":
        reason = getattr(item.body, "reason", "")
        return f"returned a body that is not an A2A answer ({reason[:60]})"
    if item.kind == "other" or (head.status >= 400 and item.kind != "error"):
        return f"returned a body that is not an A2A answer (HTTP {head.status})"
    return None
