"""An acknowledged event survives the recorder being killed (SIGKILL) right after the ack."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from a2a_tape import store

CHILD = r"""
import sys, anyio, store
from a2a_tape.store import GroupCommitWriter, NewEvent

async def producer(w, k):
    n = 0
    while True:
        n += 1
        e = await w.append(NewEvent(payload=b"p%d-%d" % (k, n), task_id="t%d" % k))
        sys.stdout.write("%d %s %d\n" % (e.position, e.task_id, e.seq))
        sys.stdout.flush()

async def main():
    st = store.open_store(sys.argv[1], durability="full")
    async with GroupCommitWriter(st) as w:
        async with anyio.create_task_group() as tg:
            for k in range(8):
                tg.start_soon(producer, w, k)

anyio.run(main)
"""


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_every_acked_event_is_in_the_log_after_sigkill(tmp_path: Path):
    db = tmp_path / "crash.db"
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(db)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=Path(__file__).parents[2],
    )
    watchdog = threading.Timer(60, proc.kill)  # never hang the suite
    watchdog.start()
    acked = []
    try:
        for line in proc.stdout:  # type: ignore[union-attr]
            pos, task, seq = line.split()
            acked.append((int(pos), task.decode(), int(seq)))
            if len(acked) == 400:
                os.kill(proc.pid, signal.SIGKILL)  # mid-stream: batches are still being written
                break
        proc.wait(timeout=30)
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            proc.kill()
    assert len(acked) == 400, proc.stderr.read().decode()[-2000:]  # type: ignore[union-attr]
    with store.open_store(db) as st:
        stored = {e.position: e for e in st.read_from(0)}
        assert st.integrity_check() == "ok"
    for pos, task, seq in acked:
        e = stored[pos]
        assert (e.task_id, e.seq, e.payload) == (task, seq, b"p%s-%d" % (task[1:].encode(), seq))
    assert sorted(stored) == list(range(1, len(stored) + 1))  # no hole, whatever was cut
    by_task: dict[str, list[int]] = {}
    for e in stored.values():
        by_task.setdefault(e.task_id, []).append(e.seq)
    for task, seqs in by_task.items():
        assert sorted(seqs) == list(range(1, len(seqs) + 1)), task  # each producer's prefix, whole
