"""Verify runs on the task page (issue 32, item 5), in Chromium over the installed ``a2a-tape ui``.

Two tasks, each recorded by ``record`` from a real agent, then verified by the installed ``verify
--json`` against a live a2a-sdk agent: one against another agent than it was recorded from (the
opencode-blocks agent: a divergence), one against the agent it was recorded from (a match), then
again with ``--update`` (its live run is served from then on), then once more (compared with that
run, where the first two were compared with the recording). The
task page lists each verify run as such, with the verdict ``verify`` printed: match, or the first
divergence (its rule and message, the recorded and the live event), and a link to the diff view of
the recorded run and the live one. The UI judges by verify's own rule
(``inspection/verify_runs.py`` calls ``inspection/verify_rules.py``): what it shows is the
``--json`` report's, field by field. The first ``record`` and the first ``verify`` run through the
installed script, the others in this process (tests/support/in_process.py). The tests, which only read
the log, share the module's one ``ui`` on it (``shared_ui``).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.conftest import running_sdk_agent
from tests.docs.harness import reader_env
from tests.replay.inspect.ui.conftest import page_problems
from tests.store.test_runs_export_serve import FIRST, SECOND, _cli
from tests.support.contract_agents import contract_agent


class Verified:
    def __init__(self, db: Path, diverged: dict, matched: dict, adopted: dict, again: dict) -> None:
        self.db, self.diverged, self.matched, self.adopted, self.again = db, diverged, matched, adopted, again


@pytest.fixture(scope="module")
def verified(tmp_path_factory) -> Verified:
    cwd = tmp_path_factory.mktemp("ui-verify")
    env = reader_env(cwd)
    db = cwd / "verify.db"
    reports = []

    def verify(task: str, url: str, exit_code: int, *extra: str, installed: bool = False) -> None:
        line = shlex.join(["verify", task, "--against", url, "--db", str(db), "--json", *extra])
        code, out, err = _cli(line, cwd, env, installed=installed)
        assert code == exit_code, out + err
        reports.extend(json.loads(out)["tasks"])

    with contract_agent() as blocks, running_sdk_agent() as sdk:
        for agent, text, exit_code in ((blocks, "hello blocks", 1), (sdk.url, "hello", 0)):
            installed = agent == blocks  # the first of each through the installed script
            line = shlex.join(["record", agent, text, "--db", str(db), "--json"])
            code, out, err = _cli(line, cwd, env, installed=installed)
            assert code == 0, err
            task = json.loads(out)["task_id"]
            verify(task, sdk.url, exit_code, installed=installed)
        verify(task, sdk.url, 0, "--update")  # its live run is served from then on
        verify(task, sdk.url, 0)  # compared with the run --update adopted
    diverged, matched, adopted, again = reports
    assert [r["verdict"] for r in reports] == ["diverged", "match", "match", "match"], reports
    assert matched["recorded"] == adopted["recorded"] == f"{matched['task_id']}@1", reports
    assert again["recorded"] == adopted["live"][0] == f"{matched['task_id']}@3", reports  # the adopted run
    return Verified(db, diverged, matched, adopted, again)


@pytest.fixture(autouse=True)
def no_page_errors(page: Page) -> Iterator[None]:
    problems = page_problems(page)
    yield
    assert problems == []


def _point(p: dict) -> str:
    return (
        p["run"] + (f" #{p['position']}" if p["position"] is not None else "") + (f" {p['kind']}" if p["kind"] else "")
    )


def test_a_diverged_verify_run_shows_its_first_divergence_and_opens_the_diff(page: Page, shared_ui, verified):
    report = verified.diverged
    task, live = report["task_id"], report["live"][0]
    ui = shared_ui(verified.db)
    page.goto(ui.url)
    page.goto(f"{ui.base}/tasks/{task}")
    cards = page.locator("#runs article.run-card")
    expect(cards).to_have_count(2)
    recorded_card, live_card = cards.nth(0), cards.nth(1)
    expect(recorded_card.locator(".verify-run")).to_have_count(0)  # the recording is no verify run
    expect(recorded_card.locator(".verify-verdict")).to_have_count(0)
    expect(live_card.locator("h4 .verify-run")).to_have_text("verify run")
    expect(live_card.locator("code.selector")).to_have_text(live)

    verdict = live_card.locator(".verify-verdict")
    expect(verdict.locator(".verdict")).to_have_text("diverged")  # verify --json's verdict
    expect(verdict.locator("code.recorded-run")).to_have_text(report["recorded"])
    first = report["first"]
    expect(verdict.locator(".first-divergence code.rule")).to_have_text(first["rule"])
    expect(verdict.locator(".first-divergence .message")).to_have_text(first["message"])
    for side in ("recorded", "live"):
        row = verdict.locator(f"table.divergence tr.{side}")
        expect(row.locator("td").nth(0)).to_have_text(_point(first[side]))
        expect(row.locator("td.what")).to_have_text(first[side]["what"])
    also = [d["rule"] for d in report["divergences"][1:]]
    if also:
        expect(verdict.locator(".also")).to_have_text(f"Also: {', '.join(also)}.")

    # the diff view of the recorded run and the live one, as `diff RECORDED LIVE` compares them
    verdict.locator("a.verify-diff").click()
    expect(page.locator("h2")).to_have_text("Compare two runs")
    expect(page.locator("input[name=a]")).to_have_value(report["recorded"])
    expect(page.locator("input[name=b]")).to_have_value(live)
    expect(page.locator("body")).to_contain_text("The runs differ.")
    expect(page.locator(".diff").first).to_contain_text(FIRST)
    expect(page.locator(".diff").first).to_contain_text(SECOND)


def test_a_matching_verify_run_says_so(page: Page, shared_ui, verified):
    report = verified.matched
    task, live = report["task_id"], report["live"][0]
    ui = shared_ui(verified.db)
    page.goto(ui.url)
    page.goto(f"{ui.base}/tasks/{live}")  # the verify run's own address
    card = page.locator(f"#runs article.run-card[data-run='{live}']")
    expect(card).to_have_class(re.compile(r"\bcurrent\b"))
    verdict = card.locator(".verify-verdict")
    expect(verdict.locator(".verdict")).to_have_text("match")
    expect(verdict.locator("code.recorded-run")).to_have_text(report["recorded"])
    expect(verdict.locator(".first-divergence")).to_have_count(0)
    verdict.locator("a.verify-diff").click()
    expect(page.locator("input[name=a]")).to_have_value(report["recorded"])
    expect(page.locator("input[name=b]")).to_have_value(live)
    assert task in page.url


def test_each_verify_run_is_judged_against_the_run_served_when_it_was_made(page: Page, shared_ui, verified):
    """``verify --update`` made run 3 the one served: the next verify run (4) was compared with it,
    runs 2 and 3 with the recording (run 2 before run 3 was adopted): the page says what the command said."""
    reports = [verified.matched, verified.adopted, verified.again]
    ui = shared_ui(verified.db)
    page.goto(ui.url)
    page.goto(f"{ui.base}/tasks/{verified.again['task_id']}")
    cards = page.locator("#runs article.run-card")
    expect(cards).to_have_count(4)
    expect(cards.locator(".verify-verdict code.recorded-run")).to_have_text([r["recorded"] for r in reports])
    expect(cards.locator(".verify-verdict .verdict")).to_have_text([r["verdict"] for r in reports])
