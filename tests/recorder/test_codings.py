"""Compressed responses are recorded decoded (RecordingTransport), whatever the chunking; a
coding we cannot undo, or bytes that do not decode, end the exchange as an error saying why,
and the client still gets every byte."""

from __future__ import annotations

import gzip
import zlib

import anyio
import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs
from starlette.applications import Starlette
from starlette.responses import StreamingResponse
from starlette.routing import Route

from a2a_tape import store
from a2a_tape.recorder.transport import RecordingTransport
from a2a_tape.wire.codings import Decoding, DecodingError
from tests.recorder.conftest import FaultAgent
from tests.replay._record import headers_for, request_body
from tests.support.servers import serve_app

BODY = b"".join(b'data: {"jsonrpc":"2.0","id":1,"result":{"n":%d}}\r\n\r\n' % i for i in range(200))


def _deflate(data: bytes, raw: bool = False) -> bytes:
    z = zlib.compressobj(wbits=-zlib.MAX_WBITS if raw else zlib.MAX_WBITS)
    return z.compress(data) + z.flush()


def _decode_in(chunks: list[bytes], header: str) -> bytes:
    d = Decoding(header)
    assert d.unsupported is None
    return b"".join(d.decode(c) for c in chunks) + d.flush()


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    bounds = [0, *sorted({c % (len(data) + 1) for c in cuts}), len(data)]
    return [data[a:b] for a, b in zip(bounds, bounds[1:])]


@settings(max_examples=50, deadline=None)
@given(hs.lists(hs.integers(0, 10_000), max_size=8))
def test_any_chunking_decodes_to_the_same_bytes(cuts):
    for header, encoded in [
        ("gzip", gzip.compress(BODY)),
        ("x-gzip", gzip.compress(BODY)),
        ("deflate", _deflate(BODY)),
        ("deflate", _deflate(BODY, raw=True)),  # raw deflate, as many servers send it
        ("deflate, gzip", gzip.compress(_deflate(BODY))),  # applied in that order: undone backwards
        ("identity", BODY),
        ("", BODY),
    ]:
        assert _decode_in(_split(encoded, cuts), header) == BODY, header


def test_codings_we_cannot_undo_say_why():
    assert "x-weird" in Decoding("x-weird").unsupported
    for coding, module, hint in (("br", "brotli", "install brotli"), ("zstd", "zstandard", "install zstandard")):
        try:
            __import__(module)
        except ImportError:
            assert hint in Decoding(f"gzip, {coding}").unsupported
        else:
            assert Decoding(coding).unsupported is None


def test_bytes_that_do_not_decode_raise_a_decoding_error():
    d = Decoding("gzip")
    with pytest.raises(DecodingError):
        d.decode(b"this is not gzip at all" * 4)


def test_transport_records_a_gzip_stream_decoded(fault_agent: FaultAgent, db_path):
    async def go() -> bytes:
        async with httpx.AsyncClient(transport=RecordingTransport(db_path)) as http:
            r = await http.post(
                fault_agent.url("gzip") + "/",
                content=request_body("stream", "1.0", text="go"),
                headers=headers_for("1.0"),
            )
            return r.content

    content = anyio.run(go)
    assert content.count(b"chunk-") == 4  # the client decoded it too
    with store.open_store(db_path) as st:
        kinds = [store.decode_item(e.payload).kind for e in st.read_from(0)]
        (ex,) = [x for x in st.exchanges() if x.rpc_method == "SendStreamingMessage"]
    assert "undecodable" not in kinds and kinds.count("artifact") == 4
    assert ex.outcome == "ok"


# A hand-written upstream (no agent sends an unknown coding or corrupt gzip on demand).
def _odd_upstream():
    async def weird(request):
        async def body():
            yield b"\x00\x01 whatever this coding makes of it"

        return StreamingResponse(body(), media_type="text/event-stream", headers={"content-encoding": "x-weird"})

    async def broken(request):
        good = gzip.compress(BODY)

        async def body():
            yield good[: len(good) // 2]
            yield b"garbage in the middle of the gzip stream" * 8

        return StreamingResponse(body(), media_type="text/event-stream", headers={"content-encoding": "gzip"})

    return Starlette(routes=[Route("/weird", weird, methods=["POST"]), Route("/broken", broken, methods=["POST"])])


def test_a_coding_we_cannot_undo_ends_the_exchange_as_an_error(db_path):
    with serve_app(_odd_upstream()) as url:
        transport = RecordingTransport(db_path)
        with httpx.Client(transport=transport) as http:
            r = http.post(url + "/weird", content=request_body("stream", "1.0", text="go"), headers=headers_for("1.0"))
            assert r.content == b"\x00\x01 whatever this coding makes of it"  # passed on untouched
            with pytest.raises(httpx.DecodingError):  # the client cannot decode it either
                http.post(url + "/broken", content=request_body("stream", "1.0", text="go"), headers=headers_for("1.0"))
        transport.close()
    with store.open_store(db_path) as st:
        weird, broken = [x for x in st.exchanges() if x.rpc_method == "SendStreamingMessage"]
        assert st.count_events() >= 1  # what decoded before the garbage is kept
    assert weird.outcome == "error" and "x-weird" in weird.error
    assert broken.outcome in ("error", "dropped") and broken.error


def test_body_chunks_reads_the_stream_as_aiter_raw_would(db_path):
    """``body_chunks`` iterates the response's byte stream itself when there is no content
    coding: a real server's streamed body arrives whole, in order, through it; a body already
    read is refused as ``aiter_raw`` refuses it (``StreamConsumed``), not read as empty."""
    from a2a_tape.wire.http_client import body_chunks

    async def rpc(request):
        async def chunks():
            for i in range(200):
                yield BODY[i * 50 : (i + 1) * 50]
            yield BODY[200 * 50 :]

        return StreamingResponse(chunks(), media_type="text/event-stream")

    app = Starlette(routes=[Route("/", rpc, methods=["POST"])])

    async def main(base: str) -> None:
        async with httpx.AsyncClient() as http:
            async with http.stream("POST", base + "/", content=b"{}") as resp:
                got = b"".join([c async for c in body_chunks(resp)])
                assert got == BODY and resp.is_stream_consumed
            async with http.stream("POST", base + "/", content=b"{}") as resp:
                await resp.aread()
                with pytest.raises(httpx.StreamConsumed):
                    [c async for c in body_chunks(resp)]

    with serve_app(app) as base:
        anyio.run(main, base)
