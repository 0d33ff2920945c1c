"""An incremental Server-Sent Events reader that works on bytes.

Every reader of a live stream uses it: the recorder, the proxy, startup recovery and the
replay server's recording modes. Why our own and not httpx-sse: we must keep the exact bytes
of each ``data:`` payload (invalid UTF-8 included), see keep-alive comments (they matter to
stall detection but are not progress), hand over every item as soon as its blank line arrives
(never hold the stream back), and refuse a line that grows past a limit instead of eating
memory.

Feed it chunks as they come off the socket; ``feed`` returns the items the chunk completed,
in order. Line endings may be ``\\n``, ``\\r\\n`` or ``\\r``, split anywhere across chunks.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import A2ATapeError

DEFAULT_MAX_LINE = 16 * 1024 * 1024


class SseLineTooLong(A2ATapeError):
    """A line (or one event's data) grew past the configured limit."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"an SSE line is longer than the {limit}-byte limit")
        self.limit = limit


@dataclass(slots=True)
class SseItem:
    """One dispatched SSE event (``data`` is the exact payload bytes) or one comment line."""

    data: bytes
    event: str | None = None  # the ``event:`` name, None when absent (i.e. "message")
    comment: bool = False  # a ``:`` line (keep-alive); ``data`` is its text


class SseParser:
    __slots__ = ("max_line", "_buf", "_data", "_event", "_cr_pending", "_has_data")

    def __init__(self, max_line: int = DEFAULT_MAX_LINE) -> None:
        self.max_line = max_line
        self._buf = b""
        self._data: list[bytes] = []
        self._has_data = False
        self._event: str | None = None
        self._cr_pending = False  # the last chunk ended in "\r": a "\n" may follow

    def _one_event(self, chunk: bytes) -> bytes | None:
        """The data of ``chunk`` when it is exactly one whole ``data: ...`` event and nothing is
        pending (the usual chunk of an agent that writes each event as it comes), else None."""
        if (
            not self._buf
            and not self._has_data
            and not self._cr_pending
            and self._event is None
            and chunk.startswith(b"data: ")
            and len(chunk) <= self.max_line
        ):
            if chunk.endswith(b"\r\n\r\n"):
                body = chunk[6:-4]
            elif chunk.endswith(b"\n\n") and not chunk.endswith(b"\r\n\n"):
                body = chunk[6:-2]
            else:
                return None
            if b"\n" not in body and b"\r" not in body:
                return body
        return None

    def feed(self, chunk: bytes) -> list[SseItem]:
        if not chunk:
            return []
        body = self._one_event(chunk)
        if body is not None:
            return [SseItem(body, None)]
        if self._cr_pending:
            self._cr_pending = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        buf = self._buf + chunk if self._buf else chunk
        out: list[SseItem] = []
        if b"\r" in buf:
            if buf.endswith(b"\r"):
                self._cr_pending = True
            buf = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lines = buf.split(b"\n")
        self._buf = lines.pop()
        if len(self._buf) > self.max_line:
            raise SseLineTooLong(self.max_line)
        for line in lines:
            self._line(line, out)
        return out

    def feed_into(self, chunk: bytes, out: list[tuple[bytes, str | None]]) -> int:
        """:meth:`feed`, appending each completed event to ``out`` as ``(data, event name)``;
        returns how many comments (keep-alives) the chunk completed. The reader of a long stream
        calls this once per chunk: the usual chunk, one whole ``data:`` event, costs one tuple."""
        body = self._one_event(chunk)
        if body is not None:
            out.append((body, None))
            return 0
        comments = 0
        for it in self.feed(chunk):
            if it.comment:
                comments += 1
            else:
                out.append((it.data, it.event))
        return comments

    def close(self) -> list[SseItem]:
        """End of stream: a last line without its newline still counts; an unfinished event does not."""
        out: list[SseItem] = []
        if self._buf:
            self._line(self._buf, out)
            self._buf = b""
        return out

    @property
    def pending(self) -> bool:
        """An event was started (data lines seen) but not dispatched: the stream was cut mid-event."""
        return self._has_data or bool(self._buf)

    def _line(self, line: bytes, out: list[SseItem]) -> None:
        if len(line) > self.max_line:
            raise SseLineTooLong(self.max_line)
        if not line:
            if self._has_data:
                data = self._data[0] if len(self._data) == 1 else b"\n".join(self._data)
                out.append(SseItem(data, self._event))
            self._data = []
            self._has_data = False
            self._event = None
            return
        if line[:1] == b":":
            out.append(SseItem(line[1:].strip(), None, True))
            return
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
        # id:, retry: and unknown fields are ignored (A2A sends none of them)
