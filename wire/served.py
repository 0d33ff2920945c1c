"""What our servers (the proxy, serve, the push receiver) read from a client and send to one, without an
HTTP client: a request body up to a limit, and recorded headers as bytes fit to send.

Apart from :mod:`wire.http_client` so that a server that calls no agent (``serve`` without a recording mode)
never loads httpx (~70 ms of its start).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping

from a2a_tape.store.headers import header_problem

MAX_REQUEST = 10 * 1024 * 1024
"""Bytes of a request body our servers take (the proxy's ``--max-body`` default, serve's limit)."""


async def up_to(chunks: AsyncIterator[bytes], declared: str | None, limit: int) -> bytes | None:
    """All of ``chunks``, or None as soon as ``declared`` (a Content-Length of these very bytes)
    or what arrived is longer than ``limit``."""
    if declared and declared.isdigit() and int(declared) > limit:
        return None
    buf = bytearray()
    async for chunk in chunks:
        buf += chunk
        if len(buf) > limit:
            return None
    return bytes(buf)


async def read_request(chunks: AsyncIterator[bytes], declared: str | None, limit: int = MAX_REQUEST) -> bytes | None:
    """A request body our server reads (``request.stream()``, its ``Content-Length``), or None
    as soon as it says or shows it is longer than ``limit``: the caller answers 413."""
    return await up_to(chunks, declared, limit)


def sendable(headers: Mapping[str, str], skip: Iterable[str] = ()) -> list[tuple[bytes, bytes]]:
    """Recorded headers as bytes fit to send: one that cannot be an HTTP header (a name that is not
    a token, a value holding CR, LF or NUL: a hostile tape, or a log written by hand) is dropped,
    never sent and never a traceback; a value is sent latin-1 when it can be (as it was read), else
    as UTF-8. ``skip``: lower-case names the server sets itself."""
    drop = set(skip)
    out = []
    for name, value in headers.items():
        if name.lower() in drop or header_problem(name, value) is not None:
            continue
        try:
            raw = value.encode("latin-1")
        except UnicodeEncodeError:
            raw = value.encode("utf-8", "surrogateescape")
        out.append((name.lower().encode("ascii"), raw))
    return out
