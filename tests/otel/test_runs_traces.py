"""Each run of a task is a trace of its own (issue 34: "each task run is a trace"), the runs of one task
joined by span links: the first span of each run links to the first span of every run before it
(``a2a_tape.link.relation`` ``run``), so a backend shows them as related.

Real parts: a task of two runs made by the installed CLI against real agents (``record`` then ``verify``
against another agent: tests/store/test_runs_export_serve.py's ``two_runs``; and ``record`` through
``proxy``, both into one SQLite log), exported to an OTLP/JSON file, to the OTLP/HTTP receiver
(tests/support/otlp_receiver.py) and, live, by ``proxy --otlp-endpoint`` and ``record --otlp-endpoint``.
tests/oracles/test_phoenix.py sends the same two runs to Arize Phoenix.
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.otel.test_export_otlp import KIND_INTERNAL, _spans_of
from tests.recorder.cli.conftest import run_cli
from tests.support.otlp_receiver import attributes, flat_spans, receiver

SCRIPT_DIR = Path(__import__("sys").executable).parent
pytestmark = pytest.mark.skipif(not (SCRIPT_DIR / "a2a-tape").exists(), reason="needs the installed console script")


def hex_id(value: str | None) -> str | None:
    """An id as OTLP/JSON writes it (hex), from protobuf's JSON mapping (base64) or already hex."""
    if not value:
        return None
    return value if re.fullmatch(r"[0-9a-f]+", value) else base64.b64decode(value).hex()


def placement(span: dict[str, Any]) -> tuple[Any, ...]:
    """Where a span sits: trace, parent, links (each with its attributes), how its trace was chosen, its run."""
    links = sorted(
        (hex_id(link["traceId"]), hex_id(link["spanId"]), tuple(sorted(attributes(link.get("attributes", [])).items())))
        for link in span.get("links", [])
    )
    attrs = span["attrs"]
    return (
        hex_id(span["traceId"]),
        hex_id(span.get("parentSpanId")),
        tuple(links),
        attrs.get("a2a_tape.trace_context.source"),
        attrs.get("a2a_tape.run.observer"),
    )


def placements(spans: list[dict[str, Any]]) -> dict[str, tuple[Any, ...]]:
    """Each exchange's span (not the ``a2a_tape.events`` span of events outside any exchange) by span id."""
    return {hex_id(s["spanId"]): placement(s) for s in spans if s["kind"] != KIND_INTERNAL}  # type: ignore[misc]


def run_links(span: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for link in span.get("links", []):
        attrs = attributes(link.get("attributes", []))
        if attrs.get("a2a_tape.link.relation") == "run":
            out.append({"traceId": hex_id(link["traceId"]), "spanId": hex_id(link["spanId"]), **attrs})
    return out


def assert_runs_are_linked_traces(spans: list[dict[str, Any]], task: str, observers: list[str]) -> None:
    """The task's spans: one trace per run (``observers``, in run order), the traces distinct, and the first
    span of each run linked to the first span of each run before it; no other span has a run link."""
    mine = [s for s in spans if s["attrs"]["a2a.task.id"] == task and s["kind"] != KIND_INTERNAL]
    runs: dict[str, list[dict[str, Any]]] = {}
    for s in sorted(mine, key=lambda s: (int(s["startTimeUnixNano"]), s["attrs"]["a2a_tape.exchange.id"])):
        runs.setdefault(s["attrs"]["a2a_tape.run.observer"], []).append(s)
    assert list(runs) == observers
    traces = [{hex_id(s["traceId"]) for s in r} for r in runs.values()]
    assert all(len(t) == 1 for t in traces), "a run is one trace"
    assert len(set().union(*traces)) == len(observers), "each run its own trace"
    firsts = [r[0] for r in runs.values()]
    for k, first in enumerate(firsts):
        got = run_links(first)
        assert [(link["traceId"], link["spanId"]) for link in got] == [
            (hex_id(f["traceId"]), hex_id(f["spanId"])) for f in firsts[:k]
        ]
        assert [link["a2a_tape.link.run.observer"] for link in got] == observers[:k]
        assert all(link["a2a_tape.link.task.id"] == task for link in got)
        assert [link["a2a_tape.link.exchange.id"] for link in got] == [
            f["attrs"]["a2a_tape.exchange.id"] for f in firsts[:k]
        ]
    assert not any(run_links(s) for r in runs.values() for s in r[1:])


def _runs_json(db: str) -> list[dict[str, Any]]:
    r = run_cli("tasks", "--runs", "--json", "--db", db)
    assert r.code == 0, r.stderr
    return json.loads(r.stdout)


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory) -> tuple[str, str]:
    """A task of two runs (``record``, then ``verify`` against another agent): (db, task)."""
    from tests.store.test_runs_export_serve import two_runs as make

    cwd = tmp_path_factory.mktemp("two-runs")
    db = cwd / "runs.db"
    task, _ = make(db, cwd)
    return str(db), task


def test_each_run_is_a_trace_linked_to_the_runs_before(two_runs, tmp_path):
    db, task = two_runs
    observers = [r["observer"] for r in _runs_json(db) if r["task_id"] == task]
    assert len(observers) == 2

    from_file = _spans_of(db)  # OTLP/JSON
    assert_runs_are_linked_traces(from_file, task, observers)
    assert placements(_spans_of(db)) == placements(from_file)  # the same on every export

    with receiver() as got:  # OTLP/HTTP, decoded by the official protobuf messages
        r = run_cli("export", "--all", "--format", "otlp", "--db", db, "--endpoint", got.url)
        assert r.code == 0, r.stderr
        sent = got.spans
    assert placements(sent) == placements(from_file)

    # a run exported alone (TASK@N): its spans as in the whole export, links to the runs before included
    for n in (1, 2):
        out = tmp_path / f"run{n}.json"
        assert run_cli("export", f"{task}@{n}", "--format", "otlp", "--db", db, "-o", str(out)).code == 0
        alone = [s for line in out.read_text().splitlines() for s in flat_spans(json.loads(line))]
        mine = placements(alone)
        assert mine and all(p[4] == observers[n - 1] for p in mine.values())
        assert mine.items() <= placements(from_file).items()
