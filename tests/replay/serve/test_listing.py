"""ListTasks and GetTask's historyLength as an a2a-sdk 1.3.0 agent answers them, for what no recording
answers: side by side, the same request to the live agent and to the replay over a recording of it
gives the same error code, or the same page (task ids in order, pageSize, totalSize, nextPageToken).

Plus the paging rule on its own (Hypothesis): every task once, in order, whatever the page size."""

from __future__ import annotations

import base64
import json

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from a2a_tape.fold.views import RecordedTask
from a2a_tape.recorder.transport import RecordingTransport
from a2a_tape.replay.serve.engine import ReplayEngine
from a2a_tape.replay.serve.library import Library
from a2a_tape.replay.serve.list_tasks import Listed, ListingError, list_page, timestamp_ns
from a2a_tape.replay.serve.server import create_app
from a2a_tape.store import decode_item
from tests.conftest import running_sdk_agent
from tests.replay._record import headers_for, request_body
from tests.support.servers import serve_app

TEXTS = ["hello", "please ask me", "many 2", "hello again", "ask twice", "many 1", "third hello"]


def list_tasks(url: str, params: dict, rpc_id: int = 3) -> dict:
    body = json.dumps({"jsonrpc": "2.0", "id": rpc_id, "method": "ListTasks", "params": params})
    return httpx.post(url + "/", content=body, headers=headers_for("1.0"), timeout=10).json()


def outcome(answer: dict) -> tuple:
    """What must agree: the error code, or the page (ids in order, sizes, the next token)."""
    if "error" in answer:
        return ("error", answer["error"]["code"], answer["id"])
    r = answer["result"]
    page = [(t["id"], t["status"]["state"], len(t.get("history", [])), "artifacts" in t) for t in r["tasks"]]
    return ("page", page, r["pageSize"], r["totalSize"], r["nextPageToken"], answer["id"])


@pytest.fixture(scope="module")
def side_by_side(tmp_path_factory):
    """(live agent URL, replay URL, task ids, one context id): the agent keeps running, its tasks
    are exactly the recorded ones."""
    db = tmp_path_factory.mktemp("listing") / "tape.db"
    with running_sdk_agent() as agent:
        ids, contexts = [], []
        with httpx.Client(transport=RecordingTransport(db), timeout=10) as c:
            for i, text in enumerate(TEXTS):
                op = "stream" if i % 2 else "send"
                r = c.post(agent.url + "/", content=request_body(op, "1.0", text=text), headers=headers_for("1.0"))
                first = r.content.split(b"\r\n\r\n")[0]
                item = decode_item(first[6:] if first.startswith(b"data: ") else first)
                ids.append(item.task_id)
                contexts.append(item.context_id)
        lib = Library.open(db)
        try:
            with serve_app(create_app(ReplayEngine(lib))) as url:
                yield agent.url, url, ids, contexts[2]
        finally:
            lib.close()


def _legacy(task_id: str) -> str:
    return base64.b64encode(task_id.encode()).decode()


CASES = [
    {},
    {"pageSize": 1},
    {"pageSize": 2},
    {"pageSize": 3, "historyLength": 1},
    {"historyLength": 0},
    {"includeArtifacts": True, "pageSize": 2},
    {"status": "TASK_STATE_INPUT_REQUIRED"},
    {"status": "TASK_STATE_COMPLETED", "pageSize": 2},
    {"status": "bogus"},
    {"status": 3},
    {"statusTimestampAfter": "2099-01-01T00:00:00Z"},
    {"statusTimestampAfter": "2000-01-01T00:00:00.5+02:00"},
    {"lastUpdatedAfter": "2099-01-01T00:00:00Z"},  # not a param of a2a-sdk 1.3.0: ignored
    {"pageToken": "bad"},
    {"pageToken": "!!!"},
    {"pageToken": "eyJ0cyI6MSwiaWQiOiIifQ"},  # a cursor with an empty id: treated as a legacy token
    {"pageSize": -1},
    {"pageSize": 0},
    {"pageSize": 101},
    {"pageSize": 100},
    {"pageSize": "x"},
    {"historyLength": -1},
    {"statusTimestampAfter": "yesterday"},
]


@pytest.mark.parametrize("params", CASES, ids=[json.dumps(c) for c in CASES])
def test_list_tasks_answers_as_the_agent(side_by_side, params):
    live, replay, _, _ = side_by_side
    assert outcome(list_tasks(replay, params)) == outcome(list_tasks(live, params))


def test_list_tasks_filters_by_context_and_takes_legacy_tokens(side_by_side):
    live, replay, ids, ctx = side_by_side
    for params in ({"contextId": ctx}, {"pageToken": _legacy(ids[3])}, {"pageToken": _legacy("no-such-task")}):
        assert outcome(list_tasks(replay, params)) == outcome(list_tasks(live, params)), params


@pytest.mark.parametrize("size", [1, 2, 3, 7, 50])
def test_paging_through_every_page_gives_the_agents_pages(side_by_side, size):
    live, replay, ids, _ = side_by_side
    pages = {}
    for name, url in (("live", live), ("replay", replay)):
        token, seen = "", []
        for _ in range(len(ids) + 2):  # bounded: one more page than there can be
            params: dict = {"pageSize": size}
            if token:
                params["pageToken"] = token
            answer = list_tasks(url, params)
            seen.append(outcome(answer))
            token = answer["result"]["nextPageToken"]
            if not token:
                break
        pages[name] = seen
    assert pages["replay"] == pages["live"]
    assert sorted(t for p in pages["replay"] for t, *_ in p[1]) == sorted(ids)


@pytest.mark.parametrize("history_length", [0, 1, 2, 5, -1])
def test_get_task_honours_history_length_as_the_agent(side_by_side, history_length):
    live, replay, ids, _ = side_by_side
    body = json.dumps(
        {"jsonrpc": "2.0", "id": 5, "method": "GetTask", "params": {"id": ids[1], "historyLength": history_length}}
    )
    answers = [httpx.post(u + "/", content=body, headers=headers_for("1.0")).json() for u in (live, replay)]
    if "error" in answers[0]:
        assert answers[1]["error"]["code"] == answers[0]["error"]["code"] == -32602 and answers[1]["id"] == 5
    else:
        assert len(answers[1]["result"].get("history", [])) == len(answers[0]["result"].get("history", []))


# -- the rule on its own -----------------------------------------------------------------------

_tasks = st.lists(
    st.tuples(
        st.uuids().map(str), st.one_of(st.none(), st.integers(0, 10**18)), st.sampled_from(["working", "completed"])
    ),
    max_size=30,
    unique_by=lambda t: t[0],
)


@settings(max_examples=60, deadline=None)
@given(tasks=_tasks, size=st.integers(1, 100))
def test_pages_hold_every_task_once_newest_first(tasks, size):
    listed = [Listed(RecordedTask(task_id=i, context_id="c", state=s, dialect="1.0"), ts) for i, ts, s in tasks]
    got, token = [], None
    for _ in range(len(listed) + 2):
        page = list_page(listed, page_size=size, page_token=token)
        assert page.total_size == len(listed) and page.page_size == size and len(page.tasks) <= size
        got += [t.snapshot.task_id for t in page.tasks]
        token = page.next_page_token
        if not token:
            break
    expected = sorted(listed, key=Listed.sort_key, reverse=True)
    assert got == [t.snapshot.task_id for t in expected]


@given(st.integers(-(10**4), 0))
def test_a_page_size_below_one_is_refused(size):
    with pytest.raises(ListingError, match="minimum page size is 1"):
        list_page([], page_size=size)


def test_timestamps_are_read_to_the_nanosecond_with_their_offset():
    assert timestamp_ns("1970-01-01T00:00:01.000000001Z") == 1_000_000_001
    assert timestamp_ns("1970-01-01T01:00:00+01:00") == 0
    assert timestamp_ns("1970-01-01T00:00:00.5-00:30") == 1_800_500_000_000
    assert timestamp_ns("yesterday") is None and timestamp_ns("2026-02-30T00:00:00Z") is None
