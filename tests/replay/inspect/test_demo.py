"""The inspection commands on fresh recordings from ``a2a-tape demo`` (the installed script)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.replay.inspect.conftest import cli
from tests.replay.inspect.test_exports import CHROMIUM, _check_har_shape, _check_mermaid, render

SCRIPT = Path(sys.executable).with_name("a2a-tape")


def _demo(db: Path) -> None:
    env = {**os.environ, "A2A_TAPE_DB": str(db)}
    proc = subprocess.run(
        [str(SCRIPT), "demo", "--db", str(db)], capture_output=True, text=True, timeout=120, env=env, check=False
    )
    assert proc.returncode == 0, proc.stderr[-1000:]


@pytest.fixture(scope="module")
def demo_dbs(tmp_path_factory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("demo")
    a, b = base / "a.db", base / "b.db"
    _demo(a)
    _demo(b)
    return a, b


def _task(db: Path) -> dict:
    [task] = cli("tasks", "--db", db, "--json").json()
    return task


def test_doctor_on_a_demo_recording(demo_dbs):
    db = demo_dbs[0]
    r = cli("doctor", "--db", db, "--json")
    doc = r.json()
    assert r.code == 0 and doc["errors"] == 0 and doc["tasks"] == 1
    # the demo agent sends its final snapshot with append=true: only a naive client would double it
    assert {f["code"] for f in doc["findings"]} >= {"answer-shown-twice"}
    assert all(f["level"] == "warning" for f in doc["findings"])
    assert "answer-shown-twice" in cli("doctor", _task(db)["task_id"], "--db", db).stdout


def test_two_demo_runs_compare_equal(demo_dbs):
    a, b = demo_dbs
    assert _task(a)["task_id"] != _task(b)["task_id"]
    r = cli("diff", a, b, "--json")
    assert r.code == 0 and r.json()["equal"] is True
    assert "recordings are equal" in cli("diff", a, b).stdout


def test_grep_and_exports_on_a_demo_recording(demo_dbs, tmp_path):
    db = demo_dbs[0]
    task = _task(db)
    hits = cli("grep", "pyproject", "--db", db, "--json").json()
    assert hits and all(h["task_id"] == task["task_id"] for h in hits)
    _check_har_shape(json.loads(cli("export", task["task_id"], "--format", "har", "--db", db).stdout))
    arrows = _check_mermaid(cli("export", task["task_id"], "--format", "mermaid", "--db", db).stdout)
    assert len(arrows) == task["events"]


@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed (apt-get install chromium)")
def test_html_report_of_a_demo_recording_in_chromium(demo_dbs, tmp_path):
    db = demo_dbs[0]
    task = _task(db)
    channels = cli("channels", task["task_id"], "--db", db, "--json").json()
    out = tmp_path / "demo.html"
    assert cli("export", task["task_id"], "--format", "html", "-o", out, "--db", db).code == 0
    page = render(tmp_path, out.read_text(encoding="utf-8"))
    assert page["resources"] == []
    assert page["answerPanels"] == [channels["final_answer"]]  # once, though the snapshot was sent append=true
    assert page["detailsOpen"] is False and page["reasoningVisible"] is False
    assert page["reasoningSource"] == channels["reasoning"]
    assert len(page["toolRows"]) == len(channels["tool_calls"]) >= 1
    assert "read_file" in " ".join(page["toolRows"][0])
