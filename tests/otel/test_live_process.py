"""The live export's own process (recorder/otlp_process.py; issue 34, "Costs"): the proxy hands each ended
exchange's id to a child that builds and sends the spans. What becomes of the recording when that child
dies, when the proxy dies, on a Ctrl-C to the process group, with a PostgreSQL log whose DSN has a
password, and when the child's pipe is full: through the installed CLI and real processes."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from a2a_tape import store
from tests.otel.test_live_export import SCRIPT, _stream, assert_live_is_the_export
from tests.otel.test_live_export import proxy_process as _proxy
from tests.support.otlp_receiver import receiver

pytestmark = pytest.mark.skipif(not SCRIPT.exists(), reason="needs the installed console script")

MODULE = b"a2a_tape.recorder.otlp_process"


def _sender_of(pid: int) -> int:
    """The pid of ``pid``'s live-export child (read from /proc)."""
    found = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        for child in Path(f"/proc/{pid}/task/{tid}/children").read_text().split():
            with contextlib.suppress(OSError):
                if MODULE in Path(f"/proc/{child}/cmdline").read_bytes():
                    found.append(int(child))
    assert len(found) == 1, found
    return found[0]


def _cmdline(pid: int, within: float = 10.0) -> bytes:
    """``pid``'s command line, once its exec is through (while the kernel sets the new program up, it reads
    empty: Popen returns as soon as the exec closed the descriptors it watches)."""
    deadline = time.monotonic() + within
    while not (cmdline := Path(f"/proc/{pid}/cmdline").read_bytes()) and time.monotonic() < deadline:
        time.sleep(0.01)
    return cmdline


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for its parent to reap it has ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _ends(pid: int, within: float = 30.0) -> bool:
    deadline = time.monotonic() + within
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _warnings(lines: list[str]) -> list[str]:
    return [line for line in lines if "warning" in line]


def _events(db: Path | str) -> int:
    with store.open_store(db, create=False) as st:
        return st.count_events()


def test_the_sender_killed_mid_run_stops_no_recording(sdk_agent, tmp_path):
    db = tmp_path / "killed.db"
    with receiver() as got, _proxy([sdk_agent.url, "--otlp-endpoint", got.url, "--db", str(db)]) as (url, proc, lines):
        items = [len(_stream(url, "one"))]
        got.wait_for_spans(1)
        child = _sender_of(proc.pid)
        os.kill(child, signal.SIGKILL)
        assert _ends(child)
        items += [len(_stream(url, "two")), len(_stream(url, "three"))]  # the streams go on
    (warning,) = _warnings(lines)
    assert "OTLP export" in warning and "ended" in warning and got.url in warning
    assert "Traceback" not in "".join(lines)
    assert _events(db) == sum(items)  # the log whole: every item the clients got
    assert not _alive(child)


def test_the_proxy_killed_leaves_no_sender_behind(sdk_agent, tmp_path):
    db = tmp_path / "orphan.db"
    with receiver() as got, _proxy([sdk_agent.url, "--otlp-endpoint", got.url, "--db", str(db)]) as (url, proc, _):
        _stream(url, "one")
        got.wait_for_spans(1)  # the sender runs
        _stream(url, "two")
        child = _sender_of(proc.pid)
        proc.kill()
        proc.wait(timeout=30)
        assert _ends(child), f"the sender {child} outlived its proxy"


def test_ctrl_c_to_the_process_group_still_sends_what_was_queued(sdk_agent, tmp_path):
    db = tmp_path / "ctrl-c.db"
    argv = [sdk_agent.url, "--otlp-endpoint", "", "--db", str(db)]
    with receiver() as got:
        argv[2] = got.url
        with _proxy(argv, start_new_session=True) as (url, proc, lines):
            for n in range(5):
                _stream(url, f"hello {n}")
            child = _sender_of(proc.pid)
            os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: every process of the group
            proc.wait(timeout=60)
        live = got.spans
    assert "Traceback" not in "".join(lines) and not _warnings(lines), lines
    assert len(live) == 5  # queued in the sender (it waits up to a second for more) when the Ctrl-C came
    assert_live_is_the_export(live, str(db))
    assert not _alive(child)


def test_a_postgresql_password_never_reaches_the_senders_command_line(sdk_agent, pg_url, tmp_path):
    secret = "pw-Never-On-Argv-7"
    dsn = pg_url.replace("postgresql://a2a@", f"postgresql://a2a:{secret}@")  # the test server trusts: any password
    assert secret in dsn
    with receiver() as got, _proxy([sdk_agent.url, "--otlp-endpoint", got.url, "--db", dsn]) as (url, proc, lines):
        _stream(url, "hello")
        child = _sender_of(proc.pid)
        cmdline = _cmdline(child)
        (span,) = got.wait_for_spans(1)  # the sender reached the log with the DSN it read from its pipe
    assert secret.encode() not in cmdline and MODULE in cmdline
    assert secret not in "".join(lines) and secret not in repr(span)
    assert not _warnings(lines)


def test_a_full_pipe_never_blocks_and_is_counted(tmp_path, capfd):
    """A sender far behind (stopped here): the ids its pipe does not take are counted, never waited for,
    and said once at the end."""
    from a2a_tape.recorder import otlp_live, otlp_process

    db = tmp_path / "full.db"
    store.open_store(db).close()
    with receiver() as got:
        with store.open_store(db, create=False) as st:
            live = otlp_process.start(st, otlp_live.connect(got.url), "0")
        child = live._proc.pid  # type: ignore[union-attr]
        os.kill(child, signal.SIGSTOP)
        try:
            t0 = time.process_time()
            for i in range(1, 400_001):  # far more than its pipe holds (1 MiB: ~150,000 ids)
                live.ended(i)
            cpu = time.process_time() - t0
        finally:
            os.kill(child, signal.SIGCONT)
        assert 0 < live.skipped < 400_000 and live.lost == 0
        assert cpu < 20.0  # never waited: a write each (seconds of CPU would be a loop stuck retrying)
        live.close()
    err = capfd.readouterr().err
    warnings = _warnings(err.splitlines())
    assert len(warnings) == 1, err
    assert f": {live.skipped} exchange(s) not exported before the end;" in warnings[0], warnings[0]
    assert not _alive(child)


def test_the_sender_runs_this_python(tmp_path):
    """The child is this interpreter with ``-m``: nothing else on its command line."""
    from a2a_tape.recorder import otlp_live, otlp_process

    db = tmp_path / "argv.db"
    store.open_store(db).close()
    with receiver() as got, store.open_store(db, create=False) as st:
        live = otlp_process.start(st, otlp_live.connect(got.url), "0")
        try:
            argv = _cmdline(live._proc.pid).split(b"\0")[:-1]  # type: ignore[union-attr]
        finally:
            live.close()
    assert argv == [sys.executable.encode(), b"-m", MODULE]
