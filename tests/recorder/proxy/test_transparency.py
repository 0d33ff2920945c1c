"""The proxy is transparent: what its client sees is what the agent answered (docs/design.md, "The
proxy is transparent"). Each answer is compared with the same request sent to the agent directly:
a real a2a-sdk 1.3.0 agent where it can show the behaviour, the proxy routes of the fault agent
(tests/support/fault_agent.py) for what a real agent cannot be made to do."""

from __future__ import annotations

import http.client
import json

import anyio
import httpx
import pytest

from a2a_tape import store
from tests.recorder.proxy.conftest import SettleWatch, running_proxy, send_body
from tests.support.fault_agent import PROXY_SSE_BYTES, make_proxy_fault_app
from tests.support.servers import serve_app

_JSON = {"content-type": "application/json"}
_HOP = {"date", "server", "content-length", "transfer-encoding", "connection"}


@pytest.fixture
def fault_proxy(db_path):
    """(fault agent URL, proxy in front of it)."""
    with serve_app(make_proxy_fault_app()) as url, running_proxy(url, db_path) as proxy:
        yield url, proxy


def _end_to_end(headers: httpx.Headers) -> list[tuple[str, str]]:
    return sorted((k, v) for k, v in headers.multi_items() if k not in _HOP)


# -- answers that are not JSON-RPC -----------------------------------------------------------


def test_non_json_answer_passes_through_with_status_headers_and_body(proxied):
    """a2a-sdk answers GET / with 405 text/plain and ``Allow: POST``: so does the proxy (not a 502)."""
    agent, proxy = proxied
    watch = SettleWatch(proxy.proxy)
    direct = httpx.get(agent.url + "/")
    r = httpx.get(proxy.url + "/")
    assert direct.status_code == 405 and direct.headers["allow"] == "POST"
    assert (r.status_code, r.content) == (direct.status_code, direct.content)
    assert _end_to_end(r.headers) == _end_to_end(direct.headers)
    watch.wait(1)
    (ex,) = proxy.store.exchanges()
    assert ex.status == 405 and ex.outcome == "error" and ex.response_body == direct.content
    assert ex.response_headers["allow"] == "POST"


def test_a_405_of_the_fault_agent_on_post_too(fault_proxy):
    url, proxy = fault_proxy
    body, headers = send_body("hello", stream=False)
    direct = httpx.post(url + "/plain405/", content=body, headers=headers)
    r = httpx.post(proxy.url + "/plain405/", content=body, headers=headers)
    assert (r.status_code, r.headers["allow"], r.text) == (405, "POST", "Method Not Allowed")
    assert _end_to_end(r.headers) == _end_to_end(direct.headers)


def test_the_agent_gets_the_clients_headers_and_only_the_encodings_the_proxy_decodes(fault_proxy):
    """A client that sends almost nothing (the standard library's): the agent sees its headers,
    plus the ``Accept-Encoding`` the proxy asks for because it decodes what it records. No
    ``User-Agent`` or ``Accept`` of the proxy's HTTP library shows up in the client's name."""
    url, proxy = fault_proxy
    body, _ = send_body("hello", stream=False, message_id="m-minimal-client")
    host, port = proxy.url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.request("POST", "/echo/", body=body, headers={"content-type": "application/json", "x-trace": "t-1"})
        seen = json.loads(conn.getresponse().read())["headers"]
    finally:
        conn.close()
    names = [name for name, _ in seen]
    assert "user-agent" not in names and "accept" not in names
    assert ["content-type", "application/json"] in seen and ["x-trace", "t-1"] in seen
    assert {name for name in names} <= {
        "host",
        "content-type",
        "x-trace",
        "content-length",
        "accept-encoding",
        "connection",
    }
    encodings = dict(seen)["accept-encoding"]
    assert "gzip" in encodings and "identity" not in encodings  # ours, not the client's


def test_redirect_passes_through_with_its_location_on_the_proxy(fault_proxy):
    url, proxy = fault_proxy
    watch = SettleWatch(proxy.proxy)
    body, headers = send_body("hello", stream=False)
    r = httpx.post(proxy.url + "/redirect/", content=body, headers=headers)
    assert r.status_code == 301 and r.headers["x-fault"] == "redirect"
    assert r.headers["location"] == proxy.url + "/moved/here?x=1"  # a client following it stays behind us
    body, headers = send_body("hello", stream=False)
    rel = httpx.post(proxy.url + "/redirect-rel/", content=body, headers=headers)
    assert (rel.status_code, rel.headers["location"]) == (302, "/moved/relative")
    watch.wait(2)
    rows = [e for e in proxy.store.exchanges() if e.rpc_method]
    assert [e.status for e in rows] == [301, 302] and all(e.outcome == "ok" for e in rows)
    assert rows[0].response_headers["location"] == url + "/moved/here?x=1"  # as the upstream said it


def test_card_headers_pass_through(sdk_agent, db_path):
    """The card keeps ``ETag`` (a2a-sdk sets one), ``Vary`` and ``Cache-Control``."""
    with running_proxy(sdk_agent.url, db_path) as proxy:
        direct = httpx.get(sdk_agent.url + "/.well-known/agent-card.json")
        r = httpx.get(proxy.url + "/.well-known/agent-card.json")
        assert r.headers["etag"] == direct.headers["etag"]
    with serve_app(make_proxy_fault_app()) as url, running_proxy(url, db_path) as proxy:
        r = httpx.get(proxy.url + "/cardheaders/.well-known/agent-card.json")
        assert r.headers["vary"] == "A2A-Version" and r.headers["cache-control"] == "public, max-age=60"
        assert r.headers["etag"] == 'W/"card-1"'


def test_sse_bytes_reach_the_client_unchanged(fault_proxy):
    """Comments, ``id:`` / ``retry:`` fields, LF and CRLF line ends, multi-line data: byte for byte."""
    url, proxy = fault_proxy
    watch = SettleWatch(proxy.proxy)
    body, headers = send_body("hello")
    with httpx.stream("POST", proxy.url + "/ssefields/", content=body, headers=headers) as r:
        got = b"".join(r.iter_bytes())
        assert r.headers["x-fault"] == "sse-fields"
    assert got == PROXY_SSE_BYTES
    watch.wait(1)
    (ex,) = [e for e in proxy.store.exchanges() if e.rpc_method]
    events = proxy.store.read_exchange(ex.id)
    assert len(events) == 2 and store.decode_item(events[-1].payload).body.state == "completed"
    assert ex.outcome == "closed"


# -- a2a-sdk's own client and raw httpx, directly and through the proxy -------------------------


_MALFORMED = [
    b"{not json",
    b'{"jsonrpc": "2.0", "id": 1}',
    b"[1, 2]",
    b'{"jsonrpc": "2.0", "id": "x-7", "method": "message/send", "params": {"message": {"role": "user"}}}',
    b'{"jsonrpc": "2.0", "id": 9, "method": "no/such/method"}',
    b"\xff\xfe",
]


def _answer(r: httpx.Response) -> tuple[int, bytes, object]:
    rpc_id = (
        json.loads(r.content).get("id", "absent")
        if r.headers.get("content-type", "").startswith("application/json")
        else "not-json"
    )
    return r.status_code, r.content, rpc_id


def test_same_answers_directly_and_through_the_proxy(proxied):
    """Malformed requests (raw httpx), a non-JSON route, and ten texts under one messageId sent by
    a2a-sdk's own client (the TCK's rapid-sequential case): status, body and id compared."""
    agent, proxy = proxied
    for body in _MALFORMED:
        direct = httpx.post(agent.url + "/", content=body, headers=_JSON)
        via = httpx.post(proxy.url + "/", content=body, headers=_JSON)
        assert _answer(via) == _answer(direct), body
    direct, via = httpx.get(agent.url + "/"), httpx.get(proxy.url + "/")
    assert _answer(via) == _answer(direct)

    async def rapid(base: str) -> list[tuple[int, bool, str, str]]:
        from a2a.client import ClientConfig, ClientFactory
        from a2a.types import Message, Part, Role, SendMessageRequest

        seen: list[tuple[int, bool]] = []

        async def hook(response: httpx.Response) -> None:
            if response.request.method == "POST":
                await response.aread()
                asked = json.loads(response.request.content).get("id")  # the client's ids are random
                seen.append((response.status_code, json.loads(response.content).get("id") == asked))

        async with httpx.AsyncClient(event_hooks={"response": [hook]}) as hc:
            client = await ClientFactory(ClientConfig(httpx_client=hc, streaming=False)).create_from_url(base)
            outcomes = []
            for i in range(10):
                msg = Message(message_id="m-rapid", role=Role.ROLE_USER, parts=[Part(text=f"text {i}")])
                async for ev in client.send_message(SendMessageRequest(message=msg)):
                    kind = ev.WhichOneof("payload")
                    outcomes.append((kind, str(ev.task.status.state) if kind == "task" else ""))
        return [(*s, *o) for s, o in zip(seen, outcomes, strict=True)]

    direct_run = anyio.run(rapid, agent.url)
    executions = agent.executor.executions
    via_run = anyio.run(rapid, proxy.url)
    assert via_run == direct_run and len(via_run) == 10
    assert agent.executor.executions == 2 * executions == 20  # the proxy refused none of the ten
