"""The official A2A TCK 1.0 against a2a-tape, per binding: each test's outcome directly, through the proxy, and
against serve over the proxy's recording.

Once per module, for each transport a2a-tape has a binding for (``$A2A_TAPE_TCK1_TRANSPORTS`` for fewer), the
TCK runs (a) against the TCK's own agent ported to a2a-sdk 1.3.0 (tests/support/tck1_sut.py), (b) through
``a2a-tape proxy`` in front of an identical agent, recording, (c) against ``a2a-tape serve`` over that recording (replay only; the whole session, judged at level ``must``). Through the proxy every test's
outcome equals (a)'s; against serve every MUST test that passed in (a) passes. A difference fails this module unless ``known_tck1_differences.txt`` lists it with its
reason; a listed difference that no longer shows fails it too, so the list only shrinks. The long form with the
whole table: ``benchmarks/run_tck.py --tck 1.0`` (docs/oracles.md).

The push slice (issue 33) is judged the same way: the SUT with its push notifications on, the TCK's push tests only
(config calls and webhook delivery, the TCK's own receiver), allowlist ``known_tck1_push_differences.txt``.
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Iterator

import pytest

from tests.oracles import allowlist, tck1
from tests.oracles.cache import Unavailable
from tests.oracles.tck import Run

pytestmark = pytest.mark.oracle


@pytest.fixture(scope="module")
def tck1_install(oracle_timing) -> tck1.Install:
    try:
        install = tck1.ensure_installed()
    except Unavailable as exc:
        pytest.skip(str(exc))
    if install.seconds:
        oracle_timing(f"tck 1.0: the TCK and its SUT's venv installed into the cache in {install.seconds:.0f} s")
    return install


@pytest.fixture(scope="module")
def tck1_push_started(tck1_install, tmp_path_factory) -> Iterator[concurrent.futures.Future[tuple[dict, float]]]:
    """The push slice, begun in the background: the main runs mostly wait (the TCK's timeouts, the agent's
    sleeps), so the slice runs beside them instead of after them (its runs, alone, take a few seconds each)."""
    transports = tck1.selected_transports()
    workdir = tmp_path_factory.mktemp("tck1push")

    def run() -> tuple[dict, float]:
        started = time.monotonic()
        runs = tck1.run_all(tck1_install, transports, workdir, tck1.parallelism(), push=True)
        return runs, time.monotonic() - started

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        yield pool.submit(run)


@pytest.fixture(scope="module")
def tck1_runs(tck1_install, tck1_push_started, tmp_path_factory, oracle_timing) -> dict[str, tck1.Runs]:
    transports = tck1.selected_transports()
    parallel = tck1.parallelism()
    started = time.monotonic()
    runs = tck1.run_all(tck1_install, transports, tmp_path_factory.mktemp("tck1"), parallel)
    oracle_timing(
        f"tck 1.0 ({', '.join(runs) or 'no transport'}, {parallel} at once): {time.monotonic() - started:.0f} s"
    )
    for r in runs.values():
        for run in r.all():
            oracle_timing(f"  {r.transport} {run.name}: {run.counts()} ({run.seconds.get(r.transport, 0):.0f} s)")
        if r.serve_refused:
            oracle_timing(f"  {r.transport} serve did not start: {r.serve_refused}")
    return runs


@pytest.fixture(scope="module")
def tck1_push_runs(tck1_push_started, oracle_timing) -> dict[str, tck1.Runs]:
    """The push slice (started by :func:`tck1_push_started`, beside the main runs when they run)."""
    runs, took = tck1_push_started.result()
    oracle_timing(f"tck 1.0 push slice ({', '.join(runs) or 'no transport'}, beside the main runs): {took:.0f} s")
    for r in runs.values():
        for run in r.all():
            oracle_timing(f"  push {r.transport} {run.name}: {run.counts()} ({run.seconds.get(r.transport, 0):.0f} s)")
        if r.serve_refused:
            oracle_timing(f"  push {r.transport} serve did not start: {r.serve_refused}")
    return runs


def _runs_of(request: pytest.FixtureRequest, transport: str, fixture: str = "tck1_runs") -> tck1.Runs:
    """The runs of ``transport``; skipped (saying why) when a2a-tape has no binding for it or it was not chosen."""
    why = tck1.no_binding_yet(transport)
    if why:
        pytest.skip(why)
    if transport not in tck1.WIRED:
        pytest.fail(
            f"a2a-tape has a {transport} binding now (proxy --grpc-listen): run the TCK's {transport} set-ups through"
            " it in tests/oracles/tck1.py (proxy_args, serve_args, WIRED) and list what differs"
        )
    if transport not in tck1.selected_transports():
        pytest.skip(f"not in ${tck1.TRANSPORTS_ENV}")
    runs: dict[str, tck1.Runs] = request.getfixturevalue(fixture)
    return runs[transport]


def _explain(problems: list[str], runs: tck1.Runs) -> str:
    return "\n".join([f"{len(problems)} problems:", *problems, "", tck1.table(runs, only_differences=True)])


@pytest.mark.parametrize("transport", tck1.TRANSPORTS)
def test_the_tck_reaches_the_agent(request, transport):
    """The harness is sound: most MUST tests pass directly, none errors, and the MUST tests are tests of the run."""
    runs = _runs_of(request, transport)
    counts = runs.direct.counts()
    assert counts.get("passed", 0) >= 50, counts
    errors = [n for n, o in runs.direct.outcomes.items() if o == "error"]
    assert not errors, errors
    assert 100 < len(runs.must) < len(runs.direct.outcomes), len(runs.must)
    assert runs.must <= set(runs.direct.outcomes), sorted(runs.must - set(runs.direct.outcomes))[:5]


@pytest.mark.parametrize("transport", tck1.TRANSPORTS)
def test_tck1_outcomes_through_the_proxy_match_the_agent(request, transport):
    runs = _runs_of(request, transport)
    problems = tck1.judge("proxy", runs, tck1.load_known())
    assert not problems, _explain(problems, runs)


@pytest.mark.parametrize("transport", tck1.TRANSPORTS)
def test_tck1_must_passes_hold_against_serve(request, transport):
    runs = _runs_of(request, transport)
    problems = tck1.judge("serve", runs, tck1.load_known())
    assert not problems, _explain(problems, runs)


@pytest.mark.parametrize("transport", tck1.TRANSPORTS)
def test_tck1_push_tests_pass_against_the_agent(request, transport):
    """The push slice is sound: with SUT_PUSH=1 the agent passes every push test of the TCK directly (config
    calls, and its webhook receiver got the agent's POSTs); none skipped for want of push support."""
    runs = _runs_of(request, transport, "tck1_push_runs")
    outcomes = tck1.push_tests(runs)
    assert len(outcomes) >= 10, sorted(outcomes)
    assert set(outcomes.values()) == {"passed"}, {n: o for n, o in outcomes.items() if o != "passed"}


@pytest.mark.parametrize("transport", tck1.TRANSPORTS)
def test_tck1_push_outcomes_through_the_proxy_match_the_agent(request, transport):
    runs = _runs_of(request, transport, "tck1_push_runs")
    problems = tck1.judge("proxy", runs, tck1.load_known(tck1.PUSH_KNOWN_DIFFERENCES))
    assert not problems, _explain(problems, runs)


@pytest.mark.parametrize("transport", tck1.TRANSPORTS)
def test_tck1_push_must_passes_hold_against_serve(request, transport):
    runs = _runs_of(request, transport, "tck1_push_runs")
    problems = tck1.judge("serve", runs, tck1.load_known(tck1.PUSH_KNOWN_DIFFERENCES))
    assert not problems, _explain(problems, runs)


# --- the allowlist and the judging rules (no TCK needed) -------------------------------------------------


@pytest.mark.parametrize("path", [tck1.KNOWN_DIFFERENCES, tck1.PUSH_KNOWN_DIFFERENCES], ids=lambda p: p.name)
def test_known_tck1_differences_file_is_well_formed(path):
    for line in tck1.load_known(path).values():
        assert line.fields[1].startswith("tests/compatibility/") or line.fields[1] == tck1.WHOLE, line
        assert len(line.reason) > 10, line


def _runs(direct: dict[str, str], proxied: dict[str, str], replay: dict[str, str], must: str = "abcdefgh") -> tck1.Runs:
    def run(name: str, outcomes: dict[str, str]) -> Run:
        return Run(name, "", {f"tests/compatibility/t.py::{k}": v for k, v in outcomes.items()})

    levels = frozenset(f"tests/compatibility/t.py::{k}" for k in must)
    return tck1.Runs("jsonrpc", run("direct", direct), run("proxy", proxied), run("serve", replay), levels)


def _known(*lines: str) -> dict[tuple[str, ...], allowlist.Line]:
    known = {}
    for number, text in enumerate(lines, 1):
        word, transport, name, reason = text.split(None, 3)
        nodeid = name if name == tck1.WHOLE else f"tests/compatibility/t.py::{name}"
        line = allowlist.Line(number, word.rstrip("~"), (transport, nodeid), reason, word.endswith("~"))
        known[(line.setup, *line.fields)] = line
    return known


def test_judge_proxy_reports_unlisted_differences_and_listed_ones_that_agree():
    runs = _runs({"a": "passed", "b": "passed", "c": "failed"}, {"a": "failed", "b": "passed", "c": "failed"}, {})
    known = _known("proxy jsonrpc b was broken once", "proxy http_json a another transport's line")
    problems = tck1.judge("proxy", runs, known)
    assert len(problems) == 2, problems
    assert problems[0].startswith("differs") and "t.py::a: direct passed, proxy failed" in problems[0]
    assert problems[1].startswith("no longer differs (direct passed, proxy passed), remove line 1"), problems[1]


def test_judge_serve_holds_must_passes_only():
    """A MUST test that passed directly must pass against serve (a missing one is a miss); one the agent fails
    may do anything there, and so may a test of another level."""
    direct = {"a": "passed", "b": "failed", "c": "passed", "d": "passed", "e": "passed"}
    runs = _runs(direct, direct, {"a": "skipped", "b": "passed", "c": "passed", "d": "failed"}, must="abce")
    assert tck1.judge("serve", runs, {}) == [
        "differs, not in known_tck1_differences.txt: jsonrpc tests/compatibility/t.py::a: direct passed, serve skipped",
        "differs, not in known_tck1_differences.txt: jsonrpc tests/compatibility/t.py::e: direct passed, serve absent",
    ]
    runs = _runs(direct, direct, {"a": "skipped", "b": "passed", "c": "passed", "e": "passed"}, must="abce")
    assert tck1.judge("serve", runs, _known("serve jsonrpc a replay lacks this")) == []
    gone = tck1.judge("serve", runs, _known("serve jsonrpc a replay lacks this", "serve jsonrpc c fixed since"))
    assert len(gone) == 1 and gone[0].startswith("no longer differs (direct passed, serve passed), remove line 2")


def test_judge_serve_refusing_the_recording_is_one_listed_difference():
    direct = {"a": "passed"}
    refused = _runs(direct, direct, {})
    refused.serve_refused = "a2a-tape serve did not start: nothing to serve"
    assert tck1.judge("serve", refused, {}) == [
        "serve would not start, not in known_tck1_differences.txt: jsonrpc: a2a-tape serve did not start: nothing to serve"
    ]
    assert tck1.judge("serve", refused, _known("serve jsonrpc * serve refuses such a recording")) == []
    started = _runs(direct, direct, {"a": "skipped"})
    gone = tck1.judge("serve", started, _known("serve jsonrpc * serve refuses such a recording"))
    assert len(gone) == 1 and gone[0].startswith("serve starts now: replace line 1"), gone
    assert "t.py::a" in gone[0]


def test_judge_lets_a_sometimes_line_agree():
    runs = _runs({"a": "passed"}, {"a": "passed"}, {})
    assert tck1.judge("proxy", runs, _known("proxy~ jsonrpc a timing under load")) == []


def test_load_known_refuses_a_malformed_line(tmp_path):
    bad = tmp_path / "known.txt"
    bad.write_text("# comment\nproxy jsonrpc tests/compatibility/t.py::a\n")
    with pytest.raises(ValueError, match="known.txt:2: expected 'proxy|serve"):
        tck1.load_known(bad)
    bad.write_text("serve soap tests/compatibility/t.py::a the transport is not the TCK's\n")
    with pytest.raises(ValueError, match="known.txt:1: unknown transport 'soap'"):
        tck1.load_known(bad)
    bad.write_text(
        "serve jsonrpc tests/compatibility/t.py::a one reason\nserve jsonrpc tests/compatibility/t.py::a two\n"
    )
    with pytest.raises(ValueError, match=r"known.txt:2: .* listed twice \(line 1\)"):
        tck1.load_known(bad)


def test_junit_outcomes_in_pytest_words(tmp_path):
    """The junit XML's testcases read back as pytest's outcomes, keyed by node id (module-level tests too)."""
    (tmp_path / "tests" / "compatibility").mkdir(parents=True)
    (tmp_path / "tests" / "compatibility" / "test_x.py").write_text("")
    report = tmp_path / "r.xml"
    report.write_text(
        """<?xml version="1.0"?><testsuites><testsuite>
        <testcase classname="tests.compatibility.test_x.TestA" name="test_pass[jsonrpc]"/>
        <testcase classname="tests.compatibility.test_x.TestA" name="test_fail"><failure message="x"/></testcase>
        <testcase classname="tests.compatibility.test_x" name="test_skip"><skipped type="pytest.skip"/></testcase>
        <testcase classname="tests.compatibility.test_x" name="test_xfail"><skipped type="pytest.xfail"/></testcase>
        <testcase classname="tests.compatibility.test_x" name="test_teardown"/>
        <testcase classname="tests.compatibility.test_x" name="test_teardown"><error message="t"/></testcase>
        </testsuite></testsuites>"""
    )
    m = "tests/compatibility/test_x.py::"
    assert tck1.read_junit(report, tmp_path) == {
        f"{m}TestA::test_pass[jsonrpc]": "passed",
        f"{m}TestA::test_fail": "failed",
        f"{m}test_skip": "skipped",
        f"{m}test_xfail": "xfailed",
        f"{m}test_teardown": "error",
    }
