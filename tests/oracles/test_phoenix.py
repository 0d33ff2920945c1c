"""Every golden recording exported to Arize Phoenix (a trace backend people run, tests/oracles/phoenix.py) over
OTLP/HTTP, then read back through Phoenix's REST API and compared with the log: a span per exchange in the
task's trace, every stream item an event at its recorded time (first-event offset within 1 ms), the
attributes of the pinned PR #195 list or ours."""

from __future__ import annotations

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
