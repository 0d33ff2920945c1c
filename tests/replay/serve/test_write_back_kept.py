"""Issue 36, item 5: what ``serve --record-mode`` recorded reaches the tape however the session
ends. SIGHUP (the terminal closed, the ssh session dropped) writes back as SIGTERM does; a new
episode whose task id the tape holds under another context is left out alone, named on stderr,
the others written. The serve is the installed ``a2a-tape``; the upstreams are real HTTP servers."""

from __future__ import annotations

import signal

import httpx
import msgspec
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from a2a_tape.replay.serve.library import Library
from tests.conftest import running_sdk_agent
from tests.oracles.tape import running
from tests.support.servers import serve_app

HEADERS = {"A2A-Version": "1.0", "content-type": "application/json"}


def _send(url: str, text: str) -> httpx.Response:
    body = msgspec.json.encode(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendMessage",
            "params": {"message": {"messageId": f"m-{text}", "role": "ROLE_USER", "parts": [{"text": text}]}},
        }
    )
    return httpx.post(url + "/", content=body, headers=HEADERS, timeout=30)


def _texts(tape) -> list[str]:
    lib = Library.open(tape)
    try:
        return sorted(ep.text for ep in lib.episodes)
    finally:
        lib.close()


def _serve(tape, upstream: str, log):
    args = ["serve", "--db", str(tape), "--listen", "127.0.0.1:0", "--record-mode", "new_episodes"]
    return running([*args, "--upstream", upstream], log)


def test_sighup_writes_the_session_back_as_sigterm_does(tmp_path):
    tape = tmp_path / "hup.jsonl"
    with running_sdk_agent() as agent, _serve(tape, agent.url, tmp_path / "serve.log") as serve:
        assert b"TASK_STATE" in _send(serve.url, "before-the-hangup").content
        serve.proc.send_signal(signal.SIGHUP)
        assert serve.proc.wait(timeout=30) == 0, serve.stderr()
    assert _texts(tape) == ["before-the-hangup"]
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def _same_task_agent() -> Starlette:
    """An agent whose task id is the text's first word, its context the whole text: "clash-1" and
    "clash-2" are one task id under two contexts (as two agents reusing ids would answer)."""

    async def rpc(request: Request) -> Response:
        doc = msgspec.json.decode(await request.body())
        text = doc["params"]["message"]["parts"][0]["text"]
        task = {
            "id": "t-" + text.split("-")[0],
            "contextId": "ctx-" + text,
            "status": {"state": "TASK_STATE_COMPLETED"},
        }
        answer = {"jsonrpc": "2.0", "id": doc["id"], "result": {"task": task}}
        return Response(msgspec.json.encode(answer), media_type="application/json")

    return Starlette(routes=[Route("/", rpc, methods=["POST"])])


def test_an_episode_the_tape_refuses_is_named_and_the_others_are_kept(tmp_path):
    tape = tmp_path / "clash.jsonl"
    with serve_app(_same_task_agent()) as upstream:
        with _serve(tape, upstream, tmp_path / "first.log") as first:
            assert _send(first.url, "clash-1").status_code == 200
            assert first.stop() == 0, first.stderr()
        with _serve(tape, upstream, tmp_path / "second.log") as second:
            assert _send(second.url, "keep-2").status_code == 200
            assert _send(second.url, "clash-2").status_code == 200
            assert _send(second.url, "other-2").status_code == 200
            assert second.stop() == 0, second.stderr()
    said = second.stderr()
    assert "not written back" in said and "task t-clash" in said and "ctx-clash-2" in said, said
    assert "Traceback" not in said
    assert _texts(tape) == ["clash-1", "keep-2", "other-2"]
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
