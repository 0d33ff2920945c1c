"""Issue 36, item 6: the proxy and ``RecordingTransport`` route a request on its path as sent, as
serve does (``wire.http_json.sent_path``, the one rule): a ``%2F`` is never a separator, and each
field is decoded after routing. Before, both routed the decoded path: ``GET /tasks%2Ft-1`` was
recorded as GetTask of ``t-1`` (the agent, routing on its own segments, sees no such route), and
``GET /tasks/a%2Fb`` (task ``a/b``) as no A2A call at all.

The proxy is the installed ``a2a-tape proxy`` in a subprocess; the agent a real a2a-sdk one (what
it answers to these paths does not matter: the row says how the recorder read the request).
"""

from __future__ import annotations

import httpx
import pytest

from a2a_tape import RecordingTransport, store
from tests.conftest import running_sdk_agent
from tests.oracles.tape import proxy

PATHS = [
    # (path as sent, the A2A method it is, the task id read from it)
    ("/tasks%2Ft-1", None, None),  # one segment: no route
    ("/tenant%2Fa/tasks/t-1", "GetTask", "t-1"),  # one tenant segment, then the route
    ("/tasks/a%2Fb", "GetTask", "a/b"),  # the id, decoded after routing
    ("/tasks/t-1", "GetTask", "t-1"),
    ("/v1/tasks%2F", None, None),
]


@pytest.fixture(scope="module")
def agent():
    with running_sdk_agent(rest=True) as a:
        yield a


@pytest.mark.parametrize(("path", "method", "task"), PATHS, ids=[p for p, _, _ in PATHS])
def test_the_proxy_routes_the_path_as_sent(agent, tmp_path, path, method, task):
    db = tmp_path / "proxy.db"
    with proxy(agent.url, db, tmp_path / "proxy.log") as p:
        r = httpx.get(p.url + path, headers={"A2A-Version": "1.0"}, timeout=20)
        assert r.status_code < 500
    with store.open_store(db, readonly=True) as st:
        (ex,) = [e for e in st.exchanges() if e.http_method == "GET"]
    assert ex.url.endswith(path)  # sent upstream as sent
    assert ex.rpc_method == method
    assert ex.binding == ("http+json" if method else None)


@pytest.mark.parametrize(("path", "method", "task"), PATHS, ids=[p for p, _, _ in PATHS])
def test_recording_transport_routes_the_path_as_sent(agent, tmp_path, path, method, task):
    db = tmp_path / "transport.db"
    transport = RecordingTransport(str(db))
    with httpx.Client(transport=transport, timeout=20) as c:
        r = c.get(agent.url + path, headers={"A2A-Version": "1.0"})
        assert r.status_code < 500
    transport.close()
    with store.open_store(db, readonly=True) as st:
        rows = st.exchanges()
    if method is None:
        assert rows == []  # not A2A: passed on untouched, not recorded
        return
    (ex,) = rows
    assert ex.url.endswith(path)
    assert (ex.rpc_method, ex.binding) == (method, "http+json")
    assert ex.task_id == task
