"""The append plan both backends share: record <-> row conversions, each event's idempotency key
(``(task_id, seq)`` or the exchange's), and :class:`BatchPlan`, which sorts a batch into new rows,
no-ops and conflicts."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import chain, groupby, repeat
from typing import Any, cast

import msgspec
from msgspec.structs import astuple

from a2a_tape.store.errors import AppendConflict
from a2a_tape.store.events import Origin
from a2a_tape.store.records import Exchange, NewEvent, StoredEvent

EventRow = tuple[int, str | None, int, int | None, str | None, bytes, float, float | None, Origin]
"""(position, task_id, seq, exchange_id, sse_event, payload, received_at, mono, origin): a new row of
``events``, in :class:`StoredEvent` field order (the column order both backends insert in)."""
ROW_WIDTH = 9

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


def event_row(position: int, seq: int, ev: NewEvent) -> EventRow:
    """The row of ``ev`` stored at ``position`` with ``seq``."""
    return (position, ev.task_id, seq, ev.exchange_id, ev.sse_event, ev.payload, ev.received_at, ev.mono, ev.origin)


def event_key(ev: NewEvent) -> Key:
    return (ev.task_id, None) if ev.task_id is not None else (None, ev.exchange_id)


def key_text(key: Key) -> str:
    task_id, exchange_id = key
    return f"task {task_id}" if task_id is not None else f"exchange {exchange_id}"


_MIN_RUN = 8  # events per run, on average, for a batch to be planned by runs


class Run(msgspec.Struct, gc=False):
    """Consecutive events of a batch, by column: one task (or one task-less exchange), one
    exchange, one SSE event name, one origin (a stream's batch, a task of an imported tape).
    Positions and seqs count up by one from ``position`` and ``seq``; the per-row columns are lists."""

    position: int  # of the first row
    seq: int
    task_id: str | None
    exchange_id: int | None
    sse_event: str | None
    origin: Origin
    payloads: list[bytes]
    received_at: list[float]
    mono: list[float | None]


def _columns(run: Run) -> tuple[Iterable[Any], ...]:
    """The run's nine columns, in :data:`EventRow` order."""
    n = len(run.payloads)
    return (
        range(run.position, run.position + n),
        repeat(run.task_id, n),
        range(run.seq, run.seq + n),
        repeat(run.exchange_id, n),
        repeat(run.sse_event, n),
        run.payloads,
        run.received_at,
        run.mono,
        repeat(run.origin, n),
    )


class BatchPlan:
    """What an append batch will write, worked out inside the writer's transaction.

    Assigns ``seq`` where the caller gave none, and makes explicit keys idempotent: a key
    already stored (or earlier in the same batch) with the same bytes is a no-op, with other
    bytes an :class:`AppendConflict`. New rows are numbered from ``start + 1`` (the highest
    position stored, read under the writer's lock). Both backends share it; only their SQL differs.

    A batch made of runs (a stream's batch, an import's) is planned by column, with list slices
    and no Python loop per event: :attr:`runs` (a backend binds a run's shared columns once per
    statement). Otherwise :attr:`values` holds the new rows flat, :data:`ROW_WIDTH` values per row
    in :data:`EventRow` order, ready to bind to a many-row ``INSERT``.
    """

    def __init__(
        self,
        events: Sequence[NewEvent],
        max_seqs: Callable[[list[Key]], dict[Key, int]],
        find: Callable[[Key, int], StoredEvent | None],
        start: int,
    ) -> None:
        self.start = start
        self.count = 0  # new rows
        self.runs: list[Run] = []
        self.values: list[object] = []
        self._out: list[StoredEvent | None] | None = None  # None: every event is a new row, in order
        self._repeats: list[tuple[int, int]] = []
        self._row_index: list[int] = []
        if events and not self._runs(events, max_seqs):
            self._general(events, max_seqs, find)

    def _runs(self, events: Sequence[NewEvent], max_seqs: Callable[[list[Key]], dict[Key, int]]) -> bool:
        """Plan the batch as :class:`Run` s when it is made of them: consecutive events sharing a
        task (or a task-less exchange), exchange, SSE event name and origin, each run's seqs all
        ours to assign, or given, counting up by one from above every seq its key has stored
        (nothing to look up). A stream's batch is one run; an import's, one per task it holds."""
        n = len(events)
        # NewEvent field order: payload, task_id, exchange_id, seq, sse_event, received_at, mono, origin
        src = list(chain.from_iterable(map(astuple, events)))
        seqs = src[3::8]
        groups = [(k, len(list(g))) for k, g in groupby(zip(src[1::8], src[2::8], src[4::8], src[7::8]))]
        if len(groups) > 1 and len(groups) * _MIN_RUN > n:
            return False  # interleaved producers: one many-row statement beats a statement per run
        keys: list[Key] = [(t, None) if t is not None else (None, ex) for (t, ex, _, _), _ in groups]
        highest = max_seqs(list(dict.fromkeys(keys)))
        nxt: dict[Key, int] = {k: v + 1 for k, v in highest.items()}
        payloads, received, monos = src[0::8], src[5::8], src[6::8]
        runs: list[Run] = []
        i = 0
        position = self.start + 1
        for ((task_id, exchange_id, sse_event, origin), size), key in zip(groups, keys):
            first = seqs[i]
            floor = nxt.get(key, 1)
            if first is None:
                if seqs[i : i + size].count(None) != size:
                    return False
                first = floor
            elif first < floor or seqs[i : i + size] != list(range(first, first + size)):
                return False  # a seq that may be stored already, or not counting up: looked at one by one
            nxt[key] = first + size
            j = i + size
            runs.append(
                Run(position, first, task_id, exchange_id, sse_event, origin, payloads[i:j], received[i:j], monos[i:j])
            )
            position += size
            i = j
        self.runs = runs
        self.count = n
        return True

    def _general(
        self,
        events: Sequence[NewEvent],
        max_seqs: Callable[[list[Key]], dict[Key, int]],
        find: Callable[[Key, int], StoredEvent | None],
    ) -> None:
        keys = [event_key(ev) for ev in events]
        # one query for the highest seq of every key in the batch (not one per key)
        highest = max_seqs(list(dict.fromkeys(keys)))
        nxt: dict[Key, int] = {k: v + 1 for k, v in highest.items()}
        out: list[StoredEvent | None] = [None] * len(events)
        values = self.values
        row_index = self._row_index
        in_batch: dict[tuple[Key, int], int] = {}  # (key, seq) -> index of its new row
        position = self.start
        for i, ev in enumerate(events):
            key = keys[i]
            if ev.seq is None:
                seq = nxt.get(key, 1)
                nxt[key] = seq + 1
            else:
                seq = ev.seq
                k = in_batch.get((key, seq))
                if k is not None:  # the same key earlier in this very batch
                    if bytes(values[k * ROW_WIDTH + 5]) != bytes(ev.payload):  # type: ignore[call-overload]
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
                    out[i] = existing
                    continue
                nxt[key] = max(nxt.get(key, 1), seq + 1)
            in_batch[(key, seq)] = len(row_index)
            row_index.append(i)
            position += 1
            values += event_row(position, seq, ev)
        self.count = len(row_index)
        self._out = out

    def rows(self) -> Iterator[EventRow]:
        """The new rows, one tuple each (for a backend that writes row by row)."""
        if self.runs:
            return chain.from_iterable(zip(*_columns(run)) for run in self.runs)
        it = iter(self.values)
        return zip(*[it] * ROW_WIDTH)

    def stored(self) -> list[StoredEvent]:
        """The batch as stored: new rows, no-ops (the stored event) and repeats, in input order."""
        if self.runs:
            out: list[StoredEvent] = []
            for run in self.runs:
                out += map(StoredEvent, *_columns(run))
            return out
        new = list(map(StoredEvent, *[self.values[k::ROW_WIDTH] for k in range(ROW_WIDTH)]))
        slots = self._out
        if slots is None:
            return new
        for k, i in enumerate(self._row_index):
            slots[i] = new[k]
        for i, k in self._repeats:
            slots[i] = new[k]
        return cast("list[StoredEvent]", slots)  # every event is a new row, a no-op or a repeat: none left None
