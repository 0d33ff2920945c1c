"""Bytes as received: a header value that is not ASCII crosses the proxy as the client (or the
agent) sent it. Before, a send got 502 "UnicodeEncodeError" and the card HTTP 500 with a traceback,
though the agent itself accepts such a header. And a request that provably never left the proxy
releases its idempotency key."""

from __future__ import annotations

import anyio
import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from a2a_tape import store
from a2a_tape.recorder.proxy.plumbing import Departure
from tests.recorder.proxy.conftest import read_sse, running_proxy, send_body
from tests.support.fault_agent import make_proxy_fault_app
from tests.support.servers import serve_app

UTF8 = "café ☕ naïve".encode()  # what a client sends as a header value, byte for byte
LATIN1 = b"gr\xfc\xdfe"  # not UTF-8 either: still passed on as it came


@pytest.mark.parametrize("value", [UTF8, LATIN1], ids=["utf-8", "latin-1"])
@pytest.mark.parametrize("stream", [False, True], ids=["send", "stream"])
def test_a_real_agent_answers_a_request_with_a_header_that_is_not_ascii(sdk_agent, db_path, value, stream):
    with running_proxy(sdk_agent.url, db_path) as proxy:
        body, h = send_body("hello", stream=stream, message_id=f"m-bytes-{stream}")
        headers = [*((k.encode(), v.encode()) for k, v in h.items()), (b"x-user-name", value)]
        with httpx.Client() as c:
            req = c.build_request("POST", proxy.url + "/", content=body, headers=headers)
            r = c.send(req, stream=True)
            try:
                assert r.status_code == 200, r.read()
                items = read_sse(r) if stream else [r.read()]
            finally:
                r.close()
        card = httpx.get(proxy.url + "/.well-known/agent-card.json", headers=[(b"x-user-name", value)])
    assert isinstance(store.decode_item(items[-1]).body, (store.TaskSnapshot, store.StatusUpdate))
    assert card.status_code == 200 and card.json()["name"] == "chunk-agent"
    assert sdk_agent.executor.executions == 1


def test_the_agent_gets_the_exact_bytes(db_path):
    with serve_app(make_proxy_fault_app()) as url, running_proxy(url, db_path) as proxy:
        r = httpx.post(proxy.url + "/echo/", content=b"{}", headers=[(b"x-user-name", UTF8), (b"x-other", LATIN1)])
    seen = {k: v.encode("latin-1") for k, v in r.json()["headers"]}
    assert seen["x-user-name"] == UTF8 and seen["x-other"] == LATIN1


def _agent_with_header_bytes() -> Starlette:
    """Answers whose headers hold bytes that are not ASCII (a card, and a JSON-RPC answer)."""

    async def answer(request: Request) -> Response:
        resp = Response(b'{"name":"bytes-card","capabilities":{}}', media_type="application/json")
        resp.raw_headers.append((b"x-served-by", UTF8))
        resp.raw_headers.append((b"x-legacy", LATIN1))
        return resp

    return Starlette(
        routes=[Route("/.well-known/agent-card.json", answer), Route("/{p:path}", answer, methods=["POST"])]
    )


@pytest.mark.parametrize("method, path", [("GET", "/.well-known/agent-card.json"), ("POST", "/rpc")])
def test_the_client_gets_the_agents_exact_header_bytes(db_path, method, path):
    with serve_app(_agent_with_header_bytes()) as url, running_proxy(url, db_path) as proxy:
        with httpx.Client() as c:
            r = c.request(method, proxy.url + path, content=b"{}" if method == "POST" else None)
    raw = dict(r.headers.raw)
    assert r.status_code == 200
    assert raw[b"x-served-by"] == UTF8 and raw[b"x-legacy"] == LATIN1


# -- a request that provably never left ------------------------------------------------------


async def _departure(url: str, headers: list[tuple[bytes, bytes]]) -> tuple[Departure, BaseException | None]:
    departure = Departure()
    async with httpx.AsyncClient() as c:
        req = c.build_request("POST", url, content=b"{}", headers=headers)
        req.extensions["trace"] = departure.trace
        try:
            await c.send(req)
        except httpx.HTTPError as exc:
            return departure, exc
    return departure, None


@pytest.mark.parametrize(
    "headers, left",
    [
        ([(b"x-ok", UTF8)], True),  # sent (and answered)
        ([(b"x-bad", b"a\r\nInjected: yes")], False),  # h11 refuses to write that head: nothing left
        ([(b"bad name", b"v")], False),
    ],
)
def test_departure_tells_whether_a_request_may_have_left(headers, left):
    with serve_app(make_proxy_fault_app()) as url:
        departure, error = anyio.run(_departure, url + "/echo/", headers)
    assert departure.left is left, error
    assert (error is None) is left
