"""doctor on fresh recordings made by ``a2a-tape record`` from a real a2a-sdk agent, both dialects."""

from __future__ import annotations

import pytest

from tests.conftest import running_sdk_agent
from tests.replay.inspect.conftest import cli


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    db = tmp_path_factory.mktemp("rec") / "rec.db"
    tasks = {}
    with running_sdk_agent() as agent:
        for proto in ("1.0", "0.3"):
            for text in ("hello", "boom"):
                r = cli("record", agent.url, text, "--protocol", proto, "--db", db, "--json")
                assert r.code in (0, 1), r.stderr
                tasks[(proto, text)] = r.json()["task_id"]
    return db, tasks


@pytest.mark.parametrize("proto", ["1.0", "0.3"])
def test_doctor_on_recorded_sessions(recorded, proto):
    db, tasks = recorded
    clean = cli("doctor", tasks[(proto, "hello")], "--db", db, "--json")
    assert clean.code == 0 and clean.json()["findings"] == []
    boom = cli("doctor", tasks[(proto, "boom")], "--db", db, "--json")
    assert boom.code == 1
    found = {f["code"]: f["level"] for f in boom.json()["findings"]}
    assert found["rpc-error"] == "error"
    state = next(
        t["state"] for t in cli("tasks", "--db", db, "--json").json() if t["task_id"] == tasks[(proto, "boom")]
    )
    # the recorder settles a crashed task (a synthetic FAILED): then the early close is a warning
    assert found["closed-while-working"] == ("error" if state in ("submitted", "working") else "warning")


def test_report_of_recorded_sessions(recorded, tmp_path):
    db, tasks = recorded
    out = tmp_path / "r.html"
    assert cli("export", "--all", "--format", "html", "-o", out, "--db", db).code == 0
    page = out.read_text(encoding="utf-8")
    assert page.count('<pre class="final-answer">chunk-0 chunk-1 chunk-2 </pre>') == 2
    assert "agent exploded mid-stream" in page
