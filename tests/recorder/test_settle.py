"""The recovery rule shared by the client and the startup recovery (recorder.settle), driven by a
scripted follower: an in-memory agent whose answers each test writes down."""

from __future__ import annotations

import time

import anyio
import pytest

from a2a_tape.recorder.settle import Backoff, settle

FAST = Backoff(0.001, 0.004)


class Script:
    """GetTask answers ``states`` in turn (the last one repeats); resubscribes answer ``refusals``
    in turn (None: the stream ended); ``stale``: no progress for a long time already."""

    def __init__(self, states, refusals=(), lost_at=None, stale=False, progress_on_get=False):
        self.states = list(states)
        self.refusals = list(refusals)
        self.lost_at = lost_at
        self.progress = time.monotonic() - (1000 if stale else 0)
        self.progress_on_get = progress_on_get
        self.state = "working"
        self.log: list[str] = []

    def settled(self):
        return self.state in ("completed", "input-required")

    def progress_at(self):
        return self.progress

    async def get_task(self):
        self.log.append("get")
        if self.lost_at is not None and self.log.count("get") == self.lost_at:
            return "the agent forgot the task"
        self.state = self.states.pop(0) if len(self.states) > 1 else self.states[0]
        if self.progress_on_get:
            self.progress = time.monotonic()
        return None

    async def resubscribe(self):
        self.log.append("resubscribe")
        return self.refusals.pop(0) if self.refusals else None

    async def note(self, action, detail):
        self.log.append(f"note:{action}")


def run(script, **kw):
    kw.setdefault("stall_timeout", 5.0)
    kw.setdefault("backoff", FAST)
    return anyio.run(lambda: settle(script, **kw))


def test_a_task_settled_already_is_asked_once():
    s = Script(["completed"])
    done = run(s, streaming=True)
    assert done.how == "settled" and s.log == ["get"]


def test_resubscribes_while_the_budget_lasts_then_polls():
    s = Script(["working"] * 4 + ["completed"])
    done = run(s, streaming=True, max_resubscribes=2)
    assert done.how == "settled" and done.resubscribes == 2 and done.polled
    assert s.log == [
        "get",
        "note:resubscribed",
        "resubscribe",
        "get",
        "note:resubscribed",
        "resubscribe",
        "get",
        "note:polling",
        "get",
        "get",
    ]


def test_a_refused_resubscribe_turns_to_polling():
    s = Script(["working", "working", "completed"], refusals=["-32004: not supported"])
    done = run(s, streaming=True)
    assert done.how == "settled" and done.resubscribes == 1
    assert s.log == [
        "get",
        "note:resubscribed",
        "resubscribe",
        "note:resubscribe refused",
        "get",
        "note:polling",
        "get",
    ]


def test_an_agent_without_streaming_is_polled():
    s = Script(["working", "working", "input-required"])
    done = run(s, streaming=False)
    assert done.how == "settled" and done.resubscribes == 0 and s.log.count("get") == 3


def test_no_progress_is_a_stall_and_a_failed_get_task_loses_it():
    assert run(Script(["working"], stale=True), streaming=True).how == "stalled"
    lost = run(Script(["working"], lost_at=2), streaming=False)
    assert lost.how == "lost" and lost.why == "the agent forgot the task"


def test_polling_stops_at_the_stall_deadline():
    """Progress never comes: the waits end at the deadline (not after a whole backoff step)."""
    t0 = time.monotonic()
    done = run(Script(["working"]), streaming=False, stall_timeout=0.4, backoff=Backoff(0.35, 10.0, jitter=0.0))
    assert done.how == "stalled" and time.monotonic() - t0 < 0.9  # capped: ~0.4 s; uncapped: 0.35 + 0.7 s


@pytest.mark.parametrize("jitter", [0.0, 0.25, 0.5])
def test_backoff_doubles_to_its_maximum_within_the_jitter(jitter):
    waits = Backoff(0.1, 0.8, jitter).waits()
    got = [next(waits) for _ in range(6)]
    for w, base in zip(got, [0.1, 0.2, 0.4, 0.8, 0.8, 0.8]):
        assert base * (1 - jitter) - 1e-9 <= w <= base * (1 + jitter) + 1e-9
