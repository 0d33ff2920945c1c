"""A tape's lines (docs/tape-format.md): their shapes, and parsing them into blocks ready to import,
every check that needs no database made. The importer (:mod:`store.tape`) and the reader process of
a large file's import (:mod:`store.tape_reader`) both read a tape through it."""

from __future__ import annotations

import base64
from collections.abc import Iterable, Iterator
from typing import Annotated, Literal

import msgspec

from a2a_tape.store.errors import StoreError
from a2a_tape.store.headers import header_problem
from a2a_tape.store.json_values import TOO_DEEP
from a2a_tape.store.records import NewEvent

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


def line_bytes(text: str | None, b64: str | None) -> bytes | None:
    """A payload or body of a line: its base64 form when it has one, else its text, else None."""
    if b64 is not None:
        return base64.b64decode(b64, validate=True)
    if text is not None:
        return text.encode("utf-8")
    return None


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
                        payload = line_bytes(text, item.payload_b64)
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
