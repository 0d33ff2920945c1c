"""RecordingTransport with the a2a-sdk client and plain httpx; redaction before the disk."""

from __future__ import annotations

from pathlib import Path

import anyio
import httpx
import msgspec
import pytest

from a2a_tape import store
from a2a_tape.recorder.transport import RecordingTransport
from a2a_tape.store.redact import REDACTED, build_redactor
from tests.conftest import running_sdk_agent
from tests.recorder.conftest import run_cli

ANSWER_KINDS = ["task", "status", "artifact", "artifact", "artifact", "status"]


def _db_bytes(db_path: Path) -> bytes:
    """The raw bytes of the database file and its WAL / journal, as they are on disk."""
    out = b""
    for suffix in ("", "-wal", "-shm", "-journal"):
        p = Path(str(db_path) + suffix)
        if p.exists():
            out += p.read_bytes()
    return out


def test_a2a_sdk_client_through_recording_transport(db_path):
    from a2a.client import ClientConfig, create_client
    from a2a.types import Message, Part, Role, SendMessageRequest

    with running_sdk_agent(slow_delay=0.05) as agent, store.open_store(db_path) as st:
        seen_when_first_arrived: list[int] = []

        async def main() -> list:
            transport = RecordingTransport(st)
            async with httpx.AsyncClient(transport=transport, headers={"Authorization": "Bearer sdk-secret-1"}) as http:
                client = await create_client(agent.url, ClientConfig(httpx_client=http))
                req = SendMessageRequest(
                    message=Message(message_id="m-sdk-1", role=Role.ROLE_USER, parts=[Part(text="slow")])
                )
                got = []
                async for ev in client.send_message(req):
                    if not got:
                        # write-ahead and not held back: the first event is in the log while the stream goes on
                        seen_when_first_arrived.append(st.count_events())
                    got.append(ev)
                transports.append(transport)
                return got

        transports: list[RecordingTransport] = []
        got = anyio.run(main)
        assert len(got) >= 4
        assert seen_when_first_arrived and 1 <= seen_when_first_arrived[0] < 6
        (task_id,) = [t.task_id for t in st.task_events()]
        assert transports[0].task_ids == [task_id]
        kinds = [store.decode_item(e.payload).kind for e in st.read_task(task_id)]
        assert kinds == ANSWER_KINDS
        exchanges = st.exchanges()
        card = [x for x in exchanges if x.rpc_method == "agent-card"]
        assert len(card) == 1 and b"chunk-agent" in card[0].response_body
        stream = [x for x in exchanges if x.rpc_method == "SendStreamingMessage"]
        assert len(stream) == 1 and stream[0].outcome == "ok" and stream[0].dialect == "1.0"
        assert stream[0].message_id == "m-sdk-1"
        assert stream[0].request_headers["authorization"] == REDACTED
    assert b"sdk-secret-1" not in _db_bytes(db_path)


def _v03_body(method: str, message_id: str, **message) -> dict:
    """A v0.3 JSON-RPC request saying "hello" (``message``: more fields of the message)."""
    return {
        "jsonrpc": "2.0",
        "id": "r1",
        "method": method,
        "params": {
            "message": {
                "messageId": message_id,
                "role": "user",
                "kind": "message",
                "parts": [{"kind": "text", "text": "hello"}],
                **message,
            }
        },
    }


def test_plain_httpx_sync_client_v03_stream_and_get(db_path):
    with running_sdk_agent() as agent:
        transport = RecordingTransport(db_path)
        body = _v03_body("message/stream", "m-plain-1")
        with httpx.Client(transport=transport) as http:
            with http.stream("POST", agent.url + "/", json=body) as resp:
                lines = [ln for ln in resp.iter_lines() if ln.startswith("data:")]
            assert len(lines) == 6
            task_id = msgspec.json.decode(lines[0][5:])["result"]["id"]
            got = http.post(
                agent.url + "/", json={"jsonrpc": "2.0", "id": "r2", "method": "tasks/get", "params": {"id": task_id}}
            )
            assert got.json()["result"]["status"]["state"] == "completed"
            # not A2A: passes through, not recorded
            http.get(agent.url + "/nothing-here")
    with store.open_store(db_path) as st:
        methods = [x.rpc_method for x in st.exchanges()]
        assert methods == ["message/stream", "tasks/get"]
        kinds = [store.decode_item(e.payload).kind for e in st.read_task(task_id)]
        assert kinds == ANSWER_KINDS + ["task"]
        assert all(x.dialect == "0.3" for x in st.exchanges())


@pytest.mark.parametrize("given", ["redactor", "redact"])
def test_json_paths_redacted_in_requests_and_events(db_path, given):
    """Paths given as a Redactor, or as ``redact=[...]`` (what ``--redact`` takes, docs/api.md)."""
    secret = "json-path-secret-42"
    paths = ["params.message.metadata.token", "result.history.*.metadata.token"]
    how = {"redactor": build_redactor(paths)} if given == "redactor" else {"redact": paths}
    with running_sdk_agent() as agent:
        transport = RecordingTransport(db_path, **how)
        body = _v03_body("message/send", "m-json-1", metadata={"token": secret, "keep": "visible-value"})
        with httpx.Client(transport=transport) as http:
            resp = http.post(agent.url + "/", json=body)
            assert resp.status_code == 200
        with store.open_store(db_path) as st:
            (ex,) = st.exchanges()
            assert b"visible-value" in ex.request_body  # only the configured path is replaced
            assert st.count_events() == 1
        transport.close()
    assert secret.encode() not in _db_bytes(db_path)


def test_cli_redaction_defaults_config_and_option(sdk_agent, db_path, tmp_path, monkeypatch):
    """The raw bytes of the database file (and its WAL) never contain a header secret."""
    project = tmp_path / "proj"
    project.mkdir()
    (project / "pyproject.toml").write_text('[tool.a2a-tape]\nredact_headers = ["X-Tenant-Pass"]\n')
    monkeypatch.chdir(project)
    secrets = ["Bearer auth-s3cret", "apikey-s3cret", "tenant-s3cret", "option-s3cret", "sess=cookie-s3cret"]
    run = run_cli(
        "record",
        sdk_agent.url,
        "hello",
        "--db",
        str(db_path),
        "--json",
        "--header",
        f"Authorization: {secrets[0]}",
        "--header",
        f"X-API-Key: {secrets[1]}",
        "--header",
        f"X-Tenant-Pass: {secrets[2]}",
        "--header",
        f"My-Odd-Header: {secrets[3]}",
        "--redact",
        "my-odd-header",
        "--header",
        f"Cookie: {secrets[4]}",
    )
    assert run.code == 0, run.stderr
    raw = _db_bytes(db_path)
    for s in secrets:
        assert s.encode() not in raw, s
    with store.open_store(db_path) as st:
        hdrs = [x.request_headers for x in st.exchanges() if x.rpc_method == "SendStreamingMessage"][0]
        assert hdrs["authorization"] == hdrs["x-tenant-pass"] == hdrs["my-odd-header"] == REDACTED
        assert hdrs["a2a-version"] == "1.0"  # not everything is hidden
    assert not any(s in run.stdout + run.stderr for s in secrets)


def test_bad_redaction_config_is_one_line(sdk_agent, db_path, tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text('[tool.a2a-tape]\nredact_headers = "not-a-list"\n')
    monkeypatch.chdir(tmp_path)
    run = run_cli("record", sdk_agent.url, "hello", "--db", str(db_path))
    assert run.code == 2
    assert "redaction config" in run.stderr and len(run.stderr.strip().splitlines()) == 1


def test_client_closing_early_keeps_what_arrived(db_path):
    """A client that stops after the first event: the exchange is 'incomplete', the event is kept."""
    with running_sdk_agent(slow_delay=0.2) as agent:

        async def main() -> None:
            transport = RecordingTransport(db_path)
            body = {
                "jsonrpc": "2.0",
                "id": "r1",
                "method": "message/stream",
                "params": {
                    "message": {
                        "messageId": "m-early-1",
                        "role": "user",
                        "kind": "message",
                        "parts": [{"kind": "text", "text": "slow"}],
                    }
                },
            }
            async with httpx.AsyncClient(transport=transport) as http:
                async with http.stream("POST", agent.url + "/", json=body) as resp:
                    async for line in resp.aiter_lines():
                        if line.startswith("data:"):
                            break
            await transport.aclose()

        anyio.run(main)
    with store.open_store(db_path) as st:
        (ex,) = st.exchanges()
        assert ex.outcome == "incomplete"
        kinds = [store.decode_item(e.payload).kind for e in st.read_exchange(ex.id)]
        assert kinds and kinds[0] == "task" and len(kinds) < 6  # not the whole stream: it was left early


def test_url_query_secrets_never_reach_the_disk(db_path):
    """A token in a query string (or a URL password) is replaced in the exchange's URL and in
    any error text that quotes the URL, also when the request fails."""
    from tests.support.servers import closed_port

    secret, password = "query-s3cret-77", "url-pa55word"
    with running_sdk_agent() as agent:
        transport = RecordingTransport(db_path)
        body = _v03_body("message/send", "m-q-1")
        with httpx.Client(transport=transport) as http:
            resp = http.post(agent.url + f"/?api_key={secret}&keep=visible", json=body)
            assert resp.status_code == 200
            dead = f"http://user:{password}@127.0.0.1:{closed_port()}/?access_token={secret}"
            try:
                http.post(dead, json=body)
            except httpx.HTTPError:
                pass
        with store.open_store(db_path) as st:
            urls = [x.url for x in st.exchanges()]
            errors = [x.error for x in st.exchanges() if x.error]
        transport.close()
    assert any(u.endswith(f"?api_key={REDACTED}&keep=visible") for u in urls), urls
    assert any("user:%5Bredacted%5D@" in u for u in urls), urls
    assert secret.encode() not in _db_bytes(db_path) and password.encode() not in _db_bytes(db_path)
    assert all(secret not in e and password not in e for e in errors)


def test_redactor_url_rules():
    from urllib.parse import urlsplit

    from a2a_tape.store.redact import Redactor

    r = Redactor(headers=["X-Tenant"])
    assert r.url("http://h/p?x=1&page=2") == "http://h/p?x=1&page=2"  # nothing secret: the same string
    assert (
        r.url("http://h/p?token=abc&monkey=banana&keyword=k") == f"http://h/p?token={REDACTED}&monkey=banana&keyword=k"
    )
    assert r.url("http://h/?client_secret=a&sig=b&X-Tenant=c&flag") == (
        f"http://h/?client_secret={REDACTED}&sig={REDACTED}&X-Tenant={REDACTED}&flag"
    )
    assert r.url("https://me:pw@h:8443/x") == "https://me:%5Bredacted%5D@h:8443/x"
    assert urlsplit(r.url("https://me:pw@h:8443/x")).port == 8443  # still a URL that parses
    assert r.url("https://me@h/x") == "https://me@h/x"
    assert r.text("GET http://h/?token=abc failed: refused") == f"GET http://h/?token={REDACTED} failed: refused"


def _interceptor(db, **kw):
    pytest.importorskip("grpc")
    from a2a_tape.recorder.grpc_interceptor import RecordingInterceptor

    return RecordingInterceptor(db, **kw)


@pytest.mark.parametrize("recorder", [RecordingTransport, _interceptor], ids=["transport", "interceptor"])
def test_redactor_and_redact_together_are_refused(db_path, recorder):
    """Both in-process recorders read db= and redact= by one rule (capture/recording_log.py)."""
    with pytest.raises(TypeError, match="not both"):
        recorder(db_path, redactor=build_redactor(), redact=["X-Other"])
    assert not db_path.exists()  # refused before the log is opened


_SECRET = "sk_live_route_lookalike_42"
_ANSWERS = {  # what a non-A2A API living under .../tasks answers: JSON, JSON that is no A2A item, broken JSON, SSE
    "object": ("application/json", '{"items": [{"token": "S"}], "msg": "invalid key S"}'),
    "list": ("application/json", '[{"token": "S"}, "invalid key S"]'),
    "broken": ("application/json", '{"token": "S", "msg": "invalid key S" '),
    "stream": ("text/event-stream", 'data: {"token": "S", "msg": "invalid key S"}\n\n'),
}


def _lookalike_app():
    from starlette.applications import Starlette
    from starlette.responses import Response
    from starlette.routing import Route

    async def tasks(request):
        ctype, text = _ANSWERS[request.query_params["v"]]
        return Response(text.replace("S", _SECRET), media_type=ctype)

    return Starlette(routes=[Route("/api/tasks", tasks)])


@pytest.mark.parametrize("sync", [True, False], ids=["sync", "async"])
def test_a_non_a2a_call_on_an_http_json_lookalike_path_is_redacted_like_any_other(db_path, sync):
    """Issue 36, item 6: ``GET .../tasks`` of some other API is recorded as the HTTP+JSON route it
    looks like; its answer goes through the one redactor (store/redact.py) as an A2A answer does:
    configured JSON paths, and a credential the call sent echoed back. The client gets it as sent."""
    from tests.support.servers import serve_app

    redactor = build_redactor(["$.items.*.token", "$.token", "$.*.token"])
    sent = {"X-Api-Key": _SECRET}
    with serve_app(_lookalike_app()) as url:
        transport = RecordingTransport(db_path, redactor=redactor)
        got = []
        if sync:
            with httpx.Client(transport=transport, headers=sent) as http:
                got = [http.get(f"{url}/api/tasks?v={v}").text for v in _ANSWERS]
        else:

            async def main() -> list[str]:
                async with httpx.AsyncClient(transport=transport, headers=sent) as http:
                    return [(await http.get(f"{url}/api/tasks?v={v}")).text for v in _ANSWERS]

            got = anyio.run(main)
        transport.close()
    assert all(_SECRET in text for text in got)  # recording changes nothing the client gets
    with store.open_store(db_path) as st:
        assert [x.http_method for x in st.exchanges()] == ["GET"] * len(_ANSWERS)
    assert _SECRET.encode() not in _db_bytes(db_path)
