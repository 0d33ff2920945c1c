"""What only the shared engine must do: several writer processes on one log, followers woken by
LISTEN/NOTIFY, leases that give each orphan to exactly one recoverer, and ``copy`` both ways.
(The rest of the store's behaviour runs on PostgreSQL through the backend-parametrised suite.)
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import pytest
from typer.testing import CliRunner

from a2a_tape import store
from a2a_tape.cli import app
from a2a_tape.store import NewEvent

WRITER = r"""
import json, sys
from a2a_tape import store
from a2a_tape.store import NewEvent
url, writer, batches, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
st = store.open_store(url)
for b in range(batches):
    evs = [NewEvent(payload=json.dumps({"w": writer, "n": b * size + i}).encode(), task_id=f"w{writer}-t{b % 3}")
           for i in range(size)]
    st.append_batch(evs)
st.close()
"""


def test_several_writer_processes_gap_free_in_commit_order(pg_url):
    writers, batches, size = 4, 40, 5
    total = writers * batches * size
    follower = store.open_store(pg_url)  # creates the schema before the writers race for it
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, pg_url, str(w), str(batches), str(size)])
        for w in range(writers)
    ]
    seen: list[int] = []
    payloads: list[dict] = []
    cursor = 0
    deadline = time.monotonic() + 120
    while len(seen) < total and time.monotonic() < deadline:
        for ev in follower.read_from(cursor):
            seen.append(ev.position)
            payloads.append(json.loads(ev.payload))
            cursor = ev.position
        if len(seen) < total:
            follower.wait_for_events(cursor, timeout=5)
    for p in procs:
        assert p.wait(timeout=60) == 0

    # the follower, reading while writers committed, never skipped a row that committed late
    assert seen == list(range(1, total + 1))
    # nothing lost, nothing doubled
    keys = [(p["w"], p["n"]) for p in payloads]
    assert len(set(keys)) == total
    # each writer's events are in the order it appended them
    for w in range(writers):
        mine = [p["n"] for p in payloads if p["w"] == w]
        assert mine == sorted(mine) and len(mine) == batches * size
    # seq per task gap-free too
    for te in follower.task_events():
        assert [e.seq for e in follower.read_task(te.task_id)] == list(range(1, te.events + 1))
    follower.close()


def test_follower_wakes_on_notify_not_on_a_timer(pg_url):
    st = store.open_store(pg_url)
    writer = store.open_store(pg_url)
    started = threading.Event()
    woke: list[bool] = []

    def follow() -> None:
        started.set()
        woke.append(st.wait_for_events(0, timeout=30))

    t = threading.Thread(target=follow)
    t.start()
    started.wait(5)
    t0 = time.monotonic()
    writer.append(NewEvent(payload=b"{}", task_id="t"))
    t.join(30)
    assert woke == [True]
    assert time.monotonic() - t0 < 10  # woken by the NOTIFY, well before the 30 s timeout
    assert st.wait_for_events(1, timeout=0.2) is False  # nothing past position 1
    st.close()
    writer.close()


def test_lease_gives_each_orphan_to_exactly_one_recoverer(pg_url):
    a = store.open_store(pg_url)
    b = store.open_store(pg_url)
    now = 1000.0
    assert a.lease_acquire("recover:t1", "proxy-a", ttl=30, now=now) is True
    assert b.lease_acquire("recover:t1", "proxy-b", ttl=30, now=now + 1) is False
    assert a.lease_acquire("recover:t1", "proxy-a", ttl=30, now=now + 2) is True  # renewal
    # proxy-a died: once its lease expires, proxy-b takes the orphan over (never none)
    assert b.lease_acquire("recover:t1", "proxy-b", ttl=30, now=now + 40) is True
    assert a.lease_acquire("recover:t1", "proxy-a", ttl=30, now=now + 41) is False
    b.lease_release("recover:t1", "proxy-b")
    assert a.lease_acquire("recover:t1", "proxy-a", ttl=30, now=now + 42) is True
    a.close()
    b.close()


def test_lease_race_between_threads_has_one_winner(pg_url):
    stores = [store.open_store(pg_url) for _ in range(6)]
    barrier = threading.Barrier(len(stores))
    wins: list[str] = []

    def race(i: int) -> None:
        barrier.wait(10)
        if stores[i].lease_acquire("recover:x", f"p{i}", ttl=60):
            wins.append(f"p{i}")

    threads = [threading.Thread(target=race, args=(i,)) for i in range(len(stores))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(wins) == 1
    for s in stores:
        s.close()


@pytest.mark.parametrize("direction", ["sqlite->postgres->sqlite"])
def test_copy_round_trips_losslessly(pg_url, tmp_path, direction):
    src = tmp_path / "src.db"
    with store.open_store(src) as st:
        ex = st.begin_exchange(
            store.Exchange(
                url="http://a/",
                rpc_method="message/stream",
                dialect="0.3",
                request_body=b'{"x":1}',
                task_id="t1",
                request_headers={"a": "b"},
            )
        )
        st.append_batch(
            [
                NewEvent(
                    payload=b'{"jsonrpc":"2.0","result":{"kind":"task","id":"t1","status":{"state":"submitted"}}}',
                    task_id="t1",
                    exchange_id=ex,
                    received_at=1.25,
                    mono=0.01,
                ),
                NewEvent(
                    payload=b"\xff\xfe not utf-8", task_id="t1", exchange_id=ex, received_at=1.5, sse_event="error"
                ),
                NewEvent(payload=b'{"error":{"code":-1}}', exchange_id=ex, received_at=1.75),
                NewEvent(
                    payload=store.local_note("gave_up", "test", "t1"), task_id="t1", origin="local", received_at=2.0
                ),
            ]
        )
    runner = CliRunner()
    first = runner.invoke(app, ["copy", str(src), pg_url])
    assert first.exit_code == 0, first.output
    again = runner.invoke(app, ["copy", str(src), pg_url, "--json"])
    assert again.exit_code == 0
    assert json.loads(again.stdout)["events"] == 0  # copying twice changes nothing
    back = tmp_path / "back.db"
    assert runner.invoke(app, ["copy", pg_url, str(back)]).exit_code == 0

    def dump(db) -> list[bytes]:
        res = runner.invoke(app, ["export", "--all", "--db", str(db)])
        assert res.exit_code == 0
        return res.stdout_bytes.splitlines()[1:]  # all but the header (it has the export time)

    assert dump(src) == dump(back)
    with store.open_store(pg_url) as pg:
        assert pg.count_events() == 4
        assert [e.position for e in pg.read_from(0)] == [1, 2, 3, 4]
        assert bytes(pg.read_task("t1")[1].payload) == b"\xff\xfe not utf-8"


def test_projection_follower_keeps_up_through_notify(pg_url):
    """A Projector following the shared log sees every task end, while another process writes."""
    from a2a_tape.fold.projection import Projector

    writer = store.open_store(pg_url)
    reader = store.open_store(pg_url)
    proj = Projector(reader)
    done = threading.Event()
    applied: list[int] = []

    def run() -> None:
        applied.append(
            proj.follow(lambda: done.is_set() or (proj.view("f3") is not None and proj.view("f3").state == "completed"))
        )

    t = threading.Thread(target=run)
    t.start()
    for n in range(4):
        tid = f"f{n}"
        writer.append_batch(
            [
                NewEvent(
                    payload=b'{"jsonrpc":"2.0","id":1,"result":{"kind":"task","id":"%s","contextId":"c",'
                    b'"status":{"state":"working"}}}' % tid.encode(),
                    task_id=tid,
                ),
                NewEvent(
                    payload=b'{"jsonrpc":"2.0","id":1,"result":{"kind":"artifact-update","taskId":"%s","contextId":"c",'
                    b'"artifact":{"artifactId":"a","parts":[{"kind":"text","text":"hi"}]}}}' % tid.encode(),
                    task_id=tid,
                ),
                NewEvent(
                    payload=b'{"jsonrpc":"2.0","id":1,"result":{"kind":"status-update","taskId":"%s","contextId":"c",'
                    b'"status":{"state":"completed"},"final":true}}' % tid.encode(),
                    task_id=tid,
                ),
            ]
        )
    t.join(60)
    done.set()
    assert not t.is_alive()
    assert applied == [12]
    assert [(v.task_id, v.state, v.final_answer) for v in sorted(proj.views(), key=lambda v: v.task_id)] == [
        (f"f{n}", "completed", "hi") for n in range(4)
    ]
    writer.close()
    reader.close()
