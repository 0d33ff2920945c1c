"""The recovery tree and bad input, against the hand-written fault agent (faults a real agent
cannot produce on demand) and a closed port."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from a2a_tape import store
from tests.recorder.conftest import run_cli
from tests.support.fault_agent import LONG_LINE
from tests.support.servers import closed_port

WHOLE = "chunk-0 chunk-1 chunk-2 chunk-3 "


def _local_actions(st: store.SqliteStore, task_id: str) -> list[str]:
    return [
        store.decode_item(e.payload).body.action
        for e in st.read_task(task_id)
        if e.origin == "local" and store.decode_item(e.payload).kind == "note"
    ]


def test_stream_cut_midway_ends_with_the_whole_answer_exactly_once(fault_agent, record, db_path):
    run = record(fault_agent.url("cut"), "go")
    assert run.code == 0, run.stderr
    doc = run.json
    assert doc["state"] == "completed"
    assert doc["final_answer"] == WHOLE
    assert doc["recovered"][:2] == ["dropped", "resubscribed"]
    with store.open_store(db_path) as st:
        actions = _local_actions(st, doc["task_id"])
        assert actions[:2] == ["stream dropped", "resubscribed"]
        first = [x for x in st.exchanges() if x.rpc_method == "SendStreamingMessage"][0]
        assert first.outcome == "dropped"
        # both chunks seen before the cut are in the log, as received
        texts = [
            store.decode_item(e.payload).body.artifact.text
            for e in st.read_exchange(first.id)
            if store.decode_item(e.payload).kind == "artifact"
        ]
        assert texts == ["chunk-0 ", "chunk-1 "]


def test_stall_is_cancelled_within_the_timeout(fault_agent, record, db_path):
    host = fault_agent.hosts["stall"]
    before = host.cancels
    t0 = time.monotonic()
    run = record(fault_agent.url("stall"), "go", "--stall-timeout", "0.6")
    elapsed = time.monotonic() - t0
    assert run.code == 1
    assert "stalled" in run.stderr and "Traceback" not in run.stderr
    doc = run.json
    assert doc["state"] == "canceled" and doc["stalled"] is True
    assert host.cancels == before + 1
    # keep-alive comments arrived all along (every ~33 ms) and were not taken for progress
    assert elapsed < 0.6 + 2.0
    with store.open_store(db_path) as st:
        assert _local_actions(st, doc["task_id"]) == ["stalled", "canceled"]
        ex = [x for x in st.exchanges() if x.rpc_method == "SendStreamingMessage"][0]
        assert ex.outcome == "stalled"
        # comments are not events: task, working, chunk-0, then the cancel's Task and our notes
        assert not any(b"ping" in bytes(e.payload) for e in st.read_task(doc["task_id"]))


def test_stall_with_resend_starts_a_new_task_in_the_same_context(fault_agent, record, db_path):
    run = record(fault_agent.url("stall"), "go", "--stall-timeout", "0.4", "--on-stall", "resend")
    assert run.code == 1  # the resent task stalls too: cancelled, reported
    doc = run.json
    with store.open_store(db_path) as st:
        sends = [x for x in st.exchanges() if x.rpc_method == "SendStreamingMessage"]
        assert len(sends) == 2
        tasks = {x.task_id for x in sends}
        assert len(tasks) == 2 and doc["task_id"] in tasks
        assert {x.context_id for x in sends} == {doc["context_id"]}
        first = next(t for t in tasks if t != doc["task_id"])
        assert "resend" in _local_actions(st, first)


def test_keep_alive_comments_are_not_events(fault_agent, record, db_path):
    run = record(fault_agent.url("ping"), "go", "--no-get-task")  # the stream's events alone
    assert run.code == 0, run.stderr
    doc = run.json
    assert doc["final_answer"] == WHOLE
    assert doc["recovered"] == []
    with store.open_store(db_path) as st:
        events = st.read_task(doc["task_id"])
        # every keep-alive comment was seen (one before each event) but none became an event
        kinds = [store.decode_item(e.payload).kind for e in events]
        assert "undecodable" not in kinds and kinds.count("artifact") == 4
        assert len(events) == doc["events"] <= 7


def test_a_gzip_encoded_stream_is_recorded_decoded(fault_agent, record, db_path):
    """The reader takes raw chunks only when there is no content coding: gzip is decoded first."""
    run = record(fault_agent.url("gzip"), "go")
    assert run.code == 0, run.stderr
    doc = run.json
    assert doc["final_answer"] == WHOLE and doc["state"] == "completed"
    with store.open_store(db_path) as st:
        kinds = [store.decode_item(e.payload).kind for e in st.read_task(doc["task_id"])]
    assert "undecodable" not in kinds and kinds.count("artifact") == 4


def test_agent_without_streaming_is_polled(fault_agent, record, db_path):
    run = record(fault_agent.url("nostream"), "go")
    assert run.code == 0, run.stderr
    doc = run.json
    assert (doc["state"], doc["final_answer"]) == ("completed", WHOLE)
    assert "polled" in doc["recovered"]
    with store.open_store(db_path) as st:
        methods = [x.rpc_method for x in st.exchanges()]
        assert "SendStreamingMessage" not in methods and "SendMessage" in methods
        assert methods.count("GetTask") >= 2
        assert "polling" in _local_actions(st, doc["task_id"])


# -- bad input: one line on stderr, exit 2, what was recorded stays ------------------------


def _one_line_error(run) -> str:
    assert run.code == 2, (run.code, run.stdout, run.stderr)
    assert run.stdout == ""
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in run.stderr
    return lines[0]


def test_closed_port(db_path):
    store.open_store(db_path).close()  # a log that exists: a failed record into a new one leaves none (test_files.py)
    url = f"http://127.0.0.1:{closed_port()}"
    line = _one_line_error(run_cli("record", url, "hi", "--db", str(db_path), "--json"))
    assert "cannot connect" in line
    with store.open_store(db_path) as st:
        (ex,) = st.exchanges()
        assert ex.outcome == "error" and ex.rpc_method == "agent-card"


def test_html_page_instead_of_a_card(fault_agent, record, db_path):
    store.open_store(db_path).close()  # a log that exists: a failed record into a new one leaves none (test_files.py)
    line = _one_line_error(record(fault_agent.url("html"), "hi"))
    assert "HTML" in line
    with store.open_store(db_path) as st:
        (ex,) = st.exchanges()
        assert b"nginx" in ex.response_body and ex.content_type.startswith("text/html")


def test_http_500(fault_agent, record, db_path):
    line = _one_line_error(record(fault_agent.url("http500"), "hi"))
    assert "HTTP 500" in line
    with store.open_store(db_path) as st:
        ex = st.exchanges()[-1]
        assert ex.status == 500 and ex.outcome == "error" and ex.response_body == b"Internal Server Error"


def test_json_that_is_no_a2a_answer(fault_agent, record, db_path):
    line = _one_line_error(record(fault_agent.url("json404"), "hi"))
    assert "not an A2A answer" in line and "404" in line
    with store.open_store(db_path) as st:
        ex = st.exchanges()[-1]
        assert ex.status == 404 and ex.outcome == "error"
        assert [bytes(e.payload) for e in st.read_exchange(ex.id)] == [b'{"detail":"Not Found"}']


def test_non_sse_content_type_on_a_streaming_call(fault_agent, record, db_path):
    line = _one_line_error(record(fault_agent.url("nonsse"), "hi"))
    assert "text/plain" in line


def test_invalid_json_data_line_is_kept_raw_and_recording_goes_on(fault_agent, record, db_path):
    run = record(fault_agent.url("badjson"), "go")
    assert run.code == 0, run.stderr
    doc = run.json
    assert doc["final_answer"] == WHOLE
    with store.open_store(db_path) as st:
        bad = [e for e in st.read_task(doc["task_id"]) if store.decode_item(e.payload).kind == "undecodable"]
        assert len(bad) == 1
        assert bytes(bad[0].payload) == b'{"jsonrpc": "2.0", "result": {not json at all'
    shown = run_cli("show", doc["task_id"], "--db", str(db_path), "--json")
    assert shown.code == 0
    assert "undecodable" in [r["kind"] for r in shown.json]


def test_non_utf8_bytes_are_kept_exactly(fault_agent, record, db_path):
    run = record(fault_agent.url("nonutf8"), "go")
    assert run.code == 0, run.stderr
    doc = run.json
    with store.open_store(db_path) as st:
        bad = [e for e in st.read_task(doc["task_id"]) if store.decode_item(e.payload).kind == "undecodable"]
        assert [bytes(e.payload) for e in bad] == [b"\xff\xfe not utf-8 \xc3\x28"]
        assert "UTF-8" in store.decode_item(bad[0].payload).body.reason


def test_line_over_the_size_limit(fault_agent, record, db_path):
    line = _one_line_error(record(fault_agent.url("longline"), "go", "--max-line-bytes", str(LONG_LINE // 4)))
    assert "limit" in line
    with store.open_store(db_path) as st:
        ex = [x for x in st.exchanges() if x.rpc_method == "message/stream" or x.rpc_method == "SendStreamingMessage"][
            0
        ]
        assert ex.outcome == "error"
        kinds = [store.decode_item(e.payload).kind for e in st.read_exchange(ex.id)]
        assert kinds[0] == "task" and "artifact" in kinds  # recorded before the long line: not lost


def test_long_line_under_a_raised_limit_is_fine(fault_agent, record):
    run = record(fault_agent.url("longline"), "go", "--max-line-bytes", str(LONG_LINE * 2))
    assert run.code == 0, run.stderr
    assert run.json["final_answer"] == WHOLE


def test_stall_then_resend_completes_in_a_new_task(fault_agent, record, db_path):
    run = record(fault_agent.url("stallonce"), "go", "--stall-timeout", "0.5", "--on-stall", "resend")
    assert run.code == 0, run.stderr
    doc = run.json
    assert (doc["state"], doc["final_answer"]) == ("completed", WHOLE)
    assert "stalled" in doc["recovered"]
    with store.open_store(db_path) as st:
        tasks = [t.task_id for t in st.task_events()]
        assert len(tasks) == 2 and tasks[-1] == doc["task_id"]
        assert _local_actions(st, tasks[0]) == ["stalled", "canceled", "resend"]
        upstream = [store.decode_item(e.payload) for e in st.read_task(tasks[0]) if e.origin == "upstream"]
        assert upstream[-1].body.state == "canceled"  # the CancelTask answer


def test_stall_while_polling_is_cancelled(fault_agent, record, db_path):
    t0 = time.monotonic()
    run = record(fault_agent.url("pollstall"), "go", "--stall-timeout", "0.8")
    assert run.code == 1
    assert time.monotonic() - t0 < 0.8 + 2.5
    doc = run.json
    assert doc["state"] == "canceled" and doc["stalled"] is True
    with store.open_store(db_path) as st:
        actions = _local_actions(st, doc["task_id"])
        assert actions[-3:] == ["polling", "stalled", "canceled"]


def test_show_tells_the_story_of_a_recovery(fault_agent, record, db_path):
    run = record(fault_agent.url("cut"), "go")
    assert run.code == 0
    shown = run_cli("show", run.json["task_id"], "--db", str(db_path), "--json")
    assert shown.code == 0
    local = [r for r in shown.json if r["origin"] == "local"]
    assert [r["data"]["a2a-tape"]["action"] for r in local][:2] == ["stream dropped", "resubscribed"]


def test_ctrl_c_keeps_what_was_recorded_and_closes_the_exchange(fault_agent, db_path):
    """SIGINT to the real script mid-stream: exit 130, one line, the exchange marked interrupted."""
    host = fault_agent.hosts["stall"]
    host.stream_started.clear()
    script = Path(sys.executable).parent / "a2a-tape"
    proc = subprocess.Popen(
        [
            str(script),
            "record",
            fault_agent.url("stall"),
            "go",
            "--db",
            str(db_path),
            "--json",
            "--stall-timeout",
            "60",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert host.stream_started.wait(30)
        proc.send_signal(signal.SIGINT)
        out, errs = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, errs
    assert errs.strip().splitlines() == ["a2a-tape: interrupted"]
    assert out == ""
    with store.open_store(db_path) as st:
        ex = [x for x in st.exchanges() if x.rpc_method == "SendStreamingMessage"][0]
        assert ex.outcome == "interrupted" and ex.ended_at is not None


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["http://127.0.0.1:9/", "hi", "--header", "no colon here"], "'no colon here' is not 'Name: value'"),
        (["http://127.0.0.1:9/", "hi", "--protocol", "2.0"], "Invalid value for '--protocol': '2.0'"),
        (["http://127.0.0.1:9/", "hi", "--on-stall", "retry"], "Invalid value for '--on-stall': 'retry'"),
        (["ftp://example.org/", "hi"], "not an http(s) URL"),
        (["http://127.0.0.1:9/", "hi", "--durability", "extreme"], "Invalid value for '--durability': 'extreme'"),
    ],
)
def test_bad_usage_is_one_line_exit_2(db_path, args, needle):
    run = run_cli("record", *args, "--db", str(db_path))
    line = _one_line_error(run)
    assert needle in line
