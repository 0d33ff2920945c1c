"""Every inspection command on the golden recordings (recordings/*.jsonl), human and --json output."""

from __future__ import annotations

import html as htmllib
import json
import re
from pathlib import Path

import pytest

from a2a_tape.inspection.doctor import CHECKS
from tests.replay.inspect.conftest import cli
from tests.replay.inspect.test_exports import _check_har_shape, _check_mermaid

RECORDINGS = Path(__file__).resolve().parents[3] / "recordings"
TAPES = sorted(p.stem for p in RECORDINGS.glob("*.jsonl"))

# what doctor must say about each golden recording: {(code, level)}
DOCTOR = {
    "opencode-append-reset": set(),
    "opencode-blocks": {
        ("answer-shown-twice", "warning"),
        ("artifact-not-closed", "warning"),
        ("closed-while-working", "warning"),
        ("sequence-repeat", "warning"),
    },
    "opencode-channels-order": {("artifact-not-closed", "warning")},
    "opencode-final-snapshot": {("answer-shown-twice", "warning")},
    "opencode-interleaved": {("artifact-not-closed", "warning")},
    "opencode-lanes": set(),
    "sdk-boom": {("artifact-not-closed", "warning"), ("closed-while-working", "error"), ("rpc-error", "error")},
    "sdk-closed-working": {("closed-while-working", "error")},
    "sdk-input-required": {("interrupted-no-follow-up", "warning")},
    "sdk-resubscribe": {("closed-while-working", "warning")},
    "sdk-v03-stream": set(),
    "sdk-v10-stream": set(),
}


@pytest.fixture(scope="module")
def golden(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("golden")
    dbs = {}
    for name in TAPES:
        db = base / f"{name}.db"
        r = cli("import", RECORDINGS / f"{name}.jsonl", "--db", db)
        assert r.code == 0, r.stderr
        dbs[name] = db
    return dbs


def test_every_golden_recording_has_a_doctor_expectation():
    assert TAPES and set(TAPES) == set(DOCTOR)


@pytest.mark.parametrize("name", sorted(DOCTOR))
def test_doctor_on_golden(golden, name):
    r = cli("doctor", "--db", golden[name], "--json")
    found = {(f["code"], f["level"]) for f in r.json()["findings"]}
    assert found == DOCTOR[name]
    assert r.code == (1 if any(level == "error" for _, level in found) else 0)
    assert all(f["positions"] for f in r.json()["findings"])
    assert all(code in CHECKS for code, _ in found)  # every code is documented in doctor --help
    human = cli("doctor", "--db", golden[name])
    assert human.code == r.code
    for code, _ in found:
        assert code in human.stdout


def test_doctor_picks_the_right_stream_in_the_boom_recording(golden):
    """v1.0 'event: error' and a v0.3 plain data error: both tasks closed while working."""
    doc = cli("doctor", "--db", golden["sdk-boom"], "--json").json()
    tasks = {f["task_id"] for f in doc["findings"] if f["code"] == "closed-while-working"}
    assert len(tasks) == 2 and doc["tasks"] == 2


@pytest.mark.parametrize("name", TAPES)
def test_html_export_of_golden_shows_the_projected_answer_once(golden, name, tmp_path):
    out = tmp_path / "r.html"
    r = cli("export", "--all", "--format", "html", "-o", out, "--db", golden[name])
    assert r.code == 0 and r.stdout == ""
    page = out.read_text(encoding="utf-8")
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", page) and "@import" not in page
    panels = [htmllib.unescape(p) for p in re.findall(r'<pre class="final-answer">(.*?)</pre>', page, re.S)]
    expected = json.loads((RECORDINGS / f"{name}.expected.json").read_text())
    answers = [t["final_answer"] for t in expected if t["final_answer"] is not None]
    assert sorted(panels) == sorted(answers)
    for t in expected:
        assert f'id="task-{htmllib.escape(t["task_id"])}"' in page


@pytest.mark.parametrize("name", TAPES)
def test_har_and_mermaid_exports_of_golden(golden, name):
    har = cli("export", "--all", "--format", "har", "--db", golden[name])
    assert har.code == 0
    doc = json.loads(har.stdout)
    _check_har_shape(doc)
    tasks = cli("tasks", "--db", golden[name], "--json").json()
    arrows = 0
    for t in tasks:
        m = cli("export", t["task_id"], "--format", "mermaid", "--db", golden[name])
        assert m.code == 0
        arrows += len(_check_mermaid(m.stdout))
    assert arrows == sum(t["events"] for t in tasks)


def test_grep_on_golden(golden):
    r = cli("grep", "chunk-1", "--db", golden["sdk-v10-stream"], "--json")
    assert r.code == 0 and [h["seq"] for h in r.json()] == [4]
    r = cli("grep", "laugh", "--db", golden["opencode-blocks"])
    assert r.code == 0 and "reasoning" in r.stdout


def test_diff_on_golden(golden, tmp_path):
    again = tmp_path / "again.db"
    assert cli("import", RECORDINGS / "sdk-v10-stream.jsonl", "--db", again).code == 0
    same = cli("diff", golden["sdk-v10-stream"], again, "--json")
    assert same.code == 0 and same.json()["equal"] is True
    # the same stream in the other dialect: same channels, different events (v0.3 carries `final`)
    other = cli("diff", golden["sdk-v10-stream"], golden["sdk-v03-stream"], "--json")
    assert other.code == 1
    [pair] = other.json()["pairs"]
    assert "final_answer" not in pair["channels"] and pair["events"]
    # two tasks of one recording: append=false vs append=true snapshot, the same answer
    snap = cli("diff", "oc-snap-1", "oc-snap-2", "--db", golden["opencode-final-snapshot"], "--json")
    assert snap.code == 1
    [pair] = snap.json()["pairs"]
    assert "final_answer" not in pair["channels"]
    assert any('"append":true' in line for line in pair["events"] if line.startswith("+"))
    human = cli("diff", "oc-snap-1", "oc-snap-2", "--db", golden["opencode-final-snapshot"])
    assert human.code == 1 and "recordings differ" in human.stdout
