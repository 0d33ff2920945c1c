"""The official A2A TCK (JSON-RPC) against a2a-tape: each test's outcome, directly and through a2a-tape.

Once per module: the TCK's categories (all by default; ``A2A_TAPE_TCK_CATEGORIES=mandatory`` for fewer) run
(a) against an a2a-sdk 1.3.0 agent (tests/support/tck_agent.py), (b) through ``a2a-tape proxy`` in front of
an identical agent, recording, and (c) against ``a2a-tape serve`` over that recording with ``--record-mode
new_episodes --upstream`` the proxied agent. A test whose outcome through the proxy or against serve differs
from (a) fails this module, unless ``known_tck_differences.txt`` lists it with its reason; a listed test that
now agrees fails too (like a strict xfail), so the list only shrinks. The long form with the whole table:
``benchmarks/run_tck.py`` (docs/oracles.md).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import pytest

from tests.oracles import tck
from tests.oracles.cache import Unavailable

pytestmark = pytest.mark.oracle


@pytest.fixture(scope="module")
def tck_install(oracle_timing) -> tck.Install:
    try:
        install = tck.ensure_installed()
    except Unavailable as exc:
        pytest.skip(str(exc))
    if install.seconds:
        oracle_timing(
            f"tck: unpacked and installed into {install.python.parents[2]} in {install.seconds:.0f} s (first use)"
        )
    return install


@dataclass
class Runs:
    categories: tuple[str, ...]
    direct: tck.Run
    proxied: tck.Run
    replay: tck.Run


@pytest.fixture(scope="module")
def tck_runs(tck_install, tmp_path_factory, oracle_timing) -> Runs:
    categories = tck.selected_categories()
    started = time.monotonic()
    direct, proxied, replay = tck.run_three_ways(tck_install, categories, tmp_path_factory.mktemp("tck"))
    oracle_timing(f"tck ({', '.join(categories)}): three runs in {time.monotonic() - started:.0f} s")
    for run in (direct, proxied, replay):
        took = ", ".join(f"{c} {s:.0f} s" for c, s in run.seconds.items())
        oracle_timing(f"  {run.name}: {run.counts()} ({took})")
    return Runs(categories, direct, proxied, replay)


def _explain(problems: list[str], runs: Runs) -> str:
    return "\n".join(
        [f"{len(problems)} problems:", *problems, "", tck.table([runs.direct, runs.proxied, runs.replay], True)]
    )


def test_the_tck_reaches_the_agent(tck_runs: Runs):
    """The harness is sound: the TCK ran, most mandatory tests pass directly, none errors in its set-up."""
    counts = tck_runs.direct.counts()
    assert counts.get("passed", 0) >= (20 if "mandatory" in tck_runs.categories else 1), counts
    errors = [n for n, o in tck_runs.direct.outcomes.items() if o == "error"]
    assert not errors, errors


def test_tck_outcomes_through_the_proxy_match_the_agent(tck_runs: Runs):
    known = tck.load_known()
    problems = tck.judge("proxy", tck_runs.direct, tck_runs.proxied, known, tck_runs.categories)
    assert not problems, _explain(problems, tck_runs)


def test_tck_outcomes_against_serve_match_the_agent(tck_runs: Runs):
    known = tck.load_known()
    problems = tck.judge("serve", tck_runs.direct, tck_runs.replay, known, tck_runs.categories)
    assert not problems, _explain(problems, tck_runs)


# --- the allowlist and the judging rule (no TCK needed) --------------------------------------------------


def test_known_differences_file_is_well_formed():
    known = tck.load_known()
    for entry in known.values():
        assert entry.nodeid.startswith(tuple(path for path, _ in tck.CATEGORIES.values())), entry
        assert len(entry.reason) > 10, entry


def _run(name: str, **outcomes: str) -> tck.Run:
    return tck.Run(name, "", {f"tests/mandatory/t.py::{k}": v for k, v in outcomes.items()})


def test_judge_reports_unlisted_differences_and_listed_ones_that_agree():
    direct = _run("direct", a="passed", b="passed", c="failed")
    other = _run("proxy", a="failed", b="passed", c="failed", d="passed")
    known = {
        ("proxy", "tests/mandatory/t.py::b"): tck.Known("proxy", "tests/mandatory/t.py::b", "was broken"),
        ("serve", "tests/mandatory/t.py::a"): tck.Known("serve", "tests/mandatory/t.py::a", "another set-up"),
        ("proxy", "tests/optional/quality/q.py::x"): tck.Known("proxy", "tests/optional/quality/q.py::x", "not run"),
    }
    problems = tck.judge("proxy", direct, other, known, ("mandatory",))
    assert len(problems) == 3, problems
    assert problems[0].startswith("differs") and "t.py::a: direct passed, proxy failed" in problems[0]
    assert problems[1].startswith("differs") and "t.py::d: direct absent, proxy passed" in problems[1]
    assert problems[2].startswith("now agrees") and "t.py::b" in problems[2]


def test_judge_lets_a_sometimes_entry_agree():
    direct = _run("direct", a="failed")
    known = {("serve", "tests/mandatory/t.py::a"): tck.Known("serve", "tests/mandatory/t.py::a", "size", True)}
    assert tck.judge("serve", direct, _run("serve", a="passed"), known, ("mandatory",)) == []
    assert tck.judge("serve", direct, _run("serve", a="failed"), known, ("mandatory",)) == []


def test_load_known_refuses_a_malformed_line(tmp_path):
    bad = tmp_path / "known.txt"
    bad.write_text("# comment\nproxy tests/mandatory/t.py::a\n")
    with pytest.raises(ValueError, match="known.txt:2"):
        tck.load_known(bad)
