"""Issue 36, item 4: the UI's cookie never reaches another server of this machine, in one real
browser (Chromium).

A browser sends a host's cookies to every port of it (cookies ignore ports). The UI lives under a
path prefix made at random for the run, and its cookie is set for that path only
(``inspection/ui/access.py``): another local server on another port, opened by the same browser at
any address that is not under the prefix, is sent no cookie of the UI. That server is real: a plain
HTTP server on 127.0.0.1 that notes the ``Cookie`` header of each request it gets.

Before (a cookie for ``/``), the other server got the UI's token with every request; and two UIs
on two ports each got the other's cookie (refused, by its per-port name): both are checked here.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from playwright.sync_api import Page


class _Other(ThreadingHTTPServer):
    """Another local program listening on a port of 127.0.0.1: it answers every GET with a page and
    keeps what each request's ``Cookie`` header said, by path."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Noting)
        self.cookies: dict[str, str] = {}

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Noting(BaseHTTPRequestHandler):
    server: _Other

    def do_GET(self) -> None:
        self.server.cookies[self.path] = self.headers.get("cookie", "")
        body = b"<!doctype html><title>another local server</title><p>hello"
        self.send_response(200)
        self.send_header("content-type", "text/html")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def other() -> Iterator[_Other]:
    server = _Other()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def test_another_local_server_on_another_port_never_gets_the_cookie(page: Page, serve_ui, demo_db, other):
    ui = serve_ui(demo_db)
    assert page.goto(ui.url).status == 200  # the printed address: the cookie set
    assert [c["name"] for c in page.context.cookies(ui.base + "/")] == [f"a2a_tape_ui_{ui.port}"]

    for path in ("/", "/index.html", "/tasks/x", "/static/ui.css", "/a2a_tape_ui"):
        assert page.goto(other.origin + path).status == 200
    assert {"/", "/index.html", "/tasks/x", "/static/ui.css", "/a2a_tape_ui"} <= set(other.cookies)  # a favicon too
    assert all(ui.token not in sent and "a2a_tape_ui" not in sent for sent in other.cookies.values()), other.cookies
    assert page.context.cookies(other.origin + "/") == []  # the browser's own jar agrees

    # the control: the cookie ignores ports, so it is the path that keeps it, and the prefix that
    # must stay unknown (it is never on a command line: test_open.py)
    assert page.goto(other.origin + ui.prefix + "/").status == 200
    assert f"a2a_tape_ui_{ui.port}={ui.token}" in other.cookies[ui.prefix + "/"]

    assert page.goto(ui.base + "/").status == 200  # the UI itself still reads it


def test_two_uis_on_two_ports_each_keep_their_own_cookie(page: Page, serve_ui, demo_db):
    one, two = serve_ui(demo_db), serve_ui(demo_db)
    assert one.port != two.port and one.prefix != two.prefix

    assert page.goto(one.url).status == 200  # the first UI's printed address: its cookie set
    assert page.context.cookies(two.base + "/") == []  # not sent to the second one at all
    assert page.goto(two.base + "/").status == 401

    assert page.goto(two.url).status == 200  # the second UI's own address
    assert page.goto(one.base + "/").status == 200  # each readable by its own cookie
    assert page.goto(two.base + "/").status == 200
    jar = {c["name"]: (c["value"], c["path"]) for c in page.context.cookies([one.base + "/", two.base + "/"])}
    assert jar == {
        f"a2a_tape_ui_{one.port}": (one.token, one.prefix),
        f"a2a_tape_ui_{two.port}": (two.token, two.prefix),
    }
