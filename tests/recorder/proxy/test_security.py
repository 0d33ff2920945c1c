"""The proxy's own concerns: its token (which requests need it, that it never goes upstream) and
the secrets it must keep off the disk and out of what it prints."""

from __future__ import annotations

import base64
import json
import queue
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from a2a_tape.cli import app
from a2a_tape.store.redact import Redactor
from tests.recorder.proxy.conftest import SettleWatch, read_sse, running_proxy, send_body
from tests.support.fault_agent import make_proxy_fault_app
from tests.support.servers import serve_app

TOKEN = "tok-proxy-5f1c"


def _raw_db(db_path) -> bytes:
    return b"".join(p.read_bytes() for p in db_path.parent.glob(db_path.name + "*"))


# -- which requests are public ----------------------------------------------------------------


@pytest.mark.parametrize(
    "method, path, public",
    [
        ("GET", "/.well-known/agent-card.json", True),
        ("GET", "/.well-known/agent-card.json?x=1", True),
        ("GET", "/.well-known/agent.json", True),  # the legacy card path
        ("GET", "/admin/private/.well-known/agent-card.json?x=1", False),
        ("GET", "/x/.well-known/agent.json", False),
        ("GET", "//.well-known/agent-card.json", False),
        ("GET", "/%2Ewell-known/agent-card.json", False),
        ("GET", "/.well-known/agent-card.json/../../admin", False),
        ("POST", "/.well-known/agent-card.json", False),
        ("GET", "/", False),
    ],
)
def test_only_the_card_at_the_root_is_public(db_path, method, path, public):
    with serve_app(make_proxy_fault_app()) as url, running_proxy(url, db_path, token=TOKEN) as proxy:
        with httpx.Client() as c:
            req = c.build_request(method, proxy.url + "/")
            req.url = req.url.copy_with(raw_path=path.encode())  # as sent, not normalised by the client
            r = c.send(req)
    assert (r.status_code != 401) is public, (path, r.status_code, r.content)


# -- the token never goes upstream --------------------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [
        {"Authorization": f"Bearer {TOKEN}"},
        {"authorization": f"bearer  {TOKEN}"},
        {"Proxy-Authorization": f"Bearer {TOKEN}"},
        {"Proxy-Authorization": f"Bearer {TOKEN}", "Authorization": f"Bearer {TOKEN}"},
        {"Proxy-Authorization": "Bearer wrong", "Authorization": f"Bearer {TOKEN}"},
    ],
)
def test_the_token_is_stripped_whichever_header_carries_it(db_path, headers):
    with serve_app(make_proxy_fault_app()) as url, running_proxy(url, db_path, token=TOKEN) as proxy:
        body, h = send_body("hello", stream=False)
        r = httpx.post(proxy.url + "/echo/", content=body, headers={**h, **headers})
        card = httpx.get(proxy.url + "/.well-known/agent-card.json", headers=headers)  # public, stripped too
        seen = r.json()
    assert r.status_code == 200 and card.status_code == 404  # the fault agent has no root card
    assert TOKEN not in json.dumps(seen), seen["headers"]
    assert TOKEN.encode() not in _raw_db(db_path)


def test_other_credentials_go_upstream_as_sent(db_path):
    with serve_app(make_proxy_fault_app()) as url, running_proxy(url, db_path, token=TOKEN) as proxy:
        body, h = send_body("hello", stream=False)
        r = httpx.post(
            proxy.url + "/echo/",
            content=body,
            headers={**h, "Proxy-Authorization": f"Bearer {TOKEN}", "Authorization": "Bearer upstream-cred"},
        )
    pairs = [tuple(p) for p in r.json()["headers"]]
    assert ("authorization", "Bearer upstream-cred") in pairs
    assert not any(name == "proxy-authorization" for name, _ in pairs)


# -- secrets on disk and in what is printed -----------------------------------------------------

QUERY_SECRET = "qs-4d1e9a"
PASSWORD = "pw-77c0b2"


def test_url_secrets_stay_off_the_disk_and_the_exports(sdk_agent, db_path):
    """The client's ``?api_key=`` and the upstream's ``user:password@`` on a request with a
    messageId (the path that skipped the URL redaction): not in the database, its WAL, the
    jsonl or HAR export."""
    upstream = sdk_agent.url.replace("http://", f"http://alice:{PASSWORD}@")
    with running_proxy(upstream, db_path) as proxy:
        watch = SettleWatch(proxy.proxy)
        for stream in (False, True):
            body, h = send_body("hello", stream=stream, message_id=f"m-secret-{stream}")
            with httpx.stream("POST", proxy.url + f"/?api_key={QUERY_SECRET}&page=2", content=body, headers=h) as r:
                assert r.status_code == 200 and r.read()
        watch.wait(2)
        rows = [e for e in proxy.store.exchanges() if e.rpc_method]
        assert [e.idempotency_key for e in rows] == ["msg:m-secret-False", "msg:m-secret-True"]
        assert all(e.url == sdk_agent.url + "/?api_key=[redacted]&page=2" for e in rows)
        raw = _raw_db(db_path)
    runner = CliRunner()
    exports = [runner.invoke(app, ["export", "--all", "--format", f, "--db", str(db_path)]) for f in ("jsonl", "har")]
    assert all(e.exit_code == 0 and e.stdout for e in exports)
    for found in [raw, *(e.stdout.encode() for e in exports)]:
        assert QUERY_SECRET.encode() not in found and PASSWORD.encode() not in found


def test_the_upstream_credentials_go_as_basic_auth_and_the_query_as_sent(db_path):
    with serve_app(make_proxy_fault_app()) as url:
        with running_proxy(url.replace("http://", f"http://alice:{PASSWORD}@"), db_path) as proxy:
            body, h = send_body("hello", stream=False)
            r = httpx.post(proxy.url + f"/echo/?api_key={QUERY_SECRET}&page=2", content=body, headers=h)
    seen = dict(tuple(p) for p in r.json()["headers"])
    assert base64.b64decode(seen["authorization"].split()[1]) == f"alice:{PASSWORD}".encode()
    assert r.json()["query"] == f"api_key={QUERY_SECRET}&page=2"


def test_a_cookie_the_agent_sets_for_one_client_never_goes_upstream_with_another_clients_request(db_path):
    """The proxy serves many clients through one connection pool: a cookie the agent (or a load
    balancer in front of it) sets reaches the client it was set for, and is not kept by the proxy,
    so it never rides along with another client's request, nor with the same client's next one
    unless that client sends it itself."""
    with serve_app(make_proxy_fault_app()) as url, running_proxy(url, db_path) as proxy:

        def post(path: str, n: int, **headers: str) -> httpx.Response:
            body, h = send_body("hello", stream=False, message_id=f"m-cookie-{n}")
            return httpx.post(proxy.url + path, content=body, headers={**h, **headers})

        first = post("/setcookie/", 1)
        assert first.headers["set-cookie"] == "session=for-the-first-client; Path=/"
        other = post("/setcookie/", 2)
        echoed = post("/echo/", 3)
        own = post("/setcookie/", 4, cookie="session=mine")
    assert other.json() == {"cookie": None}
    assert not any(name == "cookie" for name, _ in echoed.json()["headers"])
    assert own.json() == {"cookie": "session=mine"}


def test_the_listening_line_does_not_print_the_upstream_password(tmp_path):
    proc = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "a2a-tape"),  # the installed console script
            "proxy",
            f"http://bob:{PASSWORD}@127.0.0.1:9/?token={QUERY_SECRET}",
            "--listen",
            "127.0.0.1:0",
            "--no-recover",
            "--db",
            str(tmp_path / "t.db"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    lines: queue.Queue[bytes] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in proc.stderr], daemon=True).start()  # type: ignore[union-attr]
    try:
        first = lines.get(timeout=30)
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert b"listening on http://127.0.0.1:" in first, first
    assert PASSWORD.encode() not in first and QUERY_SECRET.encode() not in first
    assert b"bob:" in first  # the user name is no secret: the line still says where it goes


def test_configured_json_paths_are_redacted_in_events_and_answers(sdk_agent, db_path):
    """The a2a-sdk agent echoes the message (its metadata) in the task's history: the stored
    events and JSON answers must not keep a configured path; the client still gets the answer."""
    secret = "meta-secret-93ab"
    redactor = Redactor(
        json_paths=["params.message.metadata.token", "result.history.*.metadata.token", "result.metadata.token"]
    )
    with running_proxy(sdk_agent.url, db_path, redactor=redactor) as proxy:
        watch = SettleWatch(proxy.proxy)
        for stream in (True, False):
            body, h = send_body("hello", stream=stream)
            doc = json.loads(body)
            doc["params"]["message"]["metadata"] = {"token": secret}
            if stream:
                with httpx.stream("POST", proxy.url + "/", content=json.dumps(doc), headers=h) as r:
                    got = b"".join(read_sse(r))
            else:
                got = httpx.post(proxy.url + "/", content=json.dumps(doc), headers=h).content
            assert secret.encode() in got  # what the agent sent reaches the client unchanged
        watch.wait(2)
        payloads = [bytes(e.payload) for e in proxy.store.read_from(0)]
    assert any(b"[redacted]" in p for p in payloads)
    assert secret.encode() not in _raw_db(db_path)
