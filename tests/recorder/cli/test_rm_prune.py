"""``a2a-tape rm TASK...`` and ``a2a-tape prune`` (issue 37 item 9), through the installed CLI on tasks a
real a2a-sdk agent answered (recorded, listed and read by the same commands in process): only finished tasks
unless --force, a LOCAL note of the removal, positions never repeated, every projection afterwards equal to a
rebuild, a tape refused. Each command's removal, its first refusal and a tape refused run installed; its
further cases (another refusal, a dry run, another bad duration) run in process (:func:`cli_here`)."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

from a2a_tape import store
from a2a_tape.inspection.rebuild import rebuild_all
from tests.conftest import running_sdk_agent
from tests.support.in_process import run_text_in_process

SCRIPT = Path(sys.executable).with_name("a2a-tape")
RECORDINGS = Path(__file__).resolve().parents[3] / "recordings"


def cli(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *map(str, args)], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
    )


def cli_here(*args: object) -> subprocess.CompletedProcess[str]:
    """The same command in this process (tests/support/in_process.py): for what sets a test up or reads its
    log (record, tasks, doctor, grep, import), and the cases of rm and prune beyond their first."""
    return run_text_in_process([str(a) for a in args], timeout=120)


def one_line(run: subprocess.CompletedProcess[str], code: int = 2) -> str:
    assert run.returncode == code, (run.returncode, run.stderr)
    assert "Traceback" not in run.stderr and run.stdout == ""
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    return lines[0]


def record(url: str, text: str, db: Path) -> str:
    run = cli_here("record", url, text, "--db", db, "--json")
    assert run.returncode == 0, run.stderr
    return str(json.loads(run.stdout)["task_id"])


def read_everything(db: Path) -> None:
    """Bring every projection up to date the way users do: list, doctor, search."""
    for args in (["tasks", "--all"], ["doctor"], ["grep", "chunk"]):
        assert cli_here(*args, "--db", db).returncode in (0, 1)


def projections(db: Path) -> dict[str, list[tuple[object, ...]]]:
    tables = {
        "projection_rows": "projection, key, value",
        "task_index": "*",
        "search_index": "body, position, field, task_id, seq, kind, place",
        "doctor_findings": "*",
    }
    with sqlite3.connect(db) as conn:
        return {t: sorted(conn.execute(f"SELECT {cols} FROM {t}").fetchall(), key=repr) for t, cols in tables.items()}


def assert_equal_to_a_rebuild(db: Path, tmp_path: Path) -> None:
    read_everything(db)
    kept = projections(db)
    copy = tmp_path / "rebuilt.db"
    shutil.copy(db, copy)
    with store.open_store(copy) as st:
        rebuild_all(st)
    read_everything(copy)
    assert projections(copy) == kept
    assert all(kept.values())  # something is left to compare


def task_ids(db: Path) -> list[str]:
    return sorted(r["task_id"] for r in json.loads(cli_here("tasks", "--all", "--db", db, "--json").stdout))


def test_rm_and_prune_remove_finished_tasks_and_leave_a_rebuilds_projections(tmp_path):
    db = tmp_path / "log.db"
    with running_sdk_agent() as agent:
        done = [record(agent.url, f"hello {i}", db) for i in range(3)]
        waiting = record(agent.url, "ask me", db)
        last = record(agent.url, "the newest", db)
    read_everything(db)
    with store.open_store(db) as st:
        top = st.last_position()
        exchanges = {t: [x.id for x in st.exchanges(t)] for t in done}

    removed = cli("rm", done[0][:8], done[1], "--db", db, "--json")
    assert removed.returncode == 0, removed.stderr
    doc = json.loads(removed.stdout)
    assert doc["task_ids"] == done[:2] and doc["events"] > 0 and doc["exchanges"] >= 2, doc
    assert task_ids(db) == sorted([done[2], waiting, last])
    with store.open_store(db) as st:
        assert all(st.get_exchange(x) is None for t in done[:2] for x in exchanges[t])
        assert st.read_task(done[0]) == []
        # the removal is noted (LOCAL), after every position ever given: none is given twice
        note = list(st.read_from(top))
        assert len(note) == 1 and note[0].origin == "local" and note[0].position == top + 1
        assert b"a2a-tape rm: removed 2 tasks" in note[0].payload
    assert_equal_to_a_rebuild(db, tmp_path)

    # a task waiting for input is not finished: refused, nothing removed, unless --force
    refused = one_line(cli("rm", waiting, done[2], "--db", db))
    assert refused == (
        f"a2a-tape: error: task {waiting} is not finished (input-required): nothing removed (--force removes it anyway)"
    )
    assert task_ids(db) == sorted([done[2], waiting, last])
    assert one_line(cli_here("rm", "no-such-task", "--db", db)).startswith(
        "a2a-tape: error: unknown task: no-such-task"
    )

    # prune: nothing is older than a day; --dry-run lists what prune would take, takes nothing
    assert cli_here("prune", "--older-than", "1d", "--db", db, "--json").stdout.startswith('{"task_ids":[]')
    dry = json.loads(cli_here("prune", "--dry-run", "--db", db, "--json").stdout)
    assert sorted(dry["task_ids"]) == sorted([done[2], last]) and dry["dry_run"] is True
    assert task_ids(db) == sorted([done[2], waiting, last])
    pruned = cli("prune", "--db", db)
    assert pruned.returncode == 0 and pruned.stderr.startswith("removed 2 tasks ("), pruned.stderr
    assert task_ids(db) == [waiting]
    assert_equal_to_a_rebuild(db, tmp_path)
    forced = cli_here("prune", "--force", "--db", db)
    assert forced.returncode == 0 and task_ids(db) == []
    assert cli_here("doctor", "--db", db).returncode == 0

    # after all that, recording goes on at new positions, and is listed
    with running_sdk_agent() as agent:
        again = record(agent.url, "hello again", db)
    assert task_ids(db) == [again]
    assert_equal_to_a_rebuild(db, tmp_path)


def test_a_tape_and_bad_durations_are_refused_in_one_line(tmp_path):
    tape = tmp_path / "tape.jsonl"
    shutil.copy(RECORDINGS / "sdk-v10-stream.jsonl", tape)
    before = tape.read_bytes()
    for args, run in ((["rm", "eae94752"], cli), (["prune"], cli_here)):
        line = one_line(run(*args, "--db", tape))
        assert line.startswith(f"a2a-tape: error: {tape} is a tape (JSONL): rm and prune change a database"), line
    assert tape.read_bytes() == before
    db = tmp_path / "log.db"
    cli_here("import", tape, "--db", db)
    for bad in ("soon", "-3d", "0", "1y"):  # the first installed
        assert "is not a duration" in one_line(
            (cli if bad == "soon" else cli_here)("prune", "--older-than", bad, "--db", db)
        )
    assert task_ids(db) == ["eae94752-8d54-4221-873c-d1ce09cd1df2"]
    assert one_line(cli_here("rm", "x", "--db", tmp_path / "none.db")).startswith("a2a-tape: error: no database at")
