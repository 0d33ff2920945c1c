"""Secrets found by their shape wherever they appear (issue 36, item 4): a URL whose credential is
its user name, a JWT under any header or query name, a request body sent gzip-compressed, a
credential the agent echoes from the same exchange; and the proxy's upstream credential given
without the command line. The installed script and the in-process proxy, real HTTP."""

from __future__ import annotations

import base64
import gzip
import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from a2a_tape.store.redact import Redactor
from tests.recorder.proxy.conftest import running_proxy, send_body
from tests.support.fault_agent import make_proxy_fault_app
from tests.support.servers import serve_app

SCRIPT = str(Path(sys.executable).parent / "a2a-tape")
JWT = "eyJhbGciOiJSUzI1NiIsImtpZCI6IjEifQ.eyJzdWIiOiJhbGljZUBleGFtcGxlLmNvbSJ9.c2lnbmF0dXJlLW9mLXRoZS1qd3Q"
ECHOED = "sk-echoed-7a1c93e0"


def _raw_db(db_path) -> bytes:
    return b"".join(p.read_bytes() for p in db_path.parent.glob(db_path.name + "*"))


@contextmanager
def _cli_proxy(upstream: str, db: Path, *extra: str, env: dict[str, str] | None = None) -> Iterator[tuple[str, str]]:
    """The installed ``a2a-tape proxy``: (its address, its first stderr line)."""
    proc = subprocess.Popen(
        [SCRIPT, "proxy", upstream, "--listen", "127.0.0.1:0", "--no-recover", "--db", str(db), *extra],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, **(env or {})},
    )
    lines: queue.Queue[bytes] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in proc.stderr], daemon=True).start()  # type: ignore[union-attr]
    try:
        first = lines.get(timeout=60).decode()
        address = first.split("listening on ", 1)[1].split(" ", 1)[0] if "listening on " in first else ""
        yield address, first
    finally:
        proc.terminate()
        proc.wait(timeout=20)


@pytest.mark.parametrize(
    "userinfo, secret",
    [
        ("ghp_16C7e42F292c6912E7710c838347Ae178B4a", "ghp_16C7e42F292c"),
        ("sk_live_4eC39HqLyjWDarjtT1zdp7dc:", "sk_live"),
    ],
)
def test_a_url_whose_user_name_is_the_credential_is_not_printed(tmp_path, userinfo, secret):
    with _cli_proxy(f"http://{userinfo}@127.0.0.1:9/", tmp_path / "t.db") as (_, line):
        assert "listening on http://127.0.0.1:" in line, line
    assert secret not in line and "http://%5Bredacted%5D" in line


def test_a_url_whose_user_name_is_the_credential_is_not_stored_by_record(sdk_agent, db_path):
    token = "ghp_recordTokenInUserInfo9f3a"
    url = sdk_agent.url.replace("http://", f"http://{token}@")
    r = subprocess.run([SCRIPT, "record", url, "hello", "--db", str(db_path)], capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert token.encode() not in r.stdout + r.stderr
    assert token.encode() not in _raw_db(db_path)


def test_a_jwt_is_redacted_whatever_its_header_or_query_name(db_path):
    with serve_app(make_proxy_fault_app()) as url, running_proxy(url, db_path) as proxy:
        body, h = send_body("hello", stream=False)
        headers = {**h, "Cf-Access-Jwt-Assertion": JWT, "X-Goog-IAP-JWT-Assertion": JWT}
        r = httpx.post(proxy.url + f"/echo/?jwt={JWT}&page=2", content=body, headers=headers)
    assert r.status_code == 200 and JWT in r.text  # the agent (and the client) got it as sent
    assert JWT.encode() not in _raw_db(db_path)
    assert JWT.split(".")[2].encode() not in _raw_db(db_path)


def test_a_gzip_request_body_is_redacted_on_its_decoded_form(db_path):
    secret = "meta-secret-gz-5c2e"
    doc = json.loads(send_body("hello", stream=False)[0])
    doc["params"]["message"]["metadata"] = {"token": secret}
    coded = gzip.compress(json.dumps(doc).encode())
    redactor = Redactor(json_paths=["params.message.metadata.token"])
    with serve_app(make_proxy_fault_app()) as url, running_proxy(url, db_path, redactor=redactor) as proxy:
        headers = {"content-type": "application/json", "content-encoding": "gzip"}
        r = httpx.post(proxy.url + "/echo/", content=coded, headers=headers)
        stored = [e.request_body for e in proxy.store.exchanges()]
    assert r.status_code == 200
    (body,) = [bytes(b) for b in stored if b]
    plain = gzip.decompress(body) if body[:2] == b"\x1f\x8b" else body
    assert secret.encode() not in plain and b"[redacted]" in plain


def test_a_credential_the_agent_echoes_from_the_same_exchange_is_redacted(db_path):
    with serve_app(make_proxy_fault_app()) as url, running_proxy(url, db_path) as proxy:
        body, h = send_body("hello", stream=False)
        r = httpx.post(proxy.url + "/echo/", content=body, headers={**h, "X-Api-Key": ECHOED})
    assert ECHOED in r.text  # the client gets the answer as the agent sent it
    assert ECHOED.encode() not in _raw_db(db_path)


@pytest.mark.parametrize("how", ["env", "file"])
def test_the_upstream_credential_can_come_from_the_environment_or_a_file(tmp_path, how):
    password = "pw-from-elsewhere-61d0"
    env: dict[str, str] = {}
    extra: list[str] = []
    if how == "env":
        env["A2A_TAPE_UPSTREAM_CREDENTIALS"] = f"alice:{password}"
    else:
        (tmp_path / "cred").write_text(f"alice:{password}\n")
        extra = ["--upstream-credentials-file", str(tmp_path / "cred")]
    with serve_app(make_proxy_fault_app()) as url, _cli_proxy(url, tmp_path / "t.db", *extra, env=env) as (addr, line):
        assert addr, line
        body, h = send_body("hello", stream=False)
        r = httpx.post(addr + "/echo/", content=body, headers=h)
    seen = dict(tuple(p) for p in r.json()["headers"])
    assert base64.b64decode(seen["authorization"].split()[1]) == f"alice:{password}".encode()
    assert password.encode() not in _raw_db(tmp_path / "t.db")


def test_upstream_credentials_given_twice_are_one_clear_line(tmp_path):
    (tmp_path / "cred").write_text("alice:pw\n")
    r = subprocess.run(
        [SCRIPT, "proxy", "http://bob:x@127.0.0.1:9/", "--upstream-credentials-file", str(tmp_path / "cred")]
        + ["--db", str(tmp_path / "t.db")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "carries credentials already" in r.stderr
