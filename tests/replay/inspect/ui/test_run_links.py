"""The list's links to a task's runs (``rows.run_links``): every run of a task of a few; the first and
the last ones of a task of many (the task page has them all); none for a task of one run or a lone
Message reply."""

from __future__ import annotations

import pytest

from a2a_tape.inspection.ui.rows import RUN_LINKS, TaskListRow, run_links


def _row(runs: int, task_id: str | None = "t-1") -> TaskListRow:
    sources = ["client", *(["verify"] * (runs - 1))] if runs else []
    kind = "task" if task_id is not None else "message"
    return TaskListRow(
        task_id, "row-x", None, "completed", 3, 0.0, 1.0, 3, 0, "generic", None, kind=kind, sources=sources
    )


@pytest.mark.parametrize("runs", [0, 1])
def test_one_run_or_none_has_no_links(runs):
    assert run_links(_row(runs)) == []
    assert _row(runs).runs == 1


def test_a_lone_message_reply_has_no_runs():
    row = _row(0, task_id=None)
    assert row.runs == 0 and run_links(row) == []


@pytest.mark.parametrize("runs", range(2, RUN_LINKS + 1))
def test_a_few_runs_are_each_linked(runs):
    got = run_links(_row(runs))
    assert [link.selector for link in got if link is not None] == [f"t-1@{n}" for n in range(1, runs + 1)]
    assert got[0] is not None and got[0].source == "client"


@pytest.mark.parametrize("runs", [RUN_LINKS + 1, 40])
def test_many_runs_link_the_first_and_the_last_ones(runs):
    got = run_links(_row(runs))
    assert got[1] is None and len(got) == RUN_LINKS + 1
    assert [link.number for link in got if link is not None] == [1, *range(runs - RUN_LINKS + 2, runs + 1)]
