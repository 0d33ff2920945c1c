"""Content codings of a recorded response, undone chunk by chunk before the SSE reader.

A client asks for compressed bodies (httpx sends ``Accept-Encoding: gzip, deflate``, plus ``br``
and ``zstd`` when their modules are installed), and an agent or the reverse proxy in front of it
may use them. The recorder must record the decoded items, whatever the client decodes itself:
gzip and deflate always; br with ``brotli`` (or ``brotlicffi``) installed; zstd with
``zstandard``; several codings in a row, undone in reverse order. A coding it cannot undo, or
bytes that do not decode, make :class:`Decoding` say why instead of handing on garbage.
"""

from __future__ import annotations

import importlib
import zlib
from collections.abc import Callable
from types import ModuleType
from typing import Protocol

from a2a_tape.store.errors import A2ATapeError


class DecodingError(A2ATapeError):
    """The body does not decode with the coding its headers name."""


class _Step(Protocol):
    """One coding, undone incrementally."""

    def decode(self, data: bytes) -> bytes: ...

    def flush(self) -> bytes: ...


class _Zlib:
    def __init__(self, wbits: int, deflate: bool = False) -> None:
        self._obj = zlib.decompressobj(wbits)
        # "deflate" is zlib-wrapped by the spec and raw by many servers: the first two bytes
        # (a zlib header, or not) decide, so they are held until both are there
        self._head: bytes | None = b"" if deflate else None

    def decode(self, data: bytes) -> bytes:
        if self._head is not None:
            data = self._head + data
            if len(data) < 2:
                self._head = data
                return b""
            self._head = None
            if (data[0] * 256 + data[1]) % 31 or data[0] & 0x0F != 8:  # not a zlib header
                self._obj = zlib.decompressobj(-zlib.MAX_WBITS)
        try:
            return self._obj.decompress(data)
        except zlib.error as exc:
            raise DecodingError(str(exc)) from None

    def flush(self) -> bytes:
        if self._head:
            raise DecodingError("the body ended inside its first two bytes")
        try:
            return self._obj.flush()
        except zlib.error as exc:
            raise DecodingError(str(exc)) from None


class _Brotli:
    def __init__(self, module: ModuleType) -> None:
        self._obj = module.Decompressor()
        self._error: type[BaseException] = getattr(module, "error", Exception)
        # brotli names it process, brotlicffi decompress
        self._process: Callable[[bytes], bytes] = getattr(self._obj, "process", None) or self._obj.decompress

    def decode(self, data: bytes) -> bytes:
        try:
            return self._process(data)
        except self._error as exc:
            raise DecodingError(str(exc)) from None

    def flush(self) -> bytes:
        return b""


class _Zstd:
    def __init__(self, module: ModuleType) -> None:
        self._obj = module.ZstdDecompressor().decompressobj()
        self._error: type[BaseException] = getattr(module, "ZstdError", Exception)

    def decode(self, data: bytes) -> bytes:
        try:
            out: bytes = self._obj.decompress(data)
            return out
        except self._error as exc:
            raise DecodingError(str(exc)) from None

    def flush(self) -> bytes:
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
        codings = [c.strip().lower() for c in header.split(",") if c.strip()]
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

    def decode(self, data: bytes) -> bytes:
        for step in self.steps:
            data = step.decode(data)
        return data

    def flush(self) -> bytes:
        """What the codings still hold at the end of the body (each step's rest goes through the
        steps after it before they are flushed in turn)."""
        data = b""
        for step in self.steps:
            if data:
                data = step.decode(data)
            data += step.flush()
        return data
