"""The recorded-upstream client's rules, on every path that follows a task through it.

``record`` (:class:`recorder.record.Recorder`), the startup recovery and ``recover``, and ``probe``
call their agent through one client (:class:`capture.upstream_call.UpstreamCall`, by way of
:class:`recorder.upstream.Upstream`): what it decides about an answer holds for all of them. The
agent is the hand-written fault agent (a real a2a-sdk agent closes its streams when the task ends
and answers GetTask in JSON-RPC: the faults here cannot be had from it). ``probe``'s exit 1 at the fault
through the installed script; the other commands, whose JSON report is what is checked, in process.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import anyio
import httpx
import pytest
from starlette.applications import Starlette

from a2a_tape import store
from a2a_tape.recorder.client import send_request
from a2a_tape.recorder.record import RecordOptions, record
from a2a_tape.recorder.session import Session
from a2a_tape.recorder.upstream import Upstream
from tests.capture.drivers import cli, in_process
from tests.recorder.proxy.test_recovery import fake_task, seed
from tests.support.fault_agent import FaultHost
from tests.support.servers import serve_app

GRACE = 0.3  # seconds a stream may stay open after its task settled, in these tests
STALL = 20.0  # far above what any run here may take
PATIENCE = 30  # the stall timeout or probe timeout given: a path that waits it out fails the test


def _kept_open_by_record(url: str, db: Path) -> tuple[str, list[store.Exchange]]:
    with store.open_store(db) as st:
        opts = RecordOptions(url=url, text="go", stall_timeout=STALL, close_grace=GRACE)
        result = anyio.run(record, Session(st), opts)
        return result.state, [ex for ex in st.exchanges() if ex.streaming]


def _kept_open_by_upstream(url: str, db: Path) -> tuple[str, list[store.Exchange]]:
    """The stream reader recovery resumes tasks with and probe drops streams with."""

    async def main() -> str | None:
        async with httpx.AsyncClient() as http:
            up = Upstream(st, url, http)
            up.close_grace = GRACE
            await up.load_card()
            ep = up.endpoint(None)
            dialect, endpoint = ep.dialect, ep.url
            items, _ = await up.stream(send_request(dialect, "go", stream=True), endpoint, None, stall=STALL)
            return next(i.body.state for i in reversed(items) if isinstance(i.body, store.StatusUpdate))

    with store.open_store(db) as st:
        state = anyio.run(main)
        return state or "unknown", [ex for ex in st.exchanges() if ex.streaming]


@pytest.mark.parametrize("follow", [_kept_open_by_record, _kept_open_by_upstream], ids=["record", "recovery"])
def test_a_stream_kept_open_after_its_task_settled_is_closed_and_recorded_ok(fault_agent, db_path, follow):
    """The agent sends ``completed`` and keeps the stream open (keep-alives only): each path closes
    it ``close_grace`` after the task settled and records it ``ok``, saying why; none waits for its
    stall timeout and calls a finished task ``stalled``."""
    t0 = time.monotonic()
    state, streams = follow(fault_agent.url("openend"), db_path)
    assert time.monotonic() - t0 < STALL / 2
    assert state == "completed"
    (ex,) = streams
    assert ex.outcome == "ok" and "closed by a2a-tape" in (ex.error or ""), (ex.outcome, ex.error)
    assert ex.binding == "jsonrpc"  # the binding the client spoke, on its row


def _recover(workdir: Path) -> str:
    """Recovery resumes a task from the origin it was recorded from: the agent at the root."""
    with serve_app(Starlette(routes=FaultHost("notrpc", 0.1).routes())) as base:
        db = workdir / "tape.db"
        with store.open_store(db, create=True) as st:
            seed(st, base, [fake_task("t-1")])  # a task a proxy left WORKING (its upstream: base)
        run = in_process(["recover", "--db", str(db), "--stall-timeout", str(PATIENCE), "--json"], workdir)
    assert run.returncode in (0, 1), run.stderr
    (failed,) = json.loads(run.stdout)["failed"]
    return str(failed["reason"])


def _probe(workdir: Path, url: str) -> str:
    run = cli(["probe", url, "--db", str(workdir / "tape.db"), "--timeout", str(PATIENCE), "--json"], workdir)
    assert run.returncode == 1, run.stderr
    return next(p["detail"] for p in json.loads(run.stdout)["probes"] if p["name"] == "stall")


@pytest.mark.parametrize("path", ["recover", "probe"])
def test_a_get_task_answer_that_is_not_a2a_is_named_at_once(fault_agent, tmp_path, path):
    """GetTask answers 200 with JSON that is no JSON-RPC answer: the path says so at once, in its
    one line, instead of polling an answer without a state until its timeout runs out."""
    t0 = time.monotonic()
    why = _recover(tmp_path) if path == "recover" else _probe(tmp_path, fault_agent.url("notrpc"))
    assert time.monotonic() - t0 < PATIENCE / 2, why  # not waited out
    assert "not an A2A answer" in why, why


def test_probe_calls_an_agent_under_a_path_prefix_at_its_endpoint(fault_agent, tmp_path):
    """An agent served under a path (``/ping``, its card naming ``/ping/``): every probe's call goes
    to that endpoint, the prefix once, and the stream probes pass."""
    db = tmp_path / "tape.db"
    run = in_process(["probe", fault_agent.url("ping"), "--db", str(db), "--timeout", "5", "--json"], tmp_path)
    probes = {p["name"]: p for p in json.loads(run.stdout)["probes"]}
    assert probes["dropped-stream"]["ok"] and probes["stall"]["ok"], probes
    with store.open_store(db) as st:
        urls = {ex.url for ex in st.exchanges()}
    assert urls == {fault_agent.url("ping") + "/"}, urls
