"""The recording gRPC proxy: transparent for gRPC clients, every A2A message in the log first."""

from __future__ import annotations

import base64

import msgspec
import pytest

from a2a_tape import store
from a2a_tape.fold.projection import fold_events
from tests.grpc.clients import card, raw_call, sdk_get, sdk_send, send_request, stream_response
from tests.grpc.conftest import running_grpc_proxy
from tests.support.grpc_fake import error_details, exact_messages, running_fake_grpc_agent
from tests.support.servers import closed_port


def _exchanges(st) -> list[store.Exchange]:
    return [e for e in st.exchanges() if e.url.startswith("grpc://")]


_VARYING = frozenset({"id", "taskId", "contextId", "messageId", "timestamp"})


def _strip_ids(doc):
    """Everything but the ids and times a live agent makes anew each run."""
    if isinstance(doc, dict):
        return {k: (k if k in _VARYING and isinstance(v, str) else _strip_ids(v)) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_strip_ids(v) for v in doc]
    return doc


def test_the_card_names_the_grpc_proxy_and_the_sdk_client_goes_through_it(grpc_proxied):
    agent, proxy = grpc_proxied
    interfaces = {i["protocolBinding"]: i["url"] for i in card(proxy.url)["supportedInterfaces"]}
    assert interfaces["GRPC"] == proxy.target  # as the agent wrote it: HOST:PORT, no scheme
    assert interfaces["JSONRPC"] == proxy.url + "/"

    direct = sdk_send(agent.url, "hello", message_id="m-direct")
    through = sdk_send(proxy.url, "hello", message_id="m-proxied")
    assert _strip_ids(through) == _strip_ids(direct)
    assert agent.executor.executions == 2

    (ex,) = _exchanges(proxy.store)
    proxy.wait_settled(ex.id)
    ex = proxy.store.get_exchange(ex.id)
    assert ex.url == f"grpc://{agent.target}/lf.a2a.v1.A2AService/SendStreamingMessage"
    assert (ex.rpc_method, ex.dialect, ex.streaming, ex.outcome) == ("SendStreamingMessage", "1.0", True, "closed")
    assert ex.request_headers["a2a-version"] == "1.0" and ex.response_headers["grpc-status"] == "0"
    assert msgspec.json.decode(ex.request_body)["message"]["messageId"] == "m-proxied"
    # every message the client got is in the log, in its JSON mapping (the v1.0 JSON shape)
    events = proxy.store.read_exchange(ex.id)
    assert [msgspec.json.decode(e.payload) for e in events] == through
    view = fold_events(proxy.store.read_task(ex.task_id))[ex.task_id]
    assert view.state == "completed"
    assert "".join(a.text for a in view.artifacts) == "chunk-0 chunk-1 chunk-2 "


def test_unary_calls_and_the_agents_errors_cross_as_the_agent_sent_them(grpc_proxied):
    agent, proxy = grpc_proxied
    (done,) = sdk_send(proxy.url, "hello", stream=False, message_id="m-unary")
    task_id = done["task"]["id"]
    assert sdk_get(proxy.url, task_id)["status"]["state"] == "TASK_STATE_COMPLETED"
    # GetTask of a task the agent does not know: the same status, details and trailers as direct
    from a2a.types import GetTaskRequest

    req = GetTaskRequest(id="no-such-task").SerializeToString()
    direct = raw_call(agent.target, "GetTask", req, streaming=False)
    through = raw_call(proxy.target, "GetTask", req, streaming=False)
    assert direct.code == "NOT_FOUND"
    assert (through.code, through.details, through.trailers) == (direct.code, direct.details, direct.trailers)
    rows = {e.rpc_method: e for e in _exchanges(proxy.store)}
    assert set(rows) == {"SendMessage", "GetTask"}
    errors = [e for e in proxy.store.read_exchange(max(e.id for e in _exchanges(proxy.store)))]
    (error,) = errors
    item = store.decode_item(error.payload)
    assert isinstance(item.body, store.ErrorItem) and item.body.code == 5


def test_exact_bytes_metadata_status_and_trailers_cross_unchanged(db_path):
    """Messages no protobuf library writes (an unknown field, fields out of order), ``-bin``
    metadata both ways, trailers: the client gets the agent's exact bytes and the log their
    JSON mapping (the unknown field is what JSON cannot carry)."""
    with running_fake_grpc_agent() as (target, fake):
        with running_grpc_proxy(f"http://127.0.0.1:{closed_port()}", target, db_path) as proxy:
            req = send_request("x")
            direct = raw_call(target, "SendStreamingMessage", req, streaming=True)
            through = raw_call(proxy.target, "SendStreamingMessage", req, streaming=True)
            assert through.messages == exact_messages() == direct.messages
            assert (through.initial, through.trailers, through.code) == (direct.initial, direct.trailers, "OK")
            assert ("x-agent-bin", b"\x00\x01\xff") in through.initial
            (ex,) = _exchanges(proxy.store)
            proxy.wait_settled(ex.id)
            ex = proxy.store.get_exchange(ex.id)
            assert ex.response_headers["x-agent-bin"] == base64.b64encode(b"\x00\x01\xff").decode()
            assert ex.response_headers["x-trailer"] == "after"
            logged = [msgspec.json.decode(e.payload) for e in proxy.store.read_exchange(ex.id)]
            assert logged == [stream_response(m) for m in exact_messages()]

            # (each call its own messageId: a repeat would be answered from the log)
            req = send_request("x", "m-error")
            err = raw_call(
                proxy.target, "SendStreamingMessage", req, streaming=True, metadata=(("x-fake-mode", "error"),)
            )
            assert err.code == "NOT_FOUND" and err.details == "task nope not found"
            assert ("grpc-status-details-bin", error_details()) in err.trailers

            echoed = raw_call(
                proxy.target,
                "SendStreamingMessage",
                send_request("x", "m-echo"),
                streaming=True,
                metadata=(("x-fake-mode", "echo"), ("k-bin", b"\x07")),
            )
            assert ("echo-k-bin", b"\x07") in echoed.initial and ("echo-x-fake-mode", "echo") in echoed.initial


def test_a_method_the_proxy_does_not_know_is_forwarded_as_bytes(db_path):
    with running_fake_grpc_agent() as (target, _fake):
        with running_grpc_proxy(f"http://127.0.0.1:{closed_port()}", target, db_path) as proxy:
            got = raw_call(proxy.target, "/other.Echo/Reverse", b"\x00abc\xff", streaming=False)
            assert (got.code, got.messages) == ("OK", [b"\xffcba\x00"])
            (ex,) = _exchanges(proxy.store)
            assert ex.rpc_method == "Reverse" and ex.dialect is None


def test_each_message_is_in_the_log_before_the_client_gets_it(db_path):
    with running_fake_grpc_agent() as (target, _fake):
        with running_grpc_proxy(f"http://127.0.0.1:{closed_port()}", target, db_path) as proxy:
            seen: list[int] = []

            def after_each(k: int) -> None:
                (ex,) = _exchanges(proxy.store)
                seen.append(len(proxy.store.read_exchange(ex.id)))
                assert seen[-1] >= k

            raw_call(proxy.target, "SendStreamingMessage", send_request("x"), streaming=True, after_each=after_each)
            assert seen == [1, 2] or seen == [2, 2]


@pytest.mark.parametrize(
    ("mode", "config", "code", "outcome", "said"),
    [
        ("silent", {"first_byte_timeout": 0.3}, "DEADLINE_EXCEEDED", "timeout", "--first-byte-timeout"),
        ("stall", {"read_timeout": 0.3}, "DEADLINE_EXCEEDED", "timeout", "--read-timeout"),
    ],
)
def test_a_silent_agent_is_a_deadline_exceeded_answer(db_path, mode, config, code, outcome, said):
    with running_fake_grpc_agent() as (target, _fake):
        with running_grpc_proxy(f"http://127.0.0.1:{closed_port()}", target, db_path, **config) as proxy:
            got = raw_call(
                proxy.target,
                "SendStreamingMessage",
                send_request("x"),
                streaming=True,
                metadata=(("x-fake-mode", mode),),
            )
            assert got.code == code and said in got.details
            assert len(got.messages) == (1 if mode == "stall" else 0)
            (ex,) = _exchanges(proxy.store)
            proxy.wait_settled(ex.id)
            ex = proxy.store.get_exchange(ex.id)
            assert ex.outcome == outcome and said in (ex.error or "")


def test_an_unreachable_agent_is_unavailable_and_the_key_is_released(db_path):
    with running_grpc_proxy(f"http://127.0.0.1:{closed_port()}", f"127.0.0.1:{closed_port()}", db_path) as proxy:
        got = raw_call(proxy.target, "SendMessage", send_request("x", "m-down"), streaming=False)
        assert got.code == "UNAVAILABLE" and got.details.startswith("upstream agent unreachable")
        (ex,) = _exchanges(proxy.store)
        proxy.wait_settled(ex.id)
        assert proxy.store.get_exchange(ex.id).outcome == "error"
        assert proxy.store.idem_get("msg:m-down") is None  # a retry may run


def test_a_repeated_message_is_answered_from_the_log_not_run_twice(grpc_proxied):
    agent, proxy = grpc_proxied
    first = sdk_send(proxy.url, "hello", message_id="m-twice")
    (ex,) = _exchanges(proxy.store)
    proxy.wait_settled(ex.id)
    again = sdk_send(proxy.url, "hello", message_id="m-twice")
    assert again == first
    assert agent.executor.executions == 1
    assert [e.outcome for e in _exchanges(proxy.store)] == ["closed", "replayed"]
    # the same key with another text: forwarded as the new request it is, with a local note
    other = sdk_send(proxy.url, "hello again", message_id="m-twice")
    assert agent.executor.executions == 2 and other[0]["task"]["id"] != first[0]["task"]["id"]


def test_the_token_is_required_and_never_forwarded_and_secrets_stay_off_the_disk(db_path):
    with running_fake_grpc_agent() as (target, _fake):
        with running_grpc_proxy(f"http://127.0.0.1:{closed_port()}", target, db_path, token="s3cret") as proxy:
            req = send_request("x")
            refused = raw_call(proxy.target, "SendStreamingMessage", req, streaming=True)
            assert refused.code == "UNAUTHENTICATED"
            md = (("x-fake-mode", "echo"), ("authorization", "Bearer s3cret"), ("x-api-key", "k-123"))
            got = raw_call(proxy.target, "SendStreamingMessage", req, streaming=True, metadata=md)
            assert got.code == "OK"
            assert not any(k == "echo-authorization" for k, _ in got.initial)  # the token stays with the proxy
            assert ("echo-x-api-key", "k-123") in got.initial  # the agent's own credentials cross
    raw = db_path.read_bytes()
    assert b"s3cret" not in raw and b"k-123" not in raw


@pytest.mark.parametrize("grpc_url", ["grpc://127.0.0.1:9002", "127.0.0.1:9002", "http://127.0.0.1:9002"])
@pytest.mark.parametrize("ours", [None, "127.0.0.1:7000"])
def test_a_cards_grpc_interface_names_the_grpc_proxy_or_is_left_out(db_path, grpc_url, ours):
    """Never the HTTP proxy: a gRPC client sent there gets no gRPC server (before, a gRPC URL with
    a scheme was rewritten to the HTTP proxy's origin like any other); never the agent's own
    address either, without a gRPC proxy (issue 36: the client would go around the recorder)."""
    from a2a_tape.recorder.proxy.server import Proxy, ProxyConfig

    card = msgspec.json.encode(
        {
            "name": "a",
            "supportedInterfaces": [
                {"url": "http://127.0.0.1:9001/", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
                {"url": grpc_url, "protocolBinding": "GRPC", "protocolVersion": "1.0"},
            ],
        }
    )
    with store.open_store(db_path) as st:
        proxy = Proxy(st, ProxyConfig(upstream="http://127.0.0.1:9001"))
        proxy.grpc_address = ours
        out = msgspec.json.decode(proxy._rewrite_card(card, "http://127.0.0.1:8080"))
    jsonrpc, *grpc_itf = out["supportedInterfaces"]
    assert jsonrpc["url"] == "http://127.0.0.1:8080/"
    scheme = grpc_url.partition("://")[0] + "://" if "://" in grpc_url else ""
    assert [i["url"] for i in grpc_itf] == ([] if ours is None else [scheme + ours])


def test_a_log_that_cannot_be_written_is_unavailable_and_nothing_is_forwarded(grpc_agent, db_path):
    from tests.support.locks import write_lock_held

    with running_grpc_proxy(grpc_agent.url, grpc_agent.target, db_path, busy_timeout=0.3) as proxy:
        with write_lock_held(db_path):
            got = raw_call(proxy.target, "SendStreamingMessage", send_request("hello", "m-locked"), streaming=True)
    assert got.code == "UNAVAILABLE" and "cannot write its log (another process holds its write lock)" in got.details
    assert grpc_agent.executor.executions == 0


def test_a_stream_the_proxy_left_is_recovered_at_its_next_start(grpc_agent, db_path):
    """The proxy stops mid-stream (the row ends incomplete, the task working); the next proxy on
    the same log finishes the task at startup (over the agent's JSON-RPC interface)."""
    import threading

    started = threading.Event()
    with running_grpc_proxy(grpc_agent.url, grpc_agent.target, db_path) as proxy:
        box: dict = {}

        def client() -> None:
            box["got"] = raw_call(
                proxy.target,
                "SendStreamingMessage",
                send_request("slow many 30", "m-slow"),
                streaming=True,
                after_each=lambda k: started.set(),
            )

        t = threading.Thread(target=client)
        t.start()
        assert started.wait(20)
    t.join(20)
    with store.open_store(db_path) as st:
        (ex,) = _exchanges(st)
        assert ex.outcome == "incomplete" and ex.task_id
        assert fold_events(st.read_task(ex.task_id))[ex.task_id].state != "completed"
    with running_grpc_proxy(grpc_agent.url, grpc_agent.target, db_path, recover_on_start=True) as proxy:
        assert proxy.proxy.recovered.wait(30)
        report = proxy.proxy.recovery_report
        assert report is not None and report.resumed == [ex.task_id]
        assert fold_events(proxy.store.read_task(ex.task_id))[ex.task_id].state == "completed"


def test_a_client_that_goes_away_does_not_cut_the_recording(grpc_proxied):
    """The client cancels after the first message; the proxy reads the agent's stream to its end."""
    import asyncio

    import grpc

    agent, proxy = grpc_proxied

    async def first_only() -> None:
        async with grpc.aio.insecure_channel(proxy.target) as channel:
            call = channel.unary_stream("/lf.a2a.v1.A2AService/SendStreamingMessage")(
                send_request("slow", "m-gone"), metadata=(("a2a-version", "1.0"),)
            )
            await call.read()
            call.cancel()

    asyncio.run(first_only())
    (ex,) = _exchanges(proxy.store)
    proxy.wait_settled(ex.id, timeout=30)
    ex = proxy.store.get_exchange(ex.id)
    assert ex.outcome == "closed"
    assert fold_events(proxy.store.read_task(ex.task_id))[ex.task_id].state == "completed"


def test_a_duplicate_sent_while_the_first_is_relayed_attaches_to_it(grpc_proxied):
    """Two calls with one messageId at once: the agent runs it once, both clients get every message."""
    import concurrent.futures
    import time

    agent, proxy = grpc_proxied
    req = send_request("slow", "m-both")
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        first = pool.submit(raw_call, proxy.target, "SendStreamingMessage", req, streaming=True)
        while not _exchanges(proxy.store):  # the first call's row is in: the second is a duplicate
            time.sleep(0.001)
        second = pool.submit(raw_call, proxy.target, "SendStreamingMessage", req, streaming=True)
        a, b = first.result(), second.result()
    assert agent.executor.executions == 1
    assert a.messages == b.messages and len(a.messages) == 6 and a.code == b.code == "OK"
    first_row, second_row = _exchanges(proxy.store)
    proxy.wait_settled(first_row.id)
    assert [proxy.store.get_exchange(e.id).outcome for e in (first_row, second_row)] == ["closed", "replayed"]


def test_a_grpc_interface_on_the_agents_http_port_names_the_grpc_proxy_and_the_rest_the_http_one(db_path):
    """One URL for JSON-RPC and gRPC (one port serving both): each interface names the proxy of
    its own binding (a byte replacement of the URL would send JSON-RPC clients to the gRPC proxy)."""
    from a2a_tape.recorder.proxy.server import Proxy, ProxyConfig

    same = "http://127.0.0.1:9001"
    card = msgspec.json.encode(
        {
            "name": "a",
            "supportedInterfaces": [
                {"url": same, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
                {"url": same, "protocolBinding": "GRPC", "protocolVersion": "1.0"},
            ],
        }
    )
    with store.open_store(db_path) as st:
        proxy = Proxy(st, ProxyConfig(upstream=same))
        proxy.grpc_address = "127.0.0.1:7000"
        out = msgspec.json.decode(proxy._rewrite_card(card, "http://127.0.0.1:8080"))
    assert [i["url"] for i in out["supportedInterfaces"]] == ["http://127.0.0.1:8080", "http://127.0.0.1:7000"]


def test_a_message_past_the_limit_cuts_the_answer_off_not_the_proxys_memory(db_path, monkeypatch):
    """The agent's answer messages are bounded as HTTP answers are (64 MiB): a larger one is not taken,
    the client gets the messages before it and UNAVAILABLE naming why, the row says the answer broke off."""
    from a2a_tape.recorder.proxy import grpc_server

    monkeypatch.setattr(grpc_server, "MAX_MESSAGE", 16)  # below each message the agent sends
    with running_fake_grpc_agent() as (target, _fake):
        with running_grpc_proxy(f"http://127.0.0.1:{closed_port()}", target, db_path) as proxy:
            got = raw_call(proxy.target, "SendStreamingMessage", send_request("x", "m-big"), streaming=True)
            assert got.messages == [] and got.code == "UNAVAILABLE", got
            assert got.details.startswith("the upstream agent's answer was cut off")
            (ex,) = _exchanges(proxy.store)
            proxy.wait_settled(ex.id)
            ex = proxy.store.get_exchange(ex.id)
            assert ex.outcome == "error" and "cut off" in ex.error
            assert proxy.store.read_exchange(ex.id) == []  # no error item: the status is the proxy's, not the agent's


def test_a_failed_stream_names_its_real_error_not_the_task_group(grpc_proxied, monkeypatch):
    """Issue 36, item 6: a stream that fails inside the relay's task group (here: the log cannot take
    its second batch) says why, on its row and to the client, rather than "ExceptionGroup: unhandled
    errors in a TaskGroup"."""
    import sqlite3

    from a2a_tape.recorder.proxy import grpc_server

    commit = grpc_server._Relay._commit
    batches: list[int] = []

    async def failing(self, raws, **kw):
        batches.append(len(raws))
        if len(batches) > 1:
            raise sqlite3.OperationalError("disk I/O error")
        await commit(self, raws, **kw)

    monkeypatch.setattr(grpc_server._Relay, "_commit", failing)
    _agent, proxy = grpc_proxied
    got = raw_call(proxy.target, "SendStreamingMessage", send_request("hello", "m-broken"), streaming=True)
    assert got.code == "UNAVAILABLE" and len(batches) == 2, got
    (ex,) = _exchanges(proxy.store)
    proxy.wait_settled(ex.id)
    ex = proxy.store.get_exchange(ex.id)
    assert ex.outcome == "error"
    assert "disk I/O error" in ex.error and "ExceptionGroup" not in ex.error and "TaskGroup" not in ex.error, ex.error
    assert "ExceptionGroup" not in got.details and "TaskGroup" not in got.details, got.details
