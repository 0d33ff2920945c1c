"""Loopback servers refuse the web (wire/loopback.py), on every server a2a-tape starts: the proxy,
serve and the UI, as the installed console script. A foreign ``Host`` (DNS rebinding) and a browser's
cross-site request are refused unless allowed; what a server names itself as is never a client's
made-up Host. The browser class is tested with a real browser: Debian's Chromium driven by
Playwright. Chromium's own Local Network Access checks are turned off for it: older browsers and
other engines have none, and the server must not depend on the browser; each refusal has its
control, the same attack with the host allowed, which does get through.

Before: both servers answered any Host (after DNS rebinding a page read every recording through
serve, or sent messages through the proxy with the upstream's credentials) and any cross-site
``text/plain`` POST; the card named whatever Host the client sent. The UI had a check of its own,
narrower than the guard (no ``--allow-host``, ``--allow-remote``); its token check stays its own, so
here it is always given the token: what refuses is the guard.

Each server of a kind and options is started once for the module (``servers``) and shared by the tests that
name it: they read from it, are refused by it, or count what they send themselves."""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from tests.conftest import running_sdk_agent
from tests.oracles.tape import running
from tests.replay.inspect.ui.conftest import start_ui, stop_ui
from tests.support.in_process import run_text_in_process

TAPE = Path(__file__).parent / "data" / "chunk-agent.jsonl"
CHROMIUM = shutil.which("chromium")
CARD = "/.well-known/agent-card.json"
SERVERS = ("proxy", "serve", "ui")
AGENTS = ("proxy", "serve")
"""The servers that answer as an agent (the UI only shows the log: no card, nothing to send)."""
READ = {"proxy": CARD, "serve": CARD, "ui": "/"}
"""What each server reads out to whoever asks."""


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


@dataclass
class Served:
    """A running server: where it listens, and what a client of the person who started it sends
    with every request (the UI's token, in its cookie)."""

    url: str
    headers: dict[str, str] = field(default_factory=dict)
    token: str = ""

    @property
    def port(self) -> str:
        return str(urlsplit(self.url).port)


@functools.cache
def _ui_log() -> Path:
    """The tape imported into a log, once per test process, for the UI (which reads a database)."""
    db = Path(tempfile.mkdtemp(prefix="a2a-tape-loopback-")) / "ui.db"
    imported = run_text_in_process(["import", str(TAPE), "--db", str(db)])  # preparing, not under test: in process
    assert imported.returncode == 0, imported.stderr
    return db


@contextlib.contextmanager
def server(kind: str, agent_url: str, tmp: Path, *extra: str) -> Iterator[Served]:
    """The proxy in front of the agent, serve over a recording that sends what it has not
    recorded to the agent (so a request that gets through is seen by the agent either way), or
    the UI over that recording."""
    tape = tmp / "tape.jsonl"
    shutil.copy(TAPE, tape)
    if kind == "ui":
        ui = start_ui(_ui_log(), *extra)
        try:
            yield Served(ui.base, {"Cookie": f"a2a_tape_ui_{ui.port}={ui.token}"}, ui.token)
        finally:
            stop_ui(ui)
        return
    if kind == "proxy":
        args = ["proxy", agent_url, "--listen", "127.0.0.1:0", "--db", str(tmp / "p.db"), "--no-recover"]
    else:
        args = ["serve", "--db", str(tape), "--listen", "127.0.0.1:0", "--record-mode", "new_episodes"]
        args += ["--upstream", agent_url]
    with running([*args, *extra], tmp / f"{kind}.log") as proc:
        yield Served(proc.url)


Servers = Callable[..., Served]
"""``servers(kind, *extra)``: the module's running server of that kind started with those options."""


@pytest.fixture(scope="module")
def servers(upstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    """The module's servers, one per kind and options, started when a test first asks for it and stopped
    at the module's end. A test only reads from one, is refused, or sends what it counts by itself (the
    agent's count before and after): a server of its own per test (54, each an interpreter start) checked
    nothing more. Each test still runs against a server of the kind and options it names."""
    agent_url, _ = upstream
    started: dict[tuple[str, ...], Served] = {}
    with contextlib.ExitStack() as stack:

        def get(kind: str, *extra: str) -> Served:
            key = (kind, *extra)
            if key not in started:
                tmp = tmp_path_factory.mktemp(f"loopback-{kind}")
                started[key] = stack.enter_context(server(kind, agent_url, tmp, *extra))
            return started[key]

        yield get


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
def test_a_foreign_host_is_refused(servers, upstream, kind, host):
    _, agent = upstream
    before = agent.sends
    proc = servers(kind)
    h = {**proc.headers, "Host": host.format(port=proc.port), "A2A-Version": "1.0"}
    card = httpx.get(proc.url + READ[kind], headers=h)
    send = httpx.post(proc.url + "/", content=_send_body("rebound"), headers={**h, "content-type": "application/json"})
    assert card.status_code == send.status_code == 403, (card.text, send.text)
    assert "is not this server's" in send.text and "--allow-host" in send.text
    assert agent.sends == before


@pytest.mark.parametrize("kind", SERVERS)
@pytest.mark.parametrize(
    "host",
    ["127.0.0.1:{port}", "localhost:{port}", "LOCALHOST.:{port}", "app.localhost:{port}", "127.0.0.2", "[::1]:{port}"],
)
def test_loopback_names_are_served(servers, kind, host):
    proc = servers(kind)
    r = httpx.get(proc.url + READ[kind], headers={**proc.headers, "Host": host.format(port=proc.port)})
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("kind", SERVERS)
@pytest.mark.parametrize("allow", [["--allow-host", "agents.internal"], ["--allow-remote"]])
def test_an_allowed_host_is_served(servers, kind, allow):
    proc = servers(kind, *allow)
    r = httpx.get(proc.url + READ[kind], headers={**proc.headers, "Host": "agents.internal:8080"})
    other = httpx.get(proc.url + READ[kind], headers={**proc.headers, "Host": "elsewhere.example"})
    assert r.status_code == 200, r.text
    assert other.status_code == (200 if "--allow-remote" in allow else 403)


@pytest.mark.parametrize("kind", AGENTS)
def test_the_card_never_names_a_host_a_client_made_up(servers, kind):
    """Under --allow-remote any Host is served: the card then names the address the connection
    came in on, not the Host; a Host the user allowed by name is used as given."""
    proc = servers(kind, "--allow-remote", "--allow-host", "agents.internal")
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


def _reading(kind: str, proc: Served) -> list[object]:
    """The request that reads what a server holds, as ``fetch`` arguments: an agent's ListTasks, or
    the UI's task list with the run's token (which a rebinding page should not have: given anyway,
    the guard refuses first)."""
    if kind == "ui":
        return [f"{urlsplit(proc.url).path}/?token={proc.token}", {}]  # under the UI's prefix
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}})
    return [
        "/",
        {"method": "POST", "headers": {"content-type": "application/json", "A2A-Version": "1.0"}, "body": body},
    ]


@pytest.mark.parametrize("allowed", [False, True], ids=["refused", "control: allowed"])
@pytest.mark.parametrize("kind", SERVERS)
def test_dns_rebinding_cannot_read_or_send(servers, upstream, browser, kind, allowed):
    """The page's own origin is rebound to 127.0.0.1: its same-origin requests reach the server
    with ``Host: rebind.test:PORT``. It must read nothing (ListTasks, the UI's list) and send nothing."""
    _, agent = upstream
    before = agent.sends
    extra = ["--allow-host", "rebind.test"] if allowed else []
    proc = servers(kind, *extra)
    page = _page(browser, f"http://rebind.test:{proc.port}")
    try:
        listing = page.evaluate(FETCH, _reading(kind, proc))
        headers = {"content-type": "application/json", "A2A-Version": "1.0"}
        send = {"method": "POST", "headers": headers, "body": _send_body("rebound")}
        sent = page.evaluate(FETCH, ["/", send]) if kind in AGENTS else None
    finally:
        page.close()
    read_text = "task-rows" if kind == "ui" else "tasks"
    if allowed:
        assert listing[1] == 200 and read_text in listing[2], listing
        assert sent is None or sent[1] == 200, sent
        assert agent.sends == before + (kind in AGENTS) + (kind == "proxy")  # the proxy forwards the listing too
    else:
        assert listing[1] == 403, listing
        assert sent is None or sent[1] == 403, sent
        assert read_text not in listing[2]
        assert agent.sends == before


@pytest.mark.parametrize("allowed", [False, True], ids=["refused", "control: allowed"])
@pytest.mark.parametrize("kind", AGENTS)  # the UI answers no POST: there is nothing to act on
def test_a_cross_site_text_plain_post_sends_nothing(servers, upstream, browser, kind, allowed):
    """The POST a page may send anywhere without a CORS preflight (``text/plain``, ``no-cors``):
    the page cannot read the answer, but before the server acted on it."""
    _, agent = upstream
    before = agent.sends
    extra = ["--allow-host", "attacker.test"] if allowed else []
    proc = servers(kind, *extra)
    page = _page(browser, "http://attacker.test")
    try:
        init = {"method": "POST", "mode": "no-cors", "headers": {"content-type": "text/plain"}}
        got = page.evaluate(FETCH, [proc.url + "/", {**init, "body": _send_body("cross-site", "0.3")}])
    finally:
        page.close()
    assert got[0] == "opaque", got  # delivered as far as the browser is concerned, either way
    assert agent.sends == before + (1 if allowed else 0)


@pytest.mark.parametrize("kind", SERVERS)
def test_a_cross_site_navigation_is_refused_and_a_typed_url_is_not(servers, browser, kind):
    """A link on another site (``Sec-Fetch-Site: cross-site``, no Origin on a GET) is refused; the
    same URL typed into the address bar (``Sec-Fetch-Site: none``) is the user's own request. The
    UI's link is the address it printed, token and all: a page that got hold of it still gets 403."""
    proc = servers(kind)
    address = f"{proc.url}/?token={proc.token}" if kind == "ui" else proc.url + CARD
    page = _page(browser, "http://attacker.test", href=address)
    try:
        with page.expect_navigation() as nav:
            page.click("#go")
        clicked = nav.value
        assert clicked is not None
        clicked_status, clicked_text = clicked.status, clicked.text()
        typed = page.goto(address)
        assert typed is not None
        typed_status = typed.status
    finally:
        page.close()
    assert clicked_status == 403, clicked_text
    assert "Sec-Fetch-Site: cross-site" in clicked_text
    assert typed_status == 200
