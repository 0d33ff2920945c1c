"""Trace context and lineage on the task page (issue 34, items 3 and 4), in Chromium over the
installed ``a2a-tape ui``.

Three real a2a-sdk agents in a chain, A calls B calls C, each behind its own proxy recording into
one log (``tests/otel/test_chain.py``'s chain): once passing W3C trace context on (the client
sends a ``traceparent``, the proxies continue it), once passing nothing (the log infers the calls:
``capture/lineage.py``, basis ``timing``). The middle task's page shows the trace context each
exchange carried, as ``tasks --json`` lists it, and links its parent and its child, as ``tasks
--json`` names them (the one rule: ``inspection/listing.py``), the inferred ones marked inferred.

A recording is untrusted: trace context read from a hostile tape (markup, a terminal escape) shows
as text. Built by hand: no HTTP client sends a control character in a header (h11 refuses it),
but a tape from elsewhere can hold anything.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from a2a_tape.store import Exchange
from tests.otel.test_chain import CLIENT_TP, _chain
from tests.replay.inspect.builders import Tape, items
from tests.replay.inspect.ui.conftest import ESCAPES, page_problems, run

CHAINS = {
    "trace-context": ("trace", {"client_header": CLIENT_TP, "inject_traceparent": True, "continue_traceparent": True}),
    "inferred": ("nothing", {}),
}


@pytest.fixture(scope="module")
def chains(tmp_path_factory) -> dict[str, Path]:
    made = {}
    for name, (passes, opts) in CHAINS.items():
        db = tmp_path_factory.mktemp(f"chain-{name}") / "chain.db"
        _chain(db, passes, 1, **opts)
        made[name] = db
    return made


@pytest.fixture(autouse=True)
def no_page_errors(page: Page) -> Iterator[None]:
    problems = page_problems(page)
    yield
    assert problems == []


@pytest.mark.parametrize("chain", CHAINS)
def test_the_middle_hop_shows_its_trace_context_and_links_its_parent_and_child(page: Page, serve_ui, chains, chain):
    db = chains[chain]
    listed = json.loads(run("tasks", "--json", "--db", db, installed=chain == "trace-context").stdout)
    assert len(listed) == 3
    [middle] = [r for r in listed if r.get("parent") and r.get("children")]
    inferred = middle.get("parent_inferred")
    assert (inferred is None) == (chain == "trace-context"), middle
    ui = serve_ui(db)
    page.goto(ui.url)
    page.goto(f"{ui.base}/tasks/{middle['task_id']}")

    lineage = page.locator("#lineage")
    expect(lineage.locator("dd.parent a code")).to_have_text(middle["parent"])
    expect(lineage.locator("dd.children a code")).to_have_text(middle["children"])
    if inferred:
        expect(lineage.locator("dd.parent .inferred")).to_have_text(f"inferred: {inferred}")
        expect(lineage.locator("dd.children .inferred")).to_have_count(len(middle["children"]))
    else:
        expect(lineage.locator(".inferred")).to_have_count(0)

    traces = middle.get("trace_context", [])
    assert bool(traces) == (chain == "trace-context")
    shown = page.locator("table.trace-context tbody tr")
    expect(shown).to_have_count(len(traces))
    for k, t in enumerate(traces):
        row = shown.nth(k)
        for name in ("traceparent", "tracestate", "baggage"):
            expect(row.locator(f"td.{name}")).to_have_text(t.get(name) or "")
        if t.get("sent"):  # the proxy went on with the client's trace, its own span as the parent
            expect(row.locator("td.how")).to_contain_text(t["sent"])

    # the links open the parent's page and the child's, each naming the middle task back
    lineage.locator("dd.parent a").click()
    expect(page).to_have_url(f"{ui.base}/tasks/{middle['parent']}")
    expect(page.locator("#lineage dd.children a code")).to_have_text([middle["task_id"]])
    expect(page.locator("#lineage dd.parent")).to_have_text("none")
    page.go_back()
    page.locator("#lineage dd.children a").first.click()
    expect(page).to_have_url(f"{ui.base}/tasks/{middle['children'][0]}")
    expect(page.locator("#lineage dd.parent a code")).to_have_text(middle["task_id"])


def test_a_task_alone_has_no_lineage_section(page: Page, serve_ui, demo_db):
    ui = serve_ui(demo_db)
    page.goto(ui.url)
    page.locator("#task-rows tr.task-row a").first.click()
    expect(page.locator("section.task")).to_be_visible()
    expect(page.locator("#lineage")).to_have_count(0)
    expect(page.locator("table.trace-context")).to_have_count(0)


HOSTILE = {
    "traceparent": "00-<script>window.__hit=1</script>-01",
    "tracestate": '<img src=x onerror="window.__hit=2">',
    "baggage": ESCAPES,
}


def test_hostile_trace_context_shows_as_text(page: Page, serve_ui, tmp_path):
    tape = Tape(tmp_path / "hostile-trace.db")
    it = items("1.0", "task-hostile-trace")
    ex = tape.store.begin_exchange(
        Exchange(
            started_at=tape.clock,
            url="http://127.0.0.1:9/",
            rpc_method="SendStreamingMessage",
            dialect="1.0",
            streaming=True,
            request_headers={"content-type": "application/json", **HOSTILE},
            request_body=b'{"jsonrpc":"2.0","id":1,"method":"SendStreamingMessage"}',
            status=200,
            content_type="text/event-stream",
            outcome="closed",
            task_id=it.task_id,
        )
    )
    tape.add(it.task_id, [it.task("submitted"), it.status("completed")], exchange_id=ex)
    tape.close()
    ui = serve_ui(tape.path)
    page.goto(ui.url)
    page.goto(f"{ui.base}/tasks/{it.task_id}")
    row = page.locator("table.trace-context tbody tr")
    expect(row).to_have_count(1)
    expect(row.locator("td.traceparent")).to_have_text(HOSTILE["traceparent"])
    expect(row.locator("td.tracestate")).to_have_text(HOSTILE["tracestate"])
    expect(row.locator("td.baggage")).to_have_text("\\x1b[31mred alert\\x1b[0m and \\u202eevil")  # shown, not acting
    expect(row.locator("td.baggage .ctl")).to_have_count(3)
    assert row.locator("script, img").count() == 0
    assert page.evaluate("window.__hit") is None
