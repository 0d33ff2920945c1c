"""The live export (``proxy``/``record --otlp-endpoint``) places each span as ``export --format otlp`` of the
same log does (issue 34): the same trace, parent and links, whether they come from trace context, from the
callers inferred without it (capture/lineage.py, marked inferred), or from the runs of one task.

Each case records with the installed CLI, every process sending its spans live to one OTLP/HTTP receiver
(tests/support/otlp_receiver.py); after the recording, the file export of the log is the reference.
"""

from __future__ import annotations

import json

import pytest

from tests.otel.test_chain import ROUNDS, _cli_chain, assert_joined_by_inference
from tests.otel.test_export_otlp import _spans_of
from tests.otel.test_live_export import SCRIPT, _proxy, _record, _stream
from tests.otel.test_runs_traces import assert_runs_are_linked_traces, placements
from tests.recorder.cli.conftest import run_cli
from tests.support.otlp_receiver import receiver

pytestmark = pytest.mark.skipif(not SCRIPT.exists(), reason="needs the installed console script")


@pytest.mark.parametrize(
    ("passes", "basis", "backend"),
    [
        ("nothing", "timing", "sqlite"),
        ("context", "context_id", "sqlite"),
        ("reference", "reference_task_ids", "sqlite"),
        ("nothing", "timing", "postgresql"),
    ],
    ids=["timing", "context", "reference", "timing-postgresql"],
)
def test_live_spans_infer_the_callers_the_export_infers(request, tmp_path, passes, basis, backend):
    """Three agents in a chain, no trace context, each behind an installed ``proxy --otlp-endpoint``: the
    spans sent live are the spans the export of the log gives, inferred parents and marked links included."""
    db = request.getfixturevalue("pg_url") if backend == "postgresql" else str(tmp_path / "chain.db")
    with receiver() as got:
        _cli_chain(db, passes, ROUNDS, f"--otlp-endpoint {got.url}", tmp_path)  # ends when the proxies stop
        live = got.spans
    exported = _spans_of(db)
    assert len(live) == len(placements(exported)) == 3 * ROUNDS
    assert placements(live) == placements(exported)  # live == export, whatever the export joined
    # ... and the export joins them (tests/otel/test_chain.py, whose timing case has failed there too under
    # heavy load, not alone: its cause is not found yet)
    assert_joined_by_inference(db, ROUNDS, basis)
    assert sum(p[3] == "inferred" for p in placements(live).values()) == 2 * ROUNDS


def test_a_task_seen_from_two_sides_is_sent_live_as_two_linked_traces(sdk_agent, tmp_path):
    """``record`` through ``proxy`` into one log, both sending spans live: two runs of one task, each its
    own trace, the later run's first span linked to the earlier's, as the export of the log gives them."""
    db = tmp_path / "two-sides.db"
    with receiver() as got:
        with _proxy([sdk_agent.url, "--otlp-endpoint", got.url, "--db", str(db)]) as (url, lines):
            r = _record(url, db, got.url)
            assert r.returncode == 0, r.stderr
        assert "warning" not in "".join(lines) + r.stderr
        live = got.spans
    task = json.loads(r.stdout)["task_id"]
    runs = json.loads(run_cli("tasks", "--runs", "--json", "--db", str(db)).stdout)
    by_source = {row["source"]: row["observer"] for row in runs if row["task_id"] == task}
    assert sorted(by_source) == ["client", "proxy"]
    exported = _spans_of(str(db))
    # in the order the runs began: record's request came first (tasks --runs numbers the proxy's first:
    # it wrote the first event)
    assert_runs_are_linked_traces(exported, task, [by_source["client"], by_source["proxy"]])
    assert placements(live) == placements(exported)


def test_a_proxied_stream_still_goes_out_when_no_caller_can_be_told(sdk_agent, tmp_path):
    """A call with no caller in the log (a client of its own): its span is sent at once, its trace its own."""
    db = tmp_path / "alone.db"
    with receiver() as got, _proxy([sdk_agent.url, "--otlp-endpoint", got.url, "--db", str(db)]) as (url, _):
        assert _stream(url, "hello")
        (span,) = got.wait_for_spans(1)
    assert span["attrs"]["a2a_tape.trace_context.source"] == "derived" and not span.get("links")
    assert placements([span]) == placements(_spans_of(str(db)))
