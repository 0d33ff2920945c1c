"""Runs (issue 30): two observers' events of one task, interleaved in the log in any order, fold
each run exactly as that run alone; the projection keeps the latest run, the same as the run read
whole; selectors parse as documented."""

from __future__ import annotations

import tempfile
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from a2a_tape.fold.projection import Projector
from a2a_tape.fold.runs import BadSelector, parse_selector, pick_run, selector, task_runs
from a2a_tape.store import open_store
from a2a_tape.store.observers import new_observer
from a2a_tape.store.records import Exchange, NewEvent
from tests.replay.builders import art03, status03, task03

T = "task-1"
RUN_A = [
    task03(T, "submitted", user="hi"),
    status03(T, "working"),
    art03(T, "a1", "hello "),
    art03(T, "a1", "world", append=True, last=True),
    status03(T, "completed"),
]
RUN_B = [  # another observer of the same task, seeing something else (a replay, a proxy that rewrote)
    task03(T, "submitted", user="hi"),
    status03(T, "working"),
    art03(T, "a1", "bye", last=True),
    status03(T, "failed", "oops"),
]


def _comparable(view) -> dict:
    """A view without what depends on where its events sit in the log (positions, times)."""
    doc = msgspec.to_builtins(view)
    for key in ("first_position", "last_position", "first_at", "last_at", "ignored"):
        doc.pop(key)
    doc["faults"] = sorted(f["code"] for f in doc["faults"])
    return doc


def _record(path: Path, order: list[int], runs: list[list[bytes]], *, local_note: bool = False) -> None:
    """The runs' events into one log, interleaved as ``order`` says (0: the next of the first run)."""
    with open_store(path) as s:
        ids = [
            s.begin_exchange(new_observer(source).stamp(Exchange(url="http://a/", task_id=T, role=role)))
            for source, role in (("proxy", "proxy"), ("client", "client"))[: len(runs)]
        ]
        left = [list(r) for r in runs]
        for k in order:
            if left[k]:
                s.append(NewEvent(left[k].pop(0), T, ids[k], received_at=1.0))
        for k, rest in enumerate(left):
            for payload in rest:
                s.append(NewEvent(payload, T, ids[k], received_at=1.0))
        if local_note:  # on no exchange: the task's latest run at that point
            s.append(NewEvent(status03(T, "completed"), T, None, received_at=1.0, origin="local"))
        for ex_id in ids:
            s.update_exchange(ex_id, ended_at=2.0, outcome="ok")


def _alone(run: list[bytes]) -> dict:
    with tempfile.TemporaryDirectory() as d:
        _record(Path(d) / "alone.db", [], [run])
        with open_store(Path(d) / "alone.db") as s:
            return _comparable(task_runs(s, T)[0].view())


ALONE = {}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(order=st.lists(st.integers(0, 1), max_size=len(RUN_A) + len(RUN_B)), first=st.integers(0, 1))
def test_any_interleaving_folds_each_run_as_that_run_alone(order, first):
    if not ALONE:
        ALONE.update(a=_alone(RUN_A), b=_alone(RUN_B))
    order = [first, *order]  # which run comes first in the log decides the numbering
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "two.db"
        _record(path, order, [RUN_A, RUN_B])
        with open_store(path) as s:
            runs = task_runs(s, T)
            assert [r.source for r in runs] == (["proxy", "client"] if first == 0 else ["client", "proxy"])
            by_source = {r.source: r for r in runs}
            assert _comparable(by_source["proxy"].view()) == ALONE["a"]
            assert _comparable(by_source["client"].view()) == ALONE["b"]
            assert [len(r.events) for r in (by_source["proxy"], by_source["client"])] == [len(RUN_A), len(RUN_B)]
            # the projection keeps the latest run: the same view as that run read whole, positions too
            proj = Projector(s, cache_size=1, commit_every=2)
            proj.catch_up()
            latest = runs[-1].view()
            assert proj.view(T, {ex.id: 2.0 for ex in runs[-1].exchanges}) == latest
            assert [(r.observer, r.source) for r in proj.fold(T).s.runs] == [(r.observer, r.source) for r in runs]


def test_an_event_on_no_exchange_is_the_latest_runs(tmp_path):
    _record(tmp_path / "n.db", [0, 0, 1], [RUN_A, RUN_B], local_note=True)
    with open_store(tmp_path / "n.db") as s:
        runs = task_runs(s, T)
        assert [len(r.events) for r in runs] == [len(RUN_A), len(RUN_B) + 1]
        assert runs[-1].events[-1].exchange_id is None


def test_selectors():
    assert parse_selector("abc") == ("abc", None)
    assert parse_selector("abc@2") == ("abc", 2)
    assert parse_selector("a@b@3") == ("a@b", 3)
    assert selector("abc", 2) == "abc@2"
    for bad in ("abc@x", "abc@0", "abc@", "@1", "abc@-1"):
        with pytest.raises(BadSelector):
            parse_selector(bad)
    with pytest.raises(BadSelector, match="has 0 runs|unknown task"):
        pick_run([], "abc", 1)
