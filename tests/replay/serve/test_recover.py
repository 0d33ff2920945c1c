"""Each fault of the replay server makes ``a2a-tape record`` recover as docs/design.md section 5 says."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from a2a_tape.cli import app
from a2a_tape.replay.serve.engine import ReplayEngine
from a2a_tape.replay.serve.library import Library
from a2a_tape.replay.serve.server import create_app
from a2a_tape.store import open_store
from tests.support.servers import serve_app

TAPE = Path(__file__).parents[1] / "data" / "chunk-agent.jsonl"
runner = CliRunner()


@pytest.mark.parametrize(
    "fault, exit_code, state, recovered, events",
    [
        ("drop-after=2", 0, "completed", ["closed"], None),  # stream closed while WORKING: resubscribe/poll
        ("stall-after=3", 1, "canceled", ["stalled"], 3),  # no progress: cancel the task (its own exchange), say why
        ("duplicate=3", 0, "completed", [], 7),  # the duplicate is recorded as received
        ("error-after=3", 1, "failed", [], 4),  # event: error: the task failed
    ],
)
def test_record_recovers_from_each_fault(tmp_path, fault, exit_code, state, recovered, events):
    lib = Library.open(TAPE)
    try:
        with serve_app(create_app(ReplayEngine(lib))) as url:
            res = runner.invoke(
                app,
                [
                    "record",
                    url,
                    "hello",
                    "--db",
                    str(tmp_path / "r.db"),
                    "--json",
                    "--stall-timeout",
                    "2",  # 0.5 s: under load the cancel after the stall missed it once (state unknown)
                    "-H",
                    f"X-A2A-Tape-Fault: {fault}",
                ],
            )
    finally:
        lib.close()
    assert res.exit_code == exit_code, res.output
    out = json.loads(res.stdout)
    assert out["state"] == state
    assert out["recovered"] == recovered
    with open_store(tmp_path / "r.db", create=False) as st:
        logged = st.read_task(out["task_id"])
        sends = [
            ex for ex in st.exchanges(out["task_id"]) if ex.rpc_method in ("SendStreamingMessage", "message/stream")
        ]
    assert out["events"] == len(logged)  # every row of the run, ours and the GetTask answer too: what tasks counts
    if events is not None:  # the stream's own
        assert sum(1 for e in logged if e.exchange_id == sends[0].id) == events
    if state == "completed":
        assert out["final_answer"] == "chunk-0 chunk-1 chunk-2 "
    if fault.startswith("error-after"):
        assert "a2a-tape fault: error-after=3" in out["error"]
