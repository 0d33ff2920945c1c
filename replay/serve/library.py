"""What the recordings offer: episodes (one recorded request and its events) and tasks.

A recording is an a2a-tape database or a JSONL tape; a tape is imported into a private
temporary database (:class:`store.tape_copy.TapeCopy`) so both are read the same way. An
*episode* is one recorded send (``message/send``, ``message/stream``, ``SendMessage``,
``SendStreamingMessage``): its request, decoded once, and its upstream events, read and cut
around their JSON-RPC id on first use. Events a2a-tape wrote itself (``origin = "local"``:
notes, a recovery FAILED) are never served: the agent did not send them.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from urllib.parse import urlsplit

import msgspec

from a2a_tape.capture.hooks import A2ARequest
from a2a_tape.fold.runs import Run, served_run, task_runs
from a2a_tape.replay.serve.rpc import METHODS, SEND_OPERATIONS, BadParams, BadRequest, RpcRequest, parse_request
from a2a_tape.replay.serve.shape import Shape, shape_of
from a2a_tape.replay.serve.write_back import Mark, mark_of, write_back
from a2a_tape.store import Exchange, Item, Store, StoredEvent, StoreError, decode_item, open_store
from a2a_tape.store.methods import CARD_PATHS, GRPC, HTTP_JSON, binding_and_version
from a2a_tape.store.tape_copy import TapeCopy, is_tape
from a2a_tape.wire import grpc as grpc_wire
from a2a_tape.wire import http_json
from a2a_tape.wire.bindings import recorded_call
from a2a_tape.wire.push_configs import PUSH
from a2a_tape.wire.sse_frames import Splitter, frame, render_frames


class RecordedCard(msgspec.Struct, frozen=True):
    """An agent card as the agent served it: the request's dialect, the response as recorded."""

    path: str
    dialect: str  # the asking request's: "1.0" with an A2A-Version 1.x header, else "0.3"
    url: str  # where it was fetched (its origin is rewritten to the replay server's)
    status: int
    content_type: str | None
    headers: dict[str, str]
    body: bytes


def _asks_v1(headers: dict[str, str]) -> bool:
    v = next((v for k, v in headers.items() if k.lower() == "a2a-version"), "")
    return v.strip().split(".")[0] == "1"


class Served(msgspec.Struct, frozen=True, gc=False):
    """One recorded event, ready to serve: its payload cut around the JSON-RPC id, and its timing.

    A Struct (built in C, not tracked by the GC): a long recording makes one per event.
    """

    position: int
    task_id: str | None
    sse_event: str | None
    recorded: bytes  # the payload as recorded
    head: bytes  # the whole payload when ``tail`` is None (no id to rewrite)
    tail: bytes | None
    gap: float  # seconds since the previous item of the same exchange (recorded)
    plain: bool  # one line: the frame is ``data: head id tail``

    @property
    def item(self) -> Item:
        return decode_item(self.recorded)

    def payload(self, encoded_id: bytes) -> bytes:
        """The recorded payload with this JSON-RPC id (every other byte as recorded)."""
        if self.tail is None:
            return self.head
        return self.head + encoded_id + self.tail

    def frame(self, encoded_id: bytes) -> bytes:
        """The recorded SSE frame with this JSON-RPC id."""
        if self.plain:
            if self.tail is None:
                return b"data: " + self.head + b"\r\n\r\n"
            return b"".join((b"data: ", self.head, encoded_id, self.tail, b"\r\n\r\n"))
        return frame(self.payload(encoded_id), self.sse_event)


class Episode:
    """One recorded send and its events."""

    def __init__(self, library: Library, exchange: Exchange) -> None:
        self.library = library
        self.exchange = exchange
        self.id: int = exchange.id or 0
        method = exchange.rpc_method or ""
        self.request: RpcRequest | None = None
        self.call = recorded_call(exchange)  # the request in the JSON-RPC form, whatever its binding
        self.binding = self.call.binding
        try:
            self.request = parse_request(self.call.body)
            method = self.request.method or method
        except BadParams as exc:  # the agent's answer to params it refused: kept, matched by shape
            method = exc.method
        except BadRequest:
            pass
        self.method = method
        _, version = binding_and_version(exchange.binding, exchange.dialect)
        self.operation, dialect = METHODS.get(method, ("", version or "unknown"))
        self.dialect = version if version in ("0.3", "1.0") else dialect
        self.text = message_text(self.request)
        self.used = 0
        self._served: list[Served] | None = None
        self._shape: Shape | None = None
        self._refused: bool | None = None

    @property
    def as_request(self) -> A2ARequest:
        """The recorded request as a ``match_on`` matcher sees it (headers and body as the log keeps them)."""
        x = self.exchange
        return A2ARequest(x.rpc_method, x.url, x.http_method, tuple(x.request_headers.items()), x.request_body)

    @property
    def shape(self) -> Shape:
        """The recorded request as matching compares it (:mod:`replay.serve.shape`)."""
        if self._shape is None:
            self._shape = shape_of(self.call.body)
        return self._shape

    @property
    def refused(self) -> bool:
        """The agent refused this recorded request (we cannot read its params, or its first answer
        item is an error): only the same request finds it, never another of the same text."""
        if self._refused is None:
            self._refused = self.request is None
            if not self._refused:
                first = next((ev for ev in self.library.store.iter_exchange(self.id) if ev.origin != "local"), None)
                self._refused = first is not None and decode_item(first.payload).kind == "error"
        return self._refused

    @property
    def answer_position(self) -> int | None:
        """Where the agent's answer sits in the log (its first item), None when it has no item."""
        served = self.served
        return served[0].position if served else None

    @property
    def task_id(self) -> str | None:
        if self.exchange.task_id:
            return self.exchange.task_id
        for s in self.served:
            tid = s.task_id
            if tid:
                return tid
        return None

    @property
    def served(self) -> list[Served]:
        if self._served is None:
            self._served = self.library.served_events(self.exchange)
        return self._served

    @property
    def loaded(self) -> bool:
        """Its items were read and cut already (a replay of it costs no reading)."""
        return self._served is not None

    def iter_served(self) -> Iterator[Served]:
        """Like :attr:`served`, but the first time yields each item as soon as it is ready."""
        if self._served is not None:
            return iter(self._served)
        return self._fill()

    def iter_frames(self, encoded_id: bytes, batch: int = 256) -> Iterator[list[bytes]]:
        """Batches of SSE frames answering a request with ``encoded_id`` in the recorded dialect,
        with no timing and no fault: the fast way through a long recording (of the JSON-RPC
        binding: the items of another are served through :attr:`served`)."""
        splitter = Splitter()
        payloads: list[bytes] = []
        events: list[str | None] = []
        for ev in self.library.store.iter_exchange(self.id):
            if ev.origin == "local":
                continue
            payloads.append(ev.payload)
            events.append(ev.sse_event)
            if len(payloads) >= batch:
                yield render_frames(payloads, events, encoded_id, splitter)
                payloads, events = [], []
        if payloads:
            yield render_frames(payloads, events, encoded_id, splitter)

    def _fill(self) -> Iterator[Served]:
        out: list[Served] = []
        for s in self.library.iter_served(self.exchange):
            out.append(s)
            yield s
        if self._served is None:
            self._served = out

    def describe(self) -> str:
        text = self.text if len(self.text) <= 60 else self.text[:57] + "..."
        return f"exchange #{self.id} ({self.method or '?'}, text {text!r}, task {self.task_id or '-'})"


_TO_JSONRPC = {HTTP_JSON: http_json.to_jsonrpc, GRPC: grpc_wire.to_jsonrpc}
"""An item recorded in another binding, in the JSON-RPC form the engine serves (each binding's module says how)."""


def message_text(req: RpcRequest | None) -> str:
    if req is None or req.params is None or req.params.message is None:
        return ""
    return "".join(p.text for p in req.params.message.parts if p.text is not None)


class Library:
    """The recordings behind one replay server or transport."""

    def __init__(self, store: Store, *, source: str = "", run: int | None = None) -> None:
        self.store = store
        # which run of a task recorded by several observers is served (fold.runs): run ``run`` when
        # told, else fold.runs.served_run's (the one verify --update adopted, else the agent as it
        # was recorded); a replay recorded back is a later run
        self.run = run
        self._observers: dict[str, set[str]] = {}  # task -> the observers of its exchanges
        self._chosen: dict[str, str | None] = {}  # task -> the observer of its served run
        self.source = source or str(store.path)
        self._mark: Mark | None = None  # a tape's: where this run's own recordings begin
        self.episodes: list[Episode] = []
        self.subscriptions: dict[str, list[Episode]] = {}  # recorded resubscribes, by task
        self.cards: list[RecordedCard] = []  # in recorded order
        # every other recorded request with its answer (GetTask, CancelTask, ListTasks, requests
        # the agent refused), by (method, dialect, shape): served when the same request comes
        self.answers: dict[tuple[str, str, bytes], list[Episode]] = {}
        self.operations: dict[int, str] = {}  # exchange id -> operation ("" when not A2A)
        self.by_id: dict[int, Episode] = {}
        self.pushes: dict[str, list[Exchange]] = {}  # the agent's recorded pushes, by task (replay.serve.pushes)
        self.dirty = False  # something was recorded into it (record modes)
        self.refused: list[str] = []  # what the last write-back left out, one line each
        self._seen: set[int] = set()
        self.refresh()

    @classmethod
    def open(
        cls, location: str | os.PathLike[str], *, create: bool = False, readonly: bool = False, run: int | None = None
    ) -> Library:
        """A database file, or a JSONL tape (imported into a private temporary database).

        ``readonly``: nothing will be recorded; a database file is opened read-only (read-only media too).
        ``run``: which run of a task recorded by several observers is served (None:
        :func:`fold.runs.served_run`'s, the one ``verify --update`` adopted, else the first)."""
        if "://" in os.fspath(location):  # a PostgreSQL URL: no file to look at
            st = open_store(location, create=create and not readonly, readonly=readonly)
            return cls(st, source=str(location), run=run)
        path = Path(location)
        if is_tape(path):
            if not path.exists() and not create:
                raise StoreError(f"no recording at {path}")
            copy = TapeCopy(path if path.exists() else None)
            library = cls(copy, source=str(path), run=run)
            library._mark = mark_of(copy)  # what follows is this run's own (written back at save)
            return library
        if not create and not path.exists():
            raise StoreError(f"no recording at {path}")
        return cls(open_store(path, create=create and not readonly, readonly=readonly), source=str(path), run=run)

    def close(self) -> None:
        self.store.close()  # a tape's copy goes with it (TapeCopy)

    def save(self, *, warn: bool = True) -> bool:
        """Merge what was recorded into the tape it came from, as that tape is now (other writers
        may share it: :mod:`replay.serve.write_back`); False when nothing to do. What the tape
        refused (an episode whose task id it holds under another context; the others are written)
        is in :attr:`refused`, each line a :class:`UserWarning` too unless ``warn`` is False."""
        if not self.dirty or self._mark is None:
            return False
        self.refused = write_back(self.store, Path(self.source), self._mark)
        for line in self.refused if warn else ():
            warnings.warn(f"a2a-tape: {line}", UserWarning, stacklevel=2)
        self._mark = mark_of(self.store)
        self.dirty = False
        return True

    def refresh(self) -> list[Episode]:
        """Read exchanges added since the last call (recorded upstream meanwhile); return the new episodes."""
        added: list[Episode] = []
        after = max(self._seen, default=0)
        new = self.store.exchanges(after_id=after)
        for ex in new:
            if ex.task_id and ex.observer:
                self._observers.setdefault(ex.task_id, set()).add(ex.observer)
        for ex in new:
            self._seen.add(ex.id or 0)
            if not self._in_run(ex):
                continue  # another run of the task than the one served
            if ex.http_method == "GET" and recorded_call(ex).binding != HTTP_JSON:
                self._add_card(ex)
                continue
            if ex.role == "replay" or ex.outcome == "replayed":
                continue  # our own replays, and a gateway's answers from the log: the agent never saw them
            if ex.role == PUSH:  # a POST the agent made to a webhook: no request a client sends
                if ex.task_id:
                    self.pushes.setdefault(ex.task_id, []).append(ex)
                continue
            ep = Episode(self, ex)
            self.operations[ep.id] = ep.operation
            self.by_id[ep.id] = ep
            if ep.operation in SEND_OPERATIONS:
                self.episodes.append(ep)
                added.append(ep)
            elif ep.operation == "resubscribe":
                params = ep.request.params if ep.request else None
                tid = ep.exchange.task_id or (params.id if params else None) or ep.task_id
                if tid:
                    self.subscriptions.setdefault(tid, []).append(ep)
            else:
                self.answers.setdefault(answer_key(ep.shape, ep.dialect), []).append(ep)
        return added

    def _observer_count(self, task_id: str) -> int:
        """How many observers recorded the task, as the log says now: a client recording this
        replay into the log it serves from adds one while it is served (its events are the task's
        too, and must not reach the run served)."""
        seen = self._observers.setdefault(task_id, set())
        seen.update(ex.observer for ex in self.store.exchanges(task_id) if ex.observer)
        return len(seen)

    def _in_run(self, ex: Exchange) -> bool:
        """Whether ``ex`` belongs to the run served of its task (a task of one observer: yes)."""
        tid, observer = ex.task_id, ex.observer
        if tid is None or observer is None or len(self._observers.get(tid, ())) < 2:
            return True
        if tid not in self._chosen:
            served = self._served(task_runs(self.store, tid))
            self._chosen[tid] = served.observer if served is not None else None
        chosen = self._chosen[tid]
        return chosen is None or observer == chosen

    def _served(self, runs: Sequence[Run]) -> Run | None:
        """The run served of a task of these runs."""
        if self.run is None:
            return served_run(runs)
        return runs[min(self.run, len(runs)) - 1] if runs else None

    def _add_card(self, ex: Exchange) -> None:
        path = urlsplit(ex.url).path.rstrip("/")
        if not path.endswith(CARD_PATHS) or ex.status not in (200, None) or not ex.response_body:
            return
        headers = {k.lower(): v for k, v in ex.response_headers.items()}
        self.cards.append(
            RecordedCard(
                path=path,
                dialect="1.0" if _asks_v1(ex.request_headers) else "0.3",
                url=ex.url,
                status=ex.status or 200,
                content_type=ex.content_type or headers.get("content-type"),
                headers=headers,
                body=ex.response_body,
            )
        )

    def card_for(self, path: str, dialect: str) -> RecordedCard | None:
        """The card recorded for this path and dialect; else for the dialect, the path, any (the last
        recorded wins: the agent's newest card)."""
        path = path.rstrip("/")
        for want in (
            lambda c: c.path == path and c.dialect == dialect,
            lambda c: c.dialect == dialect,
            lambda c: c.path == path,
            lambda c: True,
        ):
            found = [c for c in self.cards if want(c)]
            if found:
                return found[-1]
        return None

    @property
    def card(self) -> bytes | None:
        """The last recorded card's body (None when no card was recorded)."""
        return self.cards[-1].body if self.cards else None

    def served_events(self, exchange: Exchange) -> list[Served]:
        return list(self.iter_served(exchange))

    def iter_served(self, exchange: Exchange) -> Iterator[Served]:
        """The exchange's upstream events, made ready to serve one by one (a stream can start
        while the rest of a long recording is still being cut)."""
        prev = 0.0
        cut = Splitter().cut
        started = exchange.started_at
        # an item recorded in another binding is served in the JSON-RPC form the engine writes
        # (wire.bindings renders it back for a client of that binding)
        to_jsonrpc = _TO_JSONRPC.get(binding_and_version(exchange.binding, exchange.dialect)[0] or "")
        base: float | None = None
        for ev in self.store.iter_exchange(exchange.id or 0):
            if ev.origin == "local":
                continue
            at = ev.mono
            if at is None:  # no monotonic offset recorded: wall-clock gaps from the exchange start
                if base is None:
                    base = started if 0 < started <= ev.received_at else ev.received_at
                at = ev.received_at - base
            gap = at - prev if at > prev else 0.0
            prev = at
            payload = ev.payload if to_jsonrpc is None else to_jsonrpc(ev.payload)
            head, tail = cut(payload)
            plain = not ev.sse_event and b"\n" not in payload and b"\r" not in payload
            yield Served(ev.position, ev.task_id, ev.sse_event, payload, head, tail, gap, plain)

    def task_items(self, task_id: str) -> list[tuple[int, Item]]:
        """Every upstream item of a task, in log order, with its position."""
        return [(e.position, e.item) for e in self.task_events(task_id)]

    def task_events(self, task_id: str) -> list[TaskEvent]:
        """Every upstream item of a task (of its run served), in log order, with its exchange's operation."""
        ops = self.operations
        if self._observer_count(task_id) < 2:
            events = self.store.read_task(task_id)
        else:
            served = self._served(task_runs(self.store, task_id))
            events = served.events if served is not None else []
        return [
            TaskEvent(ev, ops.get(ev.exchange_id or 0, ""), decode_item(ev.payload))
            for ev in events
            if ev.origin != "local"
        ]

    def episode(self, exchange_id: int) -> Episode | None:
        """The recorded request of an exchange (a send, a resubscribe, any other answered request)."""
        return self.by_id.get(exchange_id)

    def task_ids(self) -> list[str]:
        return [t.task_id for t in self.store.task_events()]


class TaskEvent(msgspec.Struct, frozen=True, gc=False):
    """One recorded item of a task, with the operation of its exchange."""

    event: StoredEvent
    operation: str  # send, stream, get, cancel, resubscribe, list, "" (not A2A)
    item: Item

    @property
    def position(self) -> int:
        return self.event.position

    @property
    def exchange_id(self) -> int:
        return self.event.exchange_id or 0


def answer_key(shape: Shape, dialect: str) -> tuple[str, str, bytes]:
    """How a recorded answer is found: the same method, dialect and shape."""
    return (shape.method or "", dialect, shape.key)
