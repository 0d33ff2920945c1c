"""Tapes shared by writers: two processes recording into one tape, and pytest-xdist workers, each
write back at the end; none loses another's recordings, a symlinked tape stays a symlink. Before,
each wrote its whole view through the same temporary file: the last one's write won. A real
a2a-sdk 1.3.0 agent is the upstream; the writers are real processes."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest

from a2a_tape import store
from a2a_tape.store.tape import import_tape
from tests.conftest import running_sdk_agent

pytest_plugins = ["pytester"]

TAPE = Path(__file__).parents[1] / "data" / "chunk-agent.jsonl"

WRITER = """
import sys, httpx
from a2a_tape.replay.serve.transport import ReplayTransport
tape, upstream, text = sys.argv[1:4]
body = ('{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"' + text
        + '","role":"ROLE_USER","parts":[{"text":"' + text + '"}]}}}')
transport = ReplayTransport(tape, record_mode="new_episodes", upstream=upstream)
with httpx.Client(transport=transport, base_url="http://agent") as c:
    r = c.post("/", content=body, headers={"A2A-Version": "1.0", "content-type": "application/json"})
    assert r.status_code == 200 and b"TASK_STATE" in r.content, r.content
    print("recorded", flush=True)
    assert sys.stdin.readline() == "save\\n"  # every writer has read the tape and recorded: now write back
print("saved", flush=True)
"""


def _texts(tape: Path, tmp_path: Path) -> list[str]:
    """The message texts of the sends a tape holds."""
    from a2a_tape.replay.serve.library import Library

    lib = Library.open(tape)
    try:
        return sorted(ep.text for ep in lib.episodes)
    finally:
        lib.close()


def _writers(tape_arg: Path, upstream: str, texts: list[str]) -> None:
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(tape_arg), upstream, text],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for text in texts
    ]
    try:
        for p in procs:  # each has read the tape as it was and recorded its own send
            line = p.stdout.readline()
            assert line == "recorded\n", (line, p.stderr.read() if p.poll() is not None else "")
        for p in procs:
            p.stdin.write("save\n")
            p.stdin.flush()
        for p in procs:
            out, err = p.communicate(timeout=60)
            assert p.returncode == 0 and out == "saved\n", err
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()


def test_two_processes_recording_into_one_tape_keep_both(tmp_path):
    tape = tmp_path / "shared.jsonl"
    shutil.copy(TAPE, tape)
    before = _texts(tape, tmp_path)
    with running_sdk_agent() as agent:
        _writers(tape, agent.url, ["from-first", "from-second"])
    assert _texts(tape, tmp_path) == sorted([*before, "from-first", "from-second"])
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
    with store.open_store(tmp_path / "check.db") as st, tape.open("rb") as fh:
        import_tape(st, fh)  # the merged tape is a whole tape


def test_two_serve_processes_recording_into_one_tape_keep_both(tmp_path):
    """Both have read the tape when they start; each records one send; each writes back when stopped."""
    from tests.oracles.tape import running

    tape = tmp_path / "shared.jsonl"
    shutil.copy(TAPE, tape)
    before = _texts(tape, tmp_path)
    with running_sdk_agent() as agent:
        args = ["serve", "--db", str(tape), "--listen", "127.0.0.1:0", "--record-mode", "new_episodes", "--upstream"]
        with running([*args, agent.url], tmp_path / "a.log") as a, running([*args, agent.url], tmp_path / "b.log") as b:
            for proc, text in ((a, "via-serve-a"), (b, "via-serve-b")):
                body = (
                    '{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"'
                    + text
                    + '","role":"ROLE_USER","parts":[{"text":"'
                    + text
                    + '"}]}}}'
                )
                r = httpx.post(
                    proc.url + "/", content=body, headers={"A2A-Version": "1.0", "content-type": "application/json"}
                )
                assert b"TASK_STATE" in r.content, r.content
            assert a.stop() == 0 and b.stop() == 0
    assert _texts(tape, tmp_path) == sorted([*before, "via-serve-a", "via-serve-b"])


def test_a_symlinked_tape_stays_a_symlink(tmp_path):
    real = tmp_path / "store" / "tape.jsonl"
    real.parent.mkdir()
    shutil.copy(TAPE, real)
    os.chmod(real, 0o644)  # a tape committed to a repository: its mode is kept
    link = tmp_path / "link.jsonl"
    link.symlink_to(real)
    with running_sdk_agent() as agent:
        _writers(link, agent.url, ["through-the-link"])
    assert link.is_symlink() and link.resolve() == real
    assert "through-the-link" in _texts(real, tmp_path)
    assert oct(real.stat().st_mode & 0o777) == "0o644"


XDIST_MODULE = """
import os, socket
import httpx
import pytest


def barrier():
    # both workers have opened the tape (the fixture did) before either test ends and writes back
    with socket.create_connection(("127.0.0.1", int(os.environ["BARRIER_PORT"]))) as s:
        assert s.recv(1) == b"g"


def send(transport, text):
    body = ('{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"' + text
            + '","role":"ROLE_USER","parts":[{"text":"' + text + '"}]}}}')
    with httpx.Client(transport=transport, base_url="http://agent") as c:
        r = c.post("/", content=body, headers={"A2A-Version": "1.0", "content-type": "application/json"})
    assert b"TASK_STATE" in r.content


@pytest.mark.a2a_tape("recordings/chunk.jsonl", record_mode="new_episodes")
def test_one(a2a_tape):
    send(a2a_tape.transport, "worker-one")
    barrier()


@pytest.mark.a2a_tape("recordings/chunk.jsonl", record_mode="new_episodes")
def test_two(a2a_tape):
    send(a2a_tape.transport, "worker-two")
    barrier()
"""


def _barrier(parties: int) -> tuple[int, threading.Thread]:
    """A TCP barrier on loopback: answers every party once all ``parties`` have connected."""
    srv = socket.create_server(("127.0.0.1", 0))
    srv.settimeout(120)

    def run() -> None:
        conns = []
        try:
            while len(conns) < parties:
                conns.append(srv.accept()[0])
            for c in conns:
                c.sendall(b"g")
        finally:
            for c in conns:
                c.close()
            srv.close()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return srv.getsockname()[1], t


def test_xdist_workers_recording_into_one_tape_keep_both(pytester, monkeypatch):
    pytest.importorskip("xdist")
    (pytester.path / "recordings").mkdir()
    shutil.copy(TAPE, pytester.path / "recordings" / "chunk.jsonl")
    pytester.makepyfile(test_shared=XDIST_MODULE)
    port, barrier = _barrier(2)
    monkeypatch.setenv("BARRIER_PORT", str(port))
    with running_sdk_agent() as agent:
        monkeypatch.setenv("A2A_TAPE_UPSTREAM", agent.url)
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2")
        result.assert_outcomes(passed=2)
    barrier.join(timeout=10)
    texts = _texts(pytester.path / "recordings" / "chunk.jsonl", pytester.path)
    assert "worker-one" in texts and "worker-two" in texts
