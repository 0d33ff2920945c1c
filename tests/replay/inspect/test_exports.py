"""export --format har / mermaid / html: HAR 1.2 shape, Mermaid structure, and the HTML report in a
real headless Chromium (answer once, reasoning collapsed, tool calls in a table, nothing fetched)."""

from __future__ import annotations

import datetime as dt
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from a2a_tape.store import local_failed, local_note
from tests.replay.inspect.builders import Tape, items
from tests.replay.inspect.conftest import cli
from tests.replay.inspect.recordings import ANSWER, REASONING, build_opencode

# -- HAR ------------------------------------------------------------------------------------------


def _sse_data(text: str) -> list[str]:
    """The data payloads of an SSE body (one frame per blank-line-separated block)."""
    frames = []
    for block in text.split("\n\n"):
        data = [line[6:] for line in block.split("\n") if line.startswith("data: ")]
        if data:
            frames.append("\n".join(data))
    return frames


def _check_har_shape(doc: dict) -> None:
    log = doc["log"]
    assert log["version"] == "1.2"
    assert isinstance(log["creator"]["name"], str) and isinstance(log["creator"]["version"], str)
    assert isinstance(log["entries"], list) and log["entries"]
    for e in log["entries"]:
        dt.datetime.fromisoformat(e["startedDateTime"].replace("Z", "+00:00"))
        assert isinstance(e["time"], (int, float)) and e["time"] >= 0
        req, resp = e["request"], e["response"]
        for key, typ in (
            ("method", str),
            ("url", str),
            ("httpVersion", str),
            ("cookies", list),
            ("headers", list),
            ("queryString", list),
            ("headersSize", int),
            ("bodySize", int),
        ):
            assert isinstance(req[key], typ), key
        for key, typ in (
            ("status", int),
            ("statusText", str),
            ("httpVersion", str),
            ("cookies", list),
            ("headers", list),
            ("content", dict),
            ("redirectURL", str),
            ("headersSize", int),
            ("bodySize", int),
        ):
            assert isinstance(resp[key], typ), key
        assert all(set(h) == {"name", "value"} for h in req["headers"] + resp["headers"])
        assert isinstance(resp["content"]["size"], int) and isinstance(resp["content"]["mimeType"], str)
        assert "encoding" not in resp["content"]  # only "base64" is allowed there
        assert isinstance(e["cache"], dict)
        for key in ("send", "wait", "receive"):
            assert isinstance(e["timings"][key], (int, float)) and e["timings"][key] >= 0
        if "postData" in req:
            assert isinstance(req["postData"]["mimeType"], str) and isinstance(req["postData"]["text"], str)


@pytest.mark.parametrize("dialect", ["1.0", "0.3"])
def test_har_export_is_har_1_2_with_the_sse_body_as_recorded(live, dialect, tmp_path):
    task = live.tasks[(dialect, "hello")]
    out = tmp_path / "t.har"
    r = cli("export", task, "--format", "har", "-o", out, "--db", live.db)
    assert r.code == 0 and r.stdout == "" and "wrote har" in r.stderr
    doc = json.loads(out.read_text())
    _check_har_shape(doc)
    [entry] = doc["log"]["entries"]
    method = "SendStreamingMessage" if dialect == "1.0" else "message/stream"
    assert method in entry["request"]["postData"]["text"]
    assert entry["response"]["status"] == 200
    assert entry["response"]["content"]["mimeType"].startswith("text/event-stream")
    raw = cli("show", task, "--raw", "--db", live.db).stdout.splitlines()
    assert _sse_data(entry["response"]["content"]["text"]) == raw  # byte for byte, in order
    # stdout form is the same document
    assert json.loads(cli("export", task, "--format", "har", "--db", live.db).stdout) == doc


def test_har_export_all_has_one_entry_per_exchange_and_leaves_local_events_out(tmp_path):
    tape = Tape(tmp_path / "t.db")
    a, b = items("1.0"), items("0.3")
    tape.stream(a, [a.task(), a.status("working"), a.artifact("art-1", "x", last=True), a.status("completed")])
    tape.stream(b, [b.task(), b.status("working")])
    tape.add(
        b.task_id,
        [local_note("gave-up", "stream lost", b.task_id), local_failed(b.task_id, b.context_id, "lost")],
        origin="local",
    )
    tape.close()
    doc = json.loads(cli("export", "--all", "--format", "har", "--db", tmp_path / "t.db").stdout)
    _check_har_shape(doc)
    assert len(doc["log"]["entries"]) == 2
    second = _sse_data(doc["log"]["entries"][1]["response"]["content"]["text"])
    assert len(second) == 2 and all("a2a-tape" not in f and "lost" not in f for f in second)


# -- Mermaid --------------------------------------------------------------------------------------

_ARROW = re.compile(r"^    (Client|Recorder|Agent)(->>|-->>)(Client|Recorder|Agent): (.+)$")


def _check_mermaid(text: str) -> list[str]:
    lines = text.rstrip("\n").split("\n")
    assert lines[0] == "sequenceDiagram"
    assert lines[1:4] == ["    participant Client", "    participant Recorder", "    participant Agent"]
    events = []
    for line in lines[4:]:
        if line.startswith("    Note over Client,Agent: "):
            continue
        m = _ARROW.match(line)
        assert m, f"not a sequence-diagram statement: {line!r}"
        label = m.group(4)
        assert ";" not in label.replace("#59;", "").replace("#35;", "").replace("#58;", "").replace("#lt;", "").replace(
            "#gt;", ""
        ).replace("#37;", "")
        if label.startswith("["):
            events.append(line)
    return events


def test_mermaid_export_has_one_arrow_per_event(live):
    task = live.tasks[("1.0", "hello")]
    r = cli("export", task, "--format", "mermaid", "--db", live.db)
    assert r.code == 0
    events = _check_mermaid(r.stdout)
    shown = json.loads(cli("show", task, "--json", "--db", live.db).stdout)
    assert len(events) == len(shown) == 6
    assert [int(re.search(r": \[(\d+)\]", e).group(1)) for e in events] == [row["position"] for row in shown]
    assert all(e.startswith("    Agent-->>Recorder: ") for e in events)
    assert "    Client->>Recorder: SendStreamingMessage" in r.stdout


def test_mermaid_marks_local_events_and_escapes_labels(tmp_path):
    tape = Tape(tmp_path / "t.db")
    it = items("0.3")
    tape.stream(it, [it.task(), it.status("working"), it.artifact("art-1", "a;b #1 <x> %% c:d")])
    tape.add(it.task_id, [local_failed(it.task_id, it.context_id, "upstream lost the task")], origin="local")
    tape.close()
    r = cli("export", it.task_id, "--format", "mermaid", "--db", tmp_path / "t.db")
    events = _check_mermaid(r.stdout)
    assert len(events) == 4
    assert events[-1].startswith("    Recorder-->>Client: [4] status failed")
    assert "a#59;b #35;1 #lt;x#gt; #37;#37; c#58;d" in r.stdout


# -- HTML in headless Chromium --------------------------------------------------------------------

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

_PROBE = """<!DOCTYPE html><html><head><meta charset="utf-8"></head><body><pre id="result">not loaded</pre>
<iframe id="report" src="report.html" style="width:1280px;height:900px" onload="probe()"></iframe>
<script>
function probe() {
  var f = document.getElementById('report'), d = f.contentDocument, w = f.contentWindow;
  var det = d.querySelector('details.reasoning');
  var table = d.querySelector('table.tool-calls');
  var out = {
    answerPanels: Array.from(d.querySelectorAll('.answer pre.final-answer')).map(function (e) { return e.innerText; }),
    answerPanelText: Array.from(d.querySelectorAll('.answer')).map(function (e) { return e.innerText; }),
    detailsOpen: det ? det.open : null,
    detailsText: det ? det.innerText : null,
    reasoningVisible: det ? det.querySelector('pre').checkVisibility() : null,
    reasoningSource: det ? det.querySelector('pre').textContent : null,
    toolHeaders: table ? Array.from(table.querySelectorAll('th')).map(function (e) { return e.innerText; }) : null,
    toolRows: table ? Array.from(table.querySelectorAll('tbody tr')).map(function (tr) {
      return Array.from(tr.querySelectorAll('td')).map(function (td) { return td.innerText; }); }) : null,
    scripts: d.querySelectorAll('script').length,
    resources: w.performance.getEntriesByType('resource').map(function (e) { return e.name; }),
    findings: Array.from(d.querySelectorAll('table.findings td')).map(function (e) { return e.innerText; }),
    timelineRows: d.querySelectorAll('table.timeline tbody tr').length,
    bodyText: d.body.innerText
  };
  document.getElementById('result').textContent = JSON.stringify(out);
}
</script></body></html>"""


def render(tmp_path: Path, html: str) -> dict:
    """Load the report in headless Chromium with the network off; return what the page shows."""
    work = tmp_path / "chromium"
    work.mkdir()
    (work / "report.html").write_text(html, encoding="utf-8")
    (work / "probe.html").write_text(_PROBE, encoding="utf-8")
    cmd = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={work / 'profile'}",
        "--allow-file-access-from-files",
        # the network is off: no proxy answers and no name resolves
        "--proxy-server=http://127.0.0.1:9",
        "--host-resolver-rules=MAP * ~NOTFOUND",
        "--dump-dom",
        (work / "probe.html").as_uri(),
    ]
    proc = subprocess.run(cmd, capture_output=True, timeout=90, check=False)
    dom = proc.stdout.decode("utf-8", "replace")
    m = re.search(r'<pre id="result">(.*?)</pre>', dom, re.S)
    assert m, f"chromium produced no result (exit {proc.returncode}): {proc.stderr.decode()[-500:]}"
    import html as htmllib

    return json.loads(htmllib.unescape(m.group(1)))


@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed (apt-get install chromium)")
def test_html_report_in_chromium(tmp_path):
    tape = Tape(tmp_path / "t.db")
    task = build_opencode(tape)
    tape.close()
    out = tmp_path / "report.html"
    r = cli("export", task, "--format", "html", "-o", out, "--db", tmp_path / "t.db")
    assert r.code == 0 and r.stdout == ""
    html = out.read_text(encoding="utf-8")

    # self-contained: nothing to fetch, and recorded text cannot inject markup
    assert not re.search(r"""(?:src|href|action|poster|data)\s*=\s*["']?\s*(?:https?:)?//""", html, re.I)
    assert "@import" not in html and "url(" not in html and "<link" not in html.lower()
    assert "<script" not in html.lower() and "&lt;script&gt;alert(1)&lt;/script&gt;" in html

    page = render(tmp_path, html)
    assert page["resources"] == []  # the report loaded nothing besides itself
    assert page["scripts"] == 0
    # the answer panel shows the final answer exactly once (the final snapshot did not double it)
    assert page["answerPanels"] == [ANSWER]
    assert page["answerPanelText"][0].count(ANSWER) == 1
    assert page["answerPanelText"][0].count("42 & counting") == 1
    # reasoning sits in a collapsed element: in the DOM, but not rendered until opened
    assert page["detailsOpen"] is False
    assert page["reasoningSource"] == REASONING
    assert page["reasoningVisible"] is False and "carefully" not in page["detailsText"]
    # tool calls: one row (last state wins), structured fields as columns
    assert page["toolHeaders"] == [
        "tool",
        "status",
        "title / text",
        "input",
        "output / error",
    ]  # as channels shows them
    [row] = page["toolRows"]
    cells = dict(zip(page["toolHeaders"], row))
    assert cells["tool"] == "calculator" and cells["status"] == "completed" and cells["output / error"] == "42"
    assert '"expr": "6*7"' in cells["input"]
    assert page["timelineRows"] == 10
    # a person who never used the CLI can read what happened
    assert "The task ended completed" in page["bodyText"]
    assert "warning" in page["findings"] and "answer-shown-twice" in page["findings"]


@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed (apt-get install chromium)")
def test_html_report_of_every_live_task_renders_each_answer_once(live, tmp_path):
    out = tmp_path / "all.html"
    assert cli("export", "--all", "--format", "html", "-o", out, "--db", live.db).code == 0
    page = render(tmp_path, out.read_text(encoding="utf-8"))
    assert page["resources"] == []
    texts = page["answerPanels"]
    assert texts.count("chunk-0 chunk-1 chunk-2 ") == 2  # hello, in both dialects
    assert texts.count("direct reply") == 2  # the lone Message replies
    assert "closed-while-working" in page["findings"]
    assert "The agent's last status message: “need more input”" in page["bodyText"]  # the ask task's question
    assert "The stream carried an error" in page["bodyText"]  # the boom tasks


def test_export_bad_input_is_one_line_and_exit_2(live, tmp_path):
    r = cli("export", live.tasks[("1.0", "hello")], "--format", "pdf", "--db", live.db)
    assert r.code == 2 and r.stdout == ""
    line = r.stderr.strip()  # typer's own message: --format is a choice (an enum)
    assert line.startswith("a2a-tape: error: Invalid value for '--format': 'pdf'") and "\n" not in line
    assert all(f"'{f}'" in line for f in ("jsonl", "har", "mermaid", "html"))
    r = cli(
        "export",
        live.tasks[("1.0", "hello")],
        "--format",
        "html",
        "-o",
        tmp_path / "no" / "such" / "dir.html",
        "--db",
        live.db,
    )
    assert r.code == 2 and len(r.stderr.splitlines()) == 1 and "Traceback" not in r.stderr
    r = cli("export", "no-such-task", "--format", "mermaid", "--db", live.db)
    assert r.code == 2 and r.stderr.startswith("a2a-tape: error: unknown task")
