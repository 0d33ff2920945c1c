"""A lone Message reply (the helloworld agent's shape: no task) in ``a2a-tape ui``, in Chromium:
its list row links to a page that says what it is and shows the answer, as ``tasks`` lists it."""

from __future__ import annotations

import json

from playwright.sync_api import Page, expect

from tests.replay.inspect.ui.conftest import run


def test_a_lone_message_has_a_page(page: Page, serve_ui, sdk_agent, tmp_path):
    db = tmp_path / "hello.db"
    for k, how in enumerate((("--protocol", "0.3", "--no-stream"), ("--protocol", "1.0"))):
        r = run("record", sdk_agent.url, "reply bare", *how, "--db", db, installed=k == 0)  # the second in process
        assert r.returncode == 0, r.stderr
    keys = [row["message_id"] for row in json.loads(run("tasks", "--json", "--db", db, installed=False).stdout)]
    problems: list[str] = []
    page.on("pageerror", lambda exc: problems.append(str(exc)))
    page.on("console", lambda msg: problems.append(msg.text) if msg.type == "error" else None)

    ui = serve_ui(db)
    page.goto(ui.url)
    expect(page.locator("#task-rows tr.message-row")).to_have_count(2)
    page.locator("#task-rows tr.message-row a").first.click()
    expect(page).to_have_url(f"{ui.base}/tasks/{keys[0]}")
    expect(page.locator("h2").first).to_contain_text(f"Message {keys[0]}")
    expect(page.locator("p.summary").first).to_contain_text("A lone Message reply")
    expect(page.get_by_text("direct reply").first).to_be_visible()
    assert "No task" not in page.content() and "unknown" not in page.locator("h2").first.inner_text()

    page.goto(f"{ui.base}/tasks/{keys[1][:10]}")  # a prefix leads to its page, as for a task
    expect(page).to_have_url(f"{ui.base}/tasks/{keys[1]}")
    expect(page.locator("h2").first).to_contain_text(f"Message {keys[1]}")
    assert problems == []
