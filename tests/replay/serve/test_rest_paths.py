"""Issue 36, item 6, on serve's HTTP+JSON binding (the installed ``a2a-tape serve``, httpx):
a query integer past any int64 is a clean 400, never an internal error; a path is routed by the
``/``s the client sent, a percent-encoded one (``%2F``) never decoded into a separator first."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.oracles.tape import serve

TAPE = Path(__file__).parents[3] / "recordings" / "sdk-v10-stream.jsonl"
TASK = "eae94752-8d54-4221-873c-d1ce09cd1df2"  # the task it holds
V1 = {"A2A-Version": "1.0"}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    with serve(TAPE, tmp_path_factory.mktemp("serve") / "serve.log") as s:
        yield s.url


@pytest.mark.parametrize("digits", [5000, 30])
def test_a_history_length_of_thousands_of_digits_is_a_clean_400(served, digits):
    r = httpx.get(f"{served}/tasks/{TASK}?historyLength={'9' * digits}", headers=V1)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["status"] == "INVALID_ARGUMENT" and "historyLength" in error["message"]
    assert "internal error" not in r.text


def test_a_percent_encoded_slash_is_not_a_path_separator(served):
    assert httpx.get(f"{served}/tasks/{TASK}", headers=V1).status_code == 200
    r = httpx.get(f"{served}/tasks%2F{TASK}", headers=V1)
    assert r.status_code == 404 and "no such resource" in r.text
    r = httpx.get(f"{served}/tenant/tasks%2F{TASK}", headers=V1)
    assert r.status_code == 404
    # one segment, decoded as a field: the task id "x/y" (unknown), not the route /tasks/x/y
    r = httpx.get(f"{served}/tasks/{TASK}%2Fextra", headers=V1)
    assert r.status_code == 404 and r.json()["error"]["status"] == "NOT_FOUND", r.text
