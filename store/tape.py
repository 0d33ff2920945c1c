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
from typing import IO, Annotated, Any, Literal

import msgspec

from a2a_tape.store.decode import decode_item
from a2a_tape.store.errors import StoreError
from a2a_tape.store.headers import header_problem
from a2a_tape.store.interface import Recordings, RecordingStore
from a2a_tape.store.json_values import TOO_DEEP
from a2a_tape.store.observers import JOINS_RUN, Observer
from a2a_tape.store.records import Exchange, NewEvent, StoredEvent

TAPE_VERSION = 1


class TapeError(StoreError):
    """A tape file that cannot be imported; nothing of it was imported."""


# what a tape may hold where the log keeps a number: an SQLite INTEGER, and a time (unix seconds)
# every view can show (years 1 to 9999); beyond them a line is refused, naming the field
Int64 = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]
UnixTime = Annotated[float, msgspec.Meta(ge=-62135596800.0, le=253402300799.0)]


class TapeHeader(msgspec.Struct, tag="header", tag_field="type", omit_defaults=True):
    # always written (a value, not the default); a header without it is a version-1 tape
    a2a_tape: Int64 | None = None
    exported_at: float = 0.0
    exchanges: Int64 = 0
    events: Int64 = 0
    source: str | None = None


class TapeExchange(msgspec.Struct, tag="exchange", tag_field="type", omit_defaults=True):
    id: Int64
    started_at: UnixTime = 0.0
    ended_at: UnixTime | None = None
    url: str = ""
    http_method: str = "POST"
    rpc_method: str | None = None
    dialect: str | None = None
    streaming: bool = False
    request_headers: dict[str, str] = {}
    request_body: str | None = None
    request_body_b64: str | None = None
    status: Int64 | None = None
    content_type: str | None = None
    response_headers: dict[str, str] = {}
    response_body: str | None = None
    response_body_b64: str | None = None
    outcome: str | None = None
    error: str | None = None
    task_id: str | None = None
    context_id: str | None = None
    message_id: str | None = None
    idempotency_key: str | None = None
    role: str = "client"
    binding: str | None = None  # absent in tapes written before it: read from the dialect (store.methods)
    observer: str | None = None  # absent in tapes written before runs: one run per role of the tape
    source: str | None = None
    host: str | None = None


class TapeEvent(msgspec.Struct, tag="event", tag_field="type", omit_defaults=True):
    position: Int64
    seq: Int64
    task_id: str | None = None
    exchange_id: Int64 | None = None
    sse_event: str | None = None
    received_at: UnixTime = 0.0
    mono: float | None = None
    origin: Literal["upstream", "local"] = "upstream"
    payload: str | None = None
    payload_b64: str | None = None


TapeLine = TapeHeader | TapeExchange | TapeEvent
_line_decoder = msgspec.json.Decoder(TapeLine)
_encoder = msgspec.json.Encoder()


def _text_or_b64(data: bytes | None) -> tuple[str | None, str | None]:
    if data is None:
        return None, None
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError:
        return None, base64.b64encode(data).decode("ascii")


def _bytes(text: str | None, b64: str | None) -> bytes | None:
    if b64 is not None:
        return base64.b64decode(b64, validate=True)
    if text is not None:
        return text.encode("utf-8")
    return None


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
    store: Recordings, *, task_ids: Iterable[str] | None = None, source: str | None = None
) -> Iterator[bytes]:
    """Yield the tape's lines (each ending in a newline): the whole log, or some tasks."""
    if task_ids is None:
        exchanges = store.exchanges()
        events: Iterable[StoredEvent] = store.read_from(0)
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


_BLOCK = 512  # lines per block
_BLOCK_BYTES = 8 << 20  # and a block of long lines ends sooner: a block is held decoded (twice across a pipe)


def read_tape_blocks(lines: Iterable[bytes]) -> Iterator[list[tuple[int, TapeLine]]]:
    """Parse a tape in blocks of ``(line number, item)`` (no generator step per line for a reader
    of a long tape); raise :class:`TapeError` naming the first bad line. Each line is decoded on
    its own: a line is one tape line or an error naming it, whatever the lines around it."""
    first = True
    numbers: list[int] = []
    raws: list[bytes] = []
    size = 0
    for number, raw in enumerate(lines, 1):
        if raw[:1] != b"{" and not raw.strip():  # a blank line
            continue
        numbers.append(number)
        raws.append(raw)
        size += len(raw)
        if len(raws) >= _BLOCK or size >= _BLOCK_BYTES:
            block = _decode_block(numbers, raws, first)
            first = False
            numbers, raws, size = [], [], 0
            yield block
    if raws:
        yield _decode_block(numbers, raws, first)
    elif first:
        raise TapeError("the file is empty: not an a2a-tape file")


def _decode_block(numbers: list[int], raws: list[bytes], first: bool) -> list[tuple[int, TapeLine]]:
    decode = _line_decoder.decode
    try:
        items = [decode(raw) for raw in raws]
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        items = [_decode_line(number, raw) for number, raw in zip(numbers, raws)]  # raises, naming the line
    if first:
        head = items[0]
        if not isinstance(head, TapeHeader):
            raise TapeError("line 1: not an a2a-tape file (the first line must be the tape header)")
        version = head.a2a_tape or 1
        if version > TAPE_VERSION:
            raise TapeError(f"line 1: tape version {version} is newer than this a2a-tape reads ({TAPE_VERSION})")
    return list(zip(numbers, items))


def _decode_line(number: int, raw: bytes) -> TapeLine:
    try:
        return _line_decoder.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:
        detail = "not UTF-8" if _not_utf8(raw) else TOO_DEEP if isinstance(exc, RecursionError) else str(exc)
        raise TapeError(f"line {number}: not a tape line ({detail})") from None


def _not_utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


class ExchangeAt(msgspec.Struct, array_like=True, tag="exchange"):
    """An exchange line of a tape and its line number (an error importing it names the line)."""

    number: int
    line: TapeExchange


ImportBlock = list[NewEvent | ExchangeAt]
"""A run of a tape's lines ready to import: its events as :class:`NewEvent` s whose
``exchange_id`` is still the tape's (the importer maps it to the log's), and its exchanges."""


def import_blocks(lines: Iterable[bytes]) -> Iterator[ImportBlock]:
    """The tape's lines as :data:`ImportBlock` s, every check that needs no database made:
    each event has a payload (valid base64 when so written) and refers to an exchange that an
    earlier line of the tape holds. Raises :class:`TapeError` naming the first bad line (of a
    block: the blocks before it are whole). The same code runs in-process and in the reader
    process of a large file's import (:mod:`a2a_tape.store.tape_reader`)."""
    refs: set[int] = set()
    for block in read_tape_blocks(lines):
        out: ImportBlock = []
        append = out.append
        for number, item in block:
            if type(item) is TapeEvent:  # the hot case first, attributes read once
                text = item.payload
                payload: bytes | None
                if text is not None and item.payload_b64 is None:
                    payload = text.encode("utf-8")
                else:
                    try:
                        payload = _bytes(text, item.payload_b64)
                    except (ValueError, TypeError) as exc:  # bad base64 and the like
                        raise TapeError(f"line {number}: {exc}") from None
                    if payload is None:
                        raise TapeError(f"line {number}: event without payload")
                ref = item.exchange_id
                if ref is not None and ref not in refs:
                    raise TapeError(f"line {number}: event refers to exchange {ref}, not in the tape")
                append(
                    NewEvent(
                        payload, item.task_id, ref, item.seq, item.sse_event, item.received_at, item.mono, item.origin
                    )
                )
            elif isinstance(item, TapeExchange):  # not the header
                bad = _bad_header(item)
                if bad is not None:
                    raise TapeError(f"line {number}: {bad}")
                refs.add(item.id)
                append(ExchangeAt(number, item))
        if out:
            yield out


def _bad_header(ex: TapeExchange) -> str | None:
    """The first recorded header of an exchange line that is not an HTTP header, said in a line."""
    for side, headers in (("request", ex.request_headers), ("response", ex.response_headers)):
        for name, value in headers.items():
            problem = header_problem(name, value)
            if problem is not None:
                return f"exchange {ex.id}: {side} {problem}: not an HTTP header"
    if ex.content_type is not None and header_problem("content-type", ex.content_type) is not None:
        return f"exchange {ex.id}: content_type holds a line break or NUL: not an HTTP header"
    return None


class ImportResult(msgspec.Struct):
    exchanges: int = 0
    events: int = 0
    skipped: int = 0  # events already in the log (same key, same bytes)
    task_ids: list[str] = []


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
                    if task_id not in tasks:
                        contexts.first_seen(task_id)
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
                ex_map[ex.id] = _import_exchange(store, ex, taskless)
                result.exchanges += 1
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

    def first_seen(self, task_id: str) -> None:
        if not self.store.has_task(task_id):
            return
        context = next((c for c in map(_context_of, self.store.read_task(task_id)) if c), None)
        if context is not None:
            self.held[task_id] = context
            self.unsettled.add(task_id)

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
    store: Recordings,
    item: TapeExchange,
    taskless: dict[_ExchangeKey, int] | None,
) -> int:
    body = _bytes(item.request_body, item.request_body_b64) or b""
    if item.task_id is None and taskless is not None:  # e.g. an error before any task id was known
        known = taskless.get((item.started_at, item.url, body))
        if known is not None:
            return known
    for ex in store.exchanges(item.task_id) if item.task_id else ():
        if ex.started_at == item.started_at and ex.url == item.url and ex.request_body == body:
            assert ex.id is not None  # read from the store: it has its id
            return ex.id  # imported before: reuse, so a second import changes nothing
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
            response_body=_bytes(item.response_body, item.response_body_b64),
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
    return new_id


def write_tape(store: Recordings, out: IO[bytes], **kw: Any) -> int:
    n = 0
    for line in export_lines(store, **kw):
        out.write(line)
        n += 1
    return n
