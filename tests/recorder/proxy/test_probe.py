"""``a2a-tape probe``: a bare a2a-sdk 1.3.0 agent fails the idempotency probe; behind the proxy it passes."""

from __future__ import annotations

import msgspec
from typer.testing import CliRunner

from a2a_tape import store
from a2a_tape.cli import app
from tests.recorder.proxy.conftest import running_proxy
from tests.support.servers import closed_port


def _probe(url: str, db) -> tuple[int, dict]:
    r = CliRunner().invoke(app, ["probe", url, "--json", "--db", str(db), "--timeout", "10"])
    return r.exit_code, msgspec.json.decode(r.stdout)


def test_bare_sdk_agent_fails_the_duplicate_probe(sdk_agent, tmp_path):
    db = tmp_path / "probe.db"
    code, doc = _probe(sdk_agent.url, db)
    assert code == 1 and doc["ok"] is False
    probes = {p["name"]: p for p in doc["probes"]}
    assert set(probes) == {"duplicate-message", "dropped-stream", "stall"}
    assert probes["duplicate-message"]["ok"] is False
    assert "created two tasks" in probes["duplicate-message"]["detail"]
    assert probes["dropped-stream"]["ok"] is True
    # every probe exchange is recorded for inspection
    st = store.open_store(db)
    rows = st.exchanges()
    assert rows and {e.role for e in rows} == {"probe"}
    assert {"message/send", "SendMessage"} & {e.rpc_method for e in rows}
    assert len(st.task_events()) >= 4  # two duplicate tasks, the dropped one, the stalled one


def test_every_probe_passes_through_the_proxy(sdk_agent, tmp_path):
    with running_proxy(sdk_agent.url, tmp_path / "proxy.db") as proxy:
        code, doc = _probe(proxy.url, tmp_path / "probe.db")
    assert code == 0, doc
    assert doc["ok"] is True and all(p["ok"] for p in doc["probes"])
    assert "same task" in {p["name"]: p for p in doc["probes"]}["duplicate-message"]["detail"]


def test_probe_of_nothing_is_bad_input_with_a_readable_detail(tmp_path):
    """Nothing answers: no probe could run, so it is bad input (exit 2), like `record` of a closed port;
    --json still prints the document, and stderr has one line."""
    code, doc = _probe(f"http://127.0.0.1:{closed_port()}", tmp_path / "p.db")
    assert code == 2
    assert doc["ok"] is False
    assert doc["probes"][0]["name"] == "agent-card" and "cannot connect" in doc["probes"][0]["detail"]
    r = CliRunner().invoke(app, ["probe", f"http://127.0.0.1:{closed_port()}", "--db", str(tmp_path / "q.db")])
    assert r.exit_code == 2
    assert r.stderr.strip().splitlines() == [r.stderr.strip()] and r.stderr.startswith(
        "a2a-tape: error: not an A2A agent"
    )


def test_probe_human_output(sdk_agent, tmp_path):
    r = CliRunner().invoke(app, ["probe", sdk_agent.url, "--db", str(tmp_path / "p.db"), "--timeout", "10"])
    assert r.exit_code == 1
    assert "FAIL duplicate-message" in r.stdout and "ok   dropped-stream" in r.stdout
