"""``proxy --otlp-endpoint`` and ``record --otlp-endpoint`` (issue 34, item 2), through the installed CLI:
each exchange's span reaches a real OTLP/HTTP receiver (tests/support/otlp_receiver.py) as it ends, with
the ids and events ``export --format otlp`` gives it later; a slow collector holds no stream back; a dead
one loses no event and is said once."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from a2a_tape import store
from tests.grpc.conftest import grpc_agent  # noqa: F401 - the fixture, for the gRPC proxy's case
from tests.otel.test_export_otlp import KIND_INTERNAL, _spans_of
from tests.recorder.cli.conftest import assert_bad_input, run_cli
from tests.recorder.proxy.conftest import get_body, read_sse, send_body
from tests.support.otlp_receiver import receiver
from tests.support.servers import closed_port

SCRIPT = Path(sys.executable).with_name("a2a-tape")
pytestmark = pytest.mark.skipif(not SCRIPT.exists(), reason="needs the installed console script")


@contextlib.contextmanager
def proxy_process(
    argv: list[str], env: dict[str, str] | None = None, **popen: object
) -> Iterator[tuple[str, subprocess.Popen[str], list[str]]]:
    """``a2a-tape proxy ...`` until it says where it listens: its URL, its process and its stderr lines
    (all of them once it ended); stopped as a service manager stops it (SIGTERM) unless it ended."""
    proc = subprocess.Popen(
        [str(SCRIPT), "proxy", *argv, "--listen", "127.0.0.1:0", "--no-recover"],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env={**os.environ, **(env or {})},
        **popen,  # type: ignore[call-overload]
    )
    lines: list[str] = []
    assert proc.stderr is not None
    try:
        for line in proc.stderr:
            lines.append(line)
            if "listening on" in line:
                break
        else:
            raise AssertionError("the proxy ended before listening: " + "".join(lines))
        yield re.search(r"(http://127\.0\.0\.1:\d+)", lines[-1]).group(1), proc, lines  # type: ignore[union-attr]
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        _, rest = proc.communicate(timeout=60)
        lines += rest.splitlines(keepends=True)


@contextlib.contextmanager
def _proxy(argv: list[str], env: dict[str, str] | None = None) -> Iterator[tuple[str, list[str]]]:
    """:func:`proxy_process` without the process."""
    with proxy_process(argv, env) as (url, _, lines):
        yield url, lines


def _stream(proxy_url: str, text: str) -> list[bytes]:
    body, headers = send_body(text, dialect="1.0")
    with httpx.stream("POST", proxy_url + "/", content=body, headers=headers, timeout=30) as r:
        assert r.status_code == 200
        return read_sse(r)


def _hex(value: str) -> str:
    """An id as OTLP/JSON writes it (hex), from protobuf's JSON mapping (base64) or already hex."""
    return value if re.fullmatch(r"[0-9a-f]+", value) else base64.b64decode(value).hex()


def _ids_and_counts(spans: list[dict]) -> set[tuple[str, str, int]]:
    """Each exchange's span (not the task's events outside any exchange: the export's ``a2a_tape.events``)."""
    return {
        (_hex(s["traceId"]), _hex(s["spanId"]), int(s["attrs"]["a2a_tape.event.count"]))
        for s in spans
        if s["kind"] != KIND_INTERNAL
    }


def _record(url: str, db: Path, endpoint: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    argv = [str(SCRIPT), "record", url, "hello", "--otlp-endpoint", endpoint, "--db", str(db), "--json"]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, env={**os.environ, **(env or {})})


def test_a_proxied_session_is_sent_as_it_ends(sdk_agent, tmp_path):
    db = tmp_path / "proxy.db"
    with receiver() as got, _proxy([sdk_agent.url, "--otlp-endpoint", got.url, "--db", str(db)]) as (url, lines):
        items = _stream(url, "hello")
        (span,) = got.wait_for_spans(1)  # sent while the proxy runs, not at its end
    assert items and span["name"] == "SendStreamingMessage" and span["kind"] == 2  # a2a.server: relayed
    assert _ids_and_counts([span]) == _ids_and_counts(_spans_of(str(db)))  # the export's ids, every event
    assert int(span["attrs"]["a2a_tape.event.count"]) == len(items)
    assert "warning" not in "".join(lines)


def test_a_recorded_session_is_sent(sdk_agent, tmp_path):
    db = tmp_path / "record.db"
    with receiver() as got:
        r = _record(sdk_agent.url, db, got.url)
        assert r.returncode == 0, r.stderr
        spans = got.spans  # record waited for them before it ended
    assert {s["name"] for s in spans} == {"SendStreamingMessage", "GetTask"}
    assert all(s["kind"] == 3 for s in spans)  # a2a.client: what record saw
    assert _ids_and_counts(spans) == _ids_and_counts(_spans_of(str(db)))
    assert "warning" not in r.stderr


def test_a_slow_collector_holds_no_stream_back(sdk_agent, tmp_path):
    db = tmp_path / "slow.db"
    hold = threading.Event()
    try:
        with (
            receiver(hold) as got,
            _proxy([sdk_agent.url, "--otlp-endpoint", got.url, "--db", str(db)]) as (url, _lines),
        ):
            first = _stream(url, "one")  # the collector holds the first batch: the streams go on
            second = _stream(url, "two")
            hold.set()
            got.wait_for_spans(2)
    finally:
        hold.set()
    assert first and second
    assert _ids_and_counts(got.spans) == _ids_and_counts(_spans_of(str(db)))


@pytest.mark.parametrize("command", ["record", "proxy"])
def test_a_dead_collector_loses_no_event_and_is_said_once(sdk_agent, tmp_path, command):
    db = tmp_path / "dead.db"
    dead = f"http://127.0.0.1:{closed_port()}"
    env = {"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "1"}  # the exporter's own retries, bounded
    if command == "record":
        r = _record(sdk_agent.url, db, dead, env)
        assert r.returncode == 0, r.stderr
        done = json.loads(r.stdout)
        assert done["state"] == "completed"
        # the run's events less ours (a note) and the GetTask answer record keeps beside the stream
        streamed, stderr = [done["events"] - done["local_events"] - 1], r.stderr
    else:
        with _proxy([sdk_agent.url, "--otlp-endpoint", dead, "--db", str(db)], env) as (url, lines):
            streamed = [len(_stream(url, "one")), len(_stream(url, "two"))]
        stderr = "".join(lines)
    warnings = [line for line in stderr.splitlines() if "warning" in line]
    assert len(warnings) == 1, stderr
    assert "OTLP export" in warnings[0] and dead in warnings[0] and "Traceback" not in stderr
    spans = _spans_of(str(db))  # what the collector missed, from the log
    streams = sorted(int(s["attrs"]["a2a_tape.event.count"]) for s in spans if s["name"] == "SendStreamingMessage")
    assert streams == sorted(streamed)  # every item the client got is in the log
    with store.open_store(db, create=False) as st:
        assert st.count_events() == sum(int(s["attrs"]["a2a_tape.event.count"]) for s in spans)


@pytest.mark.parametrize("command", ["record", "proxy"])
def test_a_bad_otlp_endpoint_is_one_line(tmp_path, command):
    argv = ["http://127.0.0.1:9"] + (["hello"] if command == "record" else [])
    r = run_cli(command, *argv, "--otlp-endpoint", "ftp://x", "--db", str(tmp_path / "x.db"))
    assert_bad_input(r, "--otlp-endpoint ftp://x")
    assert not (tmp_path / "x.db").exists()


def whole(span: dict) -> dict:
    """All of a span as a receiver decodes it, ids in hex, but doctor's findings (the file export's only:
    the live span is sent before its task may be done) and the status they set."""
    out = {k: v for k, v in span.items() if k not in ("attributes", "events", "links", "status")}
    out["resource"] = {k: v for k, v in span["resource"].items() if k != "service.instance.id"}  # each process's own
    for key in ("traceId", "spanId", "parentSpanId"):
        if key in out:
            out[key] = _hex(out[key])
    found = [e for e in span["events"] if e["name"].startswith("a2a_tape.doctor.")]
    out["events"] = [
        (e["name"], e["timeUnixNano"], e["attrs"], e.get("droppedAttributesCount"))
        for e in span["events"]
        if e not in found
    ]
    out["links"] = sorted(
        (_hex(k["traceId"]), _hex(k["spanId"]), sorted((a["key"], repr(a["value"])) for a in k.get("attributes", [])))
        for k in span.get("links", [])
    )
    if not found:
        out["status"] = span.get("status")
    return out


def assert_live_is_the_export(live: list[dict], db: str) -> None:
    """Every span sent live is, whole, the span ``export --format otlp`` of the log gives that exchange."""
    exported = {_hex(s["spanId"]): whole(s) for s in _spans_of(db) if s["kind"] != KIND_INTERNAL}
    assert live and len(live) == len(exported)
    for span in live:
        assert whole(span) == exported[_hex(span["spanId"])], span["name"]


def _proxied_exchanges(url: str) -> int:
    """Through an HTTP proxy: streams of both dialects, a blocking send (a JSON answer) and a GetTask of a
    task already streamed (a task of two exchanges): the exchanges relayed."""
    for dialect in ("1.0", "0.3"):
        body, headers = send_body(f"hello {dialect}", dialect=dialect)
        with httpx.stream("POST", url + "/", content=body, headers=headers, timeout=30) as r:
            items = read_sse(r)
    body, headers = send_body("a blocking send", dialect="0.3", stream=False)
    assert httpx.post(url + "/", content=body, headers=headers, timeout=30).status_code == 200
    task = json.loads(items[0])["result"]["id"]
    body, headers = get_body(task, "0.3")
    assert httpx.post(url + "/", content=body, headers=headers, timeout=30).status_code == 200
    return 4


@pytest.mark.parametrize("path", ["proxy", "proxy-grpc", "record"])
def test_a_span_sent_live_is_the_exports_span_whole(request, tmp_path, path):
    """The live export's process builds each span from the log (the recording hands it ids): on every
    path, each span the collector gets is, attribute for attribute and event for event, the span the file
    export gives."""
    db = tmp_path / "live.db"
    with receiver() as got:
        if path == "record":
            agent = request.getfixturevalue("sdk_agent")
            r = _record(agent.url, db, got.url)
            assert r.returncode == 0, r.stderr
            live = got.spans
        elif path == "proxy":
            agent = request.getfixturevalue("sdk_agent")
            with _proxy([agent.url, "--otlp-endpoint", got.url, "--db", str(db)]) as (url, lines):
                live = got.wait_for_spans(_proxied_exchanges(url), timeout=30)
            assert "warning" not in "".join(lines)
        else:
            from tests.grpc.clients import sdk_send

            agent = request.getfixturevalue("grpc_agent")
            argv = [agent.url, "--otlp-endpoint", got.url, "--db", str(db), "--grpc-listen", "127.0.0.1:0"]
            with _proxy(argv) as (url, lines):
                assert sdk_send(url, "hello", message_id="m-live")
                assert sdk_send(url, "hello again", message_id="m-live-2", stream=False)
                live = got.wait_for_spans(2, timeout=30)
            assert "warning" not in "".join(lines)
    assert_live_is_the_export(live, str(db))
