"""The group-commit writer: many concurrent producers, one writer, acks only once stored."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

import anyio
import pytest

from a2a_tape.store import AppendConflict, GroupCommitWriter, NewEvent, StoredEvent, StoreError
from a2a_tape.store.writer import Appends, Writes, writer_of

from .payloads import v1_artifact

PRODUCERS = 16
PER_PRODUCER = 40


def test_sixteen_producers_every_ack_is_the_stored_row(backend):
    st = backend.open()
    reader = backend.open()  # a second connection: what is acked must be committed, visible to others
    acks: dict[str, list] = {}
    invisible: list[int] = []

    async def producer(w: GroupCommitWriter, task: str) -> None:
        got = acks.setdefault(task, [])
        for n in range(PER_PRODUCER):
            stored = await w.append(NewEvent(payload=v1_artifact(task, n), task_id=task))
            got.append(stored)
            if n % 10 == 0 and not any(e.position == stored.position for e in reader.read_task(task)):
                invisible.append(stored.position)

    async def main() -> GroupCommitWriter:
        with anyio.fail_after(30):
            return await _run(st)

    async def _run(st) -> GroupCommitWriter:
        async with GroupCommitWriter(st) as w:
            async with anyio.create_task_group() as tg:
                for p in range(PRODUCERS):
                    tg.start_soon(producer, w, f"task-{p:02d}")
        return w

    w = anyio.run(main)

    total = PRODUCERS * PER_PRODUCER
    assert invisible == []
    all_acks = [e for evs in acks.values() for e in evs]
    assert len(all_acks) == total
    positions = sorted(e.position for e in all_acks)
    assert positions == list(range(1, total + 1))  # nothing lost, nothing doubled, no gap
    stored = {e.position: e for e in st.read_from(0)}
    assert len(stored) == total
    for task, evs in acks.items():
        assert [e.seq for e in evs] == list(range(1, PER_PRODUCER + 1))  # each producer's order kept
        assert [e.payload for e in evs] == [v1_artifact(task, n) for n in range(PER_PRODUCER)]
        for e in evs:
            assert stored[e.position] == e
    assert w.events == total
    assert w.batches * 4 <= w.events, f"{w.batches} batches for {w.events} events: not grouping"


def test_a_conflicting_producer_does_not_fail_the_others(backend):
    st = backend.open()
    st.append(NewEvent(payload=b"original", task_id="held", seq=1))
    outcome: dict[str, object] = {}

    async def producer(w: GroupCommitWriter, task: str) -> None:
        try:
            for n in range(5):
                if task == "bad" and n == 2:
                    await w.append(NewEvent(payload=b"other bytes", task_id="held", seq=1))
                else:
                    await w.append(NewEvent(payload=v1_artifact(task, n), task_id=task))
            outcome[task] = "ok"
        except AppendConflict as exc:
            outcome[task] = exc

    async def main() -> None:
        with anyio.fail_after(30):
            await _run()

    async def _run() -> None:
        async with GroupCommitWriter(st) as w:
            async with anyio.create_task_group() as tg:
                for p in range(PRODUCERS - 1):
                    tg.start_soon(producer, w, f"p{p}")
                tg.start_soon(producer, w, "bad")

    anyio.run(main)

    assert isinstance(outcome.pop("bad"), AppendConflict)
    assert set(outcome.values()) == {"ok"} and len(outcome) == PRODUCERS - 1
    for p in range(PRODUCERS - 1):
        assert [e.payload for e in st.read_task(f"p{p}")] == [v1_artifact(f"p{p}", n) for n in range(5)]
    assert [e.payload for e in st.read_task("bad")] == [v1_artifact("bad", n) for n in range(2)]
    assert [e.payload for e in st.read_task("held")] == [b"original"]
    assert st.count_events() == 1 + (PRODUCERS - 1) * 5 + 2


def test_append_many_keeps_one_producers_order(backend):
    st = backend.open()

    async def main():
        async with GroupCommitWriter(st) as w:
            return await w.append_many([NewEvent(payload=bytes([i]), task_id="t") for i in range(50)])

    out = anyio.run(main)
    assert [e.seq for e in out] == list(range(1, 51))
    assert [e.payload for e in st.read_task("t")] == [bytes([i]) for i in range(50)]


def test_append_many_is_all_or_nothing_and_spares_the_other_producers(backend):
    """One ``append_many`` call is one queue entry: a conflict in it stores none of its events
    (it raises), while the producers batched with it get their rows."""
    st = backend.open()
    st.append(NewEvent(payload=b"original", task_id="held", seq=1))
    outcome: dict[str, object] = {}

    async def producer(w: GroupCommitWriter, task: str) -> None:
        events = [NewEvent(payload=v1_artifact(task, n), task_id=task) for n in range(5)]
        if task == "bad":
            events.insert(2, NewEvent(payload=b"other bytes", task_id="held", seq=1))
        try:
            await w.append_many(events)
            outcome[task] = "ok"
        except AppendConflict as exc:
            outcome[task] = exc

    async def main() -> None:
        with anyio.fail_after(30):
            async with GroupCommitWriter(st) as w:
                async with anyio.create_task_group() as tg:
                    for p in range(PRODUCERS - 1):
                        tg.start_soon(producer, w, f"p{p}")
                    tg.start_soon(producer, w, "bad")

    anyio.run(main)
    assert isinstance(outcome.pop("bad"), AppendConflict)
    assert set(outcome.values()) == {"ok"} and len(outcome) == PRODUCERS - 1
    for p in range(PRODUCERS - 1):
        assert [e.payload for e in st.read_task(f"p{p}")] == [v1_artifact(f"p{p}", n) for n in range(5)]
    assert st.read_task("bad") == []
    assert [e.payload for e in st.read_task("held")] == [b"original"]


def test_the_writer_needs_no_context_and_no_task_of_its_own(backend):
    """No writer task: a producer that finds no commit under way commits itself, on whatever loop
    it runs (a transport's, a test's), with or without ``async with``; one writer serves two runs."""
    st = backend.open()
    w = GroupCommitWriter(st)
    first = anyio.run(w.append, NewEvent(payload=b"x", task_id="t"))
    second = anyio.run(w.append_many, [NewEvent(payload=b"y", task_id="t"), NewEvent(payload=b"z", task_id="t")])
    assert [first.seq, *(e.seq for e in second)] == [1, 2, 3]
    assert [e.payload for e in st.read_task("t")] == [b"x", b"y", b"z"]


def test_events_queued_before_close_are_all_stored(backend):
    """Leaving the writer's context drains the queue: a producer that queued is answered."""
    st = backend.open()
    results = []

    async def main():
        async with GroupCommitWriter(st) as w:
            async with anyio.create_task_group() as tg:
                for i in range(100):
                    tg.start_soon(lambda i=i: _append_into(w, i, results))

    async def _append_into(w, i, sink):
        sink.append(await w.append(NewEvent(payload=bytes([i]), task_id=f"t{i % 7}")))

    anyio.run(main)
    assert len(results) == 100 and st.count_events() == 100


class _GatedLog:
    """The store under test, whose ``append_batch`` on a worker thread stops at a gate once its
    rows are written and the transaction still holds the log's lock: a big batch being committed,
    held open for the test."""

    def __init__(self, st) -> None:
        self.st = st
        self.location, self.busy_timeout = st.location, st.busy_timeout
        self.entered, self.gate = threading.Event(), threading.Event()

    def without_waiting(self):
        return self.st.without_waiting()

    def append_batch(self, events):
        if threading.current_thread() is threading.main_thread():
            return self.st.append_batch(events)
        with self.st.transaction():
            stored = self.st.append_batch(events)
            self.entered.set()
            assert self.gate.wait(30)
        return stored


def _one(fn: Callable[..., Any], *args: Any) -> Writes[Any]:
    """One write transaction as the capture core's sequence yields its steps (``Capture.begin_writes``)."""
    return (yield functools.partial(fn, *args))


def test_the_shared_writer_runs_a_write_on_the_loop_unless_the_lock_is_held_by_a_batch_on_a_thread(backend):
    """The store's shared writer (``writer_of``: the proxy's key claim and exchange rows, every
    driver's ``Capture`` writes, run with ``.run``): a write on the event loop when the log is free;
    tried there, then run on a worker thread, while a big batch being committed on a thread holds the
    lock (the loop must not wait for it); a write queued behind one that waits is answered after it;
    its result or error comes back either way."""
    st = backend.open()
    log = _GatedLog(st)
    tries: dict[str, list[int]] = {"idle": [], "busy": []}
    answered: list[str] = []

    def append(name: str) -> StoredEvent:
        tries[name].append(threading.get_ident())
        return st.append(NewEvent(payload=name.encode(), task_id=name))

    def broken() -> None:
        raise StoreError("the log refused it")

    async def main() -> None:
        shared = writer_of(st)  # the store's own, apart from the gated log's writer below
        async with GroupCommitWriter(log) as w:
            await shared.run(_one(append, "idle"))
            async with anyio.create_task_group() as tg:
                big = [NewEvent(payload=bytes([i]), task_id="big") for i in range(w.inline_batch + 1)]
                tg.start_soon(w.append_many, big)
                await anyio.to_thread.run_sync(log.entered.wait)  # the batch is on its thread, lock held
                tg.start_soon(shared.run, _one(append, "busy"))
                with anyio.fail_after(10):
                    while len(tries["busy"]) < 2:  # tried on the loop, then on a worker thread
                        await anyio.lowlevel.checkpoint()

                async def refused() -> None:  # queued behind the write waiting for the lock: answered after it
                    with pytest.raises(StoreError, match="refused"):
                        await shared.run(_one(broken))
                    answered.append("refused")

                tg.start_soon(refused)
                await anyio.lowlevel.checkpoint()
                assert answered == []
                log.gate.set()
            assert answered == ["refused"]
            with pytest.raises(StoreError, match="refused"):
                await shared.run(_one(broken))

    loop_thread = threading.get_ident()
    anyio.run(main)
    assert tries["idle"] == [loop_thread]
    assert tries["busy"][0] == loop_thread and tries["busy"][1] != loop_thread and len(tries["busy"]) == 2
    assert [e.task_id for e in st.read_from(0)] == ["idle", *["big"] * 9, "busy"]


@pytest.mark.parametrize("durability", ["full", "normal"])
def test_a_write_not_inline_leaves_the_loop_only_when_the_commit_syncs(backend, durability):
    """``run(..., inline=False)`` (a relay's batches after its first): at durability full a small
    batch with the lock free still goes to a worker thread (its fsync must not stop the loop); at
    normal (no fsync) it stays on the loop, as every batch there does; an inline one stays on the
    loop either way. The events are stored the same."""
    st = backend.open(durability=durability)
    where: dict[str, int] = {}

    def mark(name: str) -> StoredEvent:
        where[name] = threading.get_ident()
        return st.append(NewEvent(payload=name.encode(), task_id=name))

    def steps(name: str, events: list[NewEvent]):  # a Writes: an append, then a write of its own
        stored = yield Appends(st, events)
        yield functools.partial(mark, name)
        return stored

    async def main() -> None:
        w = GroupCommitWriter(st)
        one = [NewEvent(payload=b"{}", task_id="t")]
        assert len(await w.run(steps("inline", one))) == 1
        assert len(await w.run(steps("off", one), inline=False)) == 1

    loop_thread = threading.get_ident()
    anyio.run(main)
    assert where["inline"] == loop_thread
    assert (where["off"] != loop_thread) == (durability == "full")
    assert [e.task_id for e in st.read_from(0)] == ["t", "inline", "t", "off"]


def test_a_leader_cancelled_mid_commit_writes_its_batch_and_hands_the_lead_on(backend):
    """No writer task can die, but a producer leading a commit can be cancelled (a client gone):
    the batch it took is still written (shielded), and the producers queued behind it are
    answered by the next leader, not left waiting."""
    st = backend.open()
    log = _GatedLog(st)
    w = GroupCommitWriter(log)
    got: dict[str, object] = {}

    async def lead(scope: anyio.CancelScope) -> None:
        with scope:
            got["lead"] = await w.append_many([NewEvent(payload=bytes([i]), task_id="a") for i in range(9)])

    async def queued() -> None:
        got["queued"] = await w.append(NewEvent(payload=b"b", task_id="b"))

    async def main() -> None:
        scope = anyio.CancelScope()
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(lead, scope)
                await anyio.to_thread.run_sync(log.entered.wait)  # the batch is on its thread
                tg.start_soon(queued)
                await anyio.lowlevel.checkpoint()
                scope.cancel()
                log.gate.set()

    anyio.run(main)
    assert isinstance(got["queued"], StoredEvent)
    assert [e.task_id for e in st.read_from(0)] == ["a"] * 9 + ["b"]  # its batch was written all the same


def test_a_leader_cancelled_by_asyncio_itself_mid_commit_still_answers_its_batch(backend):
    """asyncio's own cancel (``Task.cancel``, as grpc.aio cancels a handler whose client left) is
    not held by anyio's shield: the leader stops waiting, but the batch on its worker thread is
    written and answered all the same, so another producer whose write the same batch holds is not
    left waiting, and one queued behind it is committed after it by the next leader."""
    import asyncio

    st = backend.open()
    log = _GatedLog(st)
    w = GroupCommitWriter(log)
    got: dict[str, object] = {}

    async def main() -> None:
        lead = asyncio.create_task(w.append_many([NewEvent(payload=bytes([i]), task_id="a") for i in range(9)]))
        same = asyncio.create_task(w.append(NewEvent(payload=b"s", task_id="s")))  # taken with the leader's
        await asyncio.to_thread(log.entered.wait)  # the batch is on its worker thread
        queued = asyncio.create_task(w.append(NewEvent(payload=b"b", task_id="b")))
        await asyncio.sleep(0)
        lead.cancel()
        await asyncio.sleep(0)
        log.gate.set()
        got["same"] = await asyncio.wait_for(same, 30)
        got["queued"] = await asyncio.wait_for(queued, 30)
        with pytest.raises(asyncio.CancelledError):
            await lead

    asyncio.run(main())
    assert isinstance(got["same"], StoredEvent) and isinstance(got["queued"], StoredEvent)
    assert [e.task_id for e in st.read_from(0)] == ["a"] * 9 + ["s", "b"]
