"""The HAR export redacts headers by shape again: a log recorded before secrets were found by their
shape (or imported from such a tape) may hold ``Ocp-Apim-Subscription-Key`` or an
``Authentication: Bearer`` in clear; the export does not carry them. The installed CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from a2a_tape import store

CLI = str(Path(sys.executable).with_name("a2a-tape"))


def test_har_export_never_carries_a_secret_shaped_header(tmp_path):
    db = tmp_path / "old.db"
    with store.open_store(db) as st:
        ex = st.begin_exchange(
            store.Exchange(
                url="http://agent/",
                rpc_method="message/send",
                request_headers={"ocp-apim-subscription-key": "SEKRET-1", "x-forward": "Bearer SEKRET-2"},
                response_headers={"x-session-id": "SEKRET-3", "content-type": "application/json"},
                task_id="t-1",
                status=200,
            )
        )
        st.append(
            store.NewEvent(
                payload=b'{"jsonrpc":"2.0","id":1,"result":{"kind":"task","id":"t-1","contextId":"c","status":{"state":"completed"}}}',
                task_id="t-1",
                exchange_id=ex,
            )
        )
    env = {k: v for k, v in os.environ.items() if not k.startswith("A2A_TAPE")}
    r = subprocess.run([CLI, "export", "--all", "--format", "har", "--db", str(db)], capture_output=True, env=env)
    assert r.returncode == 0, r.stderr
    assert b"SEKRET" not in r.stdout and b"application/json" in r.stdout
