"""Startup recovery against real a2a-sdk agents: resume, FAIL with a reason, idempotent, no doubles."""

from __future__ import annotations

import time

import anyio
import httpx
import msgspec
from typer.testing import CliRunner

from a2a_tape import store
from a2a_tape.cli import app
from a2a_tape.recorder.recovery import recover, task_state
from tests.conftest import running_sdk_agent
from tests.recorder.proxy.conftest import read_sse, running_proxy, send_body
from tests.support.servers import closed_port


def seed(st: store.SqliteStore, url: str, payloads: list[bytes]) -> str:
    """A log that stops mid-task (as after a crash): these payloads, recorded from ``url``."""
    ex_id = st.begin_exchange(
        store.Exchange(
            started_at=time.time(),
            url=url + "/",
            rpc_method="message/stream",
            dialect="0.3",
            streaming=True,
            role="proxy",
        )
    )
    task_id = store.decode_item(payloads[0]).task_id
    st.append_batch(
        [store.NewEvent(payload=p, task_id=task_id, exchange_id=ex_id, received_at=time.time()) for p in payloads]
    )
    return task_id


def stream_prefix(url: str, text: str, n: int) -> list[bytes]:
    """The first ``n`` items of a real stream; then the client drops it."""
    body, headers = send_body(text)
    with httpx.stream("POST", url + "/", content=body, headers=headers) as r:
        return read_sse(r, limit=n)


def snapshot(st: store.SqliteStore) -> list[tuple]:
    return [(e.position, e.task_id, e.seq, bytes(e.payload)) for e in st.read_from(0)]


def fake_task(task_id: str, state: str = "working") -> bytes:
    return b'{"jsonrpc":"2.0","id":1,"result":{"kind":"task","id":"%s","contextId":"c1","status":{"state":"%s"}}}' % (
        task_id.encode(),
        state.encode(),
    )


def test_task_the_upstream_finished_is_resumed_and_a_second_run_changes_nothing(sdk_agent, db_path):
    st = store.open_store(db_path)
    task_id = seed(st, sdk_agent.url, stream_prefix(sdk_agent.url, "hello", 2))
    report = anyio.run(recover, st)
    assert report.resumed == [task_id] and report.failed == []
    assert task_state(task_id, st.read_task(task_id)).state == "completed"
    before = snapshot(st)
    again = anyio.run(recover, st)
    assert again == type(again)()  # nothing to do
    assert snapshot(st) == before


def test_running_task_is_followed_by_resubscribe_to_its_end(db_path):
    with running_sdk_agent(slow_delay=0.15) as agent:
        st = store.open_store(db_path)
        task_id = seed(st, agent.url, stream_prefix(agent.url, "slow many 5", 2))
        report = anyio.run(recover, st)
    assert report.resumed == [task_id]
    events = st.read_task(task_id)
    assert task_state(task_id, events).state == "completed"
    methods = {e.rpc_method for e in st.exchanges() if e.role == "recovery"}
    assert {"tasks/get", "tasks/resubscribe"} <= methods
    texts = [store.decode_item(e.payload).body for e in events]
    assert any(isinstance(b, store.ArtifactUpdate) and b.artifact.text == "chunk-4 " for b in texts)


def test_task_the_upstream_does_not_know_fails_with_a_reason(sdk_agent, db_path):
    st = store.open_store(db_path)
    seed(st, sdk_agent.url, [fake_task("t-unknown")])
    report = anyio.run(recover, st)
    assert [f.task_id for f in report.failed] == ["t-unknown"]
    assert "upstream no longer knows the task" in report.failed[0].reason
    last = st.read_task("t-unknown")[-1]
    assert last.origin == "local"
    body = store.decode_item(last.payload).body
    assert body.state == "failed" and "no longer knows" in body.message.text


def test_no_upstream_and_upstream_down_fail_with_readable_reasons(db_path):
    st = store.open_store(db_path)
    st.append(store.NewEvent(payload=fake_task("t-orphan"), task_id="t-orphan", received_at=time.time()))
    report = anyio.run(recover, st)
    assert report.failed[0].reason.startswith("recorder restarted and no upstream is known")
    seed(st, "http://127.0.0.1:9", [fake_task("t-down")])
    report = anyio.run(lambda: recover(st, f"http://127.0.0.1:{closed_port()}"))
    assert [f.task_id for f in report.failed] == ["t-down"]
    assert "cannot connect" in report.failed[0].reason


def test_interrupted_and_terminal_tasks_are_left_alone(db_path):
    st = store.open_store(db_path)
    for tid, state in (("t-ask", "input-required"), ("t-done", "completed"), ("t-no", "rejected")):
        st.append(store.NewEvent(payload=fake_task(tid, state), task_id=tid, received_at=time.time()))
    before = snapshot(st)
    assert anyio.run(recover, st) == type(anyio.run(recover, st))()
    assert snapshot(st) == before


def test_stalled_task_is_cancelled_and_failed(db_path):
    with running_sdk_agent(slow_delay=30) as agent:
        st = store.open_store(db_path)
        task_id = seed(st, agent.url, stream_prefix(agent.url, "slow", 2))
        t0 = time.monotonic()
        report = anyio.run(lambda: recover(st, stall_timeout=0.5))
        assert time.monotonic() - t0 < 10
    assert [f.task_id for f in report.failed] == [task_id]
    assert "made no progress" in report.failed[0].reason
    assert "tasks/cancel" in {e.rpc_method for e in st.exchanges()}
    assert task_state(task_id, st.read_task(task_id)).state in ("failed", "canceled")


def test_two_recoveries_at_once_do_not_double_anything(db_path):
    st1 = store.open_store(db_path)
    st2 = store.open_store(db_path)
    ids = [f"t-{i}" for i in range(5)]
    for tid in ids:
        st1.append(store.NewEvent(payload=fake_task(tid), task_id=tid, received_at=time.time()))
    reports = []

    async def main():
        async with anyio.create_task_group() as tg:
            for st in (st1, st2):
                tg.start_soon(lambda s=st: _run(s))

    async def _run(st):
        reports.append(await recover(st))

    anyio.run(main)
    failed = sorted(f.task_id for r in reports for f in r.failed)
    assert failed == ids
    for tid in ids:
        local = [e for e in st1.read_task(tid) if e.origin == "local"]
        assert len(local) == 1


def test_in_flight_keys_of_a_dead_process_are_settled(db_path):
    st = store.open_store(db_path)
    ex_with = st.begin_exchange(store.Exchange(url="http://127.0.0.1:9/", role="proxy"))
    ex_without = st.begin_exchange(store.Exchange(url="http://127.0.0.1:9/", role="proxy"))
    st.append(store.NewEvent(payload=fake_task("t-k", "completed"), task_id="t-k", exchange_id=ex_with))
    old = time.time() - 5
    st.idem_claim(store.IdempotencyRecord("msg:a", "h", ex_with, created_at=old, expires_at=old + 3600))
    st.idem_claim(store.IdempotencyRecord("msg:b", "h", ex_without, created_at=old, expires_at=old + 3600))
    report = anyio.run(recover, st)
    assert report.replayed == ["msg:a"]
    held = {r.key: r for r in st.idem_all()}
    assert (held["msg:a"].state, held["msg:a"].task_id) == ("done", "t-k")
    assert held["msg:b"].state == "lost"
    assert anyio.run(recover, st).replayed == []


def test_recover_cli_json(sdk_agent, db_path):
    st = store.open_store(db_path)
    seed(st, sdk_agent.url, [fake_task("t-gone")])
    st.close()
    r = CliRunner().invoke(app, ["recover", "--db", str(db_path), "--json"])
    assert r.exit_code == 0, r.stderr
    doc = msgspec.json.decode(r.stdout)
    assert set(doc) >= {"resumed", "failed", "replayed"}
    assert doc["failed"][0]["task_id"] == "t-gone" and doc["failed"][0]["reason"]
    r2 = CliRunner().invoke(app, ["recover", "--db", str(db_path), "--json"])
    assert msgspec.json.decode(r2.stdout) == {"resumed": [], "failed": [], "replayed": []}
    r3 = CliRunner().invoke(app, ["recover", "--db", str(db_path)])
    assert "nothing to recover" in r3.stdout


def test_recover_cli_missing_db_is_one_line(tmp_path):
    r = CliRunner().invoke(app, ["recover", "--db", str(tmp_path / "nope.db")])
    assert r.exit_code == 2 and "no database" in r.stderr and "Traceback" not in r.stderr


def test_proxy_recovers_at_startup(sdk_agent, db_path):
    st = store.open_store(db_path)
    task_id = seed(st, sdk_agent.url, stream_prefix(sdk_agent.url, "hello", 2))
    st.close()
    with running_proxy(sdk_agent.url, db_path, recover_on_start=True) as proxy:
        assert proxy.proxy.recovered.wait(15)
        assert proxy.proxy.recovery_report.resumed == [task_id]
        assert task_state(task_id, proxy.store.read_task(task_id)).state == "completed"


def test_lease_of_a_dead_recovery_is_taken_over_a_live_one_is_respected(db_path, tmp_path):
    import socket
    import subprocess
    import sys

    from a2a_tape.recorder.recovery import LEASE_KEY, RecoveryBusy, take_lease

    st = store.open_store(db_path)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    host = socket.gethostname()
    assert st.lease_acquire(LEASE_KEY, f"{host}:{dead.stdout.strip()}:abc", ttl=600)
    assert take_lease(st, "me:1:x") is None  # its owner is gone: taken over at once
    assert st.lease_holder(LEASE_KEY) == "me:1:x"
    st.lease_release(LEASE_KEY, "me:1:x")
    from a2a_tape.store.leases import new_owner

    alive = new_owner()  # a live holder (in this process)
    assert st.lease_acquire(LEASE_KEY, alive, ttl=600)
    try:
        anyio.run(lambda: recover(st, lease_wait=0.2))
        raise AssertionError("a live lease was ignored")
    except RecoveryBusy as exc:
        assert "another recovery is running" in str(exc)
    assert st.lease_acquire(LEASE_KEY, alive, ttl=-1)  # its lease runs out
    assert anyio.run(recover, st) == type(anyio.run(recover, st))()  # an expired lease does not block
    assert st.lease_holder(LEASE_KEY) is None  # released after the run


def test_proxy_startup_recovery_leaves_tasks_it_did_not_record_alone(sdk_agent, db_path):
    st = store.open_store(db_path)
    ex = st.begin_exchange(store.Exchange(url=sdk_agent.url + "/", role="import"))
    st.append(store.NewEvent(payload=fake_task("t-fixture"), task_id="t-fixture", exchange_id=ex))
    seed(st, sdk_agent.url, [fake_task("t-proxied")])  # recorded by a proxy (role "proxy")
    st.close()
    with running_proxy(sdk_agent.url, db_path, recover_on_start=True) as proxy:
        assert proxy.proxy.recovered.wait(15)
        assert [f.task_id for f in proxy.proxy.recovery_report.failed] == ["t-proxied"]
        assert task_state("t-fixture", proxy.store.read_task("t-fixture")).state == "working"


def test_recover_cli_refuses_while_a_proxy_records_into_the_database(sdk_agent, db_path):
    import subprocess
    import sys

    from a2a_tape.recorder.recovery import PROXY_KEY

    with running_proxy(sdk_agent.url, db_path) as proxy:
        httpx.get(proxy.url + "/.well-known/agent-card.json")  # served once its startup is done
        assert proxy.store.get_meta(PROXY_KEY)
    assert store.open_store(db_path).get_meta(PROXY_KEY) == ""  # cleared when it stops
    # a live proxy in another process: simulated by its mark (a sleeping child stands for it)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        import socket

        st = store.open_store(db_path)
        st.set_meta(PROXY_KEY, f"{socket.gethostname()}:{child.pid}:n")
        st.close()
        r = CliRunner().invoke(app, ["recover", "--db", str(db_path)])
        assert r.exit_code == 2 and "is recording into" in r.stderr
    finally:
        child.kill()
        child.wait()
    r = CliRunner().invoke(app, ["recover", "--db", str(db_path), "--json"])
    assert r.exit_code == 0  # its owner is gone: the mark no longer blocks


def test_the_upstream_of_a_task_comes_from_its_exchanges_without_credentials(tmp_path):
    from a2a_tape.recorder.recovery import upstream_of

    with store.open_store(tmp_path / "u.db") as st:
        assert upstream_of(st, "t-u") is None
        st.begin_exchange(store.Exchange(url="https://me:%5Bredacted%5D@agent.test:8443/rpc?x=1", task_id="t-u"))
        assert upstream_of(st, "t-u") == "https://agent.test:8443"
