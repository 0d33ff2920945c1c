"""Bad input to the replay server and to ``a2a-tape serve``: clear errors, never a crash."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from a2a_tape import store
from a2a_tape.cli import app
from a2a_tape.replay.serve.engine import ReplayEngine
from a2a_tape.replay.serve.library import Library
from a2a_tape.replay.serve.server import create_app
from a2a_tape.replay.serve.transport import ReplayTransport
from a2a_tape.store import Exchange, NewEvent, decode_item
from tests.replay._record import headers_for, request_body
from tests.support.servers import serve_app

TAPE = Path(__file__).parents[1] / "data" / "chunk-agent.jsonl"
runner = CliRunner()


def post(c: httpx.Client, body: bytes, dialect: str = "1.0", **kw) -> httpx.Response:
    return c.post("http://agent.test/", content=body, headers=headers_for(dialect), **kw)


@pytest.fixture
def client():
    with httpx.Client(transport=ReplayTransport(TAPE)) as c:
        yield c


@pytest.mark.parametrize(
    "body, code",
    [
        (b"this is not json", -32700),
        (b'{"jsonrpc": "2.0", "id": 3', -32700),
        (b"[1, 2]", -32600),
        (b'{"jsonrpc": "2.0", "id": 3}', -32600),
        (b'{"jsonrpc": "1.0", "id": 3, "method": "GetTask"}', -32600),
        (b'{"jsonrpc": "2.0", "id": 3, "method": "tasks/list"}', -32601),
        (b'{"jsonrpc": "2.0", "id": 3, "method": "GetTask", "params": {}}', -32602),
    ],
)
def test_malformed_requests_get_json_rpc_errors(client, body, code):
    r = post(client, body)
    item = decode_item(r.content)
    assert r.status_code == 200 and item.kind == "error"
    assert item.body.code == code


@pytest.mark.parametrize("dialect", ["1.0", "0.3"])
def test_unknown_task_is_task_not_found(client, dialect):
    for op in ("get", "cancel", "subscribe"):
        item = decode_item(post(client, request_body(op, dialect, task_id="no-such-task", rpc_id=9), dialect).content)
        assert item.kind == "error" and item.body.code == -32001, op
        # as an a2a-sdk 1.3.0 agent answers it: its words, and in v1.0 the ErrorInfo details
        assert item.body.message == "Task not found" and item.rpc_id == 9
        reasons = [d["reason"] for d in item.body.data] if dialect == "1.0" else item.body.data
        assert reasons == (["TASK_NOT_FOUND"] if dialect == "1.0" else None), op


def test_unrecorded_request_names_the_closest_recording(client):
    item = decode_item(post(client, request_body("stream", "1.0", text="helo wrld", rpc_id=4)).content)
    assert item.body.code == -32099
    msg = item.body.message
    assert "no recording matches SendStreamingMessage with text 'helo wrld'" in msg
    assert "closest recording: exchange #" in msg and "'hello'" in msg


@pytest.mark.parametrize("version", [None, "0.3"])
def test_a_v1_method_without_the_version_header_is_refused_as_the_agent_does(client, version):
    """a2a-sdk 1.3.0 answers a v1.0 method without ``A2A-Version: 1.0`` with -32009 (HTTP 200,
    capture T4): a client that forgets the header fails against the replay too."""
    body = request_body("stream", "1.0", text="hello", rpc_id=4)
    headers = {"content-type": "application/json", **({"A2A-Version": version} if version else {})}
    r = client.post("http://agent.test/", content=body, headers=headers)
    item = decode_item(r.content)
    assert r.status_code == 200 and item.kind == "error" and item.body.code == -32009 and item.rpc_id == 4
    assert "Expected version '1.0'" in item.body.message
    ok = client.post(
        "http://agent.test/", content=body, headers={"content-type": "application/json", "a2a-version": "1.0"}
    )
    assert ok.headers["content-type"].startswith("text/event-stream")


def test_bad_fault_on_a_request_is_invalid_params(client):
    r = client.post(
        "http://agent.test/?fault=drop-after=lots",
        content=request_body("stream", "1.0", text="hello"),
        headers=headers_for("1.0"),
    )
    item = decode_item(r.content)
    assert item.body.code == -32602 and "not a whole number" in item.body.message


def test_terminal_task_cannot_be_cancelled_or_resubscribed(client):
    r = post(client, request_body("send", "1.0", text="hello again"))
    task_id = decode_item(r.content).task_id
    cancel = decode_item(post(client, request_body("cancel", "1.0", task_id=task_id)).content)
    sub = decode_item(post(client, request_body("subscribe", "1.0", task_id=task_id)).content)
    assert cancel.body.code == -32002 and sub.body.code == -32004


def test_cancel_an_interrupted_task(client):
    """input-required is not terminal: cancel works, and GetTask says canceled from then on."""
    r = client.post(
        "http://agent.test/", content=request_body("stream", "1.0", text="please ask me"), headers=headers_for("1.0")
    )
    task_id = decode_item(r.content.split(b"\r\n\r\n")[0][len(b"data: ") :]).task_id
    cancelled = decode_item(post(client, request_body("cancel", "0.3", task_id=task_id), "0.3").content)
    got = decode_item(post(client, request_body("get", "1.0", task_id=task_id)).content)
    assert cancelled.dialect == "0.3" and cancelled.body.state == "canceled"
    assert got.body.state == "canceled"


def test_empty_database_answers_with_a_clear_error(db_path):
    store.open_store(db_path).close()
    lib = Library.open(db_path)
    try:
        with httpx.Client(transport=ReplayTransport(engine=ReplayEngine(lib))) as c:
            item = decode_item(post(c, request_body("stream", "1.0", text="hello")).content)
    finally:
        lib.close()
    assert item.body.code == -32099 and "has no recorded sends" in item.body.message
    res = runner.invoke(app, ["serve", "--db", str(db_path)])
    assert res.exit_code == 2
    assert "no recordings in" in res.stderr and "Traceback" not in res.stderr


def test_undecodable_recorded_payload_is_served_as_recorded(db_path):
    """A payload that is not JSON stays in the stream, byte for byte, between the others."""
    st = store.open_store(db_path)
    body = request_body("stream", "1.0", text="garbled")
    ex = st.begin_exchange(
        Exchange(rpc_method="SendStreamingMessage", dialect="1.0", streaming=True, request_body=body, url="http://x/")
    )
    good = b'{"result": {"task": {"id": "t-1", "contextId": "c-1", "status": {"state": "TASK_STATE_WORKING"}}}, "id": 1, "jsonrpc": "2.0"}'
    bad = b'\xff\xfe{not json "id": 1'
    done = b'{"result": {"statusUpdate": {"taskId": "t-1", "contextId": "c-1", "status": {"state": "TASK_STATE_COMPLETED"}}}, "id": 1, "jsonrpc": "2.0"}'
    st.append_batch([NewEvent(payload=p, task_id="t-1", exchange_id=ex) for p in (good, bad, done)])
    st.close()
    lib = Library.open(db_path)
    try:
        with serve_app(create_app(ReplayEngine(lib))) as url:
            r = httpx.post(
                url + "/",
                content=request_body("stream", "1.0", text="garbled", rpc_id="z"),
                headers=headers_for("1.0"),
                timeout=10,
            )
            got = httpx.post(
                url + "/", content=request_body("get", "1.0", task_id="t-1"), headers=headers_for("1.0"), timeout=10
            )
    finally:
        lib.close()
    frames = r.content.split(b"\r\n\r\n")
    assert frames[1] == b"data: " + bad
    assert frames[0] == b"data: " + good.replace(b'"id": 1,', b'"id": "z",')
    assert decode_item(got.content).body.state == "completed"


@pytest.mark.parametrize(
    "args, message",
    [
        (["--listen", "0.0.0.0:0"], "refusing to listen on 0.0.0.0"),
        (["--listen", "nonsense"], "'nonsense' is not HOST:PORT"),
        (["--timing", "sometimes"], "--timing"),
        (["--timing", "-2"], "the factor must be a finite number"),
        (["--fault", "explode"], "unknown fault 'explode'"),
        (["--record-mode", "sometimes"], "Invalid value for '--record-mode': 'sometimes' is not one of"),
        (["--record-mode", "new_episodes"], "needs --upstream"),
        (["--match", "fuzzy"], "Invalid value for '--match': 'fuzzy' is not one of"),
    ],
)
def test_serve_bad_usage_exits_2_with_one_line(args, message):
    res = runner.invoke(app, ["serve", "--db", str(TAPE), *args])
    assert res.exit_code == 2, res.output
    assert message in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_serve_missing_database_exits_2(tmp_path):
    res = runner.invoke(app, ["serve", "--db", str(tmp_path / "nope.db")])
    assert res.exit_code == 2 and "no recording at" in res.stderr


def test_serve_subprocess_answers_and_refuses_nothing_it_should_not(tmp_path):
    """The installed script, for real: it says where it listens, then answers as the agent."""
    exe = Path(sys.executable).parent / "a2a-tape"
    proc = subprocess.Popen(
        [str(exe), "serve", "--db", str(TAPE), "--listen", "127.0.0.1:0", "--timing", "50"],
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env={**os.environ, "NO_COLOR": "1"},
    )
    try:
        line = proc.stderr.readline().decode()  # printed once the socket is bound
        assert line.startswith("a2a-tape serve: http://127.0.0.1:"), line
        url = line.split()[2]
        card = httpx.get(url + "/.well-known/agent-card.json", timeout=10).json()
        r = httpx.post(
            url + "/",
            content=request_body("send", "0.3", text="hello again", rpc_id=1),
            headers=headers_for("0.3"),
            timeout=10,
        )
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert card["supportedInterfaces"][0]["url"] == url + "/"
    item = decode_item(r.content)
    assert item.dialect == "0.3" and item.body.state == "completed"
    assert proc.stdout.read() == b""  # nothing on stdout


def test_a_broken_recording_store_is_an_error_not_a_crash(tmp_path):
    """The database vanishes under a running replay: requests get -32603, the server stays up."""
    from a2a_tape.store.tape import import_tape

    db = tmp_path / "copy.db"
    with store.open_store(db) as st, TAPE.open("rb") as fh:
        import_tape(st, fh)
    lib = Library.open(db)
    engine = ReplayEngine(lib)
    with httpx.Client(transport=ReplayTransport(engine=engine)) as c:
        lib.store.close()  # every read now fails
        item = decode_item(post(c, request_body("get", "1.0", task_id="x")).content)
        card = c.get("http://agent.test/.well-known/agent-card.json")
    assert item.kind == "error" and item.body.code == -32603 and "internal error" in item.body.message
    assert card.status_code == 200


def test_a_stream_answered_with_a_json_error_is_replayed_as_json(db_path):
    """The agent refused a stream with a plain JSON error (as a2a-sdk does before any event)."""
    st = store.open_store(db_path)
    body = request_body("stream", "1.0", text="refused")
    ex = st.begin_exchange(
        Exchange(
            rpc_method="SendStreamingMessage",
            dialect="1.0",
            streaming=True,
            request_body=body,
            content_type="application/json",
            status=200,
        )
    )
    st.append(
        NewEvent(
            payload=b'{"error":{"code":-32009,"message":"A2A version not supported"},"id":1,"jsonrpc":"2.0"}',
            exchange_id=ex,
        )
    )
    st.close()
    lib = Library.open(db_path)
    try:
        with httpx.Client(transport=ReplayTransport(engine=ReplayEngine(lib))) as c:
            r = post(c, request_body("stream", "1.0", text="refused", rpc_id=8))
    finally:
        lib.close()
    assert r.headers["content-type"] == "application/json"
    assert r.content == b'{"error":{"code":-32009,"message":"A2A version not supported"},"id":8,"jsonrpc":"2.0"}'


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
def test_a_request_body_past_serves_limit_is_refused_and_serve_goes_on(tmp_path, declared):
    """A client sending a body larger than 10 MiB (said up front, or as a chunked upload) gets
    413 with a JSON-RPC error, not a server holding it all; serve answers the next request."""
    from a2a_tape.wire.served import MAX_REQUEST

    tape = tmp_path / "r.jsonl"
    tape.write_bytes(TAPE.read_bytes())
    lib = Library.open(tape)

    def chunked():
        for _ in range(2 * MAX_REQUEST >> 16):
            yield b" " * (1 << 16)

    try:
        with serve_app(create_app(ReplayEngine(lib))) as url, httpx.Client(timeout=30) as c:
            content = b" " * (MAX_REQUEST + 1) if declared else chunked()
            r = c.post(url + "/", content=content, headers=headers_for("1.0"))
            assert r.status_code == 413
            assert r.json()["error"]["code"] == -32600 and "limit" in r.json()["error"]["message"]
            assert c.get(url + "/.well-known/agent-card.json").status_code == 200
    finally:
        lib.close()
