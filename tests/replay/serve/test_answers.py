"""Answers as the agent gave them, and the agent's own validation for what no recording answers.

Side by side with a real a2a-sdk 1.3.0 agent: the same request goes to the live agent and to the
replay over a recording of it (made through ``a2a-tape proxy``), and the answers are compared."""

from __future__ import annotations

import json
import uuid

import httpx
import pytest

from a2a_tape.replay.serve.engine import ReplayEngine
from a2a_tape.replay.serve.library import Library
from a2a_tape.replay.serve.server import create_app
from a2a_tape.store import decode_item
from a2a_tape.wire.sse_frames import rewrite_id
from tests.conftest import running_sdk_agent
from tests.recorder.proxy.conftest import running_proxy
from tests.replay._record import headers_for, request_body
from tests.support.servers import serve_app


def rpc_body(method: str, params: object, rpc_id: object = 7) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": rpc_id, "method": method, "params": params}).encode()


def _msg(dialect: str, **fields: object) -> dict:
    base: dict = {"messageId": str(uuid.uuid4())}
    if dialect == "0.3":
        base["kind"] = "message"
    base.update(fields)
    return base


def malformed(dialect: str) -> list[tuple[str, dict]]:
    """(method, params) the agent refuses; each message id is new (as a conformance suite sends)."""
    send = "SendMessage" if dialect == "1.0" else "message/send"
    role = "ROLE_USER" if dialect == "1.0" else "user"
    return [
        (send, {"message": _msg(dialect, role=role, parts="invalid")}),
        (send, {"message": {"kind": "message"}}),
        (send, {"message": _msg(dialect, role=role, parts=[])}),
    ]


def text_less(dialect: str) -> tuple[str, dict]:
    """A send with a data part only: valid, no text (the agent completes a task)."""
    send = "SendMessage" if dialect == "1.0" else "message/send"
    if dialect == "1.0":
        return send, {"message": _msg(dialect, role="ROLE_USER", parts=[{"data": {"n": 1}}])}
    return send, {"message": _msg(dialect, role="user", parts=[{"kind": "data", "data": {"n": 1}}])}


def post(url: str, method: str, params: object, dialect: str, rpc_id: object = 7) -> httpx.Response:
    return httpx.post(url + "/", content=rpc_body(method, params, rpc_id), headers=headers_for(dialect), timeout=10)


@pytest.mark.parametrize("dialect", ["1.0", "0.3"])
def test_the_agents_answers_to_malformed_requests_are_served_as_recorded(tmp_path, dialect):
    """Recorded through the proxy: a text-less send (a completed task), then requests the agent
    refused. The replay answers each refused request with the agent's own error, id spliced,
    however its message id changed: not with serve's own decoder error, not with another
    text-less request's task."""
    db = tmp_path / "tape.db"
    with running_sdk_agent() as agent:
        with running_proxy(agent.url, db) as proxy:
            m, p = text_less(dialect)
            assert decode_item(post(proxy.url, m, p, dialect).content).kind == "task"
            for m, p in malformed(dialect):
                post(proxy.url, m, p, dialect)
        live = [post(agent.url, m, p, dialect, rpc_id="live") for m, p in malformed(dialect)]
    lib = Library.open(db)
    try:
        with serve_app(create_app(ReplayEngine(lib))) as url:
            replayed = [post(url, m, p, dialect, rpc_id="live") for m, p in malformed(dialect)]
    finally:
        lib.close()
    for got, want in zip(replayed, live):
        assert decode_item(want.content).kind == "error"
        assert got.status_code == want.status_code
        assert got.json() == want.json()  # the agent's code, message, data and the request's id


@pytest.mark.parametrize("dialect", ["1.0", "0.3"])
def test_what_no_recording_answers_is_refused_as_the_agent_refuses_it(tmp_path, dialect):
    """Over a recording that holds none of them: the agent's error code, with the request's id."""
    db = tmp_path / "tape.db"
    get = "GetTask" if dialect == "1.0" else "tasks/get"
    with running_sdk_agent() as agent:
        with running_proxy(agent.url, db) as proxy:
            r = httpx.post(
                proxy.url + "/", content=request_body("send", dialect, text="hello"), headers=headers_for(dialect)
            )
            task_id = decode_item(r.content).task_id
        send = "SendMessage" if dialect == "1.0" else "message/send"
        role = "ROLE_USER" if dialect == "1.0" else "user"
        text = {"text": "hello"} if dialect == "1.0" else {"kind": "text", "text": "hello"}
        requests = [
            *malformed(dialect),
            # the recorded text, but no messageId: refused, not the recorded task
            (send, {"message": {"role": role, "parts": [text]}}),
            (send, {"message": {"messageId": "", "role": role, "parts": [text]}}),
            (send, {"message": {"messageId": "m", "role": "bogus", "parts": [text]}}),
            (get, {"id": task_id, "historyLength": -1}),
            (get, {}),
            (get, {"id": 5}),
            (get, {"id": task_id, "historyLength": "x"}),
        ]
        live = [post(agent.url, m, p, dialect, rpc_id=41) for m, p in requests]
    lib = Library.open(db)
    try:
        with serve_app(create_app(ReplayEngine(lib))) as url:
            replayed = [post(url, m, p, dialect, rpc_id=41) for m, p in requests]
    finally:
        lib.close()
    for (m, p), got, want in zip(requests, replayed, live):
        g, w = decode_item(got.content), decode_item(want.content)
        assert w.kind == "error", (m, p)
        assert g.kind == "error" and g.body.code == w.body.code, (m, p, g, w)
        assert got.json()["id"] == 41


def test_a_recorded_get_task_of_the_finished_task_is_served_as_recorded(tmp_path):
    """The recording holds the agent's GetTask answer after the task ended: the replay's GetTask
    of that task (after the replayed stream) is those bytes, id spliced, not a rebuilt Task."""
    db = tmp_path / "tape.db"
    with running_sdk_agent() as agent:
        with running_proxy(agent.url, db) as proxy:
            with httpx.Client(timeout=10) as c:
                r = c.post(
                    proxy.url + "/", content=request_body("stream", "1.0", text="hello"), headers=headers_for("1.0")
                )
                first = r.content.split(b"\r\n\r\n")[0]
                task_id = decode_item(first[6:]).task_id
                for hl in (None, 1):
                    params: dict = {"id": task_id}
                    if hl is not None:
                        params["historyLength"] = hl
                    post(proxy.url, "GetTask", params, "1.0")
        live = {
            hl: post(agent.url, "GetTask", {"id": task_id, **({"historyLength": hl} if hl else {})}, "1.0", 9)
            for hl in (None, 1)
        }
    lib = Library.open(db)
    try:
        with serve_app(create_app(ReplayEngine(lib))) as url:
            httpx.post(url + "/", content=request_body("stream", "1.0", text="hello"), headers=headers_for("1.0"))
            replayed = {
                hl: post(url, "GetTask", {"id": task_id, **({"historyLength": hl} if hl else {})}, "1.0", 9)
                for hl in (None, 1)
            }
    finally:
        lib.close()
    for hl in (None, 1):
        assert replayed[hl].content == live[hl].content, hl
    assert rewrite_id(replayed[1].content, 9) == replayed[1].content


def test_a_recorded_get_task_is_not_served_for_another_state_of_the_task(tmp_path):
    """The recording's GetTask answer was given when the task had ended. Replayed with real timing
    and the stream dropped after its first item, the task is still working: GetTask answers that
    (folded), not the recorded answer of the finished task; once the task has ended, the recorded
    answer is served."""
    db = tmp_path / "tape.db"
    with running_sdk_agent(slow_delay=1.0) as agent:
        with running_proxy(agent.url, db) as proxy:
            with httpx.Client(timeout=20) as c:
                r = c.post(
                    proxy.url + "/", content=request_body("stream", "1.0", text="slow"), headers=headers_for("1.0")
                )
                task_id = decode_item(r.content.split(b"\r\n\r\n")[0][6:]).task_id
                recorded = post(proxy.url, "GetTask", {"id": task_id}, "1.0")
    assert decode_item(recorded.content).body.state == "completed"
    lib = Library.open(db)
    try:
        engine = ReplayEngine(lib, timing="real")
        with serve_app(create_app(engine)) as url:
            headers = {**headers_for("1.0"), "X-A2A-Tape-Fault": "drop-after=1"}
            httpx.post(url + "/", content=request_body("stream", "1.0", text="slow"), headers=headers)
            early = post(url, "GetTask", {"id": task_id}, "1.0")
            engine.tasks.playbacks[task_id].release(
                len(engine.tasks.playbacks[task_id].items)
            )  # the task went on to its end
            late = post(url, "GetTask", {"id": task_id}, "1.0")
    finally:
        lib.close()
    assert decode_item(early.content).body.state == "working" and early.content != recorded.content
    assert late.content == recorded.content


def test_get_cancel_get_are_answered_as_the_agent_answered_each_in_turn(tmp_path):
    """A conformance suite's sequence, recorded through the proxy: a send left waiting for input,
    GetTask, CancelTask, GetTask. Replayed, each answer is the agent's answer at that point of
    the sequence (the first GetTask not the canceled task; the second one canceled)."""
    db = tmp_path / "tape.db"
    with running_sdk_agent() as agent:
        with running_proxy(agent.url, db) as proxy:
            r = httpx.post(
                proxy.url + "/", content=request_body("send", "1.0", text="please ask me"), headers=headers_for("1.0")
            )
            task_id = decode_item(r.content).task_id
            live = [
                post(proxy.url, "GetTask", {"id": task_id}, "1.0", 11),
                post(proxy.url, "CancelTask", {"id": task_id}, "1.0", 12),
                post(proxy.url, "GetTask", {"id": task_id}, "1.0", 13),
            ]
    assert [decode_item(x.content).body.state for x in live] == ["input-required", "canceled", "canceled"]
    lib = Library.open(db)
    try:
        with serve_app(create_app(ReplayEngine(lib))) as url:
            sent = httpx.post(
                url + "/", content=request_body("send", "1.0", text="please ask me"), headers=headers_for("1.0")
            )
            replayed = [
                post(url, "GetTask", {"id": task_id}, "1.0", 11),
                post(url, "CancelTask", {"id": task_id}, "1.0", 12),
                post(url, "GetTask", {"id": task_id}, "1.0", 13),
            ]
    finally:
        lib.close()
    assert sent.content == r.content
    assert [x.content for x in replayed] == [x.content for x in live]


def test_a_recorded_list_tasks_made_after_everything_is_served_as_recorded(tmp_path):
    """ListTasks recorded after the recording's last send: replayed after the same sends, the
    agent's own page (every field as it listed them), id spliced; a ListTasks the recording does
    not hold is paged by the replay's own rule."""
    db = tmp_path / "tape.db"
    with running_sdk_agent() as agent:
        with running_proxy(agent.url, db) as proxy:
            for text in ("hello", "please ask me"):
                httpx.post(proxy.url + "/", content=request_body("send", "1.0", text=text), headers=headers_for("1.0"))
            recorded = post(proxy.url, "ListTasks", {"pageSize": 1}, "1.0", 21)
    lib = Library.open(db)
    try:
        with serve_app(create_app(ReplayEngine(lib))) as url:
            for text in ("hello", "please ask me"):
                httpx.post(url + "/", content=request_body("send", "1.0", text=text), headers=headers_for("1.0"))
            replayed = post(url, "ListTasks", {"pageSize": 1}, "1.0", 21)
            other = post(url, "ListTasks", {"pageSize": 2}, "1.0", 22).json()
    finally:
        lib.close()
    assert replayed.content == recorded.content
    assert other["result"]["totalSize"] == 2 and len(other["result"]["tasks"]) == 2
