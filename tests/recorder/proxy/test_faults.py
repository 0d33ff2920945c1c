"""Faults are answers: an upstream that goes silent, cuts its stream or sends a body that does not
decode, and a log that cannot be written (locked by another process, a full disk), each give the
client a readable JSON-RPC error (the whole answer, or the last item of a stream under way) or a
cut stream, never a clean end that looks like success; the proxy keeps serving and prints no
traceback."""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import subprocess
import tempfile
from pathlib import Path

import httpx
import pytest

from a2a_tape import store
from tests.conftest import running_sdk_agent
from tests.recorder.proxy.conftest import SettleWatch, read_sse, running_proxy, send_body
from tests.support.fault_agent import make_proxy_fault_app
from tests.support.locks import wait_for_a_lock_waiter, write_lock_held
from tests.support.servers import serve_app


def _error(payload: bytes) -> store.ErrorItem:
    item = store.decode_item(payload)
    assert isinstance(item.body, store.ErrorItem), payload
    return item.body


def _only_row(proxy) -> store.Exchange:
    (ex,) = [e for e in proxy.store.exchanges() if e.rpc_method]
    return ex


@pytest.fixture
def fault_url():
    with serve_app(make_proxy_fault_app()) as url:
        yield url


# -- the upstream -------------------------------------------------------------------------------


def test_corrupt_gzip_answer_is_an_error_with_the_request_id(fault_url, db_path):
    with running_proxy(fault_url, db_path) as proxy:
        watch = SettleWatch(proxy.proxy)
        body, h = send_body("hello", stream=False, rpc_id=41)
        r = httpx.post(proxy.url + "/gzipjson/", content=body, headers=h)
        watch.wait(1)
        ex = _only_row(proxy)
    assert r.status_code == 502
    err = _error(r.content)
    assert store.decode_item(r.content).rpc_id == 41 and "does not decode" in err.message
    assert ex.outcome == "error" and "does not decode" in ex.error and "ExceptionGroup" not in ex.error


def test_corrupt_gzip_stream_ends_with_an_error_item_not_a_clean_end(fault_url, db_path):
    with running_proxy(fault_url, db_path) as proxy:
        watch = SettleWatch(proxy.proxy)
        body, h = send_body("hello", rpc_id=42)
        with httpx.stream("POST", proxy.url + "/gzipsse/", content=body, headers=h) as r:
            items = read_sse(r)
        watch.wait(1)
        ex = _only_row(proxy)
    assert r.status_code == 200 and items, "the client must not get an empty body that ends cleanly"
    last = _error(items[-1])
    assert store.decode_item(items[-1]).rpc_id == 42 and "does not decode" in last.message
    assert ex.outcome == "error" and "does not decode" in ex.error and "ExceptionGroup" not in ex.error


def test_an_upstream_that_never_answers_times_out_on_the_first_byte(fault_url, db_path):
    with running_proxy(fault_url, db_path, first_byte_timeout=0.5) as proxy:
        watch = SettleWatch(proxy.proxy)
        body, h = send_body("hello", stream=False, rpc_id=43)
        r = httpx.post(proxy.url + "/silent/", content=body, headers=h, timeout=30)
        watch.wait(1)
        ex = _only_row(proxy)
    assert r.status_code == 504 and "--first-byte-timeout" in _error(r.content).message
    assert store.decode_item(r.content).rpc_id == 43
    assert ex.outcome == "timeout"


def test_an_upstream_silent_mid_stream_times_out_on_the_read(fault_url, db_path):
    with running_proxy(fault_url, db_path, read_timeout=0.5) as proxy:
        watch = SettleWatch(proxy.proxy)
        body, h = send_body("hello", rpc_id=44)
        with httpx.stream("POST", proxy.url + "/stallbody/", content=body, headers=h, timeout=30) as r:
            items = read_sse(r)
        watch.wait(1)
        ex = _only_row(proxy)
        assert len(proxy.store.read_exchange(ex.id)) == 1  # the item that came is recorded
    assert len(items) == 2 and "--read-timeout" in _error(items[-1]).message
    assert ex.outcome == "timeout"


def test_a_stream_the_upstream_cuts_is_cut_for_the_client(fault_url, db_path):
    """Not a clean end: the client sees the same broken stream the agent gave (so it can resubscribe)."""
    with running_proxy(fault_url, db_path) as proxy:
        watch = SettleWatch(proxy.proxy)
        body, h = send_body("hello")
        got = b""
        with pytest.raises(httpx.RemoteProtocolError):
            with httpx.stream("POST", proxy.url + "/cutsse/", content=body, headers=h) as r:
                for chunk in r.iter_bytes():
                    got += chunk
        watch.wait(1)
        ex = _only_row(proxy)
    assert got.endswith(b"\n\n") and b"working" in got  # the item that came before the cut
    assert ex.outcome == "dropped"


# -- the log ------------------------------------------------------------------------------------


def test_a_locked_log_is_a_json_rpc_error_and_the_proxy_keeps_serving(sdk_agent, db_path, capfd):
    with running_proxy(sdk_agent.url, db_path, busy_timeout=0.3) as proxy:
        with write_lock_held(db_path):
            for stream in (False, True):
                body, h = send_body("hello", stream=stream, rpc_id=45)
                r = httpx.post(proxy.url + "/", content=body, headers=h, timeout=30)
                assert r.status_code == 503 and r.headers["content-type"] == "application/json"
                err = _error(r.content)
                assert store.decode_item(r.content).rpc_id == 45
                assert "cannot write its log" in err.message and "lock" in err.message
        assert sdk_agent.executor.executions == 0  # nothing the log could not take went upstream
        body, h = send_body("hello", stream=False)
        ok = httpx.post(proxy.url + "/", content=body, headers=h)  # the lock is gone: served again
        assert isinstance(store.decode_item(ok.content).body, store.TaskSnapshot)
    captured = capfd.readouterr()
    assert "Traceback" not in captured.err + captured.out


def test_a_request_waiting_for_a_locked_log_does_not_stall_the_others(sdk_agent, db_path):
    """Another process holds the log's write lock (an import, a rebuild): a message's claim waits
    for it (the busy timeout), off the event loop, so meanwhile a request that needs no write (a
    wrong token) is answered at once; once the lock is gone the message goes through."""
    token = "tok-lock-7"
    with running_proxy(sdk_agent.url, db_path, busy_timeout=20, token=token) as proxy:
        auth = {"authorization": f"Bearer {token}"}
        body, h = send_body("hello", stream=False, message_id="m-waits")
        with concurrent.futures.ThreadPoolExecutor(1) as pool, write_lock_held(db_path):
            waiting = pool.submit(httpx.post, proxy.url + "/", content=body, headers={**h, **auth}, timeout=60)
            waiter = wait_for_a_lock_waiter()  # the message's claim waits for the lock
            assert waiter != proxy.loop_thread, "the claim waited for the lock on the proxy's event loop"
            assert not waiting.done()
            refused = httpx.post(proxy.url + "/", content=body, headers=h, timeout=5)  # the loop is free
            assert refused.status_code == 401
            assert not waiting.done()  # still waiting for the lock
        answered = waiting.result(timeout=30)
        assert answered.status_code == 200, answered.text
        assert isinstance(store.decode_item(answered.content).body, store.TaskSnapshot)
    assert sdk_agent.executor.executions == 1


@contextlib.contextmanager
def small_filesystem(size: str = "2m"):
    """A tmpfs of ``size`` mounted for the test (needs root)."""
    if os.geteuid() != 0:
        pytest.skip("the disk-full test mounts a small tmpfs, which needs root")
    where = Path(tempfile.mkdtemp(prefix="a2a-tape-full-"))
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace').strip()}")
        try:
            yield where
        finally:
            subprocess.run(["umount", "-l", str(where)], check=False)
    finally:
        with contextlib.suppress(OSError):
            where.rmdir()


def _fill(directory: Path) -> Path:
    """Write a file until the file system is full; return it (delete it to free the room)."""
    filler = directory / "filler"
    block = b"\0" * 4096
    with filler.open("wb", buffering=0) as fh:
        with contextlib.suppress(OSError):
            while True:
                fh.write(block)
    return filler


def test_a_full_disk_ends_the_stream_with_an_error_item_and_the_proxy_keeps_serving(capfd):
    with small_filesystem() as fs, running_sdk_agent(slow_delay=0.2) as agent:
        db = fs / "tape.db"
        with running_proxy(agent.url, db) as proxy:
            watch = SettleWatch(proxy.proxy)
            body, h = send_body("slow many 8", rpc_id=46)
            with httpx.stream("POST", proxy.url + "/", content=body, headers=h, timeout=30) as r:
                it = r.iter_bytes()
                first = next(it)  # the stream is under way, recorded so far
                filler = _fill(fs)
                rest = b"".join(it)
            watch.wait(1)
            items = read_sse_bytes(first + rest)
            last = _error(items[-1])
            assert store.decode_item(items[-1]).rpc_id == 46
            assert "cannot write its log" in last.message and "full" in last.message
            assert store.decode_item(items[-2]).body.state != "completed"  # not a clean end
            filler.unlink()
            again, h = send_body("hello", stream=False)
            ok = httpx.post(proxy.url + "/", content=again, headers=h)
            assert isinstance(store.decode_item(ok.content).body, store.TaskSnapshot)
            assert proxy.store.integrity_check() == "ok"
    captured = capfd.readouterr()
    assert "Traceback" not in captured.err + captured.out


def read_sse_bytes(data: bytes) -> list[bytes]:
    from a2a_tape.wire.sse_reader import SseParser

    p = SseParser()
    return [it.data for it in p.feed(data) + p.close() if not it.comment]
