"""Bad input on either side of the proxy: a clear JSON-RPC or HTTP error, no traceback, nothing
recorded lost."""

from __future__ import annotations

import httpx
import pytest
from starlette.applications import Starlette
from starlette.responses import HTMLResponse
from starlette.routing import Route
from typer.testing import CliRunner

from a2a_tape import store
from a2a_tape.cli import app
from tests.recorder.proxy.conftest import SettleWatch, read_sse, running_proxy, send_body
from tests.support.servers import closed_port, serve_app


def broken_upstream(status: int):
    """A hand-written fake: a real A2A agent cannot be made to answer an HTML page on demand.
    It serves an HTML page (with ``status``) for everything, like a misconfigured gateway."""

    async def page(request):
        return HTMLResponse("<html><body><h1>Bad Gateway</h1></body></html>", status_code=status)

    return Starlette(routes=[Route("/{p:path}", page, methods=["GET", "POST"])])


def _error(r: httpx.Response) -> store.ErrorItem:
    item = store.decode_item(r.content)
    assert isinstance(item.body, store.ErrorItem), r.content
    return item.body


def test_upstream_down_is_a_json_rpc_error_and_the_key_is_released(db_path):
    with running_proxy(f"http://127.0.0.1:{closed_port()}", db_path) as proxy:
        watch = SettleWatch(proxy.proxy)
        body, headers = send_body("hello", stream=True, message_id="m-down")
        r = httpx.post(proxy.url + "/", content=body, headers=headers)
        assert r.status_code == 502
        assert "upstream agent unreachable" in _error(r).message
        watch.wait(1)
        # the request never reached an agent: a retry with the same messageId is not refused
        r2 = httpx.post(proxy.url + "/", content=body, headers=headers)
        assert "upstream agent unreachable" in _error(r2).message
        watch.wait(2)
        rows = [e for e in proxy.store.exchanges() if e.rpc_method]
        assert [e.outcome for e in rows] == ["error", "error"]
        card = httpx.get(proxy.url + "/.well-known/agent-card.json")
        assert card.status_code == 502 and "unreachable" in _error(card).message


@pytest.mark.parametrize("status", [200, 500])
def test_upstream_html_page_passes_through_and_the_row_says_why(db_path, status):
    """Not ours to replace: the client gets the page as the upstream sent it; the row explains it."""
    with serve_app(broken_upstream(status)) as url, running_proxy(url, db_path) as proxy:
        watch = SettleWatch(proxy.proxy)
        body, headers = send_body("hello", stream=False)
        direct = httpx.post(url + "/", content=body, headers=headers)
        r = httpx.post(proxy.url + "/", content=body, headers=headers)
        assert (r.status_code, r.headers["content-type"], r.content) == (
            direct.status_code,
            direct.headers["content-type"],
            direct.content,
        )
        watch.wait(1)
        ex = [e for e in proxy.store.exchanges() if e.rpc_method][0]
        assert ex.status == status and ex.outcome == "error"
        assert ("HTML" in ex.error) or ("HTTP 500" in ex.error)
        assert b"Bad Gateway" in ex.response_body  # what the upstream said is kept for inspection


def test_upstream_json_rpc_error_passes_through(proxied):
    agent, proxy = proxied
    body, headers = send_body("hello", stream=False)
    r = httpx.post(proxy.url + "/", content=body.replace(b"message/send", b"no/such/method"), headers=headers)
    assert _error(r).code == -32601  # the agent's own answer, not ours


@pytest.mark.parametrize(
    "body, code",
    [(b"{not json", -32700), (b'{"jsonrpc": "2.0", "id": 1}', -32600), (b"[1, 2]", -32600)],
)
def test_malformed_client_request_is_the_agents_to_answer_and_is_recorded(proxied, body, code):
    agent, proxy = proxied
    watch = SettleWatch(proxy.proxy)
    direct = httpx.post(agent.url + "/", content=body, headers={"content-type": "application/json"})
    r = httpx.post(proxy.url + "/", content=body, headers={"content-type": "application/json"})
    assert r.status_code == direct.status_code == 200  # a2a-sdk answers JSON-RPC errors with HTTP 200
    assert r.content == direct.content and _error(r).code == code
    assert agent.executor.executions == 0
    watch.wait(1)
    (ex,) = proxy.store.exchanges()
    assert ex.status == 200 and ex.outcome == "error" and ex.request_body == body
    assert [bytes(e.payload) for e in proxy.store.read_exchange(ex.id)] == [r.content]


def test_oversized_body_is_refused(sdk_agent, db_path):
    with running_proxy(sdk_agent.url, db_path, max_body=2000) as proxy:
        body, headers = send_body("x" * 5000, stream=False)
        r = httpx.post(proxy.url + "/", content=body, headers=headers)
        assert r.status_code == 413
        assert "larger than the proxy's limit of 2000 bytes" in _error(r).message

        def chunked():
            yield body[:1000]
            yield body[1000:]

        r2 = httpx.post(proxy.url + "/", content=chunked(), headers=headers)  # no Content-Length
        assert r2.status_code == 413
    assert sdk_agent.executor.executions == 0


def test_token_is_required_and_not_forwarded_as_a_credential(sdk_agent, db_path):
    with running_proxy(sdk_agent.url, db_path, token="tok-123") as proxy:
        body, headers = send_body("hello", stream=True)
        assert httpx.post(proxy.url + "/", content=body, headers=headers).status_code == 401
        wrong = {**headers, "Authorization": "Bearer tok-124"}
        r = httpx.post(proxy.url + "/", content=body, headers=wrong)
        assert r.status_code == 401 and "proxy token" in _error(r).message
        assert sdk_agent.executor.executions == 0
        ok = {**headers, "Authorization": "Bearer tok-123"}
        with httpx.stream("POST", proxy.url + "/", content=body, headers=ok) as r:
            assert r.status_code == 200 and len(read_sse(r)) == 6
        assert sdk_agent.executor.executions == 1


def test_nothing_recorded_is_lost_after_bad_input(proxied):
    agent, proxy = proxied
    watch = SettleWatch(proxy.proxy)
    body, headers = send_body("hello")
    with httpx.stream("POST", proxy.url + "/", content=body, headers=headers) as r:
        read_sse(r)
    watch.wait(1)
    before = [(e.position, bytes(e.payload)) for e in proxy.store.read_from(0)]
    httpx.post(proxy.url + "/", content=b"{oops", headers=headers)
    httpx.post(proxy.url + "/", content=b"\xff\xfe", headers=headers)
    after = [(e.position, bytes(e.payload)) for e in proxy.store.read_from(0)]
    assert after[: len(before)] == before
    assert proxy.store.integrity_check() == "ok"


def test_cli_refuses_a_remote_listen_without_allow_remote(db_path):
    r = CliRunner().invoke(app, ["proxy", "http://127.0.0.1:9", "--listen", "0.0.0.0:0", "--db", str(db_path)])
    assert r.exit_code == 2
    assert "--allow-remote" in r.stderr and "Traceback" not in r.stderr and r.stderr.count("\n") == 1


def test_cli_bad_upstream_url_is_one_line(db_path):
    r = CliRunner().invoke(app, ["proxy", "ftp://x", "--db", str(db_path)])
    assert r.exit_code == 2 and "http(s) URL" in r.stderr and "Traceback" not in r.stderr


def test_proxy_token_never_reaches_the_upstream_but_other_credentials_do(db_path):
    """A hand-written fake upstream: a real agent does not tell us which headers it received."""
    from starlette.responses import JSONResponse, Response

    seen: list[dict[str, str]] = []

    async def card(request):
        seen.append(dict(request.headers))
        return JSONResponse({"name": "fake", "capabilities": {}})

    async def rpc(request):
        seen.append(dict(request.headers))
        return Response(
            b'{"jsonrpc":"2.0","id":1,"result":{"kind":"message","messageId":"r","role":"agent","parts":[]}}',
            media_type="application/json",
        )

    fake = Starlette(routes=[Route("/.well-known/agent-card.json", card), Route("/", rpc, methods=["POST"])])
    with serve_app(fake) as url, running_proxy(url, db_path, token="tok-9") as proxy:
        assert (
            httpx.get(proxy.url + "/.well-known/agent-card.json", headers={"Authorization": "Bearer tok-9"}).status_code
            == 200
        )
        body, headers = send_body("hello", stream=False)
        r = httpx.post(
            proxy.url + "/",
            content=body,
            headers={**headers, "Proxy-Authorization": "Bearer tok-9", "Authorization": "Bearer upstream-cred"},
        )
        assert r.status_code == 200
    assert "authorization" not in seen[0]
    assert seen[1]["authorization"] == "Bearer upstream-cred" and "proxy-authorization" not in seen[1]


def test_upstream_json_that_is_not_a2a_passes_through_and_is_kept(db_path):
    """A hand-written fake: a framework's own JSON 500 page, which a real agent will not send on demand."""
    from starlette.responses import JSONResponse

    async def boom(request):
        return JSONResponse({"detail": "Internal Server Error"}, status_code=500)

    fake = Starlette(routes=[Route("/", boom, methods=["POST"])])
    with serve_app(fake) as url, running_proxy(url, db_path) as proxy:
        watch = SettleWatch(proxy.proxy)
        body, headers = send_body("hello", stream=False)
        r = httpx.post(proxy.url + "/", content=body, headers=headers)
        assert r.status_code == 500 and r.json() == {"detail": "Internal Server Error"}
        watch.wait(1)
        ex = [e for e in proxy.store.exchanges() if e.rpc_method][0]
        assert ex.outcome == "error" and ex.status == 500
        kept = [bytes(e.payload) for e in proxy.store.read_exchange(ex.id)]  # an event of its exchange
        assert kept == [r.content]
