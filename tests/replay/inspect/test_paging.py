"""Costs that grow with what a command shows (issue 14), through the real CLI: ``tasks`` pages the
newest 50 and says how many more, ``--json`` streams every row; ``grep`` reads the search index
and ``--regex`` scans; ``doctor`` reads findings kept per task and re-examines only what changed;
``export --all --format html`` holds the newest 200 tasks, stops one page before its size limit,
or writes a page per task into a directory."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from a2a_tape.store import Exchange, NewEvent, open_store
from tests.replay.inspect.conftest import cli

ROOT = Path(__file__).resolve().parents[3]
EXE = str(Path(sys.executable).parent / "a2a-tape")


def _bench():
    spec = importlib.util.spec_from_file_location("bench_cli", ROOT / "benchmarks" / "bench_cli.py")
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


@pytest.fixture(scope="module")
def many(tmp_path_factory) -> Path:
    """A log of 260 tasks of 5 events (the benchmark's generated tape), imported by the CLI."""
    root = tmp_path_factory.mktemp("many")
    tape = root / "t.jsonl"
    _bench().write_tape(tape, 260, 5)
    db = root / "many.db"
    assert cli("import", tape, "--db", db).code == 0
    return db


def test_tasks_shows_the_newest_50_and_says_how_to_see_more(many):
    r = cli("tasks", "--db", many)
    assert r.code == 0
    assert "task-000259" in r.stdout and "task-000210" in r.stdout and "task-000209" not in r.stdout
    assert r.stdout.index("task-000259") < r.stdout.index("task-000210")
    assert "210 more tasks not shown" in r.stderr and "--limit N" in r.stderr and "--all" in r.stderr
    assert "task-000000" in cli("tasks", "--all", "--db", many).stdout
    r = cli("tasks", "--limit", "3", "--db", many)
    assert r.stdout.count("task-0") == 3 and "257 more" in r.stderr


def test_tasks_all_streams_aligned_pages_past_one_table(many, monkeypatch):
    from a2a_tape.cli import tables as render

    monkeypatch.setattr(render, "TABLE_ROWS", 100)
    r = cli("tasks", "--all", "--db", many)
    lines = [line for line in r.stdout.splitlines() if "task-0" in line]
    assert len(lines) == 260 and r.stderr == ""
    assert len({line.index("completed") for line in lines}) == 1  # one column layout for every page


def test_tasks_json_streams_every_task_unless_limited(many):
    rows = json.loads(cli("tasks", "--json", "--db", many).stdout)
    assert len(rows) == 260 and rows[0]["task_id"].startswith("task-000259")
    assert [r["task_id"][:11] for r in json.loads(cli("tasks", "--json", "--limit", "2", "--db", many).stdout)] == [
        "task-000259",
        "task-000258",
    ]
    assert json.loads(cli("tasks", "--json", "--state", "failed", "--db", many).stdout) == []
    r = cli("tasks", "--all", "--limit", "2", "--db", many)
    assert r.code == 2 and "--limit and --all" in r.stderr


def test_grep_reads_the_index_and_regex_scans_with_the_same_answer(many):
    hits = cli("grep", "zebrafish", "--json", "--db", many).json()
    assert len(hits) == 5 and all("zebrafish" in h["text"] for h in hits)
    assert cli("grep", "zebrafish", "--regex", "--json", "--db", many).json() == hits
    assert cli("grep", "ZEBRA", "-i", "--json", "--db", many).json() == hits
    assert cli("grep", "ZEBRA", "--json", "--db", many).code == 1  # case-sensitive unless -i
    with open_store(many) as st:
        assert st.projection_cursor("search") == st.last_position()


def test_doctor_keeps_findings_and_reexamines_only_what_changed(tmp_path, many):
    import shutil

    db = tmp_path / "d.db"
    shutil.copy(many, db)
    first = cli("doctor", "--json", "--db", db).json()
    assert first["tasks"] == 260 and first["ok"]
    with open_store(db) as st:
        assert st.projection_cursor("doctor") == st.last_position()
        # a task that goes back to working after it completed, and an exchange still open
        tid = st.task_events()[0].task_id
        st.append(NewEvent(payload=_status(tid, "TASK_STATE_WORKING"), task_id=tid, received_at=2e9))
        ex = st.begin_exchange(Exchange(started_at=2e9, url="http://127.0.0.1:1/", task_id="late-1", streaming=True))
        st.append(NewEvent(payload=_status("late-1", "TASK_STATE_WORKING"), task_id="late-1", exchange_id=ex))
    second = cli("doctor", "--json", "--db", db).json()
    assert second["tasks"] == 261 and not second["ok"]
    codes = {(f["task_id"], f["code"]) for f in second["findings"]}
    assert (tid, "terminal-changed") in codes
    with open_store(db) as st:
        assert st.findings_unsettled() == ["late-1"]
        st.update_exchange(ex, ended_at=2e9 + 1, outcome="closed")
    third = cli("doctor", "--json", "--db", db).json()
    with open_store(db) as st:
        assert st.findings_unsettled() == []
        from a2a_tape.inspection.doctor import diagnose

        direct = diagnose(st)
    assert third["findings"] == json.loads(json.dumps([_f(f) for f in direct.findings]))
    assert {f["code"] for f in third["findings"] if f["task_id"] == "late-1"} >= {"closed-while-working"}


def _f(f) -> dict:
    import msgspec

    return msgspec.to_builtins(f)


def _status(tid: str, state: str) -> bytes:
    return json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "result": {"statusUpdate": {"taskId": tid, "contextId": "c", "status": {"state": state}}},
        }
    ).encode()


def test_doctor_first_run_shows_progress_when_asked(tmp_path, many):
    import shutil

    db = tmp_path / "p.db"
    shutil.copy(many, db)
    proc = subprocess.run([EXE, "doctor", "--progress", "--db", str(db)], capture_output=True, text=True)
    assert proc.returncode == 0 and "doctor: examining tasks" in proc.stderr and "260/260" in proc.stderr
    quiet = subprocess.run([EXE, "doctor", "--db", str(db)], capture_output=True, text=True)
    assert quiet.stderr == ""  # not a terminal, not asked


def test_export_html_of_all_holds_the_newest_200(many, tmp_path):
    out = tmp_path / "r.html"
    r = cli("export", "--all", "--format", "html", "-o", out, "--db", many)
    assert r.code == 0 and "newest 200 of 260" in r.stderr
    page = out.read_text()
    assert page.count('<section class="task"') == 200 and "task-000259" in page and "task-000059" not in page
    r = cli("export", "--all", "--format", "html", "--limit", "3", "-o", out, "--db", many)
    assert out.read_text().count('<section class="task"') == 3
    cli("export", "--all", "--format", "html", "--no-limit", "-o", out, "--db", many)
    assert out.read_text().count('<section class="task"') == 260


def test_export_html_page_stops_before_its_limit(many, tmp_path, monkeypatch):
    from a2a_tape.cli import export_formats as cmd_export_formats

    monkeypatch.setattr(cmd_export_formats, "PAGE_LIMIT", 200_000)
    out = tmp_path / "r.html"
    r = cli("export", "--all", "--format", "html", "-o", out, "--db", many)
    size = out.stat().st_size
    assert r.code == 0 and size <= 200_000 and "the page stops at" in r.stderr and "-o DIR/" in r.stderr
    page = out.read_text()
    n = page.count('<section class="task"')
    assert 0 < n < 200 and page.count("<li><a") == n and "This page stops at" in page


def test_export_html_into_a_directory_writes_an_index_and_a_page_per_task(many, tmp_path):
    pages = tmp_path / "report"
    proc = subprocess.run(
        [EXE, "export", "--all", "--format", "html", "--limit", "4", "-o", f"{pages}/", "--db", str(many)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    files = sorted(p.name for p in pages.iterdir())
    assert len(files) == 5 and "index.html" in files
    index = (pages / "index.html").read_text()
    for name in files:
        if name != "index.html":
            assert f'href="{name}"' in index
            assert (pages / name).read_text().count('<section class="task"') == 1
    r = cli("export", "--all", "--format", "mermaid", "-o", pages, "--db", many)
    assert r.code == 2 and "only for --format html" in r.stderr


def test_diff_of_two_logs_streams_json_pairs(many, tmp_path):
    r = cli("diff", many, many, "--json")
    doc = r.json()
    assert r.code == 0 and doc["equal"] and len(doc["pairs"]) == 260


def test_a_store_that_cannot_be_written_lists_searches_and_doctors_without_indexes(many, monkeypatch):
    """A read-only file (a copy on a read-only mount, say): every index catch-up fails to write;
    the commands fold in memory, scan, and examine every task instead, with the same answers."""
    from a2a_tape.fold import projection
    from a2a_tape.inspection.doctor_index import DoctorIndex
    from a2a_tape.inspection.search_index import SearchIndex
    from a2a_tape.store import ReadOnlyStore

    want = {
        "tasks": cli("tasks", "--json", "--limit", "7", "--db", many).json(),
        "human": cli("tasks", "--db", many).stdout,
        "grep": cli("grep", "zebrafish", "--json", "--db", many).json(),
        "doctor": cli("doctor", "--json", "--db", many).json(),
    }

    def read_only(*args, **kwargs):
        raise ReadOnlyStore("cannot write to the log: it is read-only")

    for cls, name in ((projection.Projector, "catch_up"), (SearchIndex, "_catch_up"), (DoctorIndex, "_catch_up")):
        monkeypatch.setattr(cls, name, read_only)
    assert cli("tasks", "--json", "--limit", "7", "--db", many).json() == want["tasks"]
    human = cli("tasks", "--db", many)
    assert human.stdout == want["human"] and "210 more" in human.stderr
    assert cli("grep", "zebrafish", "--json", "--db", many).json() == want["grep"]
    assert cli("doctor", "--json", "--db", many).json() == want["doctor"]


def test_lone_message_replies_are_paged_with_the_tasks_by_last_event(tmp_path, many):
    import shutil

    db = tmp_path / "m.db"
    shutil.copy(many, db)
    reply = {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {"message": {"messageId": "m-lone", "role": "ROLE_AGENT", "parts": [{"text": "hi"}]}},
    }
    with open_store(db) as st:
        ex = st.begin_exchange(
            Exchange(started_at=3e9, url="http://127.0.0.1:1/", rpc_method="SendMessage", ended_at=3e9 + 1)
        )
        st.append(NewEvent(payload=json.dumps(reply).encode(), exchange_id=ex, received_at=3e9))
    rows = cli("tasks", "--json", "--limit", "2", "--db", db).json()
    assert [(r["kind"], r["message_id"] or r["task_id"][:11]) for r in rows] == [
        ("message", "m-lone"),
        ("task", "task-000259"),
    ]
    r = cli("tasks", "--db", db)
    assert "message m-lone" in r.stdout and "211 more" in r.stderr
    assert len(cli("tasks", "--json", "--db", db).json()) == 261
    assert cli("tasks", "--json", "--state", "completed", "--db", db).json()[0]["kind"] == "task"


def test_a_listing_past_one_table_with_a_lone_message_reply_keeps_its_columns(tmp_path, many, monkeypatch):
    """The fixed-width pages measured the first column by task id, which a lone Message row has
    not (``len(None)``: an internal error); its shown name ``message <id>`` is measured instead."""
    import shutil

    from a2a_tape.cli import tables as render

    db = tmp_path / "m.db"
    shutil.copy(many, db)
    reply = {"jsonrpc": "2.0", "id": 1, "result": {"message": {"messageId": "m-lone", "role": "ROLE_AGENT"}}}
    with open_store(db) as st:
        ex = st.begin_exchange(
            Exchange(started_at=3e9, url="http://127.0.0.1:1/", rpc_method="SendMessage", ended_at=3e9 + 1)
        )
        st.append(NewEvent(payload=json.dumps(reply).encode(), exchange_id=ex, received_at=3e9))
    monkeypatch.setattr(render, "TABLE_ROWS", 100)
    r = cli("tasks", "--all", "--db", db)
    assert r.code == 0, r.stderr
    lines = [line for line in r.stdout.splitlines() if "task-0" in line or "m-lone" in line]
    assert len(lines) == 261 and "message m-lone" in lines[0] and r.stderr == ""
    assert len({line.index("completed") for line in lines[1:]}) == 1  # one column layout for every page
