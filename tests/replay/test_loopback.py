"""Loopback servers refuse the web (replay/loopback.py), on every server a2a-tape starts: the proxy
and serve, as the installed console script. A foreign ``Host`` (DNS rebinding) and a browser's
cross-site request are refused unless allowed; what a server names itself as is never a client's
made-up Host. The browser class is tested with a real browser: Debian's Chromium driven by
Playwright. Chromium's own Local Network Access checks are turned off for it: older browsers and
other engines have none, and the server must not depend on the browser; each refusal has its
control, the same attack with the host allowed, which does get through.

Before: both servers answered any Host (after DNS rebinding a page read every recording through
serve, or sent messages through the proxy with the upstream's credentials) and any cross-site
``text/plain`` POST; the card named whatever Host the client sent."""

from __future__ import annotations

import contextlib
import itertools
import json
import shutil
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import running_sdk_agent
from tests.oracles.tape import TapeProcess, running

TAPE = Path(__file__).parent / "data" / "chunk-agent.jsonl"
CHROMIUM = shutil.which("chromium")
CARD = "/.well-known/agent-card.json"
SERVERS = ("proxy", "serve")


class Counting:
    """A real a2a-sdk agent, each request it gets counted by method and path (what reached it)."""

    def __init__(self, app) -> None:
        self.app = app
        self.seen: Counter[tuple[str, str]] = Counter()

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            self.seen[(scope["method"], scope["path"])] += 1
        await self.app(scope, receive, send)

    @property
    def sends(self) -> int:
        return self.seen[("POST", "/")]


@pytest.fixture(scope="module")
def upstream() -> Iterator[tuple[str, Counting]]:
    with running_sdk_agent(wrap=Counting) as agent:
        yield agent.url, agent.app


@contextlib.contextmanager
def server(kind: str, agent_url: str, tmp: Path, *extra: str) -> Iterator[TapeProcess]:
    """The proxy in front of the agent, or serve over a recording that sends what it has not
    recorded to the agent (so a request that gets through is seen by the agent either way)."""
    if kind == "proxy":
        args = ["proxy", agent_url, "--listen", "127.0.0.1:0", "--db", str(tmp / "p.db"), "--no-recover"]
    else:
        tape = tmp / "tape.jsonl"
        shutil.copy(TAPE, tape)
        args = ["serve", "--db", str(tape), "--listen", "127.0.0.1:0", "--record-mode", "new_episodes"]
        args += ["--upstream", agent_url]
    with running([*args, *extra], tmp / f"{kind}.log") as proc:
        yield proc


_n = itertools.count()


def _send_body(text: str, dialect: str = "1.0") -> str:
    """A send of ``text``; v0.3 needs no ``A2A-Version`` header (which a no-cors request cannot set)."""
    mid = f"m-{next(_n)}"
    if dialect == "0.3":
        message = {"kind": "message", "messageId": mid, "role": "user", "parts": [{"kind": "text", "text": text}]}
        return json.dumps({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": message}})
    message = {"messageId": mid, "role": "ROLE_USER", "parts": [{"text": text}]}
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}})


# -- Host (any client) -----------------------------------------------------------------------


@pytest.mark.parametrize("kind", SERVERS)
@pytest.mark.parametrize(
    "host", ["evil.example", "evil.example:{port}", "127.0.0.1.nip.io:{port}", "localhost.evil.example", "0.0.0.0"]
)
def test_a_foreign_host_is_refused(tmp_path, upstream, kind, host):
    agent_url, agent = upstream
    before = agent.sends
    with server(kind, agent_url, tmp_path) as proc:
        port = proc.url.rsplit(":", 1)[1]
        h = {"Host": host.format(port=port), "A2A-Version": "1.0", "content-type": "application/json"}
        card = httpx.get(proc.url + CARD, headers=h)
        send = httpx.post(proc.url + "/", content=_send_body("rebound"), headers=h)
    assert card.status_code == send.status_code == 403, (card.text, send.text)
    assert "is not this server's" in send.text and "--allow-host" in send.text
    assert agent.sends == before


@pytest.mark.parametrize("kind", SERVERS)
@pytest.mark.parametrize(
    "host",
    ["127.0.0.1:{port}", "localhost:{port}", "LOCALHOST.:{port}", "app.localhost:{port}", "127.0.0.2", "[::1]:{port}"],
)
def test_loopback_names_are_served(tmp_path, upstream, kind, host):
    agent_url, _ = upstream
    with server(kind, agent_url, tmp_path) as proc:
        port = proc.url.rsplit(":", 1)[1]
        r = httpx.get(proc.url + CARD, headers={"Host": host.format(port=port)})
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("kind", SERVERS)
@pytest.mark.parametrize("allow", [["--allow-host", "agents.internal"], ["--allow-remote"]])
def test_an_allowed_host_is_served(tmp_path, upstream, kind, allow):
    agent_url, _ = upstream
    with server(kind, agent_url, tmp_path, *allow) as proc:
        r = httpx.get(proc.url + CARD, headers={"Host": "agents.internal:8080"})
        other = httpx.get(proc.url + CARD, headers={"Host": "elsewhere.example"})
    assert r.status_code == 200, r.text
    assert other.status_code == (200 if "--allow-remote" in allow else 403)


@pytest.mark.parametrize("kind", SERVERS)
def test_the_card_never_names_a_host_a_client_made_up(tmp_path, upstream, kind):
    """Under --allow-remote any Host is served: the card then names the address the connection
    came in on, not the Host; a Host the user allowed by name is used as given."""
    agent_url, _ = upstream
    with server(kind, agent_url, tmp_path, "--allow-remote", "--allow-host", "agents.internal") as proc:
        made_up = httpx.get(proc.url + CARD, headers={"Host": "evil.example:9"}).text
        named = httpx.get(proc.url + CARD, headers={"Host": "agents.internal:8080"}).text
    assert "evil.example" not in made_up and proc.url in made_up, made_up
    assert "http://agents.internal:8080/" in named, named


# -- browsers (Chromium) ---------------------------------------------------------------------

_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    # attacker.test serves the attacking page; rebind.test is a name rebound to 127.0.0.1
    "--host-resolver-rules=MAP rebind.test 127.0.0.1, MAP attacker.test 127.0.0.1",
    # the browser's own protections off (see the module docstring): the server is what is tested
    "--disable-features=LocalNetworkAccessChecks,BlockInsecurePrivateNetworkRequests,"
    "PrivateNetworkAccessSendPreflights,PrivateNetworkAccessRespectPreflightResults",
]
ATTACK_PAGE = "<!doctype html><title>a page the developer visits</title><a id=go href='{href}'>a link</a>"


@pytest.fixture(scope="module")
def browser():
    if CHROMIUM is None:
        pytest.skip("Chromium is not installed (apt-get install chromium; .ci/run does)")
    playwright = pytest.importorskip("playwright.sync_api")
    with playwright.sync_playwright() as pw:
        ctx = pw.chromium.launch_persistent_context(
            tempfile.mkdtemp(prefix="a2a-tape-chromium-"), executable_path=CHROMIUM, headless=True, args=_ARGS
        )
        try:
            yield ctx
        finally:
            ctx.close()


def _page(browser, origin: str, href: str = "/"):
    """A tab showing the attacker's page at ``origin`` (the document comes from the attacker)."""
    page = browser.new_page()
    page.route(
        origin + "/attack.html", lambda r: r.fulfill(body=ATTACK_PAGE.format(href=href), content_type="text/html")
    )
    page.goto(origin + "/attack.html")
    return page


FETCH = """async ([url, init]) => {
  try { const r = await fetch(url, init); return [r.type, r.status, await r.text()]; }
  catch (e) { return ['error', 0, String(e)]; }
}"""


@pytest.mark.parametrize("allowed", [False, True], ids=["refused", "control: allowed"])
@pytest.mark.parametrize("kind", SERVERS)
def test_dns_rebinding_cannot_read_or_send(tmp_path, upstream, browser, kind, allowed):
    """The page's own origin is rebound to 127.0.0.1: its same-origin requests reach the server
    with ``Host: rebind.test:PORT``. It must read nothing (ListTasks) and send nothing."""
    agent_url, agent = upstream
    before = agent.sends
    extra = ["--allow-host", "rebind.test"] if allowed else []
    with server(kind, agent_url, tmp_path, *extra) as proc:
        port = proc.url.rsplit(":", 1)[1]
        page = _page(browser, f"http://rebind.test:{port}")
        try:
            headers = {"content-type": "application/json", "A2A-Version": "1.0"}
            listing = page.evaluate(
                FETCH,
                [
                    "/",
                    {
                        "method": "POST",
                        "headers": headers,
                        "body": json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}),
                    },
                ],
            )
            sent = page.evaluate(FETCH, ["/", {"method": "POST", "headers": headers, "body": _send_body("rebound")}])
        finally:
            page.close()
    if allowed:
        assert listing[1] == sent[1] == 200, (listing, sent)
        assert agent.sends == before + 1 + (kind == "proxy")  # the proxy forwards the listing too
    else:
        assert listing[1] == sent[1] == 403, (listing, sent)
        assert "tasks" not in listing[2]
        assert agent.sends == before


@pytest.mark.parametrize("allowed", [False, True], ids=["refused", "control: allowed"])
@pytest.mark.parametrize("kind", SERVERS)
def test_a_cross_site_text_plain_post_sends_nothing(tmp_path, upstream, browser, kind, allowed):
    """The POST a page may send anywhere without a CORS preflight (``text/plain``, ``no-cors``):
    the page cannot read the answer, but before the server acted on it."""
    agent_url, agent = upstream
    before = agent.sends
    extra = ["--allow-host", "attacker.test"] if allowed else []
    with server(kind, agent_url, tmp_path, *extra) as proc:
        page = _page(browser, "http://attacker.test")
        try:
            init = {"method": "POST", "mode": "no-cors", "headers": {"content-type": "text/plain"}}
            got = page.evaluate(FETCH, [proc.url + "/", {**init, "body": _send_body("cross-site", "0.3")}])
        finally:
            page.close()
    assert got[0] == "opaque", got  # delivered as far as the browser is concerned, either way
    assert agent.sends == before + (1 if allowed else 0)


@pytest.mark.parametrize("kind", SERVERS)
def test_a_cross_site_navigation_is_refused_and_a_typed_url_is_not(tmp_path, upstream, browser, kind):
    """A link on another site (``Sec-Fetch-Site: cross-site``, no Origin on a GET) is refused; the
    same URL typed into the address bar (``Sec-Fetch-Site: none``) is the user's own request."""
    agent_url, _ = upstream
    with server(kind, agent_url, tmp_path) as proc:
        page = _page(browser, "http://attacker.test", href=proc.url + CARD)
        try:
            with page.expect_navigation() as nav:
                page.click("#go")
            clicked = nav.value
            assert clicked is not None
            clicked_status, clicked_text = clicked.status, clicked.text()
            typed = page.goto(proc.url + CARD)
            assert typed is not None
            typed_status = typed.status
        finally:
            page.close()
    assert clicked_status == 403, clicked_text
    assert "Sec-Fetch-Site: cross-site" in clicked_text
    assert typed_status == 200
