"""``a2a-tape verify`` (issue 32) through the installed CLI, with real agents on 127.0.0.1.

A corpus recorded by the test itself (the a2a-sdk chunk agent over JSON-RPC, the same agent over
HTTP+JSON, and :mod:`tests.support.verify_agents`' opencode-style agent over both; plain,
input-required and failing tasks), each task verified against the same, unchanged agent: no
divergence in :data:`ROUNDS` live runs per task (``--runs``). Then the drift agent changed in one way
at a time: verify names the first divergent event, under the rule expected, with exit 1. An agent
that is not there: exit 2, one line.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import anyio
import pytest

from a2a_tape.recorder.record import RecordOptions, record
from a2a_tape.recorder.session import Session
from a2a_tape.store import open_store
from tests.conftest import running_sdk_agent
from tests.docs.harness import BIN, Background, reader_env, run_line
from tests.support.in_process import run_text_in_process, without_our_variables
from tests.support.sdk_agents import two_binding_agent
from tests.support.verify_agents import DriftAgent, drift_agent

A2A = BIN / "a2a-tape"
ROUNDS = int(os.environ.get("A2A_TAPE_VERIFY_ROUNDS", "2"))
"""Live runs per task of the corpus (``--runs``): a few by default, more on demand."""
TEXTS = ("hello there", "ask me", "boom now")
READY = r"http://127\.0\.0\.1:\d+"

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.skipif(not A2A.exists(), reason="needs the installed console script")


def _cli(line: str, cwd: Path, *, installed: bool = True) -> tuple[int, str, str]:
    """``a2a-tape LINE`` (a shell line; ``> FILE`` at its end takes stdout) in ``cwd``, by the installed
    script; ``installed=False``: the same command in this process (tests/support/in_process.py), for the
    runs whose result, not the process, is what is checked."""
    if installed:
        run = run_line(f"{A2A} {line}", cwd, reader_env(cwd))
    else:
        argv, into = shlex.split(line), None
        if len(argv) > 2 and argv[-2] == ">":
            argv, into = argv[:-2], argv[-1]
        env = {**without_our_variables(), "HOME": str(cwd), "COLUMNS": "100"}
        run = run_text_in_process(argv, cwd, env, timeout=120)
        if into is not None:
            (cwd / into).write_text(run.stdout)
    assert "Traceback" not in run.stderr, run.stderr
    return run.returncode, run.stdout, run.stderr


def _record(url: str, db: Path, binding: Literal["jsonrpc", "http+json"]) -> dict[str, str]:
    """Each of :data:`TEXTS` recorded as ``record`` does (its recorder, in this process: the CLI
    under test is verify's, and a process per recording would cost seconds each)."""
    ids = {}
    with open_store(str(db), create=True) as st:
        for text in TEXTS:
            result = anyio.run(record, Session(st), RecordOptions(url=url, text=text, binding=binding))
            assert result.task_id is not None
            ids[text] = result.task_id
    return ids


def test_corpus_verifies_against_the_unchanged_agents(tmp_path: Path) -> None:
    db = tmp_path / "corpus.db"
    recorded = 0
    with running_sdk_agent() as sdk, two_binding_agent() as rest, drift_agent() as (drift, _):
        agents = [(sdk.url, [_record(sdk.url, db, "jsonrpc")]), (rest, [_record(rest, db, "http+json")])]
        agents.append((drift, [_record(drift, db, "jsonrpc"), _record(drift, db, "http+json")]))
        for url, recordings in agents:
            ids = [tid for r in recordings for tid in r.values()]
            recorded += len(ids)
            junit = tmp_path / "verify.xml"
            code, out, err = _cli(
                f"verify {' '.join(ids)} --against {url} --runs {ROUNDS} --db '{db}' --json --junit '{junit}'",
                tmp_path,
                installed=url == sdk.url,  # the first agent's through the installed script, the others in process
            )
            report = json.loads(out)
            assert code == 0, (out, err)
            assert report["ok"] and report["summary"]["matched"] == len(ids), out
            assert all(t["divergences"] == [] and len(t["live"]) == ROUNDS for t in report["tasks"])
            suite = ET.parse(junit).getroot()
            assert suite.get("tests") == str(len(ids)) and suite.get("failures") == "0"
    assert recorded == 12
    # every verify run is a run of its task (source verify), the recording stays the first
    code, out, err = _cli(f"tasks --runs --db '{db}' --json", tmp_path, installed=False)
    runs = json.loads(out)
    assert sum(1 for r in runs if r["source"] == "verify") == recorded * ROUNDS
    assert sum(1 for r in runs if r["source"] == "client") == recorded
    assert all(r["number"] == 1 for r in runs if r["source"] == "client")


@pytest.fixture(scope="module")
def drifting(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, DriftAgent, Path, dict]]:
    """The drift agent, and its recording (each text, each binding) made while it behaved."""
    cwd = tmp_path_factory.mktemp("drift")
    db = cwd / "recorded.db"
    with drift_agent() as (url, agent):
        ids = {"jsonrpc": _record(url, db, "jsonrpc"), "http+json": _record(url, db, "http+json")}
        yield url, agent, db, ids


# fault -> (the task's text, the rule that names the first divergence, the recorded event's kind)
DRIFTS = {
    "drop-answer": ("hello there", "artifacts", "artifact"),
    "double-answer": ("hello there", "closure", "artifact"),
    "no-last-chunk": ("hello there", "closure", "artifact"),
    "skip-working": ("hello there", "states", "status"),
    "never-ask": ("ask me", "states", "status"),
    "error-code": ("boom now", "errors", "error"),
    "rename": ("hello there", "artifacts", "artifact"),
    "reasoning-in-answer": ("hello there", "artifacts", "artifact"),
    "cut": ("hello there", "artifacts", "artifact"),
    "slow": ("hello there", "first-event", None),
    "tool-status": ("hello there", "tool-calls", "artifact"),
}


@pytest.mark.parametrize("fault", sorted(DRIFTS))
def test_a_drift_is_named_at_its_first_divergent_event(drifting, fault: str, tmp_path: Path) -> None:
    """One verify of the task over both bindings: each named at its first divergent event."""
    url, agent, db, ids = drifting
    text, rule, kind = DRIFTS[fault]
    tasks = [ids["jsonrpc"][text], ids["http+json"][text]]
    slower = " --slower 3" if fault == "slow" else ""
    agent.fault = fault
    try:
        into = tmp_path / "live.db"
        line = f"verify {' '.join(tasks)} --against {url} --db '{db}' --into '{into}' --json{slower}"
        code, out, err = _cli(line, tmp_path, installed=fault == min(DRIFTS))  # the table's first row installed
    finally:
        agent.fault = None
    assert code == 1, (out, err)
    report = json.loads(out)
    assert [t["task_id"] for t in report["tasks"]] == tasks
    for task, one in zip(tasks, report["tasks"], strict=True):
        assert one["verdict"] == "diverged"
        first = one["first"]
        assert first["rule"] == rule, first
        assert first["recorded"]["run"] == f"{task}@1" and first["live"]["run"] == f"{task}@1"
        assert first["recorded"]["position"] is not None and first["recorded"]["kind"] == kind, first


def test_text_report_names_the_rule_and_both_events(drifting, tmp_path: Path) -> None:
    url, agent, db, ids = drifting
    task = ids["jsonrpc"]["hello there"]
    agent.fault = "rename"
    try:
        code, out, err = _cli(f"verify {task} --against {url} --db '{db}' --into '{tmp_path / 'l.db'}'", tmp_path)
    finally:
        agent.fault = None
    assert code == 1, err
    assert "diverged" in out and "first divergence: artifacts: artifact #3: renamed 'answer' -> 'reply'" in out
    assert f"recorded {task}@1 #" in out and f"live     {task}@1 #" in out
    assert "1 diverged" in err


def test_live_runs_that_disagree_make_a_task_flaky_not_diverged(drifting, tmp_path: Path) -> None:
    url, agent, db, ids = drifting
    task = ids["jsonrpc"]["hello there"]
    agent.fault, agent.executions = "sampling", 0
    try:
        line = f"verify {task} --against {url} --runs 2 --db '{db}' --into '{tmp_path / 'l.db'}' --json"
        code, out, err = _cli(line, tmp_path, installed=False)
    finally:
        agent.fault = None
    assert code == 0, (out, err)
    (one,) = json.loads(out)["tasks"]
    assert one["verdict"] == "flaky" and len(one["live"]) == 2
    assert one["disagreements"][0]["rule"] == "artifacts", one


def test_an_unreachable_agent_is_one_line_exit_2(drifting, tmp_path: Path) -> None:
    _, _, db, ids = drifting
    from tests.support.servers import closed_port

    port = closed_port()  # nothing listens there now
    code, out, err = _cli(
        f"verify --against http://127.0.0.1:{port} --db '{db}' --into '{tmp_path / 'l.db'}'", tmp_path
    )
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "cannot be verified" in err, err


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("verify --db '{db}'", "--against"),
        ("verify nosuchtask --against http://127.0.0.1:9 --db '{db}'", "unknown task"),
        ("verify --against http://127.0.0.1:9 --slower 0.5 --db '{db}'", "--slower"),
    ],
)
def test_bad_usage_is_one_line_exit_2(drifting, line: str, says: str, tmp_path: Path) -> None:
    db = drifting[2]
    code, out, err = _cli(line.format(db=db), tmp_path, installed=line == "verify --db '{db}'")  # the first row
    assert code == 2 and out == "", (out, err)
    assert len(err.strip().splitlines()) == 1 and says in err, err


def test_binding_grpc_at_an_agent_without_a_grpc_interface_is_one_line_exit_2(drifting, tmp_path: Path) -> None:
    """``--binding grpc`` at an agent whose card lists no gRPC interface: exit 2, one line, nothing sent."""
    url, agent, db, ids = drifting
    before = agent.executions
    line = f"verify {ids['jsonrpc']['hello there']} --against {url} --binding grpc --db '{db}' --into '{tmp_path / 'l.db'}'"
    code, out, err = _cli(line, tmp_path, installed=False)
    assert code == 2 and out == "", (out, err)
    assert len(err.strip().splitlines()) == 1 and "no gRPC interface" in err, err
    assert agent.executions == before


def _replayed_answer(db: Path, cwd: Path, text: str) -> str:
    """The final answer a client gets from ``serve`` replaying ``db`` (recorded into a log of its own)."""
    serve = Background(f"{A2A} serve --db '{db}' --listen 127.0.0.1:0", cwd, reader_env(cwd), READY)
    try:
        url = re.search(READY, serve.text)
        assert url is not None, serve.text
        code, out, err = _cli(f"record {url.group(0)} '{text}' --db '{cwd / 'client.db'}' --json", cwd, installed=False)
        assert code == 0, (out, err)
        answer = json.loads(out)["final_answer"]
        assert isinstance(answer, str), out
        return answer
    finally:
        serve.stop()


def test_update_adopts_a_passing_live_run_never_a_diverged_one(tmp_path: Path) -> None:
    """``--update`` (issue 32 item 6): after a match the live run is what ``serve`` replays and what
    the next verify compares with, the recording kept as run 1; after a divergence nothing changes."""
    db = tmp_path / "recorded.db"
    with drift_agent() as (url, agent):
        task = _record(url, db, "jsonrpc")["hello there"]
        assert _replayed_answer(db, tmp_path, "hello there") == "The answer is 42."
        agent.fault = "rename"  # a regression: never adopted
        try:
            code, out, err = _cli(
                f"verify {task} --against {url} --db '{db}' --update --json", tmp_path, installed=False
            )
        finally:
            agent.fault = None
        assert code == 1, (out, err)
        (one,) = json.loads(out)["tasks"]
        assert one["update"]["served"] is None and one["update"]["why"].startswith("diverged"), one
        assert _replayed_answer(db, tmp_path, "hello there") == "The answer is 42."

        agent.fault = "reword"  # the same contract, other words: adopted, the change summarised
        try:
            code, out, err = _cli(
                f"verify {task} --against {url} --db '{db}' --update --json", tmp_path, installed=False
            )
            assert code == 0, (out, err)
            report = json.loads(out)
            (one,) = report["tasks"]
            assert one["verdict"] == "match" and report["summary"]["updated"] == 1, out
            update = one["update"]
            assert (update["was"], update["served"], update["why"]) == (f"{task}@1", f"{task}@3", None), one
            # the text changed; the times may have too (a loaded machine): they are listed after it
            text = "artifact #3 'answer' (final_answer): text 'The answer is 42.' -> 'The answer is forty-two.'"
            assert update["changes"][0] == text, update
            assert all(c.startswith(("time to first event", "total time")) for c in update["changes"][1:]), update
            code, text, err = _cli(f"verify {task} --against {url} --db '{db}' --update", tmp_path)
            assert code == 0 and f"updated: serve replays {task}@4 (was {task}@3)" in text, (text, err)
            assert "1 updated" in err, err
            # the next verify compares with the adopted run: its exact text holds
            code, out, err = _cli(
                f"verify {task} --against {url} --db '{db}' --text exact --json", tmp_path, installed=False
            )
            assert code == 0, (out, err)
            assert json.loads(out)["tasks"][0]["recorded"] == f"{task}@4", out
        finally:
            agent.fault = None
    assert _replayed_answer(db, tmp_path, "hello there") == "The answer is forty-two."
    code, out, err = _cli(f"tasks --runs --db '{db}' --json", tmp_path, installed=False)
    runs = [r for r in json.loads(out) if r["task_id"] == task]
    assert [r["source"] for r in runs] == ["client", "verify", "verify", "verify", "verify"], runs


def test_update_needs_the_recordings_log(drifting, tmp_path: Path) -> None:
    """A live run adopted goes with the recordings: not into another log, nothing sent to the agent."""
    url, agent, db, ids = drifting
    task = ids["jsonrpc"]["hello there"]
    line = f"verify {task} --against {url} --db '{db}' --into '{tmp_path / 'l.db'}' --update"
    before = agent.executions
    code, out, err = _cli(line, tmp_path, installed=False)
    assert code == 2 and out == "" and "--update" in err and len(err.strip().splitlines()) == 1, err
    assert agent.executions == before


def _tape_runs(tape: Path, cwd: Path) -> list[dict]:
    code, out, err = _cli(f"tasks --runs --db '{tape}' --json", cwd, installed=False)
    assert code == 0, (out, err)
    return json.loads(out)


def test_update_of_a_tape_writes_the_live_run_into_it(tmp_path: Path) -> None:
    """``--update`` of a tape (issue 32 item 3): a failing verify leaves the tape byte for byte as
    it was; a passing one writes it again whole (the recording, the live run, the adoption), and
    ``serve`` of the tape then answers with the live run; the next verify compares with it."""
    db, tape = tmp_path / "recorded.db", tmp_path / "hello.jsonl"
    with drift_agent() as (url, agent):
        task = _record(url, db, "jsonrpc")["hello there"]
        assert _cli(f"export {task} --format jsonl --db '{db}' > '{tape}'", tmp_path, installed=False)[0] == 0
        before = tape.read_bytes()
        agent.fault = "rename"
        try:
            code, out, err = _cli(f"verify --db '{tape}' --against {url} --update --json", tmp_path, installed=False)
        finally:
            agent.fault = None
        assert code == 1, (out, err)
        (one,) = json.loads(out)["tasks"]
        assert one["update"]["served"] is None and one["update"]["why"].startswith("diverged"), one
        assert tape.read_bytes() == before  # not written: the live run of a failing verify is not kept

        agent.fault = "reword"  # the same contract, other words: adopted
        try:
            code, out, err = _cli(f"verify --db '{tape}' --against {url} --update --json", tmp_path)
            assert code == 0, (out, err)
            report = json.loads(out)
            assert report["into"] == str(tape) and report["summary"]["updated"] == 1, out
            assert report["tasks"][0]["update"]["served"] == f"{task}@2", out
            assert [r["source"] for r in _tape_runs(tape, tmp_path)] == ["client", "verify"]
            assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".hello.jsonl.")]  # no temporary
            assert _replayed_answer(tape, tmp_path, "hello there") == "The answer is forty-two."
            # the next verify compares with the adopted run: its exact text holds
            code, out, err = _cli(
                f"verify --db '{tape}' --against {url} --text exact --json", tmp_path, installed=False
            )
            assert code == 0, (out, err)
            assert json.loads(out)["tasks"][0]["recorded"] == f"{task}@2", out
        finally:
            agent.fault = None
    # the tape is still a tape every reader takes: a log made of it holds both runs
    code, out, err = _cli(f"import '{tape}' --db '{tmp_path / 'imported.db'}'", tmp_path, installed=False)
    assert code == 0, (out, err)
    assert [r["source"] for r in _tape_runs(tmp_path / "imported.db", tmp_path)] == ["client", "verify"]


def test_update_of_a_tape_another_writer_changed_is_refused(tmp_path: Path) -> None:
    """The tape changes while verify is in flight (another writer): verify writes nothing over
    it, one line, exit 2; the other writer's tape stays as that writer left it."""
    import subprocess
    import threading

    db, tape = tmp_path / "recorded.db", tmp_path / "hello.jsonl"
    with drift_agent() as (url, agent):
        task = _record(url, db, "jsonrpc")["hello there"]
        assert _cli(f"export {task} --format jsonl --db '{db}' > '{tape}'", tmp_path, installed=False)[0] == 0
        agent.entered.clear()
        agent.hold = threading.Event()
        try:
            proc = subprocess.Popen(
                [str(A2A), "verify", "--db", str(tape), "--against", url, "--update"],
                cwd=tmp_path,
                env=reader_env(tmp_path),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            assert agent.entered.wait(60), "verify never reached the agent"
            changed = tape.read_bytes() + tape.read_bytes().split(b"\n", 1)[1]  # the same lines again: a tape
            tape.write_bytes(changed)
        finally:
            agent.hold.set()
            agent.hold = None
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 2 and out == "", (out, err)
    assert len(err.strip().splitlines()) == 1 and "changed by another writer" in err, err
    assert tape.read_bytes() == changed


def test_across_bindings_each_recording_over_every_binding_the_card_offers(tmp_path: Path) -> None:
    """``--across-bindings`` (issue 32 item 4): every recorded client over JSON-RPC and HTTP+JSON,
    its errors compared by what A2A names them; the unchanged agents match on every binding."""
    db = tmp_path / "corpus.db"
    with two_binding_agent() as rest, drift_agent() as (drift, _):
        for url, recordings in ((rest, [_record(rest, db, "http+json")]), (drift, [_record(drift, db, "jsonrpc")])):
            ids = [tid for r in recordings for tid in r.values()]
            code, out, err = _cli(
                f"verify {' '.join(ids)} --against {url} --across-bindings --db '{db}' --json",
                tmp_path,
                installed=False,
            )
            assert code == 0, (out, err)
            report = json.loads(out)
            pairs = sorted((t["task_id"], t["binding"], t["verdict"]) for t in report["tasks"])
            assert pairs == sorted((i, b, "match") for i in ids for b in ("jsonrpc", "http+json")), out


def test_across_bindings_names_a_binding_specific_error_shape(drifting, tmp_path: Path) -> None:
    """The agent's HTTP+JSON binding fails with INTERNAL where its JSON-RPC one (and the recording)
    says UNSUPPORTED_OPERATION: the HTTP+JSON run diverges at the error, the JSON-RPC one matches."""
    url, agent, db, ids = drifting
    task = ids["jsonrpc"]["boom now"]
    junit = tmp_path / "v.xml"
    agent.fault = "rest-error-shape"
    try:
        line = f"verify {task} --against {url} --across-bindings --db '{db}' --into '{tmp_path / 'l.db'}' --json"
        code, out, err = _cli(f"{line} --junit '{junit}'", tmp_path, installed=False)
    finally:
        agent.fault = None
    assert code == 1, (out, err)
    by = {t["binding"]: t for t in json.loads(out)["tasks"]}
    assert by["jsonrpc"]["verdict"] == "match", by["jsonrpc"]
    first = by["http+json"]["first"]
    assert by["http+json"]["verdict"] == "diverged" and first["rule"] == "errors", by["http+json"]
    assert first["recorded"]["kind"] == "error" and first["recorded"]["what"] == "error UNSUPPORTED_OPERATION", first
    assert first["live"]["kind"] == "error" and "INTERNAL" in first["live"]["what"], first
    names = [c.get("name") for c in ET.parse(junit).getroot()]
    assert names == [f"{task} over jsonrpc", f"{task} over http+json"], names


GATED = """
import pytest

@pytest.mark.a2a_tape("recordings/hello.jsonl")
def test_client(a2a_tape):
    assert a2a_tape.url
"""


def test_pytest_gate_fails_a_test_whose_recording_diverged(drifting, pytester: pytest.Pytester) -> None:
    """``pytest --a2a-tape-verify URL`` (issue 32 item 5): the replayed recording is verified first;
    unchanged agent, the test passes; the agent drifted, it fails with the first divergence."""
    url, agent, db, ids = drifting
    (pytester.path / "recordings").mkdir()
    tape = pytester.path / "recordings" / "hello.jsonl"
    task = ids["jsonrpc"]["hello there"]
    assert _cli(f"export {task} --format jsonl --db '{db}' > '{tape}'", pytester.path, installed=False)[0] == 0
    pytester.makepyfile(test_gated=GATED)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--a2a-tape-verify", url)
    result.assert_outcomes(passed=1)
    agent.fault = "rename"
    try:
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--a2a-tape-verify", url)
    finally:
        agent.fault = None
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([f"*a2a-tape verify: *hello.jsonl: {task} diverged: artifacts: artifact #3: renamed*"])
    assert '"source":"verify"' not in tape.read_text()  # the recording is never written


def test_live_runs_that_disagree_while_each_matches_the_recording_are_flaky(tmp_path: Path) -> None:
    """The rules are not transitive: recorded 0.8 s to the first event, one live run fast and one
    0.8 s late each hold against the recording with ``--slower 3``, not against each other. Flaky,
    exit 0 (verify died with StopIteration when no live run diverged from the recording)."""
    db = tmp_path / "recorded.db"
    with drift_agent() as (url, agent):
        agent.fault = "slow"
        try:
            task = _record(url, db, "jsonrpc")["hello there"]
            agent.fault, agent.executions = "sampling:slow", 0
            line = f"verify {task} --against {url} --runs 2 --slower 3 --db '{db}' --json"
            code, out, err = _cli(line, tmp_path, installed=False)
        finally:
            agent.fault = None
    assert code == 0, (out, err)
    (one,) = json.loads(out)["tasks"]
    assert one["verdict"] == "flaky" and one["divergences"] == [] and one["first"] is None, one
    assert one["disagreements"][0]["rule"] == "first-event", one
