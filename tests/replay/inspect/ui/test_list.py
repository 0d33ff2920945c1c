"""The UI's task list is what ``a2a-tape tasks`` lists, from the same listing function
(``inspection/listing.keyed_listing``): the tasks and the lone Message replies (a send the
agent answered with a Message that names no task), newest last event first, in the same order,
on every page. A real a2a-sdk agent recorded by ``record`` into one log the module's tests share (its
first send through the installed script, the others in this process: tests/support/in_process.py);
``tasks`` through the installed script for the whole list, in this process for the others; the
installed ``ui``.

Before: the UI read the task index only, so a lone reply showed in ``tasks`` and never in the
browser."""

from __future__ import annotations

import json
import re

import httpx
import pytest

from a2a_tape.inspection.ui import reading
from a2a_tape.store import open_store
from tests.conftest import running_sdk_agent
from tests.replay.inspect.ui.conftest import run

SENDS = ("first task", "reply alone", "second task", "reply alone", "third task")


def _name(row: dict) -> str:
    """The first column of ``tasks`` (its rule for a lone Message: ``message <id>``)."""
    if row["kind"] == "message":
        return f"message {row['message_id'] or row['context_id'] or ''}".strip()
    return row["task_id"]


@pytest.fixture(scope="module")
def log(tmp_path_factory):
    """The module's log (read only by its tests): the SENDS recorded from one real a2a-sdk agent."""
    db = tmp_path_factory.mktemp("list") / "log.db"
    with running_sdk_agent() as agent:
        for k, text in enumerate(SENDS):
            r = run("record", agent.url, text, "--db", db, installed=k == 0)
            assert r.returncode == 0, r.stderr[-2000:]
    return db


def _tasks(db, *args: str, installed: bool = False) -> list[str]:
    r = run("tasks", "--json", "--db", db, *args, installed=installed)
    assert r.returncode == 0, r.stderr
    return [_name(row) for row in json.loads(r.stdout)]


def _listed(html: str) -> list[str]:
    return re.findall(
        r'<tr id="[^"]*" class="task-row[^"]*"><td class="id">(?:<a href="[^"]*">)?<code[^>]*>([^<]*)</code>', html
    )


@pytest.mark.parametrize("query", ["", "?state=completed", "?binding=JSONRPC", "?level=warning"])
def test_the_list_shows_what_tasks_lists_lone_messages_too(log, serve_ui, query):
    expected = _tasks(log, "--state", "completed") if "state" in query else _tasks(log, installed=query == "")
    if "level" in query:  # tasks has no faults filter: a lone reply has no faults, so it is never shown
        expected = [n for n in expected if not n.startswith("message ")]
    elif "state" not in query:
        assert sum(n.startswith("message ") for n in expected) == 2
    ui = serve_ui(log)
    with httpx.Client(base_url=ui.base, cookies={f"a2a_tape_ui_{ui.port}": ui.token}, timeout=30) as c:
        page = c.get("/" + query)
    assert page.status_code == 200
    shown = _listed(page.text)
    if "level" in query:
        assert all(n in expected for n in shown)
    else:
        assert shown == expected


def test_every_page_goes_on_after_the_last_key_shown(log):
    """One row a page: tasks and lone replies interleave across pages exactly as ``tasks`` lists them."""
    expected = _tasks(log)
    st = open_store(str(log), create=False)
    try:
        shown: list[str] = []
        before = None
        for _ in range(len(expected) + 1):
            page = reading.task_list(st, reading.Filters(), before=before, limit=1)
            shown += [r.name for r in page.rows]
            if page.more is None:
                break
            before = page.more
    finally:
        st.close()
    assert shown == expected
