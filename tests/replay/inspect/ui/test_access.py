"""Who may read ``a2a-tape ui``: this machine's browser with this run's token, and no web page.

Every route (pages, fragments, event streams, static files) lives under the run's path prefix: outside
it, 404, token or not. Under it, every route answers 401 without the token and 403 to a foreign
``Host`` (DNS rebinding) or a browser's cross-site request, with the token or not; every answer
carries the Content-Security-Policy. The installed script, over real HTTP.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import httpx
import pytest

from tests.replay.inspect.ui.conftest import Ui, run, start_ui, stop_ui

ROUTES = [
    "/",
    "/rows",
    "/tasks/{task}",
    "/task/rows?task={task}&after=0",
    "/task/at?task={task}&n=1",
    "/task/event?task={task}&position={first}",
    "/task/findings?task={task}",
    "/diff?a={task}&b={task}",
    "/static/ui.css",
    "/static/ui.js",
    "/static/vendor/htmx.min.js",
    "/favicon.ico",
    "/no/such/page",
]
STREAMS = ["/live/tasks?after=0", "/live/task?task={task}&after=0"]


@pytest.fixture(scope="module")
def ui(demo_db) -> Iterator[tuple[Ui, dict[str, object]]]:
    r = run("tasks", "--json", "--db", demo_db, installed=False)  # what to ask for (the CLI itself: elsewhere)
    task = json.loads(r.stdout)[0]["task_id"]
    first = json.loads(run("show", task, "--json", "--db", demo_db, installed=False).stdout)[0]["position"]
    server = start_ui(demo_db)
    yield server, {"task": task, "first": first}
    stop_ui(server)


def _client(ui: Ui, *, token: bool) -> httpx.Client:
    cookies = {f"a2a_tape_ui_{ui.port}": ui.token} if token else {}
    return httpx.Client(base_url=ui.base, cookies=cookies, timeout=10, follow_redirects=False)


def _status(client: httpx.Client, path: str, headers: dict[str, str] | None = None) -> httpx.Response:
    with client.stream("GET", path, headers=headers or {}) as response:
        return response  # the head is enough (a stream never ends by itself)


@pytest.mark.parametrize("path", ROUTES + STREAMS)
def test_without_the_token_every_route_answers_401(ui, path):
    server, task = ui
    with _client(server, token=False) as c:
        r = _status(c, path.format(**task))
        assert r.status_code == 401
        assert "default-src 'none'" in r.headers["content-security-policy"]
        r = _status(c, path.format(**task) + ("&" if "?" in path else "?") + "token=wrong")
        assert r.status_code == 401


@pytest.mark.parametrize("path", ROUTES + STREAMS)
@pytest.mark.parametrize(
    "headers",
    [
        {"Host": "attacker.example"},  # a page whose name was rebound to 127.0.0.1
        {"Host": "localhost.attacker.example:80"},
        {"Origin": "http://attacker.example"},
        {"Origin": "null"},
        {"Sec-Fetch-Site": "cross-site"},
        {"Sec-Fetch-Site": "same-site"},  # another port of this machine is another origin
    ],
    ids=lambda h: next(iter(h.items()))[0] + "=" + next(iter(h.values())),
)
def test_a_foreign_host_or_a_cross_site_request_is_refused_even_with_the_token(ui, path, headers):
    server, task = ui
    with _client(server, token=True) as c:
        r = _status(c, path.format(**task), headers)
        assert r.status_code == 403
        assert "default-src 'none'" in r.headers["content-security-policy"]


@pytest.mark.parametrize("path", ROUTES + STREAMS)
def test_with_the_token_every_route_answers(ui, path):
    server, task = ui
    with _client(server, token=True) as c:
        r = _status(c, path.format(**task), {"Sec-Fetch-Site": "same-origin", "Origin": server.origin})
        assert r.status_code in (200, 204, 404) and (r.status_code == 404) == path.startswith("/no/")
        assert r.headers["content-security-policy"].startswith("default-src 'none'; script-src 'self'")
        assert r.headers["x-frame-options"] == "DENY" and r.headers["cache-control"] == "no-store"


def test_the_printed_address_sets_the_cookie_and_leaves_the_address_bar(ui):
    server, _ = ui
    with httpx.Client(timeout=10) as c:
        r = c.get(server.url + "&state=completed")
    assert r.status_code == 303 and r.headers["location"] == f"{server.prefix}/?state=completed"
    cookie = r.headers["set-cookie"]
    assert f"a2a_tape_ui_{server.port}={server.token}" in cookie
    assert "HttpOnly" in cookie and "samesite=strict" in cookie.lower()
    assert f"Path={server.prefix}" in [part.strip() for part in cookie.split(";")]  # the prefix's path only


def test_the_prefix_is_made_for_the_run_and_long(ui, demo_db):
    server, _ = ui
    other = start_ui(demo_db)
    try:
        assert server.prefix != other.prefix
        assert re.fullmatch(r"/[A-Za-z0-9_-]{22,}", server.prefix), server.prefix  # 128 bits, URL-safe
    finally:
        stop_ui(other)


@pytest.mark.parametrize(
    "path", ROUTES + STREAMS + ["/?token={token}", "/?code=anything", "/tasks/{task}?token={token}"]
)
@pytest.mark.parametrize("token", [False, True], ids=["no cookie", "the cookie"])
def test_outside_the_prefix_everything_is_404(ui, path, token):
    """The server's own root, and every route of the UI as if it had no prefix: 404, with the
    token (in the cookie or the address) or not; the answer says nothing of the UI."""
    server, task = ui
    with httpx.Client(base_url=server.origin, timeout=10, follow_redirects=False) as c:
        if token:
            c.cookies.set(f"a2a_tape_ui_{server.port}", server.token)
        r = _status(c, path.format(token=server.token, **task))
        assert r.status_code == 404
        assert "set-cookie" not in r.headers and "location" not in r.headers
        assert "default-src 'none'" in r.headers["content-security-policy"]
    with httpx.Client(timeout=10) as c:
        body = c.get(server.origin + path.format(token=server.token, **task)).text
    assert server.prefix.strip("/") not in body and "token" not in body.lower()


def test_each_run_has_its_own_token(demo_db):
    one, two = start_ui(demo_db), start_ui(demo_db)
    try:
        assert one.token != two.token and len(one.token) >= 32
        with _client(two, token=False) as c:
            c.cookies.set(f"a2a_tape_ui_{two.port}", one.token)
            assert _status(c, "/").status_code == 401
    finally:
        stop_ui(one)
        stop_ui(two)


def test_the_prefix_alone_is_its_index(ui):
    """``/PREFIX`` without its slash: the list, for the token holder; 401 for anyone else."""
    server, _ = ui
    with httpx.Client(base_url=server.origin, timeout=10, follow_redirects=False) as c:
        assert c.get(server.prefix).status_code == 401
        c.cookies.set(f"a2a_tape_ui_{server.port}", server.token)
        r = c.get(server.prefix + "?state=completed")
    assert r.status_code == 303 and r.headers["location"] == f"{server.prefix}/?state=completed"
    assert "set-cookie" not in r.headers
