"""Issue 36, item 5: a proxy stopped by Ctrl-C or SIGTERM after only card reads keeps its database
(the card reads are recordings; only a failed start removes a log this run created). The proxy is
the installed ``a2a-tape``; the agent a real a2a-sdk one."""

from __future__ import annotations

import signal

import httpx
import pytest

from a2a_tape import store
from tests.conftest import running_sdk_agent
from tests.oracles.tape import proxy


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_proxy_stopped_after_only_card_reads_keeps_its_database(tmp_path, sig):
    db = tmp_path / "cards.db"
    with running_sdk_agent() as agent, proxy(agent.url, db, tmp_path / "proxy.log") as p:
        assert httpx.get(p.url + "/.well-known/agent-card.json").status_code == 200
        p.proc.send_signal(sig)
        p.proc.wait(timeout=30)
        said = p.stderr()
    assert "Traceback" not in said, said
    assert db.exists(), said
    with store.open_store(db, readonly=True) as st:
        (ex,) = st.exchanges()
        assert ex.http_method == "GET" and ex.url.endswith("/.well-known/agent-card.json") and ex.status == 200
