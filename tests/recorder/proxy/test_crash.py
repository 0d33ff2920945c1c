"""Crash safety: the proxy in a subprocess, killed with SIGKILL at a random point of a stream.

After each kill: the database passes ``PRAGMA integrity_check``; every item the client received
is in the log (write-ahead); recovery ends every task completed or FAILED with a reason; a
second recovery changes nothing.

Rounds: 5 by default; set ``A2A_TAPE_CRASH_ROUNDS=N`` for a longer soak and
``A2A_TAPE_CRASH_SEED`` to replay a failing sequence (the seed is in every assertion message).
"""

from __future__ import annotations

import os
import queue
import random
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import msgspec
import pytest
from typer.testing import CliRunner

from a2a_tape import store
from a2a_tape.cli import app
from a2a_tape.recorder.recovery import task_state
from a2a_tape.wire.sse_reader import SseParser
from tests.conftest import running_sdk_agent
from tests.recorder.proxy.conftest import send_body

ROUNDS = int(os.environ.get("A2A_TAPE_CRASH_ROUNDS", "5"))
SEED = int(os.environ.get("A2A_TAPE_CRASH_SEED", str(random.randrange(1 << 30))))
ROOT = Path(__file__).resolve().parents[3]


class ProxyProcess:
    """``a2a-tape proxy`` as a real process (its listening URL read from its first stderr line)."""

    def __init__(self, upstream: str, db: Path) -> None:
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "from a2a_tape.cli import main; main()",
                "proxy",
                upstream,
                "--listen",
                "127.0.0.1:0",
                "--db",
                str(db),
                "--no-recover",
            ],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        lines: queue.Queue[str] = queue.Queue()

        def drain() -> None:
            assert self.proc.stderr is not None
            for raw in self.proc.stderr:
                lines.put(raw.decode(errors="replace"))

        threading.Thread(target=drain, daemon=True).start()
        first = lines.get(timeout=30)
        m = re.search(r"listening on (http://127\.0\.0\.1:\d+)", first)
        assert m, f"unexpected first line from the proxy: {first!r}"
        self.url = m.group(1)

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)  # reaped: recovery must see a dead owner, not a zombie


def _received(url: str, text: str, stop_after: int, proxy: ProxyProcess) -> list[bytes]:
    """Stream through the proxy; SIGKILL it after ``stop_after`` items; what the client got."""
    body, headers = send_body(text)
    got: list[bytes] = []
    parser = SseParser()
    try:
        with httpx.stream("POST", url + "/", content=body, headers=headers, timeout=30) as r:
            if stop_after == 0:
                proxy.kill()
            for chunk in r.iter_bytes():
                for it in parser.feed(chunk):
                    if not it.comment:
                        got.append(it.data)
                        if len(got) == stop_after:
                            proxy.kill()
    except httpx.HTTPError:
        pass  # the proxy died under the client: expected
    if proxy.proc.poll() is None:
        proxy.kill()
    return got


def _recover(db: Path) -> dict:
    r = CliRunner().invoke(app, ["recover", "--db", str(db), "--json", "--stall-timeout", "3"])
    assert r.exit_code == 0, r.stderr
    return msgspec.json.decode(r.stdout)


@pytest.mark.slow
def test_sigkill_at_random_points_never_loses_what_the_client_saw(tmp_path):
    rng = random.Random(SEED)
    db = tmp_path / "crash.db"
    store.open_store(db).close()
    with running_sdk_agent(delay=0.003) as agent:
        for round_no in range(ROUNDS):
            where = f"(seed {SEED}, round {round_no})"
            n = rng.randrange(10, 60)
            proxy = ProxyProcess(agent.url, db)
            got = _received(proxy.url, f"many {n}", rng.randrange(0, n + 3), proxy)

            st = store.open_store(db)
            try:
                assert st.integrity_check() == "ok", where
                logged = {bytes(e.payload) for e in st.read_from(0)}
                missing = [g for g in got if g not in logged]
                assert not missing, f"{len(missing)} items the client saw are not in the log {where}"
            finally:
                st.close()

            report = _recover(db)
            st = store.open_store(db)
            try:
                for te in st.task_events():
                    view = task_state(te.task_id, st.read_task(te.task_id))
                    assert view.state in ("completed", "failed"), f"task {te.task_id} left {view.state} {where}"
                    if view.state == "failed":
                        last = store.decode_item(st.read_task(te.task_id)[-1].payload).body
                        assert last.message is not None and last.message.text, f"FAILED without a reason {where}"
                before = [(e.position, bytes(e.payload)) for e in st.read_from(0)]
            finally:
                st.close()
            again = _recover(db)
            assert again == {"resumed": [], "failed": [], "replayed": []}, f"{again} after {report} {where}"
            st = store.open_store(db)
            try:
                assert [(e.position, bytes(e.payload)) for e in st.read_from(0)] == before, where
            finally:
                st.close()


@pytest.mark.slow
def test_recovery_killed_midway_converges_on_the_next_run(tmp_path):
    """``a2a-tape recover`` itself SIGKILLed while it follows tasks upstream: the next run
    takes over its lease (the owner is dead), ends every task, and a third run changes nothing."""
    from tests.recorder.proxy.test_recovery import seed, stream_prefix

    rng = random.Random(SEED + 1)
    db = tmp_path / "rcrash.db"
    with running_sdk_agent(slow_delay=0.04) as agent:
        for round_no in range(max(1, ROUNDS // 2)):
            where = f"(seed {SEED + 1}, round {round_no})"
            st = store.open_store(db)
            for _ in range(3):
                seed(st, agent.url, stream_prefix(agent.url, "slow many 8", rng.randrange(1, 4)))
            st.close()
            proc = subprocess.Popen(
                [sys.executable, "-c", "from a2a_tape.cli import main; main()", "recover", "--db", str(db)],
                cwd=ROOT,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            try:
                proc.wait(timeout=rng.uniform(0.3, 1.2))  # a random point of its run (or its end)
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGKILL)
                proc.wait(timeout=10)
            st = store.open_store(db)
            try:
                assert st.integrity_check() == "ok", where
            finally:
                st.close()
            _recover(db)
            st = store.open_store(db)
            try:
                for te in st.task_events():
                    events = st.read_task(te.task_id)
                    view = task_state(te.task_id, events)
                    assert view.state in ("completed", "failed"), f"task {te.task_id} left {view.state} {where}"
                    # at most one synthetic end per task; decision notes (resubscribing, cancelling) may be
                    # several, one per run that got to decide before it was killed
                    ends = [
                        e for e in events if e.origin == "local" and not bytes(e.payload).startswith(b'{"a2a-tape"')
                    ]
                    assert len(ends) <= 1, f"{[bytes(e.payload)[:120] for e in events if e.origin == 'local']} {where}"
                before = [(e.position, bytes(e.payload)) for e in st.read_from(0)]
            finally:
                st.close()
            assert _recover(db) == {"resumed": [], "failed": [], "replayed": []}, where
            st = store.open_store(db)
            try:
                assert [(e.position, bytes(e.payload)) for e in st.read_from(0)] == before, where
            finally:
                st.close()


def test_sigterm_mid_stream_marks_the_exchange_incomplete_and_recovery_resumes_it(tmp_path):
    from a2a_tape.recorder.recovery import PROXY_KEY

    db = tmp_path / "term.db"
    store.open_store(db).close()
    with running_sdk_agent(slow_delay=0.08) as agent:
        proxy = ProxyProcess(agent.url, db)
        body, headers = send_body("slow many 40")  # longer than the proxy's 2 s graceful shutdown
        try:
            with httpx.stream("POST", proxy.url + "/", content=body, headers=headers, timeout=30) as r:
                chunks = r.iter_bytes()
                next(chunks)
                proxy.proc.send_signal(signal.SIGTERM)
                for _ in chunks:
                    pass
        except httpx.HTTPError:
            pass  # the proxy went away mid-stream
        proxy.proc.wait(timeout=30)
        st = store.open_store(db)
        try:
            rows = [e for e in st.exchanges() if e.rpc_method]
            assert [e.outcome for e in rows] == ["incomplete"]
            assert st.get_meta(PROXY_KEY) == ""
        finally:
            st.close()
        report = _recover(db)
    assert report["resumed"] == [rows[0].task_id] and report["failed"] == []
