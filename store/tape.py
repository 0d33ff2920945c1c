"""The JSONL tape format: a lossless, line-oriented copy of an event log (docs/tape-format.md).

Line 1 is a header; then one line per exchange and one per event, in log order. Payloads
that are valid UTF-8 are written as text (``payload``), others as base64 (``payload_b64``),
so export then import gives back the same log, byte for byte.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack
from itertools import chain
from typing import IO, Any

import msgspec

from a2a_tape.store.decode import decode_item
from a2a_tape.store.interface import Recordings, RecordingStore
from a2a_tape.store.observers import JOINS_RUN, Observer
from a2a_tape.store.records import Exchange, NewEvent, StoredEvent
from a2a_tape.store.tape_lines import TAPE_VERSION as TAPE_VERSION
from a2a_tape.store.tape_lines import ExchangeAt as ExchangeAt
from a2a_tape.store.tape_lines import ImportBlock as ImportBlock
from a2a_tape.store.tape_lines import TapeError as TapeError
from a2a_tape.store.tape_lines import TapeEvent as TapeEvent
from a2a_tape.store.tape_lines import TapeExchange as TapeExchange
from a2a_tape.store.tape_lines import TapeHeader as TapeHeader
from a2a_tape.store.tape_lines import import_blocks as import_blocks
from a2a_tape.store.tape_lines import line_bytes
from a2a_tape.store.tape_lines import read_tape_blocks as read_tape_blocks

_encoder = msgspec.json.Encoder()


def _text_or_b64(data: bytes | None) -> tuple[str | None, str | None]:
    if data is None:
        return None, None
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError:
        return None, base64.b64encode(data).decode("ascii")


def exchange_line(ex: Exchange) -> TapeExchange:
    req, req64 = _text_or_b64(ex.request_body)
    resp, resp64 = _text_or_b64(ex.response_body)
    return TapeExchange(
        id=ex.id or 0,
        started_at=ex.started_at,
        ended_at=ex.ended_at,
        url=ex.url,
        http_method=ex.http_method,
        rpc_method=ex.rpc_method,
        dialect=ex.dialect,
        streaming=ex.streaming,
        request_headers=ex.request_headers,
        request_body=req,
        request_body_b64=req64,
        status=ex.status,
        content_type=ex.content_type,
        response_headers=ex.response_headers,
        response_body=resp,
        response_body_b64=resp64,
        outcome=ex.outcome,
        error=ex.error,
        task_id=ex.task_id,
        context_id=ex.context_id,
        message_id=ex.message_id,
        idempotency_key=ex.idempotency_key,
        role=ex.role,
        binding=ex.binding,
        observer=ex.observer,
        source=ex.source,
        host=ex.host,
    )


def event_line(ev: StoredEvent) -> TapeEvent:
    text, b64 = _text_or_b64(bytes(ev.payload))
    return TapeEvent(
        position=ev.position,
        seq=ev.seq,
        task_id=ev.task_id,
        exchange_id=ev.exchange_id,
        sse_event=ev.sse_event,
        received_at=ev.received_at,
        mono=ev.mono,
        origin=ev.origin,
        payload=text,
        payload_b64=b64,
    )


def export_lines(
    store: Recordings,
    *,
    task_ids: Iterable[str] | None = None,
    source: str | None = None,
    exchange_ids: Iterable[int] | None = None,
) -> Iterator[bytes]:
    """Yield the tape's lines (each ending in a newline): the whole log, or some tasks, or some
    exchanges (``exchange_ids``: a lone Message reply has no task, only its exchange)."""
    events: Iterable[StoredEvent]
    if exchange_ids is not None:
        picked = [store.get_exchange(i) for i in dict.fromkeys(exchange_ids)]
        exchanges = [ex for ex in picked if ex is not None]
        chosen = sorted((e for ex in exchanges for e in store.read_exchange(ex.id or 0)), key=lambda e: e.position)
        events, n_events = chosen, len(chosen)
    elif task_ids is None:
        exchanges = store.exchanges()
        events = store.read_from(0)
        n_events = store.count_events()
    else:
        wanted = list(dict.fromkeys(task_ids))
        ex_by_id: dict[int, Exchange] = {}
        evs: list[StoredEvent] = []
        for t in wanted:
            for ex in store.exchanges(t):
                ex_by_id[ex.id or 0] = ex  # read from the store: every exchange has its id
            evs.extend(store.read_task(t))
        for ex_id in list(ex_by_id):  # events of those exchanges before the task was known
            evs.extend(e for e in store.read_exchange(ex_id) if e.task_id is None)
        evs.sort(key=lambda e: e.position)
        exchanges = sorted(ex_by_id.values(), key=lambda e: e.id or 0)
        events, n_events = evs, len(evs)
    header = TapeHeader(
        a2a_tape=TAPE_VERSION, exported_at=time.time(), exchanges=len(exchanges), events=n_events, source=source
    )
    yield _encoder.encode(header) + b"\n"
    for ex in exchanges:
        yield _encoder.encode(exchange_line(ex)) + b"\n"
    for ev in events:
        yield _encoder.encode(event_line(ev)) + b"\n"


class ImportResult(msgspec.Struct):
    exchanges: int = 0  # exchanges added (an exchange the log holds already is reused, not counted)
    events: int = 0  # events added
    skipped: int = 0  # events already in the log (same key, same bytes)
    task_ids: list[str] = []  # every task the tape holds events of, new or not
    exchanges_present: int = 0  # the tape's exchanges the log held already
    tasks_present: list[str] = []  # the tasks of task_ids the log held events of already

    @property
    def new_tasks(self) -> int:
        return len(self.task_ids) - len(self.tasks_present)


def import_tape(
    store: RecordingStore,
    lines: Iterable[bytes],
    *,
    progress: Callable[[int], None] | None = None,
    batch: int = 2000,
    reader: bool | None = None,
) -> ImportResult:
    """Import a tape atomically: on any bad line nothing of the file is in the log.

    ``lines`` is any iterable of lines. A regular file opened in binary mode with
    :data:`~a2a_tape.store.tape_reader.READER_MIN_BYTES` or more left to read (any such file with
    ``reader=True``; none with ``reader=False``) is parsed by a second process while this one
    appends (:mod:`a2a_tape.store.tape_reader`): the import then takes both cores. A pipe, or any
    other iterable, is parsed here."""
    from a2a_tape.store import tape_reader  # both ends of the reader's pipe (it imports this module)

    fd = tape_reader.reader_fd(lines, reader)
    with ExitStack() as stack:
        with tape_reader.interrupts_held():  # no Ctrl-C between the reader's start and its stop's guard
            proc = None if fd is None else tape_reader.start_reader(fd)
            blocks = None if proc is None else stack.enter_context(tape_reader.reader_blocks(proc))
        return _import(store, import_blocks(lines) if blocks is None else blocks, progress, batch)


def _import(
    store: RecordingStore, blocks: Iterable[ImportBlock], progress: Callable[[int], None] | None, batch: int
) -> ImportResult:
    result = ImportResult()
    ex_map: dict[int, int] = {}
    pending: list[NewEvent] = []
    tasks: dict[str, None] = {}
    taskless: dict[_ExchangeKey, int] | None = None  # exchanges without a task id already in the log

    def flush() -> None:
        store.append_batch(pending)
        result.events += len(pending)
        pending.clear()

    with store.transaction():
        last_pos = store.last_position()
        append = pending.append
        last_task: str | None = None
        contexts = OneContext(store)
        unsettled = contexts.unsettled
        for item in chain.from_iterable(blocks):
            if type(item) is NewEvent:  # the hot case first
                ref = item.exchange_id
                if ref is not None:
                    item.exchange_id = ex_map[ref]  # import_blocks checked the tape holds it
                task_id = item.task_id
                if task_id != last_task and task_id is not None:  # a tape's events come a task at a time
                    if task_id not in tasks and contexts.first_seen(task_id):
                        result.tasks_present.append(task_id)
                    tasks[task_id] = None
                    last_task = task_id
                if unsettled and task_id in unsettled:  # a task the log holds: its context is checked
                    contexts.check(task_id, item.payload)
                append(item)
                if len(pending) >= batch:
                    flush()
                    if progress:
                        progress(result.events)
                continue
            assert isinstance(item, ExchangeAt)
            ex = item.line
            try:
                if ex.task_id is None and taskless is None:
                    taskless = {
                        _exchange_key(e): e.id for e in store.exchanges() if e.task_id is None and e.id is not None
                    }
                ex_map[ex.id], new = _import_exchange(store, ex, taskless)
                if new:
                    result.exchanges += 1
                else:
                    result.exchanges_present += 1
            except (ValueError, TypeError) as exc:  # bad base64 and the like
                raise TapeError(f"line {item.number}: {exc}") from None
        if pending:
            flush()
        if progress:
            progress(result.events)
        added = store.last_position() - last_pos
    result.skipped = result.events - added
    result.events = added
    result.task_ids = list(tasks)
    return result


class OneContext:
    """One task, one context: a tape cannot graft events onto a task the log holds unless they are
    of the task's own context (a task id reused by another agent, or a tape made to look so,
    would take over its final answer). Only tasks the log already holds are looked at: an import
    of new tasks decodes nothing here."""

    def __init__(self, store: Recordings) -> None:
        self.store = store
        self.held: dict[str, str] = {}  # task id -> the context the log has for it
        self.unsettled: set[str] = set()  # tasks the log holds whose context in the tape is not known yet

    def first_seen(self, task_id: str) -> bool:
        """Note the context of a task the tape begins; whether the log holds the task already."""
        if not self.store.has_task(task_id):
            return False
        context = next((c for c in map(_context_of, self.store.read_task(task_id)) if c), None)
        if context is not None:
            self.held[task_id] = context
            self.unsettled.add(task_id)
        return True

    def check(self, task_id: str, payload: bytes) -> None:
        context = _context_of(payload)
        if context is None:
            return
        self.unsettled.discard(task_id)
        held = self.held[task_id]
        if context != held:
            raise TapeError(
                f"task {task_id} is in the log with context {held}, and the tape has events for it of "
                f"context {context}: not imported (one task, one context; docs/tape-format.md says how "
                "to import it under another id)"
            )


def _context_of(event: StoredEvent | bytes) -> str | None:
    payload = event if isinstance(event, bytes) else event.payload
    return decode_item(payload).context_id


_ExchangeKey = tuple[float, str, bytes]


def _exchange_key(ex: Exchange) -> _ExchangeKey:
    return (ex.started_at, ex.url, ex.request_body)


def _import_exchange(
    store: Recordings, item: TapeExchange, taskless: dict[_ExchangeKey, int] | None
) -> tuple[int, bool]:
    """The exchange's id in the log, and whether it was added (False: the log held it already)."""
    body = line_bytes(item.request_body, item.request_body_b64) or b""
    if item.task_id is None and taskless is not None:  # e.g. an error before any task id was known
        known = taskless.get((item.started_at, item.url, body))
        if known is not None:
            return known, False
    for ex in store.exchanges(item.task_id) if item.task_id else ():
        if ex.started_at == item.started_at and ex.url == item.url and ex.request_body == body:
            assert ex.id is not None  # read from the store: it has its id
            return ex.id, False  # imported before: reuse, so a second import changes nothing
    observer: Observer | None = None
    if item.observer is not None:  # the tape's runs stay the runs they were (a copy is lossless)
        observer = Observer(item.observer, item.source or "import", item.host or "")
    elif item.role not in JOINS_RUN:
        # a tape written before runs: split by role as a log before runs is (store.schema._v6), and
        # the same way each time (reading a tape as a log imports it again: it must read the same)
        observer = Observer(f"tape-{item.role}", "import", "")
    new_id = store.begin_exchange(
        Exchange(
            observer=None if observer is None else observer.id,
            source=None if observer is None else observer.source,
            started_at=item.started_at,
            ended_at=item.ended_at,
            url=item.url,
            http_method=item.http_method,
            rpc_method=item.rpc_method,
            dialect=item.dialect,
            streaming=item.streaming,
            request_headers=item.request_headers,
            request_body=body,
            status=item.status,
            content_type=item.content_type,
            response_headers=item.response_headers,
            response_body=line_bytes(item.response_body, item.response_body_b64),
            outcome=item.outcome,
            error=item.error,
            task_id=item.task_id,
            context_id=item.context_id,
            message_id=item.message_id,
            idempotency_key=item.idempotency_key,
            role=item.role,
            binding=item.binding,  # as the tape says (readers fill an old row in: store.methods)
            host=item.host,
        )
    )
    if item.task_id is None and taskless is not None:
        taskless[(item.started_at, item.url, body)] = new_id
    return new_id, True


def write_tape(store: Recordings, out: IO[bytes], **kw: Any) -> int:
    n = 0
    for line in export_lines(store, **kw):
        out.write(line)
        n += 1
    return n
