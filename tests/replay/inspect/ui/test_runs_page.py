"""A task's runs in the UI (issue 30 item 3), in Chromium over the installed ``a2a-tape ui``.

The task has two runs that differ (tests/store/test_runs_export_serve.py: ``record`` of an
opencode-blocks agent whose task store doubles the answer, then ``verify`` against the plain
a2a-sdk agent). Its page shows both side by side, each with the agent's stored copy as evidence,
the latest run below them unless the address names another (``/tasks/TASK@N``, the CLI's
notation), a link per pair of runs to the diff view, and a 404 page for a selector that names no run.
``tasks --runs --json`` through the installed script for the first test, the other commands that read
the log in this process (tests/support/in_process.py); ``ui``, the proxy and ``record`` installed. The
tests that only read the two-run log share the module's one ``ui`` on it (``shared_ui``).
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import ConsoleMessage, Page, expect

from tests.conftest import running_sdk_agent
from tests.docs.harness import Background, reader_env
from tests.replay.inspect.ui.conftest import run
from tests.store.test_runs_export_serve import A2A, FIRST, SECOND, two_runs

PROXY_READY = r"http://127\.0\.0\.1:\d+"


@pytest.fixture(autouse=True)
def no_page_errors(page: Page) -> Iterator[list[str]]:
    problems: list[str] = []
    page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))

    def console(msg: ConsoleMessage) -> None:
        if msg.type == "error" and "401" not in msg.text and "404" not in msg.text:
            problems.append(f"console: {msg.text}")

    page.on("console", console)
    yield problems
    assert problems == []


@pytest.fixture(scope="module")
def runs_db(tmp_path_factory) -> tuple[Path, str]:
    cwd = tmp_path_factory.mktemp("ui-runs")
    db = cwd / "runs.db"
    task, _ = two_runs(db, cwd)
    return db, task


def _runs(db: Path, *, installed: bool = False) -> list[dict]:
    r = run("tasks", "--runs", "--json", "--db", db, installed=installed)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_a_task_of_two_runs_shows_them_side_by_side_the_latest_below(page: Page, shared_ui, runs_db):
    db, task = runs_db
    listed = _runs(db, installed=True)
    ui = shared_ui(db)
    page.goto(ui.url)
    page.locator("#task-rows tr.task-row a").first.click()
    cards = page.locator("#runs article.run-card")
    expect(cards).to_have_count(2)
    expect(page.locator("#runs h3")).to_have_text("2 runs")
    for card, want in zip((cards.nth(0), cards.nth(1)), listed, strict=True):
        expect(card.locator("code.selector")).to_have_text(want["run"])  # the CLI's notation
        expect(card.locator("dd.source")).to_have_text(want["source"])
        expect(card.locator("dd.binding")).to_contain_text("JSONRPC")
        expect(card.locator("dd.upstream")).to_have_text(want["upstream"].rstrip("/"))
        expect(card.locator("dd.host")).to_have_text(want["host"])
        expect(card.locator("dd.final-state .state")).to_have_text(want["state"])
        expect(card.locator("pre.run-answer")).to_have_text(want["final_answer"])
    # the stored copy of each, marked as evidence: run 1's agent doubled the answer in its store
    first, second = cards.nth(0), cards.nth(1)
    expect(first.locator(".stored-copy .evidence")).to_have_text("evidence")
    expect(first.locator("pre.stored-answer")).to_have_text(FIRST + FIRST)
    expect(first.locator("ul.differences")).to_contain_text("holds the streamed text twice")
    expect(second.locator(".same-as-stream")).to_be_visible()
    # the latest run by default, below the cards
    expect(second).to_have_class(re.compile(r"\bcurrent\b"))
    expect(page.locator("section.task h2 .run-label")).to_have_text("run 2 of 2")
    expect(page.locator("section.task .answer pre.final-answer")).to_have_text(SECOND)

    # run 1 by its address, as the CLI names it
    first.locator("h4 a").click()
    expect(page).to_have_url(f"{ui.base}/tasks/{task}@1")
    expect(page.locator("section.task h2 .run-label")).to_have_text("run 1 of 2")
    expect(page.locator("section.task .answer pre.final-answer")).to_have_text(FIRST)
    expect(page.locator("#findings table.findings")).to_contain_text("stored-copy-differs")
    expect(page.locator("#runs article.run-card").nth(0)).to_have_class(re.compile(r"\bcurrent\b"))
    # a prefix with a selector goes to the whole id's run
    page.goto(f"{ui.base}/tasks/{task[:8]}@2")
    expect(page).to_have_url(f"{ui.base}/tasks/{task}@2")

    # the pair's link: the diff view compares the two runs as `diff TASK@1 TASK@2` does
    page.locator("#runs a.run-pair").click()
    expect(page.locator("h2")).to_have_text("Compare two runs")
    expect(page.locator("body")).to_contain_text("The runs differ.")
    expect(page.locator("input[name=a]")).to_have_value(f"{task}@1")
    # a changed line marks the words that differ, not the whole line
    changed = [line for line in page.locator(".diff.events div.chg").all() if line.locator("mark.word").count()]
    assert changed
    for line in changed:
        marked = "".join(line.locator("mark.word").all_inner_texts())
        assert 0 < len(marked) < len(line.inner_text()), line.inner_text()
    r = run("diff", f"{task}@1", f"{task}@2", "--db", db, installed=False)
    assert r.returncode == 1, r.stdout + r.stderr  # the command says they differ too


@pytest.mark.parametrize(
    ("address", "says"),
    [
        ("{task}@9", "has 2 runs"),
        ("{task}@x", "bad run selector"),
        ("{task}@0", "bad run selector"),
        ("no-such-task@1", "No task 'no-such-task'"),
    ],
)
def test_a_selector_that_names_no_run_is_a_404_page(page: Page, shared_ui, runs_db, address, says):
    db, task = runs_db
    ui = shared_ui(db)
    page.goto(ui.url)
    response = page.goto(f"{ui.base}/tasks/{address.format(task=task)}")
    assert response is not None and response.status == 404
    expect(page.locator("p.notice")).to_contain_text(says)
    assert "Traceback" not in page.content()
    response = page.goto(f"{ui.base}/diff?a={task}@1&b={address.format(task=task)}")
    assert response is not None and response.status == 404
    expect(page.locator("p.notice")).to_contain_text(says)


def test_a_task_of_one_run_shows_its_run_and_stored_copy(page: Page, serve_ui, demo_db):
    ui = serve_ui(demo_db)
    page.goto(ui.url)
    page.locator("#task-rows tr.task-row a").first.click()
    card = page.locator("#runs article.run-card")
    expect(card).to_have_count(1)  # loaded after the page
    expect(page.locator("#runs h3")).to_have_text("1 run")
    expect(card.locator("dd.source")).to_have_text("client")
    expect(card.locator(".stored-copy .evidence")).to_be_visible()
    expect(card.locator("pre.stored-answer")).to_contain_text("a2a-tape keeps every raw A2A stream event")
    expect(page.locator("#runs a.run-pair")).to_have_count(0)
    expect(page.locator("#scrubber")).to_be_visible()  # the live page, as before
    # the artifacts table agrees with doctor on lastChunk (the stored copy closes nothing)
    task = page.locator("section.task").get_attribute("data-task")
    doctor = json.loads(run("doctor", task, "--json", "--db", demo_db, installed=False).stdout)
    never = [f["message"].split()[1] for f in doctor["findings"] if f["code"] == "artifact-not-closed"]
    assert never  # the demo agent never closes its reasoning artifact, on purpose
    for row in page.locator("table.artifacts tbody tr").all():
        name, closed = row.locator("td").nth(0).inner_text(), row.locator("td").nth(2).inner_text()
        assert closed == ("no" if name in never else "yes"), (name, closed, never)


def test_two_runs_recorded_at_once_update_live(page: Page, serve_ui, tmp_path):
    """A proxy and ``record`` through it, one log: two runs of one task, both being recorded while
    the page is open (an agent that waits for the test before each chunk); the page follows both."""
    env = reader_env(tmp_path)
    db = tmp_path / "live.db"
    with running_sdk_agent() as agent:
        proxy = Background(f"{A2A} proxy {agent.url} --listen 127.0.0.1:0 --db '{db}'", tmp_path, env, PROXY_READY)
        rec = None
        try:
            url = re.search(r"http://127\.0\.0\.1:\d+", proxy.text).group(0)  # type: ignore[union-attr]
            rec = subprocess.Popen(
                [str(A2A), "record", url, "gated many 2", "--db", str(db)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            task = _two_runs_appear(db)
            ui = serve_ui(db)
            page.goto(ui.url)
            page.goto(f"{ui.base}/tasks/{task}")
            cards = page.locator("#runs article.run-card")
            expect(cards).to_have_count(2)
            expect(cards.locator("dd.source")).to_have_text(["proxy", "client"])
            expect(cards.locator("dd.final-state .state")).to_have_text(["working", "working"])
            expect(cards.nth(1).locator("dd.final-state")).to_contain_text("(being recorded)")
            for _ in range(2):
                agent.executor.gate.release()
            # the page follows the log: both runs end, the latest shown below them
            expect(cards.locator("dd.final-state .state")).to_have_text(["completed", "completed"])
            expect(page.locator("section.task h2 .state")).to_have_text("completed")
            expect(page.locator("section.task .answer pre.final-answer")).to_have_text("chunk-0 chunk-1 ")
            expect(page.locator("#runs .same-as-stream")).to_have_count(2)  # each run's GetTask: the same
        finally:
            for _ in range(2):
                agent.executor.gate.release()
            if rec is not None:
                out, err = rec.communicate(timeout=60)
                assert rec.returncode == 0, err
            assert proxy.stop() == 0, proxy.text


def _two_runs_appear(db: Path) -> str:
    """The task once the log holds both runs of it (the proxy's and the client's first events)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        r = run("tasks", "--runs", "--json", "--db", db, installed=False)
        found = json.loads(r.stdout) if r.returncode == 0 and r.stdout.strip() else []
        if len(found) == 2:
            return found[0]["task_id"]
        time.sleep(0.05)  # a poll's pace (in this process a look costs little: it would spin)
    raise AssertionError("the proxy and the client never both recorded the task")


@pytest.mark.parametrize(
    "query", ["", "?q=hello", "?state=completed&binding=JSONRPC"], ids=["list", "search", "filters"]
)
def test_the_list_shows_each_tasks_runs_and_links_to_each(page: Page, shared_ui, runs_db, query):
    """The task list's runs column (issue 30): how many runs ``tasks --json`` counts, a link to each
    (``/tasks/TASK@N``) named by its source, on the list, a search and a filtered list alike."""
    db, task = runs_db
    listed = {r["task_id"]: r for r in json.loads(run("tasks", "--json", "--db", db, installed=False).stdout)}
    assert listed[task]["runs"] == 2 and listed[task]["sources"] == ["client", "verify"]
    ui = shared_ui(db)
    page.goto(ui.url)
    page.goto(f"{ui.base}/{query}")
    row = page.locator("#task-rows tr.task-row", has=page.locator("td.id code", has_text=task))
    expect(row.locator("td.runs .run-count")).to_have_text(str(listed[task]["runs"]))
    links = row.locator("td.runs a.run-link")
    expect(links).to_have_text(["@1", "@2"])
    assert [links.nth(k).get_attribute("title") for k in (0, 1)] == ["run 1 (client)", "run 2 (verify)"]
    links.nth(1).click()
    expect(page).to_have_url(f"{ui.base}/tasks/{task}@2")
    expect(page.locator("section.task h2 .run-label")).to_have_text("run 2 of 2")
    expect(page.locator("section.task .answer pre.final-answer")).to_have_text(SECOND)
