"""``a2a-tape ui`` in a real browser (Chromium, driven by Playwright) over real recordings: the
golden recordings, the demo agent's, hand-built hostile ones, and a live ``record`` while the page
is open. What a person sees is what is checked: rows, panels, the scrubber, text as text. A log the
tests only read is served by one ``ui`` for the module (``shared_ui``), each test in a browser
context of its own.

The commands a test reads the log with (``tasks``, ``grep``, ``diff``) or prepares it with (``record``
before the page opens) run in this process (tests/support/in_process.py), but ``tasks`` for the
list's order, through the installed script; ``ui`` and the ``record`` the page watches live are the
installed script."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect

from a2a_tape import store
from a2a_tape.fold.fold import fold_task_events
from a2a_tape.inspection.ui.render import CLIP
from tests.conftest import running_sdk_agent
from tests.replay.inspect.recordings import ANSWER, REASONING
from tests.replay.inspect.ui.conftest import ESCAPES, HUGE, HUGE_TAIL, SCRIPT, Hostile, page_problems, run

OUR_SCRIPTS = 3  # htmx, its SSE extension, ui.js


@pytest.fixture(autouse=True)
def no_page_errors(page: Page) -> Iterator[list[str]]:
    """Every test: the page threw nothing and broke no rule of its Content-Security-Policy."""
    problems = page_problems(page)
    yield problems
    assert problems == []


def tasks_json(db, *args: str, installed: bool = False) -> list[str]:
    r = run("tasks", "--json", "--db", db, *args, installed=installed)
    assert r.returncode == 0, r.stderr
    return [t["task_id"] for t in json.loads(r.stdout) if t["task_id"] is not None]


def listed(page: Page) -> list[str]:
    return page.locator("#task-rows tr.task-row td.id code").all_inner_texts()


# -- the list ------------------------------------------------------------------------------------


def test_the_list_shows_every_task_newest_first(page: Page, shared_ui, golden_db):
    ui = shared_ui(golden_db)
    expected = tasks_json(golden_db, installed=True)
    page.goto(ui.url)
    expect(page.locator("#task-rows tr.task-row")).to_have_count(len(expected))
    assert listed(page) == expected  # the order of `tasks` (newest last event first)
    assert "token" not in page.url  # the token went into a cookie, out of the address bar


def test_a_filter_narrows_the_list(page: Page, shared_ui, golden_db):
    ui = shared_ui(golden_db)
    page.goto(ui.url)
    failed = tasks_json(golden_db, "--state", "failed")
    assert failed and len(failed) < len(tasks_json(golden_db))
    page.locator("select[name=state]").select_option("failed")
    expect(page.locator("#task-rows tr.task-row")).to_have_count(len(failed))
    assert listed(page) == failed
    assert "state=failed" in page.url  # the filtered list has an address of its own


def test_the_search_finds_tasks_by_the_text_of_their_events(page: Page, shared_ui, golden_db):
    ui = shared_ui(golden_db)
    r = run("grep", "need more input", "--json", "--db", golden_db, installed=False)
    wanted = sorted({m["task_id"] for m in json.loads(r.stdout)})
    assert wanted
    page.goto(ui.url)
    page.locator("#q").fill("need more input")
    page.locator("#q").press("Enter")
    expect(page.locator("#task-rows tr.task-row")).to_have_count(len(wanted))
    assert sorted(listed(page)) == wanted
    expect(page.locator("#task-rows .match").first).to_contain_text("need more input")


# -- one task --------------------------------------------------------------------------------------


def test_the_demo_task_shows_its_waterfall_answer_reasoning_and_tool_call(page: Page, shared_ui, demo_db):
    ui = shared_ui(demo_db)
    page.goto(ui.url)
    page.locator("#task-rows tr.task-row a").first.click()
    # the agent card record fetched first, the stream, then the GetTask record asks once after it
    # (the agent's own answer, kept), numbered in the task
    expect(page.locator("table.exchanges tbody tr")).to_have_count(3)
    expect(page.locator("table.exchanges td.method")).to_have_text(
        ["agent-card", "SendStreamingMessage", "GetTask (a client decision)"]
    )
    expect(page.locator("table.exchanges tbody tr td:first-child")).to_have_text(["1", "2", "3"])
    answer = page.locator(".answer pre.final-answer")
    expect(answer).to_have_count(1)
    expect(answer).to_contain_text("a2a-tape keeps every raw A2A stream event")
    expect(page.locator("details.reasoning")).not_to_have_attribute("open", "")
    expect(page.locator("table.tool-calls")).to_contain_text("read_file")
    expect(page.locator("#events tr[data-position]")).to_have_count(13)  # the stream's 11, the note, GetTask's
    expect(page.locator("#findings table.findings")).to_contain_text("answer-shown-twice")


def test_a_task_page_shows_the_answer_once_and_the_reasoning_folded(page: Page, shared_ui, hostile: Hostile):
    ui = shared_ui(hostile.db)
    page.goto(ui.url)
    page.goto(f"{ui.base}/tasks/{hostile.opencode}")
    panel = page.locator("#channels .answer")
    expect(panel.locator("pre.final-answer")).to_have_text(ANSWER)  # the final snapshot did not double it
    assert panel.inner_text().count("42 & counting") == 1
    reasoning = page.locator("details.reasoning")
    expect(reasoning).not_to_have_attribute("open", "")
    expect(reasoning.locator("pre")).to_be_hidden()
    assert reasoning.locator("pre").text_content() == REASONING
    reasoning.locator("summary").click()
    expect(reasoning.locator("pre")).to_be_visible()
    tools = page.locator("table.tool-calls")
    headers = tools.locator("th").all_inner_texts()
    cells = dict(zip(headers, tools.locator("tbody tr").first.locator("td").all_inner_texts()))
    assert cells["tool"] == "calculator" and cells["status"] == "completed" and cells["output / error"] == "42"


def test_recorded_markup_and_escape_sequences_show_as_text(page: Page, shared_ui, hostile: Hostile):
    ui = shared_ui(hostile.db)
    page.goto(ui.url)
    page.goto(f"{ui.base}/tasks/{hostile.opencode}")
    expect(page.locator("pre.final-answer")).to_contain_text("<script>alert(1)</script>")
    assert page.locator("script").count() == OUR_SCRIPTS  # the recorded one is text, not an element
    assert page.locator("details.reasoning pre b").count() == 0
    page.goto(f"{ui.base}/tasks/{hostile.escapes}")
    shown = page.locator("pre.final-answer").inner_text()
    assert shown == ESCAPES.replace("\x1b", "\\x1b").replace("\u202e", "\\u202e")
    assert "\x1b" not in page.content() and "\u202e" not in page.content()


def test_a_huge_answer_shows_its_ends_and_the_whole_is_a_link_away_as_plain_text(
    page: Page, shared_ui, hostile: Hostile
):
    ui = shared_ui(hostile.db)
    page.goto(ui.url)
    page.goto(f"{ui.base}/tasks/{hostile.huge}")
    answer = page.locator("pre.final-answer")
    shown = answer.inner_text()
    assert shown.startswith("0123456789") and shown.endswith(HUGE_TAIL)
    assert f"{HUGE - CLIP:,} characters not shown here" in shown and len(shown) < CLIP + 200
    link = page.get_by_role("link", name=re.compile("the whole answer"))
    response = page.request.get(ui.origin + link.get_attribute("href"))  # an address under the prefix
    assert (
        response.headers["content-type"].startswith("text/plain")
        and response.headers["x-content-type-options"] == "nosniff"
    )
    assert len(response.text()) == HUGE and response.text().endswith(HUGE_TAIL)


def test_the_scrubber_shows_the_answer_at_a_middle_position(page: Page, shared_ui, hostile: Hostile):
    ui = shared_ui(hostile.db)
    with store.open_store(hostile.db, readonly=True) as st:
        events = st.read_task(hostile.opencode)
    total = len(events)
    page.goto(ui.url)
    page.goto(f"{ui.base}/tasks/{hostile.opencode}")
    for n in (7, 8, 2):  # the first half of the answer; both halves; no answer yet
        expected = fold_task_events(hostile.opencode, events[:n]).view().final_answer
        page.locator("#scrub").fill(str(n))
        expect(page.locator("#scrub-label")).to_have_text(re.compile(rf"after event {n} of {total} "))
        if expected is None:
            expect(page.locator("#channels .answer pre")).to_have_count(0)
        else:
            expect(page.locator("#channels pre.final-answer")).to_have_text(expected)
        expect(page.locator(f"#ev-{events[n - 1].position}")).to_have_class(re.compile(r"\bcurrent\b"))
    assert fold_task_events(hostile.opencode, events[:7]).view().final_answer == ANSWER[: len(ANSWER) // 2]
    page.locator("button.play[data-speed='10']").click()  # play from here to the end, 10x
    expect(page.locator("#scrub-label")).to_have_text(re.compile(rf"after event {total} of {total} "), timeout=20_000)
    expect(page.locator("#channels pre.final-answer")).to_have_text(ANSWER)


def test_an_item_shows_its_raw_bytes_and_decoded_json(page: Page, shared_ui, hostile: Hostile):
    ui = shared_ui(hostile.db)
    with store.open_store(hostile.db, readonly=True) as st:
        ev = st.read_task(hostile.opencode)[6]
    page.goto(ui.url)
    page.goto(f"{ui.base}/tasks/{hostile.opencode}")
    row = page.locator(f"#ev-{ev.position}")
    row.locator("details.item summary").click()
    expect(row.locator(".raw-bytes")).to_have_text(bytes(ev.payload).decode())
    expect(row.locator(".decoded")).to_contain_text('"artifactUpdate": {')


def test_the_doctors_findings_link_to_their_positions(page: Page, shared_ui, hostile: Hostile):
    ui = shared_ui(hostile.db)
    page.goto(ui.url)
    page.goto(f"{ui.base}/tasks/{hostile.opencode}")
    finding = page.locator("#findings table.findings tr", has_text="answer-shown-twice")
    link = finding.locator("a.to-position").first
    position = link.inner_text()
    link.click()
    expect(page.locator("#scrub-label")).to_contain_text(f"(position {position},")
    expect(page.locator(f"#ev-{position}")).to_have_class(re.compile(r"\bcurrent\b"))


# -- diff --------------------------------------------------------------------------------------------


def test_two_demo_runs_compare_equal_and_a_failed_task_differs(page: Page, shared_ui, demo_db, golden_db):
    ui = shared_ui(demo_db)
    a, b = tasks_json(demo_db)
    page.goto(ui.url)
    page.locator(f"input[name=a][value='{a}']").check()
    page.locator(f"input[name=b][value='{b}']").check()
    page.get_by_role("button", name="Compare A and B").click()
    expect(page.locator("body")).to_contain_text("The two tasks behaved the same.")
    r = run("diff", a, b, "--db", demo_db, installed=False)
    assert r.returncode == 0  # as the command says
    ui2 = shared_ui(golden_db)
    [done] = tasks_json(golden_db, "--state", "completed")[:1]
    [failed] = tasks_json(golden_db, "--state", "failed")[:1]
    page.goto(ui2.url)
    page.goto(f"{ui2.base}/diff?a={done}&b={failed}")
    expect(page.locator("body")).to_contain_text("The tasks differ.")
    expect(page.locator(".diff.events .chg, .diff.events .del, .diff.events .add").first).to_be_visible()


# -- who may look ----------------------------------------------------------------------------------


def test_without_the_token_the_browser_gets_nothing(page: Page, shared_ui, demo_db):
    ui = shared_ui(demo_db)
    response = page.goto(ui.base + "/")
    assert response is not None and response.status == 401
    assert "task" not in page.content().lower().replace("a2a-tape ui", "")
    response = page.goto(ui.base + "/?token=not-the-token")
    assert response is not None and response.status == 401


# -- live ----------------------------------------------------------------------------------------------


def _record(url: str, db, text: str) -> subprocess.Popen[str]:
    """``record`` of the stream alone (no GetTask after it: the page is checked event by event)."""
    return subprocess.Popen(
        [str(SCRIPT), "record", url, text, "--db", str(db), "--no-get-task"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_task_being_recorded_updates_live(page: Page, serve_ui, tmp_path, backend, request):
    db = tmp_path / "live.db" if backend == "sqlite" else request.getfixturevalue("pg_url")
    with running_sdk_agent() as agent:
        first = run("record", agent.url, "hello", "--db", db, installed=False)
        assert first.returncode == 0, first.stderr
        ui = serve_ui(db)
        page.goto(ui.url)
        expect(page.locator("#task-rows tr.task-row")).to_have_count(1)
        rec = _record(agent.url, db, "gated many 3")
        try:
            # the new task comes to the top of the list while it is recorded, without a reload
            expect(page.locator("#task-rows tr.task-row")).to_have_count(2)
            expect(page.locator("#task-rows tr.task-row").first.locator("td.state")).to_have_text("working")
            page.locator("#task-rows tr.task-row a").first.click()
            expect(page.locator("#task-header h2 .state")).to_have_text("working")
            expect(page.locator("#events tr[data-position]")).to_have_count(2)
            for i in range(3):  # each chunk the agent sends is on the page, answer and row
                agent.executor.gate.release()
                # (the last chunk comes with the final status: two rows)
                expect(page.locator("#events tr[data-position]")).to_have_count(3 + i if i < 2 else 6)
                expect(page.locator("#channels pre.final-answer")).to_have_text(
                    "".join(f"chunk-{k} " for k in range(i + 1))
                )
            expect(page.locator("#task-header h2 .state")).to_have_text("completed")
            expect(page.locator("#events tr[data-position]")).to_have_count(6)
            expect(page.locator("#scrub-label")).to_contain_text("after event 6 of 6")
        finally:
            for _ in range(3):
                agent.executor.gate.release()
            out, err = rec.communicate(timeout=60)
        assert rec.returncode == 0, err
