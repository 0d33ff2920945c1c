"""The idempotency gateway: behind the proxy, a real a2a-sdk 1.3.0 agent runs a repeated message once."""

from __future__ import annotations

import json
import threading

import httpx
import pytest

from a2a_tape import store
from a2a_tape.recorder.proxy.idempotency import Gateway, OnKeyConflict, request_hash, scoped
from a2a_tape.store.redact import Redactor
from tests.conftest import running_sdk_agent
from tests.recorder.proxy.conftest import SettleWatch, read_sse, running_proxy, send_body


def _rpc_id(payload: bytes):
    return store.decode_item(payload).rpc_id


@pytest.mark.parametrize("dialect", ["0.3", "1.0"])
def test_repeated_streaming_message_is_served_from_the_log(proxied, dialect):
    agent, proxy = proxied
    watch = SettleWatch(proxy.proxy)
    body, headers = send_body("hello", dialect=dialect, message_id="m-dup", rpc_id=1)
    with httpx.stream("POST", proxy.url + "/", content=body, headers=headers) as r:
        first = read_sse(r)
    watch.wait(1)
    again, _ = send_body("hello", dialect=dialect, message_id="m-dup", rpc_id=2)
    with httpx.stream("POST", proxy.url + "/", content=again, headers=headers) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        second = read_sse(r)
    assert agent.executor.executions == 1
    assert len(second) == len(first) == 6
    assert [store.decode_item(p).body for p in second] == [store.decode_item(p).body for p in first]
    assert {_rpc_id(p) for p in second} == {2}  # answered to the repeat's own JSON-RPC id
    rows = [e.outcome for e in proxy.store.exchanges() if e.rpc_method]
    assert rows == ["closed", "replayed"]


@pytest.mark.parametrize("dialect", ["0.3", "1.0"])
def test_repeated_send_gets_the_recorded_reply(proxied, dialect):
    agent, proxy = proxied
    body, headers = send_body("hello", dialect=dialect, stream=False, message_id="m-send", rpc_id=7)
    a = httpx.post(proxy.url + "/", content=body, headers=headers)
    again, _ = send_body("hello", dialect=dialect, stream=False, message_id="m-send", rpc_id=8)
    b = httpx.post(proxy.url + "/", content=again, headers=headers)
    assert agent.executor.executions == 1
    # the recorded bytes, answered to the new request id (only the id differs)
    assert b.content == a.content.replace(b'"id":7', b'"id":8').replace(b'"id": 7', b'"id": 8')
    assert json.loads(b.content) == {**json.loads(a.content), "id": 8}
    assert store.decode_item(b.content).task_id == store.decode_item(a.content).task_id


def test_duplicate_while_in_flight_attaches_to_the_live_stream(db_path):
    with running_sdk_agent(slow_delay=0.05) as agent, running_proxy(agent.url, db_path) as proxy:
        body, headers = send_body("slow many 6", message_id="m-live", rpc_id=1)
        again, _ = send_body("slow many 6", message_id="m-live", rpc_id=2)
        second: list[bytes] = []
        with httpx.stream("POST", proxy.url + "/", content=body, headers=headers) as r:
            it = r.iter_bytes()
            next(it)  # the first stream is under way

            def duplicate() -> None:
                with httpx.stream("POST", proxy.url + "/", content=again, headers=headers) as r2:
                    second.extend(read_sse(r2))

            t = threading.Thread(target=duplicate)
            t.start()
            rest = b"".join(it)
        t.join(timeout=15)
        assert not t.is_alive()
        assert agent.executor.executions == 1
        assert len(second) == 9
        assert store.decode_item(second[-1]).body.state == "completed"
        assert rest  # the first client got its stream too


def test_same_key_different_request_is_refused_under_reject(sdk_agent, db_path):
    with running_proxy(sdk_agent.url, db_path, on_key_conflict=OnKeyConflict.reject) as proxy:
        body, headers = send_body("hello", stream=False, message_id="m-x")
        httpx.post(proxy.url + "/", content=body, headers=headers)
        other, _ = send_body("something else", stream=False, message_id="m-x")
        r = httpx.post(proxy.url + "/", content=other, headers=headers)
    item = store.decode_item(r.content)
    assert isinstance(item.body, store.ErrorItem) and item.body.code == -32600
    assert "messageId 'm-x' was already used for a different request" in item.body.message
    assert sdk_agent.executor.executions == 1


def test_same_key_different_request_is_forwarded_with_a_local_note(proxied):
    """By default the agent is not made stricter than it is: a2a-sdk runs a reused messageId."""
    agent, proxy = proxied
    watch = SettleWatch(proxy.proxy)
    body, headers = send_body("hello", stream=False, message_id="m-x")
    a = httpx.post(proxy.url + "/", content=body, headers=headers)
    other, _ = send_body("something else", stream=False, message_id="m-x")
    b = httpx.post(proxy.url + "/", content=other, headers=headers)
    watch.wait(2)
    assert agent.executor.executions == 2
    assert isinstance(store.decode_item(b.content).body, store.TaskSnapshot)
    assert store.decode_item(a.content).task_id != store.decode_item(b.content).task_id
    first, second = [e for e in proxy.store.exchanges() if e.rpc_method]
    assert second.outcome == "ok" and second.idempotency_key == "msg:m-x"
    events = proxy.store.read_exchange(second.id)
    note = store.decode_item(events[0].payload).body
    assert events[0].origin == "local" and isinstance(note, store.Note)
    assert f"first used by exchange {first.id}" in note.detail
    assert bytes(events[-1].payload) == b.content
    # the key still belongs to the first request: an exact repeat of it is answered from the log
    c = httpx.post(proxy.url + "/", content=body, headers=headers)
    assert agent.executor.executions == 2
    assert c.content == a.content


@pytest.mark.parametrize("policy", [OnKeyConflict.forward, OnKeyConflict.reject])
def test_idempotency_key_header_wins_over_message_id(sdk_agent, db_path, policy):
    with running_proxy(sdk_agent.url, db_path, on_key_conflict=policy) as proxy:
        a, headers = send_body("hello", stream=False)  # two different messageIds ...
        b, _ = send_body("hello", stream=False)
        h = {**headers, "Idempotency-Key": "order-42"}
        ra = httpx.post(proxy.url + "/", content=a, headers=h)
        rb = httpx.post(proxy.url + "/", content=b, headers=h)
        ra2 = httpx.post(proxy.url + "/", content=a, headers=h)
    # ... but one key: the bodies differ (messageId is part of the request): a conflict
    assert isinstance(store.decode_item(ra.content).body, store.TaskSnapshot)
    assert ra2.content == ra.content  # the exact repeat of the first is answered from the log
    if policy is OnKeyConflict.reject:
        assert sdk_agent.executor.executions == 1
        assert isinstance(store.decode_item(rb.content).body, store.ErrorItem)
        assert "Idempotency-Key 'order-42'" in store.decode_item(rb.content).body.message
    else:
        assert sdk_agent.executor.executions == 2
        assert isinstance(store.decode_item(rb.content).body, store.TaskSnapshot)


def test_repeat_after_a_proxy_restart_is_answered_from_the_log(sdk_agent, db_path):
    body, headers = send_body("hello", stream=False, message_id="m-restart", rpc_id=1)
    with running_proxy(sdk_agent.url, db_path) as proxy:
        watch = SettleWatch(proxy.proxy)
        a = httpx.post(proxy.url + "/", content=body, headers=headers)
        watch.wait(1)
    with running_proxy(sdk_agent.url, db_path) as proxy:
        again, _ = send_body("hello", stream=False, message_id="m-restart", rpc_id=1)
        b = httpx.post(proxy.url + "/", content=again, headers=headers)
    assert sdk_agent.executor.executions == 1
    assert b.content == a.content


def test_keys_expire_after_the_ttl(sdk_agent, db_path):
    with running_proxy(sdk_agent.url, db_path, idempotency_ttl=1e-6) as proxy:
        watch = SettleWatch(proxy.proxy)
        body, headers = send_body("hello", stream=False, message_id="m-ttl")
        a = httpx.post(proxy.url + "/", content=body, headers=headers)
        watch.wait(1)
        b = httpx.post(proxy.url + "/", content=body, headers=headers)
    assert sdk_agent.executor.executions == 2  # expired: the repeat is a new request
    assert store.decode_item(a.content).task_id != store.decode_item(b.content).task_id


def test_request_hash_ignores_key_order_and_spacing_but_not_content():
    assert request_hash("m", b'{"a": 1, "b": [1, 2]}') == request_hash("m", b'{"b":[1,2],"a":1}')
    assert request_hash("m", b'{"a": 1}') != request_hash("m", b'{"a": 2}')
    assert request_hash("message/send", b"{}") != request_hash("message/stream", b"{}")


def test_repeat_after_a_crash_mid_stream_is_served_from_log_and_recovery(sdk_agent, db_path):
    """A proxy died mid-stream (its key still in flight); after recovery the repeat gets the whole
    task (the recorded prefix, then what recovery recorded) and the agent does not run it again."""
    import time as _time

    import anyio

    from a2a_tape.recorder.proxy.idempotency import parse_request
    from a2a_tape.recorder.recovery import recover

    body, headers = send_body("hello", message_id="m-crash", rpc_id=5)
    with httpx.stream("POST", sdk_agent.url + "/", content=body, headers=headers) as r:
        prefix = read_sse(r, limit=2)  # what the dead proxy had recorded
    st = store.open_store(db_path)
    ex = st.begin_exchange(
        store.Exchange(
            url=sdk_agent.url + "/",
            rpc_method="message/stream",
            role="proxy",
            idempotency_key="msg:m-crash",
            streaming=True,
        )
    )
    task_id = store.decode_item(prefix[0]).task_id
    st.append_batch([store.NewEvent(payload=p, task_id=task_id, exchange_id=ex) for p in prefix])
    rpc = parse_request(body)
    past = _time.time() - 5
    scope = Gateway(st).scope("/", [], Redactor().is_secret)  # the path, no credential: as the proxy's
    st.idem_claim(
        store.IdempotencyRecord(
            "msg:m-crash",
            scoped(scope, request_hash(rpc.method, rpc.params)),
            ex,
            created_at=past,
            expires_at=past + 3600,
        )
    )
    report = anyio.run(recover, st)
    assert report.replayed == ["msg:m-crash"] and report.resumed == [task_id]
    st.close()
    assert sdk_agent.executor.executions == 1

    with running_proxy(sdk_agent.url, db_path) as proxy:
        again, _ = send_body("hello", message_id="m-crash", rpc_id=6)
        with httpx.stream("POST", proxy.url + "/", content=again, headers=headers) as r:
            served = read_sse(r)
    assert sdk_agent.executor.executions == 1
    assert [json.loads(p) for p in served[:2]] == [{**json.loads(p), "id": 6} for p in prefix]
    assert store.decode_item(served[-1]).body.state == "completed"
