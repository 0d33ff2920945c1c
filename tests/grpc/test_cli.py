"""The installed CLI: ``proxy --grpc-listen`` records a gRPC client, ``tasks`` shows it, ``serve
--grpc-listen`` answers a gRPC client from it; bad gRPC options are one line and exit 2."""

from __future__ import annotations

import contextlib
import json
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.grpc.clients import card, sdk_send
from tests.grpc.test_proxy import _strip_ids
from tests.recorder.proxy.conftest import send_body
from tests.support.servers import bind_loopback

SCRIPT = Path(sys.executable).with_name("a2a-tape")


@contextlib.contextmanager
def _running(argv: list[str], wait_for: str) -> Iterator[tuple[subprocess.Popen, list[str]]]:
    """The CLI running until it printed ``wait_for`` (a regex) on stderr; SIGTERM at the end (uvicorn
    shuts down on it as on Ctrl-C). No ``preexec_fn``: this process has grpc's threads running (the
    agent fixture), and Python code run between fork and exec in such a process can die there."""
    proc = subprocess.Popen([str(SCRIPT), *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    try:
        assert proc.stderr is not None
        for line in proc.stderr:  # the condition waited for: the line saying where it listens
            lines.append(line)
            if re.search(wait_for, line):
                break
        else:
            raise AssertionError(f"{argv[0]} ended before listening: {''.join(lines)}")
        yield proc, lines
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _url(lines: list[str]) -> str:
    return re.search(r"(http://127\.0\.0\.1:\d+)", "".join(lines)).group(1)  # type: ignore[union-attr]


@pytest.mark.skipif(not SCRIPT.exists(), reason="needs the installed console script")
def test_proxy_then_tasks_then_serve_over_grpc(grpc_agent, tmp_path):
    db = tmp_path / "cli.db"
    argv = ["proxy", grpc_agent.url, "--listen", "127.0.0.1:0", "--grpc-listen", "127.0.0.1:0", "--db", str(db)]
    with _running([*argv, "--no-recover"], r"gRPC on 127\.0\.0\.1:\d+ -> " + re.escape(grpc_agent.target)) as (
        proc,
        lines,
    ):
        live = sdk_send(_url(lines), "hello", message_id="m-cli")
    # a gRPC call is said on stderr as an HTTP one is, once its row is final (the HTTP proxy's line)
    said = proc.stderr.read()
    line = f"a2a-tape proxy: POST /lf.a2a.v1.A2AService/SendStreamingMessage SendStreamingMessage task {live[0]['task']['id']}"
    assert f"{line} forward 200 (closed)\n" in said, said
    tasks = subprocess.run([str(SCRIPT), "tasks", "--db", str(db), "--json"], capture_output=True, text=True)
    (task,) = json.loads(tasks.stdout)
    assert task["state"] == "completed" and task["task_id"] == live[0]["task"]["id"]
    assert task["bindings"] == ["grpc"]  # tasks and show name the binding of every exchange
    show = subprocess.run([str(SCRIPT), "show", task["task_id"], "--db", str(db), "--json"], capture_output=True)
    assert {(e["binding"], e["version"]) for e in json.loads(show.stdout)} == {("grpc", "1.0")}
    serve = ["serve", "--db", str(db), "--listen", "127.0.0.1:0", "--grpc-listen", "127.0.0.1:0"]
    with _running(serve, r"gRPC on 127\.0\.0\.1:\d+") as (_proc, lines):
        assert sdk_send(_url(lines), "hello", message_id="m-cli") == live
    assert _strip_ids(live)[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


@pytest.mark.skipif(not SCRIPT.exists(), reason="needs the installed console script")
@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["proxy", "http://127.0.0.1:9", "--grpc-listen", "nope"], "is not HOST:PORT"),
        (["proxy", "http://127.0.0.1:9", "--grpc-listen", "10.1.2.3:0"], "--allow-remote"),
        (["proxy", "http://127.0.0.1:9", "--grpc-listen", "127.0.0.1:BUSY"], "cannot listen on"),
        (["proxy", "http://127.0.0.1:9", "--grpc-listen", "127.0.0.1:0"], "cannot read the agent's card"),
        (["serve", "--grpc-listen", "127.0.0.1:BUSY"], "cannot listen on"),
    ],
)
def test_bad_grpc_options_are_one_line_and_exit_2(argv, said, tmp_path):
    busy = bind_loopback()
    try:
        argv = [a.replace("BUSY", str(busy.getsockname()[1])) for a in argv]
        done = subprocess.run(
            [str(SCRIPT), *argv, "--db", str(tmp_path / "x.db")], capture_output=True, text=True, timeout=60
        )
    finally:
        busy.close()
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and said in lines[0] and "Traceback" not in done.stderr
    assert not (tmp_path / "x.db").exists()


REPO = Path(__file__).parents[2]
RECORDED_CARD = REPO / "tests" / "replay" / "data" / "chunk-agent.jsonl"  # the agent's card in it
NO_CARD = REPO / "recordings" / "sdk-v10-stream.jsonl"  # none: serve makes one up


@pytest.mark.skipif(not SCRIPT.exists(), reason="needs the installed console script")
@pytest.mark.parametrize("tape", [RECORDED_CARD, NO_CARD], ids=["recorded-card", "made-up-card"])
def test_the_card_serve_answers_names_its_grpc_server(tape):
    """The a2a-sdk client configured for gRPC only follows the card to ``serve --grpc-listen``,
    whether the card is the recorded one or one serve made up (that one named no gRPC interface:
    "no compatible transports found")."""
    serve = ["serve", "--db", str(tape), "--listen", "127.0.0.1:0", "--grpc-listen", "127.0.0.1:0"]
    with _running(serve, r"gRPC on 127\.0\.0\.1:\d+") as (_proc, lines):
        target = re.search(r"gRPC on (127\.0\.0\.1:\d+)", "".join(lines)).group(1)  # type: ignore[union-attr]
        interfaces = card(_url(lines))["supportedInterfaces"]
        assert [i["url"] for i in interfaces if i["protocolBinding"] == "GRPC"] == [target]
        answers = sdk_send(_url(lines), "hello")
    assert answers[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


@pytest.mark.skipif(not SCRIPT.exists(), reason="needs the installed console script")
def test_without_grpc_listen_the_cards_name_no_grpc_address(grpc_agent, tmp_path):
    """Issue 36, item 6: the agent's own gRPC address on the card of ``proxy`` or ``serve`` without
    ``--grpc-listen`` sent a gRPC client around the recorder (or a replay test to the live agent)."""
    db = tmp_path / "nogrpc.db"
    proxy = ["proxy", grpc_agent.url, "--listen", "127.0.0.1:0", "--db", str(db), "--no-recover"]
    with _running(proxy, r"listening on") as (_proc, lines):
        proxied = card(_url(lines))
        body, headers = send_body("hello", dialect="1.0", stream=False, message_id="m-nogrpc")
        assert httpx.post(_url(lines) + "/", content=body, headers=headers, timeout=30).status_code == 200
    assert grpc_agent.target not in json.dumps(proxied)
    assert [i["protocolBinding"] for i in proxied["supportedInterfaces"]] == ["JSONRPC"]
    assert proxied["supportedInterfaces"][0]["url"] == _url(lines) + "/"
    serve = ["serve", "--db", str(db), "--listen", "127.0.0.1:0"]
    with _running(serve, r"a2a-tape serve: http") as (_proc, lines):
        served = card(_url(lines))
    assert grpc_agent.target not in json.dumps(served)
    assert [i["protocolBinding"] for i in served["supportedInterfaces"]] == ["JSONRPC"]
