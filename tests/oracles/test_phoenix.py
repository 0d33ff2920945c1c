"""Every golden recording exported to Arize Phoenix (a trace backend people run, tests/oracles/phoenix.py) over
OTLP/HTTP, then read back through Phoenix's REST API and compared with the log: a span per exchange in the
task's trace, every stream item an event at its recorded time (first-event offset within 1 ms), the
attributes of the pinned PR #195 list or ours."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from a2a_tape.store import open_store
from a2a_tape.store.tape import import_tape
from tests.oracles.cache import Unavailable
from tests.oracles.phoenix import ensure_installed, running_phoenix, spans
from tests.otel.test_export_otlp import PR195_ATTRIBUTES, PR195_METHODS, PR195_STATES
from tests.recorder.cli.conftest import run_cli

pytestmark = pytest.mark.oracle

RECORDINGS = Path(__file__).resolve().parents[2] / "recordings"
TAPES = sorted(RECORDINGS.glob("*.jsonl"))
PHOENIX_OWN = {"session.id"}  # Phoenix copies gen_ai.conversation.id there on ingest


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory, oracle_timing):
    try:
        script = ensure_installed()
    except Unavailable as exc:
        pytest.skip(str(exc))
    with running_phoenix(script, tmp_path_factory.mktemp("phoenix")) as url:
        yield url


def _seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp).timestamp()


def test_phoenix_holds_every_golden_recording_as_recorded(phoenix, tmp_path):
    db = str(tmp_path / "all.db")
    with open_store(db) as st:
        for tape in TAPES:
            with tape.open("rb") as fh:
                import_tape(st, fh)
        exchanges = {
            (t.task_id, ex.id): (ex, [e for e in st.read_task(t.task_id) if e.exchange_id == ex.id])
            for t in st.task_events()
            for ex in st.exchanges(t.task_id)
        }
    r = run_cli("export", "--all", "--format", "otlp", "--db", db, "--endpoint", phoenix)
    assert r.code == 0, r.stderr
    got = spans(phoenix, len(exchanges))
    assert len(got) == len(exchanges)
    by_key = {(s["attributes"]["a2a.task.id"], s["attributes"]["a2a_tape.exchange.id"]): s for s in got}
    assert by_key.keys() == exchanges.keys()
    traces: dict[str, set[str]] = {}
    for (task_id, _), (ex, events) in exchanges.items():
        span = by_key[(task_id, ex.id)]
        attrs = span["attributes"]
        traces.setdefault(task_id, set()).add(span["context"]["trace_id"])
        assert span["name"] == attrs["a2a.method.name"] and attrs["a2a.method.name"] in PR195_METHODS
        assert not {k for k in attrs if k not in PR195_ATTRIBUTES | PHOENIX_OWN and not k.startswith("a2a_tape.")}
        assert attrs.get("a2a.task.state", "TASK_STATE_UNSPECIFIED") in PR195_STATES
        assert abs(_seconds(span["start_time"]) - ex.started_at) < 1e-3
        items = [e for e in span["events"] if not e["name"].startswith("a2a_tape.doctor.")]
        assert len(items) == len(events) == attrs["a2a_tape.event.count"]
        if events:
            offset = _seconds(items[0]["timestamp"]) - _seconds(span["start_time"])
            assert abs(offset - (events[0].received_at - ex.started_at)) < 1e-3
    assert all(len(ids) == 1 for ids in traces.values())


def test_phoenix_holds_each_run_of_a_task_as_a_trace_of_its_own(phoenix, tmp_path):
    """A task of two runs (``record``, then ``verify`` against another agent): two traces in Phoenix, each
    run's spans in its own, the trace ids of the OTLP file. Phoenix keeps no span links (its span model has
    none), so the links between the runs are checked in tests/otel/test_runs_traces.py."""
    from tests.otel.test_export_otlp import _spans_of
    from tests.otel.test_runs_traces import assert_runs_are_linked_traces, hex_id
    from tests.store.test_runs_export_serve import two_runs

    db = tmp_path / "runs.db"
    task, _ = two_runs(db, tmp_path)
    from_file = [s for s in _spans_of(str(db)) if s["attrs"]["a2a.task.id"] == task]
    runs = [r["observer"] for r in json.loads(run_cli("tasks", "--runs", "--json", "--db", str(db)).stdout)]
    assert_runs_are_linked_traces(from_file, task, runs)

    r = run_cli("export", task, "--format", "otlp", "--db", str(db), "--endpoint", phoenix)
    assert r.code == 0, r.stderr
    got = spans(phoenix, len(from_file), keep=lambda s: s["attributes"].get("a2a.task.id") == task)
    assert len(got) == len(from_file)
    trace_of_run: dict[str, set[str]] = {}
    for s in got:
        trace_of_run.setdefault(s["attributes"]["a2a_tape.run.observer"], set()).add(s["context"]["trace_id"])
    assert sorted(trace_of_run) == sorted(runs)
    assert all(len(t) == 1 for t in trace_of_run.values()) and len(set().union(*trace_of_run.values())) == 2
    expected = {s["attrs"]["a2a_tape.run.observer"]: hex_id(s["traceId"]) for s in from_file}
    assert {run: next(iter(t)) for run, t in trace_of_run.items()} == expected
