"""Issue 36, item 1: the gRPC proxy keeps the HTTP proxy's promises of who may see what.

- a recording answers only the caller that made it: a repeat of a messageId with no credentials or
  other ones goes to the agent (the caller's scope is the method's path and its credential metadata,
  as the HTTP proxy's is its path and credential headers);
- a duplicate attached to a live call gets none of the first call's per-client metadata (a session
  token, a cookie the agent set), in the head or the trailers;
- with ``--token``, a call of a method outside A2AService reaches the agent without the proxy's token.

The proxy is the installed ``a2a-tape proxy --grpc-listen`` in a subprocess, the client grpc.aio. The
scope case runs against the real a2a-sdk agent (tests/support/grpc_agents.py); the metadata cases
against the hand-written agent of tests/support/grpc_fake.py, because an a2a-sdk agent sets no
metadata of its own and has no method outside A2AService: the fake echoes what it was sent.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import re
import threading
import time
from collections.abc import Iterator

import pytest

from a2a_tape import store
from tests.grpc.clients import raw_call, send_request
from tests.grpc.test_cli import SCRIPT, _running
from tests.support.grpc_fake import running_fake_grpc_agent
from tests.support.servers import closed_port

pytestmark = pytest.mark.skipif(not SCRIPT.exists(), reason="needs the installed console script")
V1 = ("a2a-version", "1.0")


@contextlib.contextmanager
def _grpc_proxy(http_upstream: str, db, *extra: str) -> Iterator[str]:
    """The CLI proxy with its gRPC side; yields the gRPC side's HOST:PORT."""
    argv = ["proxy", http_upstream, "--listen", "127.0.0.1:0", "--grpc-listen", "127.0.0.1:0", "--db", str(db)]
    with _running([*argv, "--no-recover", *extra], r"gRPC on 127\.0\.0\.1:\d+") as (_proc, lines):
        yield re.search(r"gRPC on (127\.0\.0\.1:\d+)", "".join(lines)).group(1)  # type: ignore[union-attr]


def _rows(db) -> list[store.Exchange]:
    with store.open_store(db, readonly=True) as st:
        return [ex for ex in st.exchanges() if ex.rpc_method and ex.rpc_method.startswith("Send")]


def test_a_repeat_from_another_caller_goes_to_the_agent_not_the_first_callers_answer(grpc_agent, tmp_path):
    db = tmp_path / "scope.db"
    req = send_request("hello", "m-scoped")
    with _grpc_proxy(grpc_agent.url, db) as target:
        first = raw_call(target, "SendMessage", req, streaming=False, metadata=(V1, ("x-api-key", "k-one")))
        assert first.code == "OK" and grpc_agent.executor.executions == 1
        same = raw_call(target, "SendMessage", req, streaming=False, metadata=(V1, ("x-api-key", "k-one")))
        assert same.messages == first.messages and grpc_agent.executor.executions == 1  # its own repeat: the log
        bare = raw_call(target, "SendMessage", req, streaming=False, metadata=(V1,))
        assert bare.code == "OK" and grpc_agent.executor.executions == 2  # no credentials: the agent decides
        assert bare.messages != first.messages
        other = raw_call(target, "SendMessage", req, streaming=False, metadata=(V1, ("x-api-key", "k-two")))
        assert other.code == "OK" and grpc_agent.executor.executions == 3
    outcomes = [ex.outcome for ex in _rows(db)]
    assert outcomes.count("replayed") == 1, outcomes
    raw = db.read_bytes()
    assert b"k-one" not in raw and b"k-two" not in raw  # the scope holds no secret


def test_a_duplicate_attached_to_a_live_call_gets_none_of_the_first_callers_metadata(tmp_path):
    db = tmp_path / "attach.db"
    req = send_request("x", "m-held")
    md = (V1, ("x-fake-mode", "echo-held"), ("session-token", "first-secret"))
    with (
        running_fake_grpc_agent() as (agent, fake),
        _grpc_proxy(f"http://127.0.0.1:{closed_port()}", db, "--grpc-upstream", agent) as target,
    ):
        live = threading.Event()
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            first = pool.submit(
                raw_call,
                target,
                "SendStreamingMessage",
                req,
                streaming=True,
                metadata=md,
                after_each=lambda _k: live.set(),
            )
            assert live.wait(20), "the first call never got its first message"
            second = pool.submit(raw_call, target, "SendStreamingMessage", req, streaming=True, metadata=md)
            deadline = time.monotonic() + 20
            while len(_rows(db)) < 2:  # the duplicate's row: it is attached
                assert time.monotonic() < deadline, "the duplicate never arrived"
                time.sleep(0.02)  # polling the log for a condition
            fake.release()
            a, b = first.result(timeout=30), second.result(timeout=30)
    assert fake.calls == 1  # one call reached the agent
    assert a.code == b.code == "OK" and a.messages == b.messages
    assert ("echo-session-token", "first-secret") in a.initial  # the caller the agent answered gets its own
    assert ("echo-session-token", "first-secret") in a.trailers
    assert not any("first-secret" in str(v) for _k, v in b.initial + b.trailers)  # the duplicate, none of it
    assert ("echo-x-fake-mode", "echo-held") in b.initial  # the rest of the head as the agent sent it


def test_behind_a_token_a_method_outside_a2a_reaches_the_agent_without_it(tmp_path):
    db = tmp_path / "generic.db"
    with (
        running_fake_grpc_agent() as (agent, _fake),
        _grpc_proxy(
            f"http://127.0.0.1:{closed_port()}", db, "--grpc-upstream", agent, "--token", "s3cret-token"
        ) as target,
    ):
        md = (("authorization", "Bearer s3cret-token"), ("x-api-key", "k-123"))
        got = raw_call(target, "/other.Echo/Reverse", b"\x00abc", streaming=False, metadata=md)
        refused = raw_call(target, "/other.Echo/Reverse", b"\x00abc", streaming=False, metadata=())
    assert (got.code, got.messages) == ("OK", [b"cba\x00"])
    assert not any(k == "echo-authorization" for k, _ in got.initial), got.initial  # the token stayed here
    assert ("echo-x-api-key", "k-123") in got.initial  # the caller's own credentials cross
    assert refused.code == "UNAUTHENTICATED"
