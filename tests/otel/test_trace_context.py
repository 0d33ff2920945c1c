"""W3C trace context (issue 34, item 3): what each exchange's request carried, shown in ``show`` and
``tasks --json``; ``proxy --inject-traceparent`` starts one when the client sent none, never over the
client's, and the exported span is the one the agent's spans hang from."""

from __future__ import annotations

import json

import httpx
import pytest

from a2a_tape import store
from a2a_tape.wire.trace_context import INJECTED_HEADER, parse_traceparent
from tests.otel.test_export_otlp import _spans_of, _tape_with
from tests.recorder.cli.conftest import run_cli
from tests.recorder.proxy.conftest import SettleWatch, read_sse, running_proxy, send_body
from tests.support.fault_agent import make_proxy_fault_app
from tests.support.servers import serve_app

CLIENT_TP = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_tasks_json_and_show_say_what_each_request_carried(tmp_path):
    db = _tape_with(tmp_path, "client", {"traceparent": CLIENT_TP, "tracestate": "congo=t61", "baggage": "user=7"})
    (row,) = json.loads(run_cli("tasks", "--json", "--db", db).stdout)
    assert row["trace_context"] == [
        {"exchange_id": 1, "traceparent": CLIENT_TP, "tracestate": "congo=t61", "baggage": "user=7"}
    ]
    shown = run_cli("show", row["task_id"], "--db", db).stdout.decode()
    assert f"exchange 1: traceparent {CLIENT_TP}; tracestate congo=t61; baggage user=7" in shown


def test_a_task_without_trace_context_shows_none(tmp_path):
    db = _tape_with(tmp_path, "client", {})
    (row,) = json.loads(run_cli("tasks", "--json", "--db", db).stdout)
    assert row["trace_context"] == []
    assert "traceparent" not in run_cli("show", row["task_id"], "--db", db).stdout.decode()


@pytest.mark.parametrize("inject", [False, True], ids=["plain", "inject"])
@pytest.mark.parametrize("sent", [None, CLIENT_TP], ids=["client-sent-none", "client-sent-one"])
def test_the_upstream_gets_the_clients_traceparent_or_the_proxys(db_path, inject, sent):
    headers = {"content-type": "application/json", **({"traceparent": sent} if sent else {})}
    with serve_app(make_proxy_fault_app()) as url, running_proxy(url, db_path, inject_traceparent=inject) as proxy:
        r = httpx.post(proxy.url + "/echo/", content=b"{}", headers=headers)
    got = [v for k, v in r.json()["headers"] if k == "traceparent"]
    if sent:
        assert got == [sent]  # never overwritten, never doubled
    elif inject:
        (tp,) = got
        assert parse_traceparent(tp) is not None and tp.endswith("-01")
    else:
        assert got == []


def test_an_injected_traceparent_is_recorded_and_its_span_is_the_agents_parent(sdk_agent, db_path, tmp_path):
    with running_proxy(sdk_agent.url, db_path, inject_traceparent=True) as proxy:
        watch = SettleWatch(proxy.proxy)
        body, headers = send_body("hello", dialect="1.0")
        with httpx.stream("POST", proxy.url + "/", content=body, headers=headers) as r:
            assert r.status_code == 200
            read_sse(r)
        watch.wait(1)
    with store.open_store(db_path) as st:
        (task,) = [t.task_id for t in st.task_events()]
        (ex,) = st.exchanges(task)
    tp = parse_traceparent(ex.request_headers["traceparent"])
    assert tp is not None and ex.request_headers[INJECTED_HEADER] == ex.request_headers["traceparent"]
    (row,) = json.loads(run_cli("tasks", "--json", "--db", str(db_path)).stdout)
    assert row["trace_context"][0]["injected"] is True
    assert "started by the proxy" in run_cli("show", task, "--db", str(db_path)).stdout.decode()
    (span,) = _spans_of(str(db_path))
    assert span["traceId"] == tp.trace_id and span["spanId"] == tp.parent_id and "parentSpanId" not in span
    assert span["kind"] == 2 and span["attrs"]["a2a_tape.trace_context.source"] == "injected"


def test_trace_context_in_the_message_metadata_is_the_requests_when_no_header_carries_one(tmp_path):
    """A2A#2026: trace context in the message's metadata under the extension's key. show says where it
    came from, tasks --json marks it, the export joins its trace with the caller's span as parent."""
    from a2a_tape.capture.lineage import TRACE_EXTENSION

    db = _tape_with(tmp_path, "client", {})
    tape = tmp_path / "t.jsonl"
    lines = []
    for line in tape.read_text().splitlines():
        doc = json.loads(line)
        if doc["type"] == "exchange":
            body = json.loads(doc["request_body"])
            body["params"]["message"]["metadata"] = {TRACE_EXTENSION: {"traceparent": CLIENT_TP, "baggage": "u=1"}}
            doc["request_body"] = json.dumps(body)
        lines.append(json.dumps(doc))
    tape.write_text("\n".join(lines) + "\n")
    db = str(tmp_path / "meta.db")
    assert run_cli("import", str(tape), "--db", db).code == 0
    (row,) = json.loads(run_cli("tasks", "--json", "--db", db).stdout)
    assert row["trace_context"] == [{"exchange_id": 1, "traceparent": CLIENT_TP, "baggage": "u=1", "metadata": True}]
    shown = run_cli("show", row["task_id"], "--db", db).stdout.decode()
    assert f"exchange 1: traceparent {CLIENT_TP}; baggage u=1 (in the message's metadata)" in shown
    (span,) = _spans_of(db)
    assert (span["traceId"], span["parentSpanId"]) == (CLIENT_TP[3:35], CLIENT_TP[36:52])
    assert span["attrs"]["a2a_tape.trace_context.source"] == "request"


def test_the_proxy_writes_the_traceparent_it_sends_into_the_message_metadata_when_asked(db_path):
    """--inject-traceparent --traceparent-metadata: the agent gets the traceparent in a header and in the
    message's metadata (the rest of the metadata kept); the log keeps the body as the client sent it."""
    from a2a_tape.capture.lineage import TRACE_EXTENSION

    body, headers = send_body("hello", dialect="1.0")
    doc = json.loads(body)
    doc["params"]["message"]["metadata"] = {"mine": 1}
    body = json.dumps(doc).encode()
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def echo(request: Request) -> JSONResponse:  # what reached the agent: its traceparent and body
        return JSONResponse(
            {"traceparent": request.headers.get("traceparent"), "body": (await request.body()).decode()}
        )

    opts = {"inject_traceparent": True, "traceparent_metadata": True}
    app = Starlette(routes=[Route("/", echo, methods=["POST"])])
    with serve_app(app) as url, running_proxy(url, db_path, **opts) as proxy:
        r = httpx.post(proxy.url + "/", content=body, headers=headers)
    echoed = r.json()
    tp = echoed["traceparent"]
    assert parse_traceparent(tp) is not None
    sent = json.loads(echoed["body"])
    assert sent["params"]["message"]["metadata"] == {"mine": 1, TRACE_EXTENSION: {"traceparent": tp}}
    with store.open_store(db_path) as st:
        (ex,) = st.exchanges()
    assert ex.request_body == body and ex.request_headers[INJECTED_HEADER] == tp
