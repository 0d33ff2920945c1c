"""Lone Message replies: a send the agent answered with a Message that names no task.

There is no task to fold, list or show, so these are found from the exchanges: a send (the
send methods of :mod:`store.methods`, either dialect) whose events name no task and hold a
Message from the agent. ``tasks`` lists them beside the tasks; ``show``, ``channels``, ``export``
and the UI reach one by its message id or its context id (or a unique prefix of either), as
they reach a task (:func:`find_message`; :func:`message_view` is what ``channels`` shows).
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from a2a_tape.store import Exchange, MessageItem, Recordings, StoredEvent, decode_item
from a2a_tape.store.methods import SEND_METHODS


class LoneMessage(msgspec.Struct):
    """A send answered by a Message that names no task."""

    key: str  # the reply's message id, else its context id, else ``exchange-N``
    message_id: str | None
    context_id: str | None
    text: str
    events: list[StoredEvent]  # the exchange's events, in log order (never empty)
    exchange: Exchange  # the send it answered


class MessageView(msgspec.Struct):
    """What ``channels`` shows of a lone Message reply: its text is the answer; there is no
    task, so no task id and no task state (``tasks --json`` spells a message row the same way)."""

    kind: str  # "message"
    key: str
    message_id: str | None
    context_id: str | None
    final_answer: str
    events: int
    first_position: int
    last_position: int
    first_at: float
    last_at: float
    exchange_id: int
    task_id: None = None
    state: None = None


def message_view(m: LoneMessage) -> MessageView:
    first, last = m.events[0], m.events[-1]
    return MessageView(
        kind="message",
        key=m.key,
        message_id=m.message_id,
        context_id=m.context_id,
        final_answer=m.text,
        events=len(m.events),
        first_position=first.position,
        last_position=last.position,
        first_at=first.received_at,
        last_at=last.received_at,
        exchange_id=m.exchange.id or 0,
    )


def lone_messages(st: Recordings, exchanges: Iterable[Exchange] | None = None) -> list[LoneMessage]:
    """Every send of ``exchanges`` (default: all of them) whose answer was a lone Message, in
    exchange order. ``st.exchanges_without_task()`` gives only the exchanges it can be."""
    found: list[LoneMessage] = []
    for ex in exchanges if exchanges is not None else st.exchanges():
        if ex.task_id is not None or ex.id is None or ex.rpc_method not in SEND_METHODS:
            continue
        events = list(st.iter_exchange(ex.id))
        if not events or any(e.task_id is not None for e in events):
            continue
        reply = None
        for e in events:
            body = decode_item(e.payload).body
            if isinstance(body, MessageItem) and body.message.task_id is None and body.message.role != "user":
                reply = body.message
        if reply is None:
            continue
        ctx = reply.context_id or ex.context_id
        key = reply.message_id or ctx or f"exchange-{ex.id}"
        found.append(LoneMessage(key, reply.message_id, ctx, reply.text, events, ex))
    return found


def find_message(st: Recordings, key: str) -> LoneMessage | None:
    """The lone Message reply named by ``key``: its message id or context id, else a unique
    prefix of its key (the last one, when the same reply was recorded more than once)."""
    if not key:
        return None
    every = lone_messages(st, st.exchanges_without_task())  # the candidates only: flat as the log grows
    found = [m for m in every if key in (m.message_id, m.context_id, m.key)]
    if not found:
        found = [m for m in every if m.key.startswith(key)]
    return found[-1] if found and len({m.key for m in found}) == 1 else None
