"""The append plan both backends share: record <-> row conversions, each event's idempotency key
(``(task_id, seq)`` or the exchange's), and :class:`BatchPlan`, which sorts a batch into new rows,
no-ops and conflicts."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

import msgspec

from .errors import AppendConflict
from .events import Origin
from .records import Exchange, NewEvent, StoredEvent

EventRow = tuple[str | None, int, int | None, str | None, bytes, float, float | None, Origin]
"""(task_id, seq, exchange_id, sse_event, payload, received_at, mono, origin): a new row of ``events``."""

EXCHANGE_FIELDS = [f for f in Exchange.__struct_fields__ if f != "id"]
_JSON_FIELDS = {"request_headers", "response_headers"}
_headers_decoder = msgspec.json.Decoder(dict[str, str])


def to_column(field: str, value: object) -> object:
    if field in _JSON_FIELDS:
        return msgspec.json.encode(value).decode()
    if isinstance(value, bool):
        return int(value)
    return value


def exchange_values(exchange: Exchange) -> list[object]:
    """The column values of an exchange, in :data:`EXCHANGE_FIELDS` order."""
    return [to_column(f, getattr(exchange, f)) for f in EXCHANGE_FIELDS]


def exchange_from_row(row: Sequence[Any]) -> Exchange:
    values = dict(zip(["id", *EXCHANGE_FIELDS], row))
    for f in _JSON_FIELDS:
        values[f] = _headers_decoder.decode(values[f]) if values[f] else {}
    values["streaming"] = bool(values["streaming"])
    values["request_body"] = bytes(values["request_body"]) if values["request_body"] else b""
    if values["response_body"] is not None:
        values["response_body"] = bytes(values["response_body"])
    values["role"] = values["role"] or "client"
    return Exchange(**values)


Key = tuple[str | None, int | None]
"""(task_id, None) or (None, exchange_id): what seq counts within."""


def event_key(ev: NewEvent) -> Key:
    return (ev.task_id, None) if ev.task_id is not None else (None, ev.exchange_id)


def key_text(key: Key) -> str:
    task_id, exchange_id = key
    return f"task {task_id}" if task_id is not None else f"exchange {exchange_id}"


class BatchPlan:
    """What an append batch will write, worked out inside the writer's transaction.

    Assigns ``seq`` where the caller gave none, and makes explicit keys idempotent: a key
    already stored (or earlier in the same batch) with the same bytes is a no-op, with other
    bytes an :class:`AppendConflict`. Both backends share it; only their SQL differs.
    """

    def __init__(
        self,
        events: Sequence[NewEvent],
        max_seqs: Callable[[list[Key]], dict[Key, int]],
        find: Callable[[Key, int], StoredEvent | None],
    ) -> None:
        self.out: list[StoredEvent | None] = [None] * len(events)
        self.rows: list[EventRow] = []
        self._row_index: list[int] | range = []
        self._repeats: list[tuple[int, int]] = []
        keys = [event_key(ev) for ev in events]
        # one query for the highest seq of every key in the batch (not one per key)
        highest = max_seqs(list(dict.fromkeys(keys)))
        nxt: dict[Key, int] = {k: v + 1 for k, v in highest.items()}
        if all(ev.seq is None for ev in events):  # the live case: every seq is ours to assign
            rows = self.rows
            for key, ev in zip(keys, events):
                seq = nxt.get(key, 1)
                nxt[key] = seq + 1
                rows.append(
                    (ev.task_id, seq, ev.exchange_id, ev.sse_event, ev.payload, ev.received_at, ev.mono, ev.origin)
                )
            self._row_index = range(len(events))
            return
        row_index: list[int] = []
        self._row_index = row_index
        in_batch: dict[tuple[Key, int], int] = {}
        for i, ev in enumerate(events):
            key = keys[i]
            if ev.seq is None:
                seq = nxt.get(key, 1)
                nxt[key] = seq + 1
            else:
                seq = ev.seq
                k = in_batch.get((key, seq))
                if k is not None:  # the same key earlier in this very batch
                    if bytes(self.rows[k][4]) != bytes(ev.payload):
                        raise AppendConflict(
                            f"event {key_text(key)} seq {seq} appears twice in one batch with other bytes"
                        )
                    self._repeats.append((i, k))
                    continue
                # a seq above the highest stored one cannot be stored yet: no lookup (an import
                # of a fresh tape gives every seq, and would probe the index once per event)
                top = highest.get(key)
                existing = find(key, seq) if top is not None and seq <= top else None
                if existing is not None:
                    if bytes(existing.payload) != bytes(ev.payload):
                        raise AppendConflict(f"event {key_text(key)} seq {seq} is already stored with other bytes")
                    self.out[i] = existing
                    continue
                nxt[key] = max(nxt.get(key, 1), seq + 1)
            in_batch[(key, seq)] = len(self.rows)
            row_index.append(i)
            self.rows.append(
                (ev.task_id, seq, ev.exchange_id, ev.sse_event, ev.payload, ev.received_at, ev.mono, ev.origin)
            )

    def stored(self, start: int) -> list[StoredEvent]:
        """The batch as stored, its new rows numbered from ``start + 1``."""
        if isinstance(self._row_index, range):  # every event is a new row, in order
            return [StoredEvent(position, *row) for position, row in enumerate(self.rows, start + 1)]
        out = self.out
        for k, (i, row) in enumerate(zip(self._row_index, self.rows)):
            out[i] = StoredEvent(start + 1 + k, *row)
        for i, k in self._repeats:
            out[i] = out[self._row_index[k]]
        return cast("list[StoredEvent]", out)  # every event is a new row, a no-op or a repeat: none left None
