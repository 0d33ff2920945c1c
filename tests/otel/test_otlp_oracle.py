"""The OTLP span format pinned by an oracle: for every golden recording (recordings/*.jsonl) and a few logs
made from them that exercise what the recordings do not (a ``traceparent`` with ``tracestate`` from the
client, one the proxy injected, one it continued, a call joined to its caller by timing, a task of two
runs linked), ``export --format otlp`` writes exactly the OTLP/JSON that the SDK's ``ReadableSpan`` objects
run through the official encoder (``encode_spans``) wrote before the mapping built the protobuf messages
itself (docs/performance.md section 30): every attribute, event, time, link, status, flag and kind, the
scope, and the resource but what differs between exports (the log's path, the process's instance id).

The goldens in tests/otel/otlp_goldens/ were written by the code of main ``842b5d6`` (the SDK spans and
the official encoder), with ``python -m tests.otel.test_otlp_oracle --write``; the live export sends the
same spans (tests/otel/test_live_export.py compares each live span whole with the file export's).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from a2a_tape.store import open_store
from a2a_tape.store.tape import import_tape

RECORDINGS = Path(__file__).resolve().parents[2] / "recordings"
GOLDENS = Path(__file__).resolve().parent / "otlp_goldens"
VOLATILE = ("a2a_tape.log", "service.instance.id", "service.version", "telemetry.sdk.version")
"""Resource attributes that differ between two exports of one log (its path, the process, the releases)."""

TRACE, PARENT = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
SENT = f"00-{TRACE}-1111111111111111-01"


def _lines(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (RECORDINGS / f"{name}.jsonl").read_text().splitlines()]


def _shifted(docs: list[dict[str, Any]], ex_base: int, pos_base: int, dt: float, task: str, **ex: Any) -> list[dict]:
    """A recording's exchanges and events renumbered and moved ``dt`` seconds, its task renamed."""
    out = []
    old_tasks = {d.get("task_id") for d in docs if d.get("task_id")}
    for d in docs:
        if d["type"] == "header":
            continue
        d = json.loads(json.dumps(d))
        if d.get("task_id") in old_tasks:
            d["task_id"] = task
        if d["type"] == "exchange":
            d["id"] += ex_base
            d["started_at"] += dt
            d["ended_at"] = None if d.get("ended_at") is None else d["ended_at"] + dt
            d.update(ex)
            if "headers" in ex:
                d["request_headers"] = {**d["request_headers"], **d.pop("headers")}
        elif d["type"] == "event":
            d["position"] += pos_base
            d["exchange_id"] = None if d.get("exchange_id") is None else d["exchange_id"] + ex_base
            d["received_at"] += dt
            if "payload" in d:
                for old in old_tasks:
                    d["payload"] = d["payload"].replace(old, task)
        out.append(d)
    return out


def _made_logs() -> dict[str, list[dict[str, Any]]]:
    """Logs made from the recordings for what they do not show: trace context carried, injected and
    continued (proxy roles), a call inside another agent's open exchange (an inferred caller, its link),
    and one task recorded twice (two runs: the later one's first span linked to the earlier's)."""
    v10 = _lines("sdk-v10-stream")
    proxy = {"role": "proxy", "host": "h"}
    carried = _shifted(
        v10,
        0,
        0,
        0.0,
        "T-carried",
        **proxy,
        headers={"traceparent": f"00-{TRACE}-{PARENT}-01", "tracestate": "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"},
    )
    injected = _shifted(
        v10, 1, 6, 100.0, "T-injected", **proxy, headers={"traceparent": SENT, "x-a2a-tape-traceparent": SENT}
    )
    continued_tp = f"00-{TRACE}-{PARENT}-01"
    continued = _shifted(
        v10, 2, 12, 200.0, "T-continued", **proxy, headers={"traceparent": continued_tp, "x-a2a-tape-traceparent": SENT}
    )
    # a caller open at agent 1 (its stream stretched over the callee's), the callee at agent 2 inside it
    caller = _shifted(v10, 3, 18, 300.0, "T-caller", **proxy, url="http://127.0.0.1:1/", observer="proxy-1")
    caller[0]["ended_at"] = caller[0]["started_at"] + 5.0
    callee = _shifted(v10, 4, 24, 301.0, "T-callee", **proxy, url="http://127.0.0.1:2/", observer="proxy-2")
    # one task, two runs: recorded by a client, then again through a proxy (another observer)
    run_a = _shifted(v10, 5, 30, 400.0, "T-runs", observer="record-a")
    run_b = _shifted(v10, 6, 36, 410.0, "T-runs", **proxy, observer="proxy-b")
    # what no recording has: a message id, a tenant and referenced tasks in the request, an error, a local event
    body = {"jsonrpc": "2.0", "id": 7, "method": "SendStreamingMessage", "params": {"tenant": "acme"}}
    body["params"]["message"] = {"role": "user", "parts": [], "referenceTaskIds": ["T-caller", "T-runs"]}
    fields = _shifted(v10, 7, 42, 500.0, "T-fields", message_id="m-1", error="reset by peer", outcome="error")
    fields[0]["request_body"] = json.dumps(body)
    fields[2]["origin"] = "local"
    logs = carried + injected + continued + caller + callee + run_a + run_b + fields
    return {"made-trace-context-and-runs": logs}


def logs() -> Iterator[tuple[str, list[bytes]]]:
    """Each golden's name and its tape's lines."""
    for tape in sorted(RECORDINGS.glob("*.jsonl")):
        yield tape.stem, tape.read_bytes().splitlines(keepends=True)
    for name, docs in _made_logs().items():
        kinds = [d["type"] for d in docs]
        header = {"type": "header", "a2a_tape": 1, "exported_at": 0.0, "source": "tests/otel/test_otlp_oracle.py"}
        header.update(exchanges=kinds.count("exchange"), events=kinds.count("event"))
        yield name, [json.dumps(d).encode() + b"\n" for d in [header, *docs]]


NAMES = [name for name, _ in logs()]


def exported(tmp: Path, name: str, lines: list[bytes]) -> list[dict[str, Any]]:
    """``export --all --format otlp`` of the log, in process: its OTLP/JSON lines, the volatile resource
    attributes taken out (:data:`VOLATILE`)."""
    from tests.recorder.cli.conftest import run_cli

    db = tmp / f"{name}.db"
    with open_store(db) as st:
        import_tape(st, iter(lines))
    out = tmp / f"{name}.otlp.json"
    r = run_cli("export", "--all", "--format", "otlp", "--db", str(db), "-o", str(out))
    assert r.code == 0, r.stderr
    docs = [json.loads(line) for line in out.read_text().splitlines()]
    for doc in docs:
        for rs in doc["resourceSpans"]:
            attrs = rs["resource"]["attributes"]
            rs["resource"]["attributes"] = [kv for kv in attrs if kv["key"] not in VOLATILE]
    return docs


@pytest.mark.parametrize("name", NAMES)
def test_the_export_is_what_the_official_encoder_wrote(name, tmp_path):
    lines = dict(logs())[name]
    golden = json.loads((GOLDENS / f"{name}.json").read_text())
    assert exported(tmp_path, name, lines) == golden


def test_the_made_log_shows_what_the_recordings_do_not():
    """The made log's golden holds each case it was made for (or the oracle would pin less than it says)."""
    (doc,) = json.loads((GOLDENS / "made-trace-context-and-runs.json").read_text())
    spans = [s for rs in doc["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]
    sources = {kv["value"]["stringValue"] for s in spans for kv in s["attributes"] if kv["key"].endswith("source")}
    assert sources >= {"request", "injected", "continued", "inferred", "derived"}
    assert any(s.get("traceState") for s in spans) and any(s.get("parentSpanId") for s in spans)
    relations = {
        kv["value"]["stringValue"]
        for s in spans
        for link in s.get("links", [])
        for kv in link["attributes"]
        if kv["key"] == "a2a_tape.link.relation"
    }
    assert relations == {"caller", "run"}
    assert {s.get("flags") for s in spans} == {256, 768} and {s["kind"] for s in spans} >= {2, 3}
    keys = {kv["key"] for s in spans for kv in s["attributes"]}
    keys |= {kv["key"] for s in spans for e in s.get("events", []) for kv in e["attributes"]}
    made_for = {"a2a.message.id", "a2a.tenant", "a2a.message.reference_task_ids", "a2a_tape.error"}
    assert keys >= made_for | {"a2a_tape.event.origin"}


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    import tempfile

    GOLDENS.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name, lines in logs():
            docs = exported(Path(tmp), name, lines)
            (GOLDENS / f"{name}.json").write_text(json.dumps(docs, indent=1, sort_keys=True) + "\n")
            print(name, sum(len(ss["spans"]) for d in docs for rs in d["resourceSpans"] for ss in rs["scopeSpans"]))
