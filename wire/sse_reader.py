"""An incremental Server-Sent Events reader that works on bytes, per the HTML standard.

Every reader of a live stream uses it (through the capture core, :mod:`capture.exchange`): the
recorder, the proxy, startup recovery, probes, ``RecordingTransport`` and the replay server's
recording modes. Why our own and not httpx-sse: we must keep the exact bytes of each ``data:``
payload (invalid UTF-8 included), see keep-alive comments (they matter to stall detection but
are not progress), hand over every item as soon as its blank line arrives (never hold the stream
back), and refuse a line that grows past a limit instead of eating memory.

Feed it chunks as they come off the socket; ``feed`` returns the items the chunk completed, in
order. The parsing rules of the HTML standard (section "Server-sent events", "Interpreting an
event stream"):

- one leading UTF-8 BOM is skipped for parsing (the first item is not lost), and kept in that
  item's :attr:`SseItem.raw`;
- line endings ``\\r\\n``, ``\\n`` or ``\\r``, split anywhere across chunks;
- several ``data:`` lines make one payload joined with ``\\n``;
- ``event:``, ``id:`` and ``retry:`` are kept on the item (``id`` with a NUL is ignored, ``retry``
  must be ASCII digits), unknown fields are ignored; a ``:`` line is a comment item;
- an item cut by the close (data lines, no blank line) is returned by :meth:`close` with
  ``incomplete=True``: never dropped.

Exactness: ``data`` is the payload bytes as sent; ``raw`` is the slice of the stream since the
previous item through this one's end, so the ``raw`` of every item (the close's included) joined
is the stream byte for byte: a relay passes ``raw`` on and its client sees what the agent sent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from a2a_tape.store.errors import A2ATapeError

DEFAULT_MAX_LINE = 16 * 1024 * 1024
BOM = b"\xef\xbb\xbf"
_EOL = re.compile(rb"\r\n|\r|\n")


class SseLineTooLong(A2ATapeError):
    """A line, or one event (its lines before the blank line that ends it), grew past the
    configured limit: an agent that never ends an event cannot take the reader's memory."""

    def __init__(self, limit: int, what: str = "line") -> None:
        super().__init__(f"an SSE {what} is longer than the {limit}-byte limit")
        self.limit = limit


@dataclass(slots=True)
class SseItem:
    """One dispatched SSE event (``data`` is the exact payload bytes) or one comment line."""

    data: bytes
    event: str | None = None  # the ``event:`` name, None when absent (i.e. "message")
    comment: bool = False  # a ``:`` line (keep-alive); ``data`` is its text
    id: str | None = None  # the ``id:`` field of this item, when it had one
    retry: int | None = None  # the ``retry:`` field of this item, when it had a valid one
    incomplete: bool = False  # cut by the close: its blank line never came
    raw: bytes = b""  # the exact stream bytes since the previous item, through this one's end


def _one_data_event(whole: bytes, max_line: int) -> bytes | None:
    """The data of ``whole`` when it is exactly one ``data: ...`` line and its blank line (CRLF
    or LF line ends), else None. Told by where the first line end is (``bytes.find`` is a
    memchr): a line end inside the data makes two lines, not one event."""
    if whole[:6] != b"data: " or len(whole) > max_line:
        return None
    n = len(whole)
    lf = whole.find(b"\n", 6)
    if lf == n - 3:  # "data: ...\r\n\r\n"
        if whole[-4:] == b"\r\n\r\n" and whole.find(b"\r", 6) == n - 4:
            return whole[6:-4]
    elif lf == n - 2 and whole[-1] == 10 and whole.find(b"\r", 6) < 0:  # "data: ...\n\n"
        return whole[6:-2]
    return None


class SseParser:
    __slots__ = (
        "max_line",
        "_buf",
        "_data",
        "_event",
        "_cr_pending",
        "_has_data",
        "_id",
        "_retry",
        "_raw",
        "_started",
        "_idle",
        "tail",
    )

    def __init__(self, max_line: int = DEFAULT_MAX_LINE) -> None:
        self.max_line = max_line
        self._buf = b""  # the unfinished line (raw bytes)
        self._data: list[bytes] = []
        self._has_data = False
        self._event: str | None = None
        self._id: str | None = None
        self._retry: int | None = None
        self._raw: list[bytes] = []  # raw bytes of the lines read since the last item
        self._cr_pending = False  # the last chunk ended in "\r": a "\n" may follow
        self._started = False  # the BOM check is done
        # nothing pending at all (started, no partial line, no data, no fields, no raw bytes
        # kept): a chunk that is exactly one ``data:`` event can be taken whole. Kept up to date
        # at the end of every slow-path feed (the only place the state changes).
        self._idle = False
        self.tail = b""  # set by close(): the stream's last bytes that made no item

    def _one_event(self, chunk: bytes) -> bytes | None:
        """The fast path, when nothing but a partial ``data:`` line is pending: the data of the
        pending bytes + ``chunk`` when they are exactly one whole ``data: ...`` event (the usual
        chunk of an agent that writes each event as it comes, or the second half of one split
        across reads), then taken as the item's raw bytes. Else None (the general way)."""
        body = _one_data_event(self._buf + chunk if self._buf else chunk, self.max_line)
        if body is not None:
            self._buf = b""
        return body

    def _partial(self, chunk: bytes) -> bool:
        """The fast path's other half: ``chunk`` ends no line (a ``data:`` line split across
        reads): kept pending, nothing else to do."""
        if b"\n" in chunk or b"\r" in chunk:
            return False
        whole = self._buf + chunk
        if whole[:6] != b"data: " or len(whole) > self.max_line:
            return False
        self._buf = whole
        return True

    def _settle(self) -> None:
        """After a slow-path feed: may the next chunk take the fast path? Only when nothing is
        pending but (maybe) the beginning of a ``data:`` line."""
        self._idle = (
            self._started
            and not self._has_data
            and not self._cr_pending
            and not self._raw
            and self._event is None
            and self._id is None
            and self._retry is None
            and (not self._buf or self._buf[:6] == b"data: ")
        )

    def _start(self, chunk: bytes) -> bytes:
        """The first bytes: a leading BOM is skipped for parsing, kept in the raw bytes."""
        head = self._buf + chunk
        if len(head) < 3 and BOM.startswith(head):
            self._buf = head  # may still become a BOM
            return b""
        self._buf = b""
        self._started = True
        if head.startswith(BOM):
            self._raw.append(BOM)
            return head[3:]
        return head

    def feed(self, chunk: bytes) -> list[SseItem]:
        if self._idle and chunk:
            pending = self._buf
            body = self._one_event(chunk)
            if body is not None:
                return [SseItem(body, None, raw=pending + chunk if pending else chunk)]
            if self._partial(chunk):
                return []
        self._idle = False  # until _settle says otherwise (an error below leaves it False)
        out = self._feed(chunk)
        self._settle()
        return out

    def _feed(self, chunk: bytes) -> list[SseItem]:
        """:meth:`feed` without the fast path (the state may be anything)."""
        chunk = self._new_bytes(chunk)
        if not chunk:
            return []
        buf = self._buf + chunk if self._buf else chunk
        # the line ends: one kind in the whole buffer (the usual case) splits in C; a mix goes
        # through the regex. Either way each item's raw bytes are one slice of ``buf``.
        if b"\r" not in buf:
            return self._feed_lines(buf, buf.split(b"\n"), 1)
        if buf.count(b"\r\n") == buf.count(b"\r") == buf.count(b"\n") and not buf.endswith(b"\r"):
            return self._feed_lines(buf, buf.split(b"\r\n"), 2)
        return self._feed_mixed(buf, [])

    def _new_bytes(self, chunk: bytes) -> bytes:
        """What of ``chunk`` is still to parse: a leading BOM (the stream's first bytes) and the
        ``\n`` of a ``\r\n`` split across chunks are only kept in the raw bytes."""
        if chunk and not self._started:
            chunk = self._start(chunk)
        if chunk and self._cr_pending:
            self._cr_pending = False
            if chunk[:1] == b"\n":
                self._raw.append(b"\n")
                chunk = chunk[1:]
        return chunk

    def _feed_lines(self, buf: bytes, lines: list[bytes], eol: int) -> list[SseItem]:
        """The items of ``buf`` split at one kind of line end (``eol`` bytes long); the last part
        is the line not ended yet."""
        out: list[SseItem] = []
        raw = self._raw
        rest = lines.pop()
        pos = start = 0
        line_fn = self._line
        data = self._data
        max_line = self.max_line
        for line in lines:
            pos += len(line) + eol
            if line[:6] == b"data: " and len(line) <= max_line:  # the usual line, inline
                data.append(line[6:])
                self._has_data = True
                continue
            item = line_fn(line)
            data = self._data  # a blank line starts a new list
            if item is not None:
                if raw:
                    raw.append(buf[start:pos])
                    item.raw = b"".join(raw)
                    raw.clear()
                else:
                    item.raw = buf[start:pos]
                start = pos
                out.append(item)
        if start < pos:
            raw.append(buf[start:pos])
        self._buf = rest
        if len(rest) > self.max_line:
            raise SseLineTooLong(self.max_line)
        if raw:
            self._check_pending(rest)
        return out

    def _check_pending(self, rest: bytes) -> None:
        """The bytes of the event being read (its lines so far, and the line not ended yet) stay
        within ``max_line``, like each of its lines."""
        if sum(map(len, self._raw)) + len(rest) > self.max_line:
            raise SseLineTooLong(self.max_line, "event")

    def _feed_mixed(self, buf: bytes, out: list[SseItem]) -> list[SseItem]:
        """:meth:`feed` for a buffer with mixed line ends (or a ``\r`` at its end)."""
        raw = self._raw
        pos = start = 0
        line_fn = self._line
        for m in _EOL.finditer(buf):
            end = m.end()
            if end == len(buf) and m.group() == b"\r":
                self._cr_pending = True
            item = line_fn(buf[pos : m.start()])
            pos = end
            if item is not None:
                raw.append(buf[start:pos])
                item.raw = raw[0] if len(raw) == 1 else b"".join(raw)
                raw.clear()
                start = pos
                out.append(item)
        if start < pos:
            raw.append(buf[start:pos])
        self._buf = buf[pos:] if pos else buf
        if len(self._buf) > self.max_line:
            raise SseLineTooLong(self.max_line)
        if raw:
            self._check_pending(self._buf)
        return out

    def feed_into(self, chunk: bytes, out: list[tuple[bytes, str | None]]) -> int:
        """:meth:`feed`, appending each completed event to ``out`` as ``(data, event name)``;
        returns how many comments (keep-alives) the chunk completed. The reader of a long stream
        calls this once per chunk: the usual chunk, one whole ``data:`` event, costs one tuple."""
        if self._idle and chunk:
            one = self._one_event(chunk)
            if one is not None:
                out.append((one, None))
                return 0
            if self._partial(chunk):
                return 0
        comments = 0
        for it in self.feed(chunk):
            if it.comment:
                comments += 1
            else:
                out.append((it.data, it.event))
        return comments

    def close(self) -> list[SseItem]:
        """End of stream. A last line without its line end still counts; an event whose blank
        line never came is returned with ``incomplete=True`` (never dropped); bytes that made no
        item (stray blank lines, a lone ``id:``) come back as an empty comment item, so the
        ``raw`` bytes still add up to the stream."""
        out: list[SseItem] = []
        raw = self._raw
        if not self._started and self._buf:  # one or two bytes, a BOM's beginning
            raw.append(self._buf)
            self._buf = b""
        if self._buf:
            line = self._buf
            self._buf = b""
            raw.append(line)
            item = self._line(line)
            if item is not None:
                item.raw = b"".join(raw)
                raw.clear()
                out.append(item)
        if self._has_data:
            data = self._data[0] if len(self._data) == 1 else b"\n".join(self._data)
            out.append(SseItem(data, self._event, False, self._id, self._retry, True, b"".join(raw)))
            raw.clear()
            self._reset()
        self.tail = b"".join(raw)
        raw.clear()
        self._settle()
        return out

    @property
    def pending(self) -> bool:
        """An event was started (data lines seen) but not dispatched: the stream was cut mid-event."""
        return self._has_data or bool(self._buf)

    def _reset(self) -> None:
        self._data = []
        self._has_data = False
        self._event = None
        self._id = None
        self._retry = None

    def _line(self, line: bytes) -> SseItem | None:
        if len(line) > self.max_line:
            raise SseLineTooLong(self.max_line)
        if not line:
            item = None
            if self._has_data:
                data = self._data[0] if len(self._data) == 1 else b"\n".join(self._data)
                item = SseItem(data, self._event, False, self._id, self._retry)
            self._reset()
            return item
        if line[:1] == b":":
            return SseItem(line[1:].strip(), None, True)
        name, sep, value = line.partition(b":")
        if sep and value[:1] == b" ":
            value = value[1:]
        if name == b"data":
            self._data.append(value)
            self._has_data = True
            if len(value) > self.max_line:
                raise SseLineTooLong(self.max_line)
        elif name == b"event":
            self._event = value.decode("utf-8", "replace") or None
        elif name == b"id":
            if b"\0" not in value:
                self._id = value.decode("utf-8", "replace")
        elif name == b"retry":
            if value.isdigit():
                self._retry = int(value)
        # unknown fields are ignored, as the standard says
        return None
