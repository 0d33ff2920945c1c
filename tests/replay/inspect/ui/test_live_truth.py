"""The UI tells the truth while a task is recorded (issue 37 item 4), in Chromium over the
installed ``a2a-tape ui``, with a real a2a-sdk agent recorded by the installed ``record``.

While its exchange is open a task is being recorded: the page shows the "being recorded" dot and
no ``closed-while-working`` (the stream has not ended); a task that waits for input, its exchange
closed, has no dot. The page shows what the user asked; exchanges are numbered in the task (not by
the log's ids), the agent-card fetch that began the recording among them; numeric cells do not wrap; a failed task's answer is not in the green box of a
final answer; counts are said as people say them (no "(s)").

``record`` of what a test checks the page against runs through the installed script once (the failed
task), in this process otherwise (tests/support/in_process.py), as ``tasks`` and ``doctor`` do; the
``record`` the page watches live and ``ui`` are the installed script.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect

from tests.conftest import running_sdk_agent
from tests.replay.inspect.ui.conftest import SCRIPT, page_problems, run


@pytest.fixture(autouse=True)
def no_page_errors(page: Page) -> Iterator[list[str]]:
    """Every test: the page threw nothing and broke no rule of its Content-Security-Policy."""
    problems = page_problems(page)
    yield problems
    assert problems == []


LINES = """e => {
  const r = document.createRange(); r.selectNodeContents(e);
  return new Set(Array.from(r.getClientRects()).map(x => Math.round(x.top))).size;
}"""


def _record(url: str, db, text: str, *, installed: bool = False) -> dict:
    r = run("record", url, text, "--db", db, "--json", installed=installed)
    assert r.stdout, r.stderr
    return json.loads(r.stdout)


def _findings_loaded(page: Page) -> str:
    findings = page.locator("#findings")
    expect(findings).not_to_contain_text("The doctor is examining")
    return findings.inner_text()


def test_a_task_being_recorded_tells_the_truth_while_live(page: Page, serve_ui, tmp_path):
    db = tmp_path / "live.db"
    with running_sdk_agent() as agent:
        _record(agent.url, db, "hello")  # exchanges before: the log's ids are not the task's numbers
        waiting = _record(agent.url, db, "ask me")["task_id"]  # input-required, its exchange closed
        ui = serve_ui(db)
        page.goto(ui.url)
        page.goto(f"{ui.base}/tasks/{waiting}")
        expect(page.locator("#task-header h2 .state")).to_have_text("input-required")
        expect(page.locator(".live-dot")).to_have_count(0)  # unfinished, but nobody records it now
        expect(page.locator("section.task")).not_to_have_class(re.compile(r"\blive\b"))

        rec = subprocess.Popen(
            [str(SCRIPT), "record", agent.url, "gated many 2", "--db", str(db), "--no-get-task"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            page.goto(ui.url)
            expect(page.locator("#task-rows tr.task-row")).to_have_count(3)
            expect(page.locator("#task-rows tr.task-row").first.locator("td.state")).to_have_text("working")
            page.locator("#task-rows tr.task-row a").first.click()
            expect(page.locator("#task-header h2 .state")).to_have_text("working")
            expect(page.locator("#task-header .live-dot")).to_be_visible()  # its exchange is open now
            # what the user asked, on the page
            expect(page.locator("pre.user-message")).to_have_text("gated many 2")
            # the stream has not ended: no closed-while-working while its exchange is open
            shown = _findings_loaded(page)
            assert "closed-while-working" not in shown, shown
            # the task's exchanges numbered in it, the agent card record fetched first among them
            expect(page.locator("table.exchanges td.method")).to_have_text(["agent-card", "SendStreamingMessage"])
            expect(page.locator("table.exchanges tbody tr td:first-child")).to_have_text(["1", "2"])
            expect(page.locator("#events tr[data-position] td:nth-child(7)").first).to_have_text("2")
            for _ in range(2):
                agent.executor.gate.release()
            expect(page.locator("#task-header h2 .state")).to_have_text("completed")
            expect(page.locator(".live-dot")).to_have_count(0)
        finally:
            for _ in range(2):
                agent.executor.gate.release()
            out, err = rec.communicate(timeout=60)
        assert rec.returncode == 0, err
        task = json.loads(run("tasks", "--json", "--db", db, installed=False).stdout)[0]["task_id"]
        doctor = run("doctor", task, "--db", db, "--json", installed=False)
        assert [f["code"] for f in json.loads(doctor.stdout)["findings"] if f["level"] == "error"] == []
        expect(page.locator("#findings")).not_to_contain_text("closed-while-working")
        # numbers stay on one line, however narrow the page
        page.set_viewport_size({"width": 820, "height": 900})
        for cell in page.locator("table.exchanges td.num, table.timeline td.num").all():
            assert cell.evaluate("e => getComputedStyle(e).whiteSpace") == "nowrap"
            lines = cell.evaluate(LINES)  # the lines its text is laid out on
            assert lines <= 1, (cell.inner_text(), lines)
        text = page.locator("section.task").inner_text()
        assert "(s)" not in text and re.search(r"after \d+ recorded events, from", text), text


def test_a_failed_tasks_answer_is_not_shown_as_a_final_answer(page: Page, serve_ui, tmp_path):
    db = tmp_path / "failed.db"
    with running_sdk_agent() as agent:
        failed = _record(agent.url, db, "boom now", installed=True)
        done = _record(agent.url, db, "hello")
    assert failed["state"] == "failed" and failed["final_answer"] == "chunk-0 "
    ui = serve_ui(db)
    page.goto(ui.url)
    page.goto(f"{ui.base}/tasks/{failed['task_id']}")
    answer = page.locator("#channels .answer")
    expect(answer).to_have_class(re.compile(r"\bnot-completed\b"))
    expect(answer.locator("h3")).to_have_text("The answer streamed before the task ended failed")
    expect(answer.locator("pre.final-answer")).to_have_text("chunk-0 ")
    green = "rgb(238, 247, 238)"  # the final answer's box
    assert answer.locator("pre").evaluate("e => getComputedStyle(e).backgroundColor") != green
    page.goto(f"{ui.base}/tasks/{done['task_id']}")
    expect(page.locator("#channels .answer h3")).to_have_text("Final answer")
    assert page.locator("#channels .answer pre").evaluate("e => getComputedStyle(e).backgroundColor") == green


def test_the_list_fits_a_narrow_window(page: Page, serve_ui, golden_db):
    ui = serve_ui(golden_db)
    page.set_viewport_size({"width": 820, "height": 900})
    page.goto(ui.url)
    expect(page.locator("#task-rows tr.task-row").first).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")
