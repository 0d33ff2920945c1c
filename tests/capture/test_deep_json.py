"""A client's request nested deeper than the interpreter's recursion limit (5,000 levels): msgspec
raised RecursionError on it, which no caller expected, and the request broke inside a2a-tape. Now
it is JSON a2a-tape cannot read (``store.json_values.TOO_DEEP``): RecordingTransport passes it on
untouched, the proxy forwards it unread (the agent answers it, and that is recorded), serve
answers a JSON-RPC parse error. (An agent's item nested as deep is a byte mode of the promise
matrix, tests/capture/test_promises.py: ``deep``.)"""

from __future__ import annotations

import anyio
import httpx
import msgspec
import pytest

from a2a_tape import store
from a2a_tape.store.json_values import decode_json
from a2a_tape.store.redact import build_redactor
from tests.capture.drivers import HEADERS, _proxy
from tests.support.fault_agent import DEPTH, RawFaultAgent
from tests.support.servers import serve_app

DEEP_REQUEST = (
    b'{"jsonrpc":"2.0","id":"d-1","method":"message/stream","params":{"message":{"kind":"message",'
    b'"messageId":"m-deep","role":"user","parts":[{"kind":"text","text":"hi"}],"metadata":{"deep":'
    + b"[" * DEPTH
    + b"]" * DEPTH
    + b"}}}}"
)


def _readable() -> bool:
    """Whether this interpreter reads the request at all: Python 3.13's C recursion guard lets msgspec
    decode it; on 3.11 and 3.12 it is too deep. Either way nothing breaks; what is recorded follows."""
    try:
        decode_json(DEEP_REQUEST)
    except msgspec.DecodeError:
        return False
    return True


READABLE = _readable()


def _post(url: str, transport: httpx.BaseTransport | None = None) -> httpx.Response:
    with httpx.Client(transport=transport, timeout=30) as http:
        resp = http.post(url, content=DEEP_REQUEST, headers=HEADERS)
        resp.read()
        return resp


@pytest.mark.parametrize("path", ["transport-sync", "transport-async", "proxy", "serve"])
def test_a_request_nested_too_deep_breaks_nothing(raw_agent, path, workdir):
    base, agent = raw_agent
    db = workdir / "tape.db"
    redactor = build_redactor(directory=workdir)  # JSON paths configured: the request is read for them
    if path == "transport-sync":
        from a2a_tape.recorder.transport import RecordingTransport

        resp = _post(base + "/plain/", RecordingTransport(db, redactor=redactor))
        assert resp.status_code == 200 and resp.content == agent.sent("plain")
    elif path == "transport-async":
        from a2a_tape.recorder.transport import RecordingTransport

        async def call() -> httpx.Response:
            async with httpx.AsyncClient(transport=RecordingTransport(db, redactor=redactor), timeout=30) as http:
                r = await http.post(base + "/plain/", content=DEEP_REQUEST, headers=HEADERS)
                await r.aread()
                return r

        resp = anyio.run(call)
        assert resp.status_code == 200 and resp.content == agent.sent("plain")
    elif path == "proxy":
        with serve_app(RawFaultAgent().root_app("plain")) as root, _proxy(root, db, workdir) as url:
            resp = _post(url + "/")
        assert resp.status_code == 200 and resp.content == agent.sent("plain")
        with store.open_store(db) as st:
            (ex,) = st.exchanges()  # recorded; the request unread where too deep (not ours to judge)
            assert ex.rpc_method == ("message/stream" if READABLE else None) and ex.outcome == "closed"
            assert len(st.read_exchange(ex.id)) == 3
    else:
        from a2a_tape.replay.serve.engine import ReplayEngine
        from a2a_tape.replay.serve.library import Library
        from a2a_tape.replay.serve.server import create_app

        library = Library.open(str(db), create=True)
        try:
            engine = ReplayEngine(library, record_mode="all", upstream=base + "/plain", redactor=redactor)
            with serve_app(create_app(engine)) as url:
                resp = _post(url + "/")
        finally:
            library.close()
        if READABLE:  # an ordinary request here: recorded upstream and answered as the agent did
            assert resp.status_code == 200 and resp.content == agent.sent("plain"), resp.text
        else:
            assert resp.status_code == 200 and resp.json()["error"]["code"] == -32700, resp.text
