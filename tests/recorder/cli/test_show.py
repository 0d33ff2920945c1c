"""``a2a-tape show``: the timeline of one task, as JSON, as raw bytes and for humans."""

from __future__ import annotations

import json

from a2a_tape import store

from .conftest import PAYLOADS, TASK, run_cli


def test_show_json_lists_events_in_log_order_with_payload_as_received(log_db):
    r = run_cli("show", TASK, "--db", log_db, "--json")
    assert r.code == 0, r.stderr
    rows = json.loads(r.stdout)  # one JSON document, nothing else on stdout
    assert [row["seq"] for row in rows] == [1, 2, 3, 4, 5, 6, 7]
    assert [row["position"] for row in rows] == [1, 2, 3, 4, 5, 6, 8]  # position 7 is the other task
    for row in rows:
        assert {"seq", "position", "kind", "received_at", "origin", "data"} <= row.keys()
    assert [row["kind"] for row in rows] == ["task", "status", "artifact", "undecodable", "artifact", "status", "note"]
    assert [row["origin"] for row in rows] == ["upstream"] * 6 + ["local"]
    assert rows[0]["received_at"] == 100.0 and rows[5]["received_at"] == 100.5
    for row, payload in zip(rows, PAYLOADS):
        if row["kind"] == "undecodable":
            assert row["data"] is None  # not JSON: shown, never dropped
        else:
            assert row["data"] == json.loads(payload)  # exactly the object received, not a re-shaped one
    assert rows[6]["data"]["a2a-tape"]["action"] == "stalled"


def test_show_accepts_a_unique_prefix(log_db):
    r = run_cli("show", TASK[:8], "--db", log_db, "--json")
    assert r.code == 0 and len(json.loads(r.stdout)) == 7


def test_show_raw_prints_the_exact_bytes(log_db):
    r = run_cli("show", TASK, "--db", log_db, "--raw")
    assert r.code == 0, r.stderr
    expected = b"".join(p + b"\n" for p in PAYLOADS)
    note = store.local_note("stalled", "no progress", TASK)
    assert r.stdout == expected + note + b"\n"  # the non-UTF-8 bytes and the CRLFs come back untouched


def test_show_for_humans(log_db):
    r = run_cli("show", TASK, "--db", log_db)
    assert r.code == 0, r.stderr
    text = r.stdout.decode()
    assert "completed" in text and "chunk-1" in text and "LOCAL" in text
