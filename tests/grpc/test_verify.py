"""``a2a-tape verify`` over gRPC (issue 32), through the installed CLI, against a real a2a-sdk 1.3.0
agent serving gRPC with its own ``GrpcHandler`` (verify's drift agent, :mod:`tests.support.verify_agents`).

JSON-RPC recordings sent again with ``--binding grpc``; a gRPC recording (the client interceptor's)
sent again in the binding it was recorded in; ``--across-bindings`` over JSON-RPC and gRPC; the
unchanged agent matches on each (errors compared by what A2A names them: the JSON-RPC code, the
gRPC status, the same ``ErrorInfo`` reason). Then the agent drifts: verify over gRPC names the first
divergent event, under the rule expected, exit 1.
"""

from __future__ import annotations

import asyncio
import json
import shlex
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from a2a_tape import RecordingInterceptor
from a2a_tape.recorder.record import RecordOptions, record
from a2a_tape.recorder.session import Session
from a2a_tape.store import open_store
from tests.docs.harness import BIN, reader_env, run_line
from tests.support.grpc_agents import GrpcAgent, running_grpc_agent
from tests.support.in_process import run_text_in_process, without_our_variables
from tests.support.verify_agents import DriftAgent

A2A = BIN / "a2a-tape"
TEXTS = ("hello there", "ask me", "boom now")

pytestmark = pytest.mark.skipif(not A2A.exists(), reason="needs the installed console script")


def _cli(line: str, cwd: Path, *, installed: bool = True) -> tuple[int, str, str]:
    """``a2a-tape LINE`` in ``cwd``, by the installed script; ``installed=False``: the same command in this
    process (tests/support/in_process.py), for the runs whose result, not the process, is what is checked."""
    if installed:
        run = run_line(f"{A2A} {line}", cwd, reader_env(cwd))
    else:
        env = {**without_our_variables(), "HOME": str(cwd), "COLUMNS": "100"}
        run = run_text_in_process(shlex.split(line), cwd, env, timeout=120)
    assert "Traceback" not in run.stderr, run.stderr
    return run.returncode, run.stdout, run.stderr


def _grpc_recording(url: str, db: Path, text: str) -> str:
    """``text`` sent by the a2a-sdk client over gRPC, recorded by :class:`RecordingInterceptor`."""
    from a2a.client import ClientConfig
    from a2a.client.client_factory import create_client
    from a2a.types import Message, Part, Role, SendMessageRequest

    with open_store(str(db), create=True) as st:
        recording = RecordingInterceptor(st)

        async def run() -> None:
            config = ClientConfig(grpc_channel_factory=recording.channel, supported_protocol_bindings=["GRPC"])
            client = await create_client(url, client_config=config)
            msg = Message(message_id="m-grpc-1", role=Role.ROLE_USER, parts=[Part(text=text)])
            try:
                async for _ in client.send_message(SendMessageRequest(message=msg)):
                    pass
            finally:
                await client.close()

        asyncio.run(run())
        (task,) = recording.task_ids
        return task


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GrpcAgent, DriftAgent, Path, dict[str, str]]]:
    """The drift agent over gRPC and JSON-RPC, each text recorded over JSON-RPC (``record``), and
    ``hello there`` over gRPC too (key ``grpc``)."""
    db = tmp_path_factory.mktemp("grpc-verify") / "recorded.db"
    drift = DriftAgent()
    with running_grpc_agent(executor=drift) as running:
        ids = {}
        with open_store(str(db), create=True) as st:
            for text in TEXTS:
                result = anyio.run(record, Session(st), RecordOptions(url=running.url, text=text, binding="jsonrpc"))
                assert result.task_id is not None
                ids[text] = result.task_id
        ids["grpc"] = _grpc_recording(running.url, db, "hello there")
        yield running, drift, db, ids


def _bindings_of_live_runs(db: Path, cwd: Path) -> set[str | None]:
    code, out, err = _cli(f"tasks --runs --db '{db}' --json", cwd, installed=False)
    assert code == 0, (out, err)
    return {r["binding"] for r in json.loads(out) if r["source"] == "verify"}


def test_jsonrpc_recordings_verify_over_grpc(agent, tmp_path: Path) -> None:
    running, _, db, ids = agent
    into = tmp_path / "live.db"
    tasks = " ".join(ids[t] for t in TEXTS)
    code, out, err = _cli(
        f"verify {tasks} --against {running.url} --binding grpc --db '{db}' --into '{into}' --json", tmp_path
    )
    assert code == 0, (out, err)
    report = json.loads(out)
    assert [t["verdict"] for t in report["tasks"]] == ["match"] * 3, out
    assert _bindings_of_live_runs(into, tmp_path) == {"grpc"}


def test_a_grpc_recording_is_sent_again_over_grpc(agent, tmp_path: Path) -> None:
    running, _, db, ids = agent
    into = tmp_path / "live.db"
    line = f"verify {ids['grpc']} --against {running.url} --db '{db}' --into '{into}' --json"
    code, out, err = _cli(line, tmp_path, installed=False)
    assert code == 0, (out, err)
    assert json.loads(out)["tasks"][0]["verdict"] == "match", out
    assert _bindings_of_live_runs(into, tmp_path) == {"grpc"}


def test_across_bindings_sends_over_grpc_when_the_card_offers_it(agent, tmp_path: Path) -> None:
    running, _, db, ids = agent
    tasks = [ids[t] for t in TEXTS]
    line = (
        f"verify {' '.join(tasks)} --against {running.url} --across-bindings --db '{db}' --into '{tmp_path / 'l.db'}'"
    )
    code, out, err = _cli(f"{line} --json", tmp_path, installed=False)
    assert code == 0, (out, err)
    pairs = sorted((t["task_id"], t["binding"], t["verdict"]) for t in json.loads(out)["tasks"])
    assert pairs == sorted((t, b, "match") for t in tasks for b in ("jsonrpc", "grpc")), out


# fault -> (the task, the rule that names the first divergence, the recorded event's kind)
DRIFTS = {
    "rename": ("hello there", "artifacts", "artifact"),
    "skip-working": ("hello there", "states", "status"),
    "error-code": ("boom now", "errors", "error"),
    "no-last-chunk": ("grpc", "closure", "artifact"),
}


@pytest.mark.parametrize("fault", sorted(DRIFTS))
def test_a_drift_over_grpc_is_named_at_its_first_divergent_event(agent, fault: str, tmp_path: Path) -> None:
    running, drift, db, ids = agent
    key, rule, kind = DRIFTS[fault]
    task = ids[key]
    drift.fault = fault
    try:
        line = f"verify {task} --against {running.url} --binding grpc --db '{db}' --into '{tmp_path / 'l.db'}' --json"
        code, out, err = _cli(line, tmp_path, installed=fault == min(DRIFTS))  # the table's first row installed
    finally:
        drift.fault = None
    assert code == 1, (out, err)
    (one,) = json.loads(out)["tasks"]
    first = one["first"]
    assert one["verdict"] == "diverged" and first["rule"] == rule, one
    assert first["recorded"]["run"] == f"{task}@1" and first["live"]["run"] == f"{task}@1", first
    assert first["recorded"]["position"] is not None and first["recorded"]["kind"] == kind, first
    if fault == "error-code":  # what A2A names each, whatever the binding
        assert first["recorded"]["what"] == "error UNSUPPORTED_OPERATION" and "INVALID_PARAMS" in first["live"]["what"]
