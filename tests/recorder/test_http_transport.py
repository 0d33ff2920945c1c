"""Our clients' transport loads no CA bundle for plain HTTP, and still verifies HTTPS; a client
that acts for many keeps no cookies."""

from __future__ import annotations

import ssl

import anyio
import httpx
import pytest
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from a2a_tape.wire.http_client import LazyTlsTransport, _trusts_nothing, cookieless
from tests.support.fault_agent import make_proxy_fault_app
from tests.support.servers import closed_port, serve_app


async def _hello(request):
    return JSONResponse({"hello": "world"})


@pytest.fixture(scope="module")
def plain_url():
    with serve_app(Starlette(routes=[Route("/", _hello)])) as url:
        yield url


def test_plain_http_never_builds_the_verifying_transport(plain_url):
    async def go():
        t = LazyTlsTransport()
        async with httpx.AsyncClient(transport=t) as http:
            r = await http.get(plain_url + "/")
        return t, r

    t, r = anyio.run(go)
    assert r.json() == {"hello": "world"}
    assert t._plain is not None and t._tls is None


def test_https_goes_through_the_verifying_transport():
    async def go():
        t = LazyTlsTransport()
        async with httpx.AsyncClient(transport=t) as http:
            with pytest.raises(httpx.ConnectError):
                await http.get(f"https://127.0.0.1:{closed_port()}/")
        return t

    t = anyio.run(go)
    assert t._tls is not None and t._plain is None


def test_an_explicit_verify_is_used_for_everything(plain_url):
    async def go():
        t = LazyTlsTransport(verify=ssl.create_default_context())
        async with httpx.AsyncClient(transport=t) as http:
            await http.get(plain_url + "/")
        return t

    t = anyio.run(go)
    assert t._tls is not None and t._plain is None


def test_the_plain_context_fails_closed():
    """Were it ever handed a TLS connection, it would verify against no CA at all."""
    ctx = _trusts_nothing()
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
    assert ctx.cert_store_stats()["x509_ca"] == 0


def test_the_sync_side_is_lazy_too(plain_url):
    t = LazyTlsTransport()
    with httpx.Client(transport=t) as http:
        assert http.get(plain_url + "/").json() == {"hello": "world"}
        with pytest.raises(httpx.ConnectError):
            http.get(f"https://127.0.0.1:{closed_port()}/")
    assert t._sync_plain is not None and t._sync_tls is not None and t._plain is None


def test_a_cookieless_client_sends_no_cookie_it_was_given():
    """Recovery's client (and the proxy's) after an answer that set a cookie: the next request
    goes without it; a plain client, for comparison, sends it back."""

    async def go(jar):
        async with httpx.AsyncClient(transport=LazyTlsTransport(), cookies=jar) as http:
            first = await http.post(url + "/setcookie/", content=b"{}")
            second = await http.post(url + "/setcookie/", content=b"{}")
        return first, second.json()["cookie"]

    with serve_app(make_proxy_fault_app()) as url:
        first, sent = anyio.run(go, cookieless())
        _, plain = anyio.run(go, None)
    assert first.headers["set-cookie"].startswith("session=")
    assert sent is None
    assert plain == "session=for-the-first-client"
