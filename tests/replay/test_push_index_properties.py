"""Pushes and the projections (issue 33): a push is an exchange row with a note in its task's log
(written as the proxy's receiver writes them, ``Capture.push_writes``, the one place every push path writes), so
a task known by its pushes alone is in every index, and the indexes kept incrementally at any cut
hold the rows a rebuild makes (Hypothesis, over logs that mix the agent's streamed updates and
pushes of several tasks). The task index's state is the rule of ``fold.task_state.shown_state``: the
agent's last streamed state, else the last one pushed.
"""

from __future__ import annotations

import time
from pathlib import Path

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from a2a_tape import store
from a2a_tape.capture.sending import Capture
from a2a_tape.fold.projection import Projector
from a2a_tape.inspection.doctor import diagnose
from a2a_tape.inspection.doctor_index import DoctorIndex
from a2a_tape.inspection.listing import newest
from a2a_tape.inspection.search_index import SearchIndex
from a2a_tape.recorder.proxy.push_configs import Hook
from a2a_tape.recorder.proxy.push_receiver import read_push
from a2a_tape.store import open_store
from a2a_tape.store.redact import Redactor
from a2a_tape.store.writer import run_writes

from .test_index_properties import _task_index
from .test_properties import _tmpdir

STATES = ("TASK_STATE_WORKING", "TASK_STATE_COMPLETED", "TASK_STATE_FAILED")
LOWER = {"TASK_STATE_WORKING": "working", "TASK_STATE_COMPLETED": "completed", "TASK_STATE_FAILED": "failed"}
HOOK = Hook(id="h1", url="http://127.0.0.1:9/hook", token="tok")

ops = st.lists(
    st.tuples(st.sampled_from(["t1", "t2", "t3"]), st.sampled_from(["stream", "push"]), st.sampled_from(STATES)),
    min_size=1,
    max_size=30,
)


def _update(task: str, state: str) -> bytes:
    return msgspec.json.encode({"statusUpdate": {"taskId": task, "contextId": f"c-{task}", "status": {"state": state}}})


def _write(s: store.Store, op: tuple[str, str, str], streams: dict[str, int], at: float) -> None:
    """One op into the log at ``at``: an update the agent streamed (on the task's stream through the
    proxy), or a push, through the receiver's own write (its row, its note, one transaction)."""
    task, kind, state = op
    body = _update(task, state)
    if kind == "stream":
        ex = streams.get(task)
        if ex is None:
            ex = streams[task] = s.begin_exchange(
                store.Exchange(url="http://agent/", rpc_method="SendStreamingMessage", task_id=task, role="proxy")
            )
        s.append(store.NewEvent(payload=body, task_id=task, exchange_id=ex, received_at=at))
        return
    verdict = read_push(body, "tok", HOOK)
    ex = store.Exchange(started_at=at, url=HOOK.url, rpc_method="push", request_body=body, task_id=task, role="push")
    ex.context_id, ex.dialect = verdict.context_id, verdict.dialect
    capture = Capture(Redactor(), task_id=verdict.task_id)
    run_writes(capture.push_writes(s, ex, state=verdict.state, notes=verdict.notes))


def _expected_states(done: list[tuple[str, str, str]]) -> dict[str, str]:
    streamed: dict[str, str] = {}
    pushed: dict[str, str] = {}
    for task, kind, state in done:
        (streamed if kind == "stream" else pushed)[task] = LOWER[state]
    return {t: streamed.get(t, pushed.get(t, "unknown")) for t in {*streamed, *pushed}}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(log=ops, cut=st.integers(0, 30), every=st.integers(1, 5))
def test_pushes_in_the_indexes_incremental_at_any_cut_equal_a_rebuild(log, cut, every):
    cut = min(cut, len(log))
    with _tmpdir() as tmp:
        with (
            open_store(Path(tmp) / "inc.db", durability="normal") as a,
            open_store(Path(tmp) / "full.db", durability="normal") as b,
        ):
            streams_a: dict[str, int] = {}
            for i, op in enumerate(log[:cut]):
                _write(a, op, streams_a, float(i + 1))
            indexes = (SearchIndex(a, commit_every=every), DoctorIndex(a, chunk=2), Projector(a, commit_every=every))
            for index in indexes:
                index.catch_up()
            for i, op in enumerate(log[cut:], cut):
                _write(a, op, streams_a, float(i + 1))
            for index in indexes:
                index.catch_up()
            streams_b: dict[str, int] = {}
            for i, op in enumerate(log):
                _write(b, op, streams_b, float(i + 1))
            full = (SearchIndex(b), DoctorIndex(b), Projector(b))
            for index in full:
                index.rebuild()
            assert indexes[0].rows() == full[0].rows()
            assert indexes[1].rows() == full[1].rows()
            assert _task_index(a) == _task_index(b)
            assert indexes[1].report() == diagnose(b)
            # every task with a push or an update is listed, in the state the rule gives
            expected = _expected_states(log)
            assert {v.task_id: v.state for v in newest(a)} == expected
            only_pushed = {t for t, _, _ in log} - {t for t, k, _ in log if k == "stream"}
            flagged = {f.task_id for f in indexes[1].report().findings if f.code == "push-only"}
            assert flagged == only_pushed


def test_a_push_after_the_task_was_examined_reaches_doctors_kept_findings(tmp_path):
    """doctor's kept findings re-examine a task when its log moves: a push that comes after the task
    ended and was examined moves it by its note (without one, the push row alone did not)."""
    with open_store(tmp_path / "t.db") as s:
        streams: dict[str, int] = {}
        ex = s.begin_exchange(
            store.Exchange(
                url="http://agent/",
                rpc_method="SendStreamingMessage",
                request_body=b'{"params":{"configuration":{"taskPushNotificationConfig":{"url":"http://127.0.0.1:9/hook"}}}}',
                task_id="t1",
                role="proxy",
            )
        )
        streams["t1"] = ex
        for i, state in enumerate(("TASK_STATE_WORKING", "TASK_STATE_COMPLETED")):
            _write(s, ("t1", "stream", state), streams, 2.0 * i + 1)
            _write(s, ("t1", "push", state), streams, 2.0 * i + 2)
        for row in s.exchanges("t1"):
            s.update_exchange(row.id, ended_at=time.time(), outcome="ok")
        index = DoctorIndex(s)
        index.catch_up()
        assert not index.report().findings
        _write(s, ("t1", "push", "TASK_STATE_WORKING"), streams, 9.0)  # the agent pushes after its end
        late = max(row.id for row in s.exchanges("t1") if row.id is not None)
        s.update_exchange(late, ended_at=time.time(), outcome="ok")  # delivered: the task is settled again
        index.catch_up()
        assert "push-after-terminal" in {f.code for f in index.report().findings}
        assert index.report() == diagnose(s)
