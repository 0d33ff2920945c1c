"""Content codings of a recorded response, undone chunk by chunk before the SSE reader.

A client asks for compressed bodies (httpx sends ``Accept-Encoding: gzip, deflate``, plus ``br``
and ``zstd`` when their modules are installed), and an agent or the reverse proxy in front of it
may use them. The recorder must record the decoded items, whatever the client decodes itself:
gzip and deflate always; br with ``brotli`` (or ``brotlicffi``) installed; zstd with
``zstandard``; several codings in a row, undone in reverse order. A coding it cannot undo, or
bytes that do not decode, make :class:`Decoding` say why instead of handing on garbage.

Bounded whatever the peer sends (docs/security.md): at most :data:`MAX_CODINGS` layers, and every
layer's decoded output at most :data:`DECODED_FLOOR` bytes plus :data:`MAX_RATIO` times the coded
bytes read so far. One layer of gzip/deflate cannot expand past ~1032:1, so the bound never
stops an honest body of one coding; it stops a body coded twice to multiply that (543 bytes of
``gzip, gzip`` would be ~700 MB) within the floor. zlib layers are decoded with ``max_length``, so
no single call holds more than the bound either.
"""

from __future__ import annotations

import importlib
import zlib
from collections.abc import Callable
from types import ModuleType
from typing import Protocol

from a2a_tape.store.errors import A2ATapeError

MAX_CODINGS = 2
"""Content codings on one body, at most (``gzip, gzip`` is two)."""
DECODED_FLOOR = 16 * 1024 * 1024
"""Decoded bytes every layer may produce whatever the ratio (a small body's floor)."""
MAX_RATIO = 1100
"""Decoded bytes per coded byte past the floor, per layer (one gzip layer reaches ~1032)."""


class DecodingError(A2ATapeError):
    """The body does not decode with the coding its headers name (or decodes past the bound)."""


def _too_large() -> DecodingError:
    return DecodingError(
        f"the body decodes past its bound ({DECODED_FLOOR} bytes plus {MAX_RATIO} per coded byte): not read further"
    )


class _Step(Protocol):
    """One coding, undone incrementally."""

    def decode(self, data: bytes, room: int) -> bytes: ...

    def flush(self, room: int) -> bytes: ...


class _Zlib:
    def __init__(self, wbits: int, deflate: bool = False) -> None:
        self._obj = zlib.decompressobj(wbits)
        # "deflate" is zlib-wrapped by the spec and raw by many servers: the first two bytes
        # (a zlib header, or not) decide, so they are held until both are there
        self._head: bytes | None = b"" if deflate else None

    def decode(self, data: bytes, room: int) -> bytes:
        """At most ``room`` decoded bytes (:class:`DecodingError` past it)."""
        if self._head is not None:
            data = self._head + data
            if len(data) < 2:
                self._head = data
                return b""
            self._head = None
            if (data[0] * 256 + data[1]) % 31 or data[0] & 0x0F != 8:  # not a zlib header
                self._obj = zlib.decompressobj(-zlib.MAX_WBITS)
        try:
            out = self._obj.decompress(data, room + 1)
        except zlib.error as exc:
            raise DecodingError(str(exc)) from None
        if len(out) > room:
            raise _too_large()
        return out

    def flush(self, room: int) -> bytes:
        if self._head:
            raise DecodingError("the body ended inside its first two bytes")
        try:
            out = self._obj.decompress(b"", room + 1) + self._obj.flush()
        except zlib.error as exc:
            raise DecodingError(str(exc)) from None
        if len(out) > room:
            raise _too_large()
        return out


class _Brotli:
    def __init__(self, module: ModuleType) -> None:
        self._obj = module.Decompressor()
        self._error: type[BaseException] = getattr(module, "error", Exception)
        # brotli names it process, brotlicffi decompress
        self._process: Callable[[bytes], bytes] = getattr(self._obj, "process", None) or self._obj.decompress

    def decode(self, data: bytes, room: int) -> bytes:
        try:
            out = self._process(data)
        except self._error as exc:
            raise DecodingError(str(exc)) from None
        if len(out) > room:
            raise _too_large()
        return out

    def flush(self, room: int) -> bytes:
        return b""


class _Zstd:
    def __init__(self, module: ModuleType) -> None:
        self._obj = module.ZstdDecompressor().decompressobj()
        self._error: type[BaseException] = getattr(module, "ZstdError", Exception)

    def decode(self, data: bytes, room: int) -> bytes:
        try:
            out: bytes = self._obj.decompress(data)
        except self._error as exc:
            raise DecodingError(str(exc)) from None
        if len(out) > room:
            raise _too_large()
        return out

    def flush(self, room: int) -> bytes:
        return b""


def _brotli() -> _Brotli | None:
    for name in ("brotli", "brotlicffi"):
        try:
            return _Brotli(importlib.import_module(name))
        except ImportError:
            continue
    return None


def _zstd() -> _Zstd | None:
    try:
        module = importlib.import_module("zstandard")  # an optional extra, imported by name like brotli
    except ImportError:
        return None
    return _Zstd(module)


_MAKERS: dict[str, Callable[[], _Step | None]] = {
    "gzip": lambda: _Zlib(16 + zlib.MAX_WBITS),
    "x-gzip": lambda: _Zlib(16 + zlib.MAX_WBITS),
    "deflate": lambda: _Zlib(zlib.MAX_WBITS, deflate=True),
    "br": _brotli,
    "zstd": _zstd,
}
_HINTS = {"br": " (install brotli)", "zstd": " (install zstandard)"}


class Decoding:
    """The codings of one response (its ``Content-Encoding``); :attr:`unsupported` says why
    it cannot be undone here (None: it can)."""

    def __init__(self, header: str) -> None:
        self.steps: list[_Step] = []
        self.unsupported: str | None = None
        self.coded = 0  # bytes read off the wire so far
        self.produced: list[int] = []  # each step's decoded bytes so far
        codings = [c.strip().lower() for c in header.split(",") if c.strip() and c.strip().lower() != "identity"]
        if len(codings) > MAX_CODINGS:
            self.unsupported = f"{len(codings)} content codings on one body: at most {MAX_CODINGS} are decoded"
            return
        for coding in reversed(codings):  # the last coding applied is undone first
            if coding == "identity":
                continue
            make = _MAKERS.get(coding)
            step = make() if make is not None else None
            if step is None:
                self.unsupported = f"content-encoding {coding!r} cannot be decoded here{_HINTS.get(coding, '')}"
                self.steps = []
                return
            self.steps.append(step)
        self.produced = [0] * len(self.steps)

    def _room(self, k: int) -> int:
        return DECODED_FLOOR + MAX_RATIO * self.coded - self.produced[k]

    def decode(self, data: bytes) -> bytes:
        self.coded += len(data)
        for k, step in enumerate(self.steps):
            data = step.decode(data, self._room(k))
            self.produced[k] += len(data)
        return data

    def flush(self) -> bytes:
        """What the codings still hold at the end of the body (each step's rest goes through the
        steps after it before they are flushed in turn)."""
        data = b""
        for k, step in enumerate(self.steps):
            if data:
                data = step.decode(data, self._room(k))
                self.produced[k] += len(data)
            rest = step.flush(self._room(k))
            self.produced[k] += len(rest)
            data += rest
        return data
