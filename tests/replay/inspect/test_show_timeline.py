"""show for humans: relative time, artifact and channel, append/replace, preview, LOCAL, undecodable raw."""

from __future__ import annotations

from pathlib import Path

from a2a_tape.store import local_failed, local_note
from tests.replay.inspect.builders import Tape, items
from tests.replay.inspect.conftest import cli

RECORDINGS = Path(__file__).resolve().parents[3] / "recordings"


def _wide(*args):
    """Human output on a wide console, so table cells are not folded."""
    from a2a_tape.cli.app import out

    saved = out._width  # None: rich measures the terminal
    out.width = 200
    try:
        return cli(*args)
    finally:
        out._width = saved


def test_show_channels_modes_and_ignored_events(tmp_path):
    db = tmp_path / "g.db"
    assert cli("import", RECORDINGS / "opencode-final-snapshot.jsonl", "--db", db).code == 0
    r = _wide("show", "oc-snap-2", "--db", db)
    assert r.code == 0
    lines = r.stdout.splitlines()
    # not a terminal: the plain layout, one line a row (seq, pos, +s, kind, ...)
    row = lambda pos: next(line for line in lines if line.split()[1:2] == [str(pos)])  # noqa: E731
    assert "+0.000" in row(9) and "submitted" in row(9)
    assert "…:stream [final_answer]" in row(12) and "replace: 'Hel'" in row(12)
    assert "ignored: no message_id" in row(13) and "append: 'lo'" in row(13)
    assert "ignored: user echo" in row(11)
    assert "append (final snapshot), last chunk: 'Hello world!'" in row(15)
    assert "+0.350" in row(16)


def test_show_marks_local_events_errors_and_undecodable_bytes(tmp_path):
    tape = Tape(tmp_path / "t.db")
    it = items("1.0")
    ex = tape.stream(it, [it.task(), it.status("working"), it.artifact("art-1", "partial")])
    tape.add(it.task_id, [b"\xff\xfe garbage \x00"], exchange_id=ex)
    tape.add(
        it.task_id,
        [
            local_note("gave-up", "no progress for 30 s", it.task_id),
            local_failed(it.task_id, it.context_id, "upstream lost the task"),
        ],
        origin="local",
    )
    tape.close()
    r = _wide("show", it.task_id, "--db", tmp_path / "t.db")
    assert r.code == 0
    lines = r.stdout.splitlines()
    local = [line for line in lines if "LOCAL" in line]
    assert len(local) == 2 and all("a2a-tape decision" in line for line in local)
    assert any("gave-up: no progress for 30 s" in line for line in local)
    assert any("failed: upstream lost the task" in line for line in local)
    bad = next(line for line in lines if "undecodable" in line)
    assert "raw: b'\\xff\\xfe garbage \\x00'" in bad
    assert "LOCAL rows were written by a2a-tape itself" in r.stderr
    # the JSON and raw forms are unchanged by the human view
    rows = cli("show", it.task_id, "--db", tmp_path / "t.db", "--json").json()
    assert [row["origin"] for row in rows] == ["upstream"] * 4 + ["local"] * 2
    assert rows[3]["data"] is None and rows[3]["kind"] == "undecodable"
