"""A recording answers only the caller that made it: an idempotency key belongs to the path and
to the caller's credentials; per-client answer headers reach only that client; ``--idempotency
off`` makes the proxy transparent to clients that reuse messageIds. A real a2a-sdk 1.3.0 agent."""

from __future__ import annotations

import itertools
import threading

import httpx
import pytest

from a2a_tape import store
from a2a_tape.recorder.proxy.idempotency import Idempotency, OnKeyConflict
from tests.conftest import running_sdk_agent
from tests.oracles.tape import running
from tests.recorder.proxy.conftest import SettleWatch, read_sse, running_proxy, send_body


class SetsCookies:
    """What a load balancer or an agent's login does in front of a real agent: every answer sets
    a session cookie of its own (``session=1``, ``session=2``, ...) and a session token header."""

    def __init__(self, app) -> None:
        self.app = app
        self.count = itertools.count(1)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        n = next(self.count)

        async def with_cookie(message):
            if message["type"] == "http.response.start":
                extra = [(b"set-cookie", f"session={n}; Path=/".encode()), (b"x-session-token", f"tok-{n}".encode())]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, with_cookie)


def agent(**kw):
    """A real a2a-sdk agent (``rpc_urls``: more paths to the same agent), answers setting cookies."""
    return running_sdk_agent(wrap=SetsCookies, **kw)


CALLERS = {
    "no credentials": {},
    "other bearer": {"Authorization": "Bearer someone-else"},
    "other api key": {"X-Api-Key": "k-2"},
    "other cookie": {"Cookie": "session=2"},
    "shape-only credential": {"Ocp-Apim-Subscription-Key": "sub-2"},
}


@pytest.mark.parametrize("stream", [False, True], ids=["send", "stream"])
@pytest.mark.parametrize("caller", CALLERS)
def test_a_repeat_from_another_caller_is_not_answered_from_the_log(db_path, caller, stream):
    """The first client's authenticated request is recorded; another client (no credentials, or
    others) repeating its messageId must reach the agent, never get the first client's answer."""
    with agent() as a, running_proxy(a.url, db_path) as proxy:
        watch = SettleWatch(proxy.proxy)
        body, h = send_body("hello", stream=stream, message_id="m-scope")
        first = _call(proxy.url + "/", body, {**h, "Authorization": "Bearer alice"}, stream)
        watch.wait(1)
        second = _call(proxy.url + "/", body, {**h, **CALLERS[caller]}, stream)
        watch.wait(2)
        same = _call(
            proxy.url + "/", body, {**h, "Authorization": "Bearer alice"}, stream
        )  # its row: before the answer
        rows = [e for e in proxy.store.exchanges() if e.rpc_method]
        note = store.decode_item(proxy.store.read_exchange(rows[1].id)[0].payload).body
    assert a.executor.executions == 2  # the other caller's request ran; alice's exact repeat did not
    assert store.decode_item(second[0]).task_id != store.decode_item(first[0]).task_id
    assert [store.decode_item(p).task_id for p in same] == [store.decode_item(p).task_id for p in first]
    assert isinstance(note, store.Note) and "another caller" in note.detail
    assert [r.outcome for r in rows][2] == "replayed"


def test_a_repeat_on_another_path_is_not_answered_from_the_log(db_path):
    """Two paths of one proxy (two tenants of one agent, or two agents): a key is the path's."""
    with agent(rpc_urls=("/", "/tenant-b/")) as a, running_proxy(a.url, db_path) as proxy:
        watch = SettleWatch(proxy.proxy)
        body, h = send_body("hello", stream=False, message_id="m-path")
        first = httpx.post(proxy.url + "/", content=body, headers=h)
        watch.wait(1)
        other = httpx.post(proxy.url + "/tenant-b/", content=body, headers=h)
        query = httpx.post(proxy.url + "/?tenant=b", content=body, headers=h)
    assert a.executor.executions == 3
    ids = {store.decode_item(r.content).task_id for r in (first, other, query)}
    assert len(ids) == 3


def test_another_caller_is_refused_under_reject(db_path):
    with agent() as a, running_proxy(a.url, db_path, on_key_conflict=OnKeyConflict.reject) as proxy:
        body, h = send_body("hello", stream=False, message_id="m-rej")
        httpx.post(proxy.url + "/", content=body, headers={**h, "Authorization": "Bearer alice"})
        r = httpx.post(proxy.url + "/", content=body, headers=h)
    item = store.decode_item(r.content)
    assert isinstance(item.body, store.ErrorItem) and item.body.code == -32600
    assert "messageId 'm-rej' is in use by another caller" in item.body.message
    assert a.executor.executions == 1


def test_the_scope_holds_no_secret(db_path):
    with agent() as a, running_proxy(a.url, db_path) as proxy:
        body, h = send_body("hello", stream=False, message_id="m-digest")
        watch = SettleWatch(proxy.proxy)
        httpx.post(proxy.url + "/", content=body, headers={**h, "Authorization": "Bearer alice-secret-77"})
        watch.wait(1)
        held = proxy.store.idem_all()
    assert len(held) == 1 and "alice-secret-77" not in held[0].request_hash
    raw = b"".join(p.read_bytes() for p in db_path.parent.glob(db_path.name + "*"))
    assert b"alice-secret-77" not in raw


# -- per-client answer headers --------------------------------------------------------------


def _headers_of(url: str, body: bytes, h: dict[str, str]) -> tuple[httpx.Headers, list[bytes]]:
    with httpx.stream("POST", url, content=body, headers=h) as r:
        return r.headers, read_sse(r)


def test_a_duplicate_attached_to_a_live_stream_gets_no_cookie_of_the_first_client(db_path):
    """Two anonymous clients send the same message; the second attaches to the first's live
    stream (the agent runs it once) and must not receive the cookie the agent set for the first."""
    with agent(slow_delay=0.05) as a, running_proxy(a.url, db_path) as proxy:
        body, h = send_body("slow many 6", message_id="m-cookie", rpc_id=1)
        again, _ = send_body("slow many 6", message_id="m-cookie", rpc_id=2)
        got: dict[str, object] = {}
        with httpx.stream("POST", proxy.url + "/", content=body, headers=h) as r:
            it = r.iter_bytes()
            next(it)  # the first stream is under way

            def duplicate() -> None:
                got["headers"], got["items"] = _headers_of(proxy.url + "/", again, h)

            t = threading.Thread(target=duplicate)
            t.start()
            b"".join(it)
            first_headers = r.headers
        t.join(timeout=15)
        assert not t.is_alive()
    assert a.executor.executions == 1 and len(got["items"]) == 9  # attached, not run again
    assert first_headers.get_list("set-cookie") == ["session=1; Path=/"]
    assert first_headers["x-session-token"] == "tok-1"
    dup = got["headers"]
    assert "set-cookie" not in dup and "x-session-token" not in dup, dict(dup)
    assert dup["content-type"].startswith("text/event-stream")


@pytest.mark.parametrize("stream", [False, True], ids=["send", "stream"])
def test_a_repeat_answered_from_the_log_gets_no_cookie(db_path, stream):
    with agent() as a, running_proxy(a.url, db_path) as proxy:
        watch = SettleWatch(proxy.proxy)
        body, h = send_body("hello", stream=stream, message_id="m-log-cookie")
        first = httpx.post(proxy.url + "/", content=body, headers=h)
        watch.wait(1)
        again = httpx.post(proxy.url + "/", content=body, headers=h)
    assert a.executor.executions == 1
    assert first.headers["set-cookie"] == "session=1; Path=/"
    assert "set-cookie" not in again.headers and "x-session-token" not in again.headers


# -- --idempotency off ------------------------------------------------------------------------


def _call(url: str, body: bytes, h: dict[str, str], stream: bool) -> list[bytes]:
    if stream:
        with httpx.stream("POST", url, content=body, headers=h) as r:
            return read_sse(r)
    return [httpx.post(url, content=body, headers=h).content]


@pytest.mark.parametrize("stream", [False, True], ids=["send", "stream"])
def test_idempotency_off_sends_every_repeat_to_the_agent(db_path, stream):
    """The official TCK 1.0 reuses one messageId per helper for a whole run: with the gateway off,
    each request reaches the agent and gets the agent's own answer, and each is recorded."""
    with agent() as a, running_proxy(a.url, db_path, idempotency=Idempotency.off) as proxy:
        watch = SettleWatch(proxy.proxy)
        body, h = send_body("hello", stream=stream, message_id="m-tck")
        answers = [_call(proxy.url + "/", body, h, stream) for _ in range(3)]
        watch.wait(3)
        assert proxy.store.idem_all() == []
        rows = [e for e in proxy.store.exchanges() if e.rpc_method]
    assert a.executor.executions == 3
    assert len({store.decode_item(x[0]).task_id for x in answers}) == 3
    assert [r.outcome for r in rows] == ["ok" if not stream else "closed"] * 3


def test_the_cli_takes_idempotency_off(tmp_path):
    with (
        agent() as a,
        running(
            [
                "proxy",
                a.url,
                "--listen",
                "127.0.0.1:0",
                "--db",
                str(tmp_path / "p.db"),
                "--no-recover",
                "--idempotency",
                "off",
            ],
            tmp_path / "proxy.log",
        ) as proc,
    ):
        body, h = send_body("hello", stream=False, message_id="m-cli")
        first = httpx.post(proc.url + "/", content=body, headers=h)
        second = httpx.post(proc.url + "/", content=body, headers=h)
    assert a.executor.executions == 2
    assert store.decode_item(first.content).task_id != store.decode_item(second.content).task_id
