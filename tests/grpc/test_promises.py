"""The capture promises on both gRPC recording paths (the proxy, RecordingInterceptor), one test each:
what the client gets is what the agent sent; every A2A message is in the log in its JSON mapping;
an agent's error status is recorded with its details; secrets stay off the disk."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import msgspec
import pytest

from a2a_tape import RecordingInterceptor, store
from tests.grpc.clients import Raw, raw_call, send_request, stream_response
from tests.grpc.conftest import running_grpc_proxy
from tests.support.grpc_fake import error_details, exact_messages, running_fake_grpc_agent
from tests.support.servers import closed_port

PATHS = ("proxy", "interceptor")
SECRET_MD = (("authorization", "Bearer SEKRET-TOKEN"), ("x-api-key", "SEKRET-KEY"))


@contextlib.contextmanager
def _path(path: str, db_path) -> Iterator:
    """(call, store): ``call(mode, message_id)`` makes one streaming call of the fake agent
    through ``path`` and returns what the client got."""
    with running_fake_grpc_agent() as (target, _fake):
        if path == "proxy":
            with running_grpc_proxy(f"http://127.0.0.1:{closed_port()}", target, db_path) as proxy:

                def via_proxy(mode: str, message_id: str) -> Raw:
                    md = (("x-fake-mode", mode), *SECRET_MD)
                    got = raw_call(
                        proxy.target, "SendStreamingMessage", send_request("x", message_id), streaming=True, metadata=md
                    )
                    for ex in proxy.store.exchanges():
                        proxy.wait_settled(ex.id)
                    return got

                yield via_proxy, proxy.store
        else:
            st = store.open_store(db_path)
            recording = RecordingInterceptor(st)
            try:

                def via_interceptor(mode: str, message_id: str) -> Raw:
                    md = (("x-fake-mode", mode), *SECRET_MD)
                    return raw_call(
                        target,
                        "SendStreamingMessage",
                        send_request("x", message_id),
                        streaming=True,
                        metadata=md,
                        interceptors=recording.interceptors,
                    )

                yield via_interceptor, st
            finally:
                st.close()


def _grpc_rows(st) -> list[store.Exchange]:
    return [e for e in st.exchanges() if e.url.startswith("grpc://")]


@pytest.mark.parametrize("path", PATHS)
def test_the_client_gets_the_agents_bytes_and_the_log_their_json(path, db_path):
    with _path(path, db_path) as (call, st):
        got = call("exact", "m-exact")
        assert got.messages == exact_messages() and got.code == "OK"
        (ex,) = _grpc_rows(st)
        assert [msgspec.json.decode(e.payload) for e in st.read_exchange(ex.id)] == [
            stream_response(m) for m in exact_messages()
        ]
        assert ex.outcome == "closed" and ex.response_headers["x-trailer"] == "after"


@pytest.mark.parametrize("path", PATHS)
def test_an_agents_error_status_is_recorded_with_its_details(path, db_path):
    with _path(path, db_path) as (call, st):
        got = call("error", "m-error")
        assert (got.code, got.details) == ("NOT_FOUND", "task nope not found")
        assert ("grpc-status-details-bin", error_details()) in got.trailers
        (ex,) = _grpc_rows(st)
        assert ex.outcome == "error" and ex.response_headers["grpc-status"] == "5"
        (err,) = st.read_exchange(ex.id)
        error = msgspec.json.decode(err.payload)["error"]
        assert (error["code"], error["status"], error["details"][0]["reason"]) == (5, "NOT_FOUND", "TASK_NOT_FOUND")


@pytest.mark.parametrize("path", PATHS)
def test_no_secret_reaches_the_disk(path, db_path):
    with _path(path, db_path) as (call, _st):
        call("exact", "m-secret")
    raw = b"".join(p.read_bytes() for p in db_path.parent.glob(db_path.name + "*"))
    assert b"SEKRET" not in raw


@pytest.mark.parametrize("path", PATHS)
def test_the_clients_own_deadline_is_not_recorded_as_the_agents_answer(path, db_path):
    """A stall the client gives up on by its deadline: the row ends incomplete saying so, and no
    DEADLINE_EXCEEDED item is in the log (a replay served it to every later client as the agent's)."""
    with running_fake_grpc_agent() as (target, _fake):
        if path == "proxy":
            with running_grpc_proxy(f"http://127.0.0.1:{closed_port()}", target, db_path) as proxy:
                got = raw_call(
                    proxy.target,
                    "SendStreamingMessage",
                    send_request("x", "m-dl"),
                    streaming=True,
                    metadata=(("x-fake-mode", "stall"),),
                    timeout=0.5,
                )
                (ex,) = _grpc_rows(proxy.store)
                proxy.wait_settled(ex.id)
                ex, events = proxy.store.get_exchange(ex.id), proxy.store.read_exchange(ex.id)
        else:
            with store.open_store(db_path) as st:
                recording = RecordingInterceptor(st)
                got = raw_call(
                    target,
                    "SendStreamingMessage",
                    send_request("x", "m-dl"),
                    streaming=True,
                    metadata=(("x-fake-mode", "stall"),),
                    timeout=0.5,
                    interceptors=recording.interceptors,
                )
                (ex,) = _grpc_rows(st)
                events = st.read_exchange(ex.id)
    assert got.code == "DEADLINE_EXCEEDED" and len(got.messages) == 1
    assert ex.outcome == "incomplete" and "the client's deadline passed" in ex.error
    assert [store.decode_item(e.payload).kind for e in events] == ["status"]
