"""A Hypothesis state machine of the store plus recovery, with crashes between any two steps.

The model is what the log should say about each task (open / ended) and each idempotency key.
A crash closes the store object abruptly (or in the middle of a write transaction) and reopens
the file. Whatever came before, recovery must converge (no task left open, each FAILED once,
with a reason) and be idempotent (a second run changes nothing).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import anyio
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st_
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from a2a_tape import store
from a2a_tape.recorder.recovery import is_open, recover, task_state

TASKS = [f"t{i}" for i in range(4)]


def _task(tid: str) -> bytes:
    return (
        b'{"jsonrpc":"2.0","id":1,"result":{"kind":"task","id":"%s","contextId":"c","status":{"state":"submitted"}}}'
        % tid.encode()
    )


def _status(tid: str, state: str) -> bytes:
    return (
        b'{"jsonrpc":"2.0","id":1,"result":{"kind":"status-update","taskId":"%s","contextId":"c",'
        b'"status":{"state":"%s"},"final":false}}' % (tid.encode(), state.encode())
    )


def _chunk(tid: str, n: int) -> bytes:
    return (
        b'{"jsonrpc":"2.0","id":1,"result":{"kind":"artifact-update","taskId":"%s","contextId":"c",'
        b'"artifact":{"artifactId":"a","parts":[{"kind":"text","text":"c%d"}]},"append":true}}' % (tid.encode(), n)
    )


class Crash(Exception):
    pass


class StoreRecovery(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.TemporaryDirectory()
        self.path = Path(self.dir.name) / "sm.db"
        self.st = store.open_store(self.path)
        self.model: dict[str, str] = {}  # task -> "open" / "ended"
        self.keys: dict[str, bool] = {}  # in-flight key -> has recorded events
        self.n = 0

    def teardown(self) -> None:
        assert self.st.integrity_check() == "ok"
        self.st.close()
        self.dir.cleanup()

    def _append(self, tid: str | None, payload: bytes, exchange_id: int | None = None) -> None:
        self.n += 1
        self.st.append(store.NewEvent(payload=payload, task_id=tid, exchange_id=exchange_id, received_at=time.time()))

    @rule(tid=st_.sampled_from(TASKS))
    def start(self, tid: str) -> None:
        if tid in self.model:
            return
        self._append(tid, _task(tid))
        self.model[tid] = "open"

    @rule(tid=st_.sampled_from(TASKS), state=st_.sampled_from(["working", "working", "submitted"]))
    def progress(self, tid: str, state: str) -> None:
        if self.model.get(tid) == "open":
            self._append(tid, _status(tid, state) if self.n % 2 else _chunk(tid, self.n))

    @rule(tid=st_.sampled_from(TASKS), state=st_.sampled_from(["completed", "failed", "canceled", "input-required"]))
    def end(self, tid: str, state: str) -> None:
        if self.model.get(tid) == "open":
            self._append(tid, _status(tid, state))
            self.model[tid] = "ended"

    @rule(key=st_.sampled_from(["msg:a", "msg:b", "hdr:c"]), answered=st_.booleans())
    def claim(self, key: str, answered: bool) -> None:
        if key in self.keys or self.st.idem_get(key) is not None:
            return
        ex = self.st.begin_exchange(store.Exchange(role="proxy", idempotency_key=key))
        past = time.time() - 10
        self.st.idem_claim(store.IdempotencyRecord(key, "h", ex, created_at=past, expires_at=past + 3600))
        if answered:
            self._append(None, _status("x", "working"), exchange_id=ex)
        self.keys[key] = answered

    @rule()
    def crash(self) -> None:
        """The process dies between two steps: the store object is dropped and the file reopened."""
        self.st.close()
        self.st = store.open_store(self.path)

    @rule(tid=st_.sampled_from(TASKS))
    def crash_mid_write(self, tid: str) -> None:
        """The process dies inside a write transaction: nothing of it may become visible."""
        before = self.st.count_events()
        try:
            with self.st.transaction():
                self.st.append(store.NewEvent(payload=_status(tid, "completed"), task_id=tid, received_at=time.time()))
                raise Crash
        except Crash:
            pass
        self.st.close()
        self.st = store.open_store(self.path)
        assert self.st.count_events() == before

    @rule()
    def recover(self) -> None:
        open_before = sorted(t for t, s in self.model.items() if s == "open")
        report = anyio.run(recover, self.st)
        assert sorted(f.task_id for f in report.failed) == open_before
        assert all(f.reason for f in report.failed)
        assert sorted(report.replayed) == sorted(k for k, answered in self.keys.items() if answered)
        for t in open_before:
            self.model[t] = "ended"
        states = {r.key: r.state for r in self.st.idem_all()}
        for k, answered in self.keys.items():
            assert states[k] == ("done" if answered else "lost")
        self.keys.clear()
        snapshot = [(e.position, bytes(e.payload)) for e in self.st.read_from(0)]
        again = anyio.run(recover, self.st)
        assert (again.resumed, again.failed, again.replayed) == ([], [], [])
        assert [(e.position, bytes(e.payload)) for e in self.st.read_from(0)] == snapshot

    @rule()
    def two_recoveries_at_once(self) -> None:
        """Two processes recover the same file at the same moment: each open task FAILED once."""
        open_before = sorted(t for t, s in self.model.items() if s == "open")
        other = store.open_store(self.path)
        reports = []

        async def both() -> None:
            async def one(st: store.SqliteStore) -> None:
                reports.append(await recover(st))

            async with anyio.create_task_group() as tg:
                tg.start_soon(one, self.st)
                tg.start_soon(one, other)

        try:
            anyio.run(both)
        finally:
            other.close()
        assert sorted(f.task_id for r in reports for f in r.failed) == open_before
        for t in open_before:
            self.model[t] = "ended"
            assert sum(e.origin == "local" for e in self.st.read_task(t)) == 1
        self.keys.clear()

    @invariant()
    def log_agrees_with_model(self) -> None:
        for tid, expected in self.model.items():
            view = task_state(tid, self.st.read_task(tid))
            assert is_open(view.state) == (expected == "open"), (tid, view.state, expected)


TestStoreRecovery = StoreRecovery.TestCase
TestStoreRecovery.settings = settings(
    max_examples=40,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
