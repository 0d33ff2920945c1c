"""diff (two tasks, two databases; ids and timestamps normalised) and grep, through the real CLI."""

from __future__ import annotations

import pytest

from tests.conftest import running_sdk_agent
from tests.replay.inspect.builders import Tape, items, record_live
from tests.replay.inspect.conftest import cli
from tests.replay.inspect.recordings import ANSWER, build_opencode


@pytest.fixture(scope="module")
def two_dbs(tmp_path_factory):
    """The same conversation recorded twice from a real agent: every id and timestamp differs."""
    base = tmp_path_factory.mktemp("diff")
    dbs = []
    for name in ("a.db", "b.db"):
        with running_sdk_agent() as agent:
            for dialect in ("1.0", "0.3"):
                record_live(agent.url, "hello", base / name, dialect=dialect)
            record_live(agent.url, "ask", base / name)
        dbs.append(base / name)
    return dbs


def test_same_behaviour_recorded_twice_compares_equal(two_dbs):
    a, b = two_dbs
    r = cli("diff", a, b)
    assert r.code == 0, r.stdout
    assert "recordings are equal" in r.stdout
    doc = cli("diff", a, b, "--json").json()
    assert doc["equal"] is True and len(doc["pairs"]) == 3
    assert all(p["a"] != p["b"] and p["equal"] for p in doc["pairs"])  # different ids, same behaviour


def test_two_tasks_in_one_database(live):
    a, b = live.tasks[("1.0", "hello")], live.tasks[("1.0", "boom")]
    r = cli("diff", a, b, "--db", live.db, "--json")
    assert r.code == 1
    [pair] = r.json()["pairs"]
    assert pair["equal"] is False and "final_answer" in pair["channels"] and pair["events"]
    # a task against itself is equal
    assert cli("diff", a, a, "--db", live.db).code == 0


def _chunks(tmp_path, name, second_chunk, *, dialect="1.0", task_id=None):
    tape = Tape(tmp_path / name)
    it = items(dialect, task_id)
    tape.stream(
        it,
        [
            it.task(user_text="count"),
            it.status("working"),
            it.artifact(f"{it.task_id}:stream", "one "),
            it.artifact(f"{it.task_id}:stream", second_chunk, append=True, last=True),
            it.status("completed"),
        ],
    )
    tape.close()
    return tmp_path / name


def test_a_changed_chunk_differs(tmp_path):
    a = _chunks(tmp_path, "a.db", "two")
    b = _chunks(tmp_path, "b.db", "too")
    same = _chunks(tmp_path, "c.db", "two")
    assert cli("diff", a, same).code == 0  # other task ids (also inside the artifact id), same behaviour
    r = cli("diff", a, b)
    assert r.code == 1 and "recordings differ" in r.stdout
    doc = cli("diff", a, b, "--json").json()
    [pair] = doc["pairs"]
    assert doc["equal"] is False
    assert "-one two" in pair["channels"]["final_answer"] and "+one too" in pair["channels"]["final_answer"]
    assert any(line.startswith("-") and '"two"' in line for line in pair["events"])
    assert any(line.startswith("+") and '"too"' in line for line in pair["events"])
    # the artifact id carried the task id: normalised, so the channel names agree
    assert "artifact <task-1>:stream" in pair["channels"]


def test_unpaired_task_is_a_difference(tmp_path):
    a = _chunks(tmp_path, "a.db", "two")
    tape = Tape(a)
    it = items("1.0")
    tape.stream(it, [it.task(user_text="something else"), it.status("completed")])
    tape.close()
    b = _chunks(tmp_path, "b.db", "two")
    doc = cli("diff", a, b, "--json").json()
    assert doc["equal"] is False
    assert [p["equal"] for p in doc["pairs"]] == [True, False]
    assert doc["pairs"][1]["b"] is None


def test_diff_bad_input(tmp_path):
    a = _chunks(tmp_path, "a.db", "two")
    r = cli("diff", "nope", "nada", "--db", a)
    assert r.code == 2 and r.stderr.startswith("a2a-tape: error: unknown task") and r.stdout == ""


# -- grep -----------------------------------------------------------------------------------------


def test_grep_finds_text_across_tasks_with_positions(live):
    r = cli("grep", "chunk-1", "--db", live.db, "--json")
    assert r.code == 0
    hits = r.json()
    hello = {live.tasks[("1.0", "hello")], live.tasks[("0.3", "hello")]}
    assert {h["task_id"] for h in hits} == hello
    assert all(h["kind"] == "artifact" and h["where"] == "artifact art-1" and "chunk-1" in h["text"] for h in hits)
    shown = cli("show", hits[0]["task_id"], "--json", "--db", live.db).json()
    assert any(row["position"] == hits[0]["position"] and row["seq"] == hits[0]["seq"] for row in shown)
    human = cli("grep", "chunk-1", "--db", live.db)
    assert human.code == 0 and "2 matches" in human.stdout


def test_grep_searches_metadata_data_parts_and_history(tmp_path):
    tape = Tape(tmp_path / "t.db")
    task = build_opencode(tape)
    tape.close()
    db = tmp_path / "t.db"
    where = {h["where"] for h in cli("grep", "calculator", "--db", db, "--json").json()}
    assert where == {f"artifact {task}:stream:tool_call data"}
    meta = cli("grep", "^final_snapshot$", "--db", db, "--json").json()
    assert [h["where"] for h in meta] == [f"artifact {task}:stream metadata source"]
    assert [h["where"] for h in cli("grep", "6\\*7\\?", "--db", db, "--json").json()] == ["history user"]
    assert len(cli("grep", "<SCRIPT>", "-i", "--task", task[:12], "--db", db, "--json").json()) == 2
    assert ANSWER[:10] in cli("grep", "answer is", "--db", db).stdout


def test_grep_no_match_and_bad_pattern(live):
    r = cli("grep", "no such text anywhere", "--db", live.db, "--json")
    assert r.code == 1 and r.json() == []
    bad = cli("grep", "(unclosed", "--db", live.db)
    assert bad.code == 2 and bad.stderr.startswith("a2a-tape: error: bad pattern") and len(bad.stderr.splitlines()) == 1


def test_jsonrpc_ids_timestamps_and_message_ids_are_normalised(tmp_path):
    def build(name, rpc_id, stamp, context):
        tape = Tape(tmp_path / name)
        it = items("0.3")
        it.rpc_id, it.context_id = rpc_id, context
        status = it.status("completed").replace(b"2026-11-30T02:08:56.971579Z", stamp.encode())
        tape.stream(
            it,
            [
                it.task(user_text="hi"),
                it.status("working", "on it, see " + it.task_id),
                it.artifact(f"{it.task_id}:stream", "done", last=True),
                status,
            ],
        )
        tape.close()
        return tmp_path / name

    a = build("a.db", 1, "2026-11-30T02:08:56.971579Z", "ctx-aaaa")
    b = build("b.db", "req-77", "2027-01-01T00:00:00Z", "ctx-bbbb")
    r = cli("diff", a, b, "--json")
    assert r.code == 0, r.stdout  # the task id inside a status message's text is normalised too
    c = build("c.db", 1, "2026-11-30T02:08:56.971579Z", "ctx-aaaa")
    tape = Tape(c)
    it = items("0.3")
    tape.stream(it, [it.task(user_text="hi")])  # a second "hi" in C only: no partner in A
    tape.close()
    doc = cli("diff", a, c, "--json").json()
    assert doc["equal"] is False and [p["equal"] for p in doc["pairs"]] == [True, False]
