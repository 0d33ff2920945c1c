"""The UI under its run's path prefix (issue 36, item 4), end to end in Chromium over the installed
``a2a-tape ui``: every address a page asks for (its script and styles, the list's filters and pages,
a task's fragments, its event streams, the diff) is under the prefix and answered, and the
demo's printed ``ui`` step opens as printed.

Before the prefix, every address was at the server's root; a URL the UI makes without the prefix
(a template's, ``ui.js``'s, ``web_app.py``'s) is a 404 now, so each one missed fails here.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Page, Request, Response, expect

from tests.docs.harness import Background, reader_env, run_line
from tests.docs.test_demo_steps import DEMO_ANSWER, SCRIPT, printed_steps
from tests.replay.inspect.ui.conftest import page_problems


@pytest.fixture
def asked(page: Page) -> Iterator[tuple[list[str], list[str]]]:
    """Every URL the page asks for, and every answer of 400 or more (URL and status)."""
    urls: list[str] = []
    failed: list[str] = []
    page.on("request", lambda r: urls.append(r.url))

    def answered(r: Response) -> None:
        if r.status >= 400:
            failed.append(f"{r.status} {r.url}")

    page.on("response", answered)
    page.on("requestfailed", lambda r: failed.append(f"failed {r.url}: {r.failure}") if not _aborted(r) else None)
    yield urls, failed


def _aborted(r: Request) -> bool:
    """A request the page gave up as it went on (an event stream as it left, a fragment replaced):
    no answer to judge."""
    return "ERR_ABORTED" in (r.failure or "")


def test_every_address_a_page_asks_for_is_under_the_prefix(page: Page, serve_ui, demo_db, asked):
    problems = page_problems(page)
    urls, failed = asked
    ui = serve_ui(demo_db)
    page.goto(ui.url)
    expect(page.locator("#task-rows tr.task-row")).to_have_count(2)
    page.select_option("select[name=state]", "completed")  # the filters (htmx, the list's own address)
    expect(page).to_have_url(re.compile(re.escape(ui.base) + r"/\?.*state=completed"))

    page.locator("#task-rows tr.task-row a").first.click()  # a task: its fragments and stream
    expect(page.locator("#runs article.run-card")).to_have_count(1)
    expect(page.locator("#findings table.findings")).to_be_visible()
    page.locator("#scrub").fill("2")  # the scrubber's fragment
    expect(page.locator("#scrub-label")).to_contain_text("2")
    page.locator("#events tr[data-position] details.item summary").first.click()  # an item's raw bytes
    expect(page.locator("#events details.item .raw-bytes").first).to_be_visible()
    page.locator("#findings a.to-position").first.click()  # a finding's position (ui.js)
    expect(page.locator("#events tr.current")).to_have_count(1)

    page.locator("header.top a", has_text="Tasks").click()
    page.locator("#task-rows tr.task-row input[name=a]").nth(0).check()
    page.locator("#task-rows tr.task-row input[name=b]").nth(1).check()
    page.get_by_role("button", name="Compare A and B").click()  # the diff, by its form
    expect(page.locator("h2")).to_have_text("Compare two tasks")
    page.locator("p a:has(code)").first.click()  # back to a task from the diff
    expect(page.locator("section.task")).to_be_visible()

    assert urls and all(u.startswith(ui.base + "/") for u in urls), [u for u in urls if not u.startswith(ui.base)]
    assert {urlsplit(u).path.removeprefix(ui.prefix).split("/")[1] for u in urls} >= {
        "",  # the list
        "static",
        "tasks",
        "task",
        "live",
        "diff",
    }
    assert failed == []
    assert problems == []


def test_the_demos_printed_steps_open_the_ui_and_its_list_counts_the_replay_as_a_run(page: Page, tmp_path):
    """``a2a-tape demo``'s next steps, run as printed: the address ``a2a-tape ui`` prints opens the
    demo's task in the browser (the prefix and the token in it); then ``serve`` and ``record`` of the
    replay make a second run of the task (issue 30), and the open list shows it as it comes: two
    runs, a link to each (``/tasks/TASK@N``)."""
    problems = page_problems(page)
    env = reader_env(tmp_path)
    demo = run_line(f"{SCRIPT} demo", tmp_path, env)
    assert demo.returncode == 0, demo.stderr
    steps = {shlex.split(s, comments=True)[1]: s.split("  #", 1)[0].strip() for s in printed_steps(demo.stdout)}
    running = [Background(steps["ui"], tmp_path, env, r"a2a-tape ui: http://")]
    try:
        url = re.search(r"a2a-tape ui: (http://\S+)", running[0].text).group(1)  # type: ignore[union-attr]
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/[A-Za-z0-9_-]{22,}/\?token=[A-Za-z0-9_-]+", url), url
        response = page.goto(url)
        assert response is not None and response.status == 200
        base = url.split("/?", 1)[0]
        assert "token" not in page.url and page.url.startswith(base + "/")
        row = page.locator("#task-rows tr.task-row")
        expect(row).to_have_count(1)
        expect(row.locator("td.runs")).to_have_text("1")  # one run: no links
        task = row.locator("td.id code").inner_text()

        running.append(Background(steps["serve"], tmp_path, env, r"http://127\.0\.0\.1:\d+"))
        recorded = run_line(steps["record"], tmp_path, env)
        assert recorded.returncode == 0, recorded.stdout + recorded.stderr
        # the list, open all along, shows the replay recorded back as the task's second run
        expect(row).to_have_count(1)
        expect(row.locator("td.runs .run-count")).to_have_text("2")
        links = row.locator("td.runs a.run-link")
        expect(links).to_have_text(["@1", "@2"])
        assert [links.nth(k).get_attribute("title") for k in (0, 1)] == [
            "run 1 (client)",
            "run 2 (replay)",  # the replay recorded back: a run of source replay
        ]  # as tasks --json names their sources
        links.nth(0).click()
        expect(page).to_have_url(f"{base}/tasks/{task}@1")
        expect(page.locator("section.task h2 .run-label")).to_have_text("run 1 of 2")
        expect(page.locator("section.task .answer pre.final-answer")).to_have_text(DEMO_ANSWER)
    finally:
        codes = [bg.stop() for bg in running]
    assert codes == [0] * len(running), [bg.text for bg in running]
    assert problems == []
