"""One fault vocabulary and one count (issue 37 item 3), through the installed CLI and ``ui``.

- A list's "faults" is doctor's count of the task: ``tasks --json`` (``faults`` = ``errors`` +
  ``warnings``), ``tasks`` for people (``1E 2W``), the UI's list (its HTML and the rows the page is
  made of) all say what ``doctor TASK --json`` finds, for every golden recording and the demo.
  Before: the fold's count (0 for the demo's task where doctor finds 2 warnings; 2 for
  sdk-closed-working's task where doctor finds 1 error).
- ``channels`` names faults by doctor's codes (fold/codes.py, the one table): it said
  ``stream-closed-active`` / ``ended-active`` where doctor says ``closed-while-working``.
- ``record``'s event count is the one ``tasks``, ``channels``, ``show`` and the UI count (every
  row the log holds for the run, LOCAL notes and the GetTask answer included): it said 11 where
  the others said 13 for the demo (the stream's events only).

Each command that reads the log (``tasks``, ``doctor``, ``channels``, ``show``; ``import`` to make it)
runs through the installed script for the issue's case (the sdk-closed-working task), and ``record``
for its first way of recording; the other cases run the same commands in this process
(tests/support/in_process.py). ``ui`` and ``demo`` always run as the installed script.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import httpx
import msgspec
import pytest

from a2a_tape.fold.codes import CHECKS
from a2a_tape.inspection.ui import reading
from a2a_tape.store import open_store
from tests.replay.inspect.ui.conftest import RECORDINGS, SCRIPT, run
from tests.support.in_process import run_text_in_process

TAPES = sorted(RECORDINGS.glob("*.jsonl"))
_ROW = re.compile(
    r'<tr id="[^"]*" class="task-row[^"]*"><td class="id">(?:<a href="[^"]*">)?<code[^>]*>([^<]*)</code>.*?'
    r"<td>(\d+)</td>.*?<td class=\"faults[^\"]*\">([^<]*)</td>",
    re.S,
)


def _people(*args: object, installed: bool) -> str:
    """What a person reads on a wide terminal (stdout)."""
    if installed:
        env = {**os.environ, "COLUMNS": "400"}
        r = subprocess.run([str(SCRIPT), *map(str, args)], capture_output=True, text=True, timeout=120, env=env)
    else:
        r = run_text_in_process([str(a) for a in args], env={"COLUMNS": "400"}, timeout=120)
    assert r.returncode in (0, 1), r.stderr
    return r.stdout


def _json(*args: object, installed: bool) -> object:
    r = run(*args, installed=installed)
    assert r.returncode in (0, 1), r.stderr  # doctor: 1 on an error
    return json.loads(r.stdout)


def _doctor(db: Path, task_id: str, *, installed: bool) -> tuple[int, int]:
    doc = _json("doctor", task_id, "--db", db, "--json", installed=installed)
    assert isinstance(doc, dict)
    assert doc["errors"] + doc["warnings"] == len(doc["findings"])
    return doc["errors"], doc["warnings"]


def _cell(errors: int, warnings: int) -> str:
    """How a list shows doctor's count: ``1E 2W``, ``2W``, nothing."""
    return " ".join(f"{n}{c}" for n, c in ((errors, "E"), (warnings, "W")) if n)


def _ui_rows(serve_ui, db: Path) -> dict[str, tuple[int, str]]:
    ui = serve_ui(db)
    with httpx.Client(base_url=ui.base, cookies={f"a2a_tape_ui_{ui.port}": ui.token}, timeout=30) as c:
        page = c.get("/")
    assert page.status_code == 200
    return {task: (int(events), cell.strip()) for task, events, cell in _ROW.findall(page.text)}


def _check_counts(db: Path, serve_ui, *, installed: bool = False) -> dict[str, tuple[int, int]]:
    """Every list's faults and events equal doctor's and channels' for every task of ``db`` (the commands
    through the installed script, or in this process: ``installed``; the UI is always the installed one)."""
    rows = [r for r in _json("tasks", "--all", "--json", "--db", db, installed=installed) if r["kind"] == "task"]
    assert rows
    shown = _ui_rows(serve_ui, db)
    st = open_store(str(db), create=False)
    try:
        page = msgspec.to_builtins(reading.task_list(st, reading.Filters()))  # the rows the page is made of
    finally:
        st.close()
    listed = {r["task_id"]: r for r in page["rows"] if r["task_id"]}
    people = _people("tasks", "--all", "--db", db, installed=installed)
    counts = {}
    for row in rows:
        task = row["task_id"]
        errors, warnings = _doctor(db, task, installed=installed)
        counts[task] = (errors, warnings)
        assert (row["faults"], row["errors"], row["warnings"]) == (errors + warnings, errors, warnings), task
        ui = listed[task]
        assert (ui["faults"], ui["errors"], ui["warnings"]) == (errors + warnings, errors, warnings), task
        assert shown[task] == (row["events"], _cell(errors, warnings)), task
        line = next(x for x in people.splitlines() if x.split() and x.split()[0] == task)
        column = re.search(r"\d\d:\d\d:\d\d\s+(\d+E(?: \d+W)?\b|\d+W\b)?", line)  # after "started"
        assert column and (column.group(1) or "") == _cell(errors, warnings), line
        channels = _json("channels", task, "--db", db, "--json", installed=installed)
        assert isinstance(channels, dict)
        assert channels["events"] == row["events"] == ui["events"], task
        assert {f["code"] for f in channels["faults"]} <= set(CHECKS), channels["faults"]
        human = _people("channels", task, "--db", db, installed=installed)
        said = re.findall(r"^(error|warning): ([a-z-]+): ", human, re.M)
        assert sum(level == "error" for level, _ in said) == errors, human
        assert sum(level == "warning" for level, _ in said) == warnings, human
        assert {code for _, code in said} <= set(CHECKS), human
    return counts


@pytest.mark.parametrize("tape", TAPES, ids=[t.stem for t in TAPES])
def test_every_list_counts_doctors_findings(tape, tmp_path, serve_ui):
    db = tmp_path / "g.db"
    r = run("import", tape, "--db", db, installed=False)
    assert r.returncode == 0, r.stderr
    _check_counts(db, serve_ui)


def test_counts_read_from_doctors_kept_findings_are_the_same(tmp_path, serve_ui):
    """Every golden recording in one log, listed three ways: each task examined afresh (the kept
    findings out of date by more than a list catches up), then read from the findings ``doctor``
    kept in the log, then after the log grew (a list catches a few tasks up itself)."""
    from a2a_tape.inspection import listing
    from a2a_tape.inspection.doctor_index import FaultCounter

    db = tmp_path / "all.db"
    for tape in TAPES[:-1]:
        assert run("import", tape, "--db", db, installed=False).returncode == 0
    st = open_store(str(db), create=False)
    try:
        rows = list(listing.list_tasks(st, listing.TaskFilter(), limit=None).rows)
        fresh = {r.task_id: (r.errors, r.warnings) for r in rows if r.task_id}
        counter = FaultCounter(st, catch_up_at_most=0)
        assert {t: tuple(counter(t)) for t in fresh} == fresh  # afresh: nothing kept yet
        assert counter._kept is None
    finally:
        st.close()
    doctor = run("doctor", "--db", db, "--json", installed=False)
    assert doctor.returncode in (0, 1)
    assert run("import", TAPES[-1], "--db", db, installed=False).returncode == 0  # the log grows past what doctor kept
    counts = _check_counts(db, serve_ui)
    assert {t: counts[t] for t in fresh} == fresh
    st = open_store(str(db), create=False)
    try:
        counter = FaultCounter(st)
        assert {t: tuple(counter(t)) for t in counts} == counts
        assert counter._kept is not None  # read from the findings kept in the log
    finally:
        st.close()


def test_the_closed_working_task_shows_one_error_everywhere(tmp_path, serve_ui):
    """The issue's case: the list said 2 (the fold's stream-closed-active and ended-active) where
    the task's page and doctor show 1 error; channels named codes doctor does not know. Every command
    through the installed script."""
    db = tmp_path / "g.db"
    assert run("import", RECORDINGS / "sdk-closed-working.jsonl", "--db", db).returncode == 0
    assert list(_check_counts(db, serve_ui, installed=True).values()) == [(1, 0)]
    [row] = _json("tasks", "--json", "--db", db, installed=True)
    channels = _json("channels", row["task_id"], "--db", db, "--json", installed=True)
    assert isinstance(channels, dict)
    codes = {f["code"] for f in channels["faults"]}
    assert codes == {"closed-while-working"}, channels["faults"]


def test_the_demo_task_shows_doctors_two_warnings_and_records_count_everywhere(tmp_path, serve_ui):
    """record (the demo's) counts what tasks, channels, show and the UI count; the list's faults
    are doctor's two warnings (it said 0)."""
    db = tmp_path / "demo.db"
    r = run("demo", "--db", db)
    assert r.returncode == 0, r.stderr[-2000:]
    said = re.search(r"recorded (\d+) events of task ([0-9a-f-]+)", r.stdout + r.stderr)
    assert said, r.stdout[-2000:]
    events, task = int(said.group(1)), said.group(2)
    assert _check_counts(db, serve_ui) == {task: (0, 2)}
    [row] = _json("tasks", "--json", "--db", db, installed=False)
    assert row["events"] == events
    shown = _json("show", task, "--json", "--db", db, installed=False)
    assert isinstance(shown, list) and len(shown) == events


@pytest.mark.parametrize("extra", [(), ("--no-get-task",), ("--no-stream",)])
def test_records_event_count_is_the_one_everyone_counts(sdk_agent, tmp_path, serve_ui, extra):
    """A real a2a-sdk agent: record --json's events (and its human line) equal tasks', channels',
    show's and the UI's, whether record asked GetTask after the stream, or polled. ``record`` through the
    installed script the first way, in this process the others."""
    installed = extra == ()
    db = tmp_path / "r.db"
    r = run("record", sdk_agent.url, "hello", "--db", db, "--json", *extra, installed=installed)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    [row] = _json("tasks", "--json", "--db", db, installed=False)
    shown = _json("show", doc["task_id"], "--json", "--db", db, installed=False)
    assert isinstance(shown, list)
    assert doc["events"] == row["events"] == len(shown)
    assert doc["local_events"] == sum(1 for e in shown if e.get("origin") == "local")
    _check_counts(db, serve_ui)
    human = run("record", sdk_agent.url, "hello", "--db", tmp_path / "h.db", *extra, installed=installed)
    said = re.search(r"recorded (\d+) events?", human.stdout + human.stderr)
    assert said, human.stderr
    n = int(said.group(1))
    [again] = _json("tasks", "--json", "--db", tmp_path / "h.db", installed=False)
    assert n == again["events"]
