"""A user's before-record hooks on every path that takes them, against a real a2a-sdk agent.

Paths: ``RecordingTransport`` (``httpx.Client`` and ``httpx.AsyncClient``) and a replay's record
mode (``ReplayTransport(record_mode="all", upstream=...)``, what the pytest plugin's record modes
run). Each hook's effect is read back from the log; the built-in redaction runs after the hook
(a secret a hook writes never reaches the disk); a hook that raises is one :class:`HookError`
line, and what was recorded before it stays. The pytest plugin's own run is
tests/replay/test_plugin_hooks.py; ``match_on`` is tests/replay/serve/test_match_on.py.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from a2a_tape import A2AAnswer, A2ARequest, HookError, RecordingTransport, ReplayTransport, store
from a2a_tape.store.redact import REDACTED
from tests.conftest import running_sdk_agent

SECRET = "HOOK-SEKRET-42"
TOKEN = "REQ-SEKRET-7"  # the client's own credential: an answer hook that echoes it is scrubbed


def _body(text: str, method: str = "message/stream", mid: str = "m-1") -> bytes:
    message = {"kind": "message", "messageId": mid, "role": "user", "parts": [{"kind": "text", "text": text}]}
    return json.dumps({"jsonrpc": "2.0", "id": "r1", "method": method, "params": {"message": message}}).encode()


HEADERS = {"content-type": "application/json", "authorization": f"Bearer {TOKEN}"}


@dataclasses.dataclass
class Sent:
    """What the client got: the SSE data lines (or the JSON body), or the error it raised."""

    datas: list[dict[str, Any]]
    error: BaseException | None = None
    hook_errors: list[str] = dataclasses.field(default_factory=list)


def _datas(raw: bytes) -> list[dict[str, Any]]:
    if raw.lstrip().startswith(b"{"):
        return [json.loads(raw)]
    return [json.loads(line[5:]) for line in raw.splitlines() if line.startswith(b"data:")]


def _sync(db: Path, url: str, bodies: list[bytes], **hooks: Any) -> Sent:
    got: list[dict[str, Any]] = []
    with httpx.Client(transport=RecordingTransport(db, **hooks), timeout=30) as http:
        for body in bodies:
            try:
                with http.stream("POST", url + "/", content=body, headers=HEADERS) as resp:
                    got += _datas(resp.read())
            except HookError as exc:
                return Sent(got, exc)
    return Sent(got)


def _async(db: Path, url: str, bodies: list[bytes], **hooks: Any) -> Sent:
    async def main() -> Sent:
        got: list[dict[str, Any]] = []
        async with httpx.AsyncClient(transport=RecordingTransport(db, **hooks), timeout=30) as http:
            for body in bodies:
                try:
                    async with http.stream("POST", url + "/", content=body, headers=HEADERS) as resp:
                        got += _datas(await resp.aread())
                except HookError as exc:
                    return Sent(got, exc)
        return Sent(got)

    return anyio.run(main)


def _replay_recording(db: Path, url: str, bodies: list[bytes], **hooks: Any) -> Sent:
    transport = ReplayTransport(db, record_mode="all", upstream=url, **hooks)
    got: list[dict[str, Any]] = []
    try:
        with httpx.Client(transport=transport, timeout=30) as http:
            for body in bodies:
                try:
                    with http.stream("POST", "http://replay/", content=body, headers=HEADERS) as resp:
                        got += _datas(resp.read())
                except HookError as exc:
                    return Sent(got, exc, transport.hook_errors)
    finally:
        transport.close()
    return Sent(got, None, transport.hook_errors)


PATHS: dict[str, Callable[..., Sent]] = {
    "RecordingTransport sync": _sync,
    "RecordingTransport async": _async,
    "replay record mode": _replay_recording,
}


def _disk(db: Path) -> bytes:
    return b"".join(p.read_bytes() for p in db.parent.glob(db.name + "*"))


def _sends(st: store.Store) -> list[store.Exchange]:
    return [x for x in st.exchanges() if x.rpc_method == "message/stream"]


def _one_error(sent: Sent, what: str) -> str:
    """The one line the client (or the test, through ``hook_errors``) was told."""
    if sent.error is not None:
        line = str(sent.error)
    else:
        errors = [d["error"]["message"] for d in sent.datas if "error" in d]
        assert errors, sent
        line = errors[-1]
        assert sent.hook_errors == [line]
    assert "\n" not in line and line.removeprefix("a2a-tape: ").startswith(what), line
    return line


@pytest.fixture(scope="module")
def agent():
    with running_sdk_agent() as running:
        yield running


@pytest.mark.parametrize("path", PATHS)
def test_before_record_request_changes_what_is_recorded_then_redaction_runs(agent, tmp_path, path):
    """The hook rewrites the text, adds a header and a secret; the agent still gets what the
    client sent (the task's history echoes it), the log keeps the rewrite, the secret redacted."""
    seen: list[A2ARequest] = []

    def rewrite(request: A2ARequest) -> A2ARequest:
        seen.append(request)
        body = request.body.replace(b'"hello"', b'"hello, rewritten"')
        headers = (*request.headers, ("x-hooked", "yes"), ("x-api-key", SECRET))
        return dataclasses.replace(request, body=body, headers=headers)

    db = tmp_path / "hooks.db"
    sent = PATHS[path](db, agent.url, [_body("hello")], before_record_request=rewrite)
    assert sent.error is None and sent.datas[-1]["result"]["status"]["state"] == "completed"
    assert sent.datas[0]["result"]["history"][0]["parts"][0]["text"] == "hello"  # what the agent got
    assert seen and seen[0].method == "message/stream" and seen[0].text == "hello"
    assert seen[0].header("Authorization") == f"Bearer {TOKEN}"  # the hook sees the wire, in memory
    with store.open_store(db) as st:
        (send,) = _sends(st)
        assert b"hello, rewritten" in send.request_body
        assert send.request_headers["x-hooked"] == "yes"
        assert send.request_headers["x-api-key"] == REDACTED  # redaction ran after the hook
        assert send.outcome == "ok" and st.count_events() == 6
    assert SECRET.encode() not in _disk(db) and TOKEN.encode() not in _disk(db)


@pytest.mark.parametrize("path", PATHS)
def test_before_record_request_none_records_nothing_of_that_exchange(agent, tmp_path, path):
    def skip_streams(request: A2ARequest) -> A2ARequest | None:
        return None if request.text == "skip me" else request

    db = tmp_path / "hooks.db"
    sent = PATHS[path](
        db, agent.url, [_body("skip me"), _body("keep me", mid="m-2")], before_record_request=skip_streams
    )
    assert sent.error is None
    assert len(sent.datas) == 12  # both answered in full: dropping is about the log only
    with store.open_store(db) as st:
        (send,) = _sends(st)
        assert b"keep me" in send.request_body
        assert b"skip me" not in _disk(db)
        assert st.count_events() == 6


@pytest.mark.parametrize("path", PATHS)
def test_before_record_answer_changes_and_drops_items_then_redaction_runs(agent, tmp_path, path):
    """Working statuses are left out, artifact text is rewritten, and a hook that copies the
    client's token into an answer still leaves no token on disk."""

    def answers(answer: A2AAnswer) -> A2AAnswer | None:
        doc = answer.json()
        result = doc["result"]
        if result.get("kind") == "status-update" and result["status"]["state"] == "working":
            return None
        if result.get("kind") == "artifact-update":
            result["artifact"]["parts"][0]["text"] = result["artifact"]["parts"][0]["text"].upper()
            result["artifact"]["metadata"] = {"copied": answer.request.header("authorization")}
        return dataclasses.replace(answer, body=json.dumps(doc).encode())

    db = tmp_path / "hooks.db"
    sent = PATHS[path](db, agent.url, [_body("hello")], before_record_answer=answers)
    assert sent.error is None and len(sent.datas) == 6  # the client gets what the agent sent
    assert "chunk-0 " in json.dumps(sent.datas)
    with store.open_store(db) as st:
        kinds = [store.decode_item(e.payload).kind for e in st.read_from(0) if e.origin == "upstream"]
        assert kinds == ["task", "artifact", "artifact", "artifact", "status"]
        payloads = b"".join(e.payload for e in st.read_from(0))
        assert b"CHUNK-0 " in payloads and b"chunk-0 " not in payloads
        (send,) = _sends(st)
        assert send.outcome == "ok"
    assert TOKEN.encode() not in _disk(db)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("hook", ["before_record_request", "before_record_answer"])
def test_a_hook_that_raises_is_one_line_and_loses_nothing_recorded(agent, tmp_path, path, hook):
    """The first send is recorded whole; the hook raises on the second (the request, or its third
    answer item): one line naming the hook; the first send's exchange and events are intact, and
    an answer hook's items before the raise are in the log, the exchange ended ``error``."""
    calls = {"n": 0}

    def on_request(request: A2ARequest) -> A2ARequest:
        if request.text == "second":
            raise ValueError(f"cannot take {request.header('authorization')}")
        return request

    def on_answer(answer: A2AAnswer) -> A2AAnswer:
        if answer.request.text == "second":
            calls["n"] += 1
            if calls["n"] == 3:
                raise ValueError(f"cannot take {answer.request.header('authorization')}")
        return answer

    db = tmp_path / "hooks.db"
    given = {hook: on_request if hook == "before_record_request" else on_answer}
    sent = PATHS[path](db, agent.url, [_body("first"), _body("second", mid="m-2")], **given)
    line = _one_error(sent, f"{hook} raised ValueError: cannot take ")
    assert TOKEN not in line  # the hook's message quoted the credential: scrubbed
    with store.open_store(db) as st:
        sends = _sends(st)
        assert sends[0].outcome == "ok" and b"first" in sends[0].request_body
        first = [e for e in st.read_from(0) if e.exchange_id == sends[0].id]
        assert len(first) == 6
        if hook == "before_record_request":
            assert len(sends) == 1  # nothing of the second was written
        else:
            (second,) = sends[1:]
            assert second.outcome == "error" and "before_record_answer raised ValueError" in (second.error or "")
            kept = [e for e in st.read_from(0) if e.exchange_id == second.id and e.origin == "upstream"]
            assert len(kept) == 2  # the items before the raise
    assert TOKEN.encode() not in _disk(db)


def test_hooks_that_are_not_functions_are_refused_at_once(tmp_path):
    with pytest.raises(TypeError, match="before_record_answer must be a function"):
        RecordingTransport(tmp_path / "x.db", before_record_answer="drop")  # type: ignore[arg-type]


def test_a_hook_that_returns_something_else_is_one_line(agent, tmp_path):
    """A hook must give back the request or answer it was handed (or None): a dict is named."""
    sent = _sync(tmp_path / "hooks.db", agent.url, [_body("hello")], before_record_answer=lambda answer: answer.json())
    assert str(sent.error) == (
        "before_record_answer returned dict: return the A2AAnswer it was given (changed) or None"
    )


def test_the_hooks_see_an_http_json_call_as_its_binding_sent_it(tmp_path):
    """Over HTTP+JSON the request's body is the params alone: ``text`` and ``method`` still read
    it, and the answer hook's drop is in the log."""
    seen: list[A2ARequest] = []

    def keep(request: A2ARequest) -> A2ARequest:
        seen.append(request)
        return request

    def no_working(answer: A2AAnswer) -> A2AAnswer | None:
        update = answer.json().get("statusUpdate", {})
        return None if update.get("status", {}).get("state") == "TASK_STATE_WORKING" else answer

    db = tmp_path / "hooks.db"
    message = {"messageId": "m-rest", "role": "ROLE_USER", "parts": [{"text": "hello"}]}
    with running_sdk_agent(rest=True) as agent:
        transport = RecordingTransport(db, before_record_request=keep, before_record_answer=no_working)
        with httpx.Client(transport=transport, timeout=30) as http:
            url = agent.url + "/a2a/rest/message:stream"
            with http.stream("POST", url, json={"message": message}, headers={"A2A-Version": "1.0"}) as resp:
                datas = _datas(resp.read())
    assert len(datas) == 6 and "TASK_STATE_COMPLETED" in json.dumps(datas[-1])
    assert [(r.method, r.text) for r in seen] == [("SendStreamingMessage", "hello")]
    with store.open_store(db) as st:
        kinds = [store.decode_item(e.payload).kind for e in st.read_from(0) if e.origin == "upstream"]
    assert kinds == ["task", "artifact", "artifact", "artifact", "status"]
