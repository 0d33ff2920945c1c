"""Two recorders recovering one shared PostgreSQL log at once: every orphan handled exactly once."""

from __future__ import annotations

import json
import subprocess
import sys
import time

from a2a_tape import store
from tests.recorder.proxy.test_recovery import fake_task


def test_two_recover_processes_on_one_postgres_log_fail_each_orphan_once(pg_url):
    ids = [f"orphan-{i}" for i in range(8)]
    with store.open_store(pg_url) as st:
        for tid in ids:
            st.append(store.NewEvent(payload=fake_task(tid), task_id=tid, received_at=time.time()))
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "a2a_tape.cli", "recover", "--json", "--db", pg_url],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    reports = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert "Traceback" not in err
        reports.append(json.loads(out))
    failed = sorted(f["task_id"] for r in reports for f in r["failed"])
    assert failed == ids  # never by two, never by none
    with store.open_store(pg_url) as st:
        for tid in ids:
            local = [e for e in st.read_task(tid) if e.origin == "local"]
            assert len(local) == 1, tid
            assert store.decode_item(local[0].payload).body.state == "failed"
    # and a third run changes nothing
    again = subprocess.run(
        [sys.executable, "-m", "a2a_tape.cli", "recover", "--json", "--db", pg_url],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert json.loads(again.stdout) == {"resumed": [], "failed": [], "replayed": []}
