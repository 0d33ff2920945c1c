"""Golden recordings: each tape imported into a fresh database, ``channels --json`` compared with
the expected file, and a digest of every projected view (a replay determinism check)."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
from typer.testing import CliRunner

from a2a_tape.cli import app
from a2a_tape.fold.projection import Projector, TaskView, views_digest
from a2a_tape.store import open_store
from a2a_tape.store.tape import import_tape

RECORDINGS = Path(__file__).resolve().parents[2] / "recordings"
TAPES = sorted(RECORDINGS.glob("*.jsonl"))
runner = CliRunner()


def test_every_tape_has_an_expected_file_and_a_readme_line():
    assert len(TAPES) >= 12
    readme = (RECORDINGS / "README.md").read_text()
    for tape in TAPES:
        assert (RECORDINGS / f"{tape.stem}.expected.json").is_file(), tape.name
        assert f"`{tape.name}`" in readme


@pytest.mark.parametrize("tape", TAPES, ids=[t.stem for t in TAPES])
def test_channels_json_matches_expected(tape, tmp_path):
    db = str(tmp_path / "g.db")
    res = runner.invoke(app, ["import", str(tape), "--db", db])
    assert res.exit_code == 0, res.output
    expected = json.loads((RECORDINGS / f"{tape.stem}.expected.json").read_text())
    assert expected
    for want in expected:
        res = runner.invoke(app, ["channels", want["task_id"], "--db", db, "--json"])
        assert res.exit_code == 0, res.output
        assert json.loads(res.stdout) == want


def test_projection_digest_of_all_recordings(tmp_path):
    views: list[TaskView] = []
    for i, tape in enumerate(TAPES):
        with open_store(tmp_path / f"{i}.db") as st, tape.open("rb") as fh:
            import_tape(st, fh)
            proj = Projector(st)
            proj.catch_up()
            views.extend(proj.views())
    assert views_digest(views) == (RECORDINGS / "projections.sha256").read_text().strip()


def test_all_tapes_in_one_log_project_as_each_alone(tmp_path):
    """Tasks never bleed into each other: one database holding every tape gives the same views."""
    with open_store(tmp_path / "all.db") as st:
        for tape in TAPES:
            with tape.open("rb") as fh:
                import_tape(st, fh)
        proj = Projector(st)
        proj.catch_up()
        got = {v.task_id: v for v in proj.views()}
    for tape in TAPES:
        for want in json.loads((RECORDINGS / f"{tape.stem}.expected.json").read_text()):
            view = got[want["task_id"]]
            # positions differ in a shared log; the content must not
            assert view.final_answer == want["final_answer"]
            assert view.state == want["state"]
            assert [msgspec.to_builtins(a) for a in view.artifacts] == want["artifacts"]
            assert [msgspec.to_builtins(t) for t in view.tool_calls] == want["tool_calls"]
