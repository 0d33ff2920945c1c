"""Runs (issue 30 item 3) in ``export`` and ``serve``, through the installed CLI with real agents.

The task here has two runs that differ: ``record`` of an opencode-blocks agent (a real a2a-sdk
agent whose task store keeps a doubled answer: run 1, source client, with the agent's stored
copy), then ``verify`` of it against the plain a2a-sdk agent (run 2, source verify, another
answer). ``export TASK@N`` (and ``--run N``) writes that run alone in every format; a bad
selector is one line, exit 2. ``serve`` serves run 1 (the agent as first recorded) unless
``--run N`` says otherwise.

``serve`` runs installed; so do one export (jsonl) of a run and each bad selector in one format. What
prepares the log (record, verify, import) and reads it (tasks, show), and the other formats' exports, run
the same command in process (``installed=False``).
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from tests.conftest import running_sdk_agent
from tests.docs.harness import BIN, Background, reader_env, run_line
from tests.support.contract_agents import ANSWER, contract_agent
from tests.support.in_process import run_text_in_process, without_our_variables

A2A = BIN / "a2a-tape"
FIRST = "".join(ANSWER)  # what the opencode-blocks agent streams
SECOND = "chunk-0 chunk-1 chunk-2 "  # what the plain a2a-sdk agent streams

pytestmark = pytest.mark.skipif(not A2A.exists(), reason="needs the installed console script")


def _cli(line: str, cwd: Path, env: dict[str, str], *, installed: bool = True) -> tuple[int, str, str]:
    """``a2a-tape LINE`` (a shell line's words) by the installed script; ``installed=False``: in process."""
    if installed:
        run = run_line(f"{A2A} {line}", cwd, env)
    else:
        # HOME only: the CLI makes its console once per process, as wide as $COLUMNS says then (a run here
        # that set it would set it for every later run in this worker)
        run = run_text_in_process(shlex.split(line), cwd, {**without_our_variables(), "HOME": env["HOME"]})
    assert "Traceback" not in run.stderr, run.stderr
    return run.returncode, run.stdout, run.stderr


def two_runs(db: Path, cwd: Path) -> tuple[str, dict[str, str]]:
    """A task of two runs that differ (see the module's docstring); its id."""
    env = reader_env(cwd)
    with contract_agent() as blocks, running_sdk_agent() as sdk:
        code, out, err = _cli(f"record {blocks} 'hello blocks' --db '{db}' --json", cwd, env, installed=False)
        assert code == 0, err
        task = json.loads(out)["task_id"]
        code, out, err = _cli(f"verify {task} --against {sdk.url} --db '{db}'", cwd, env, installed=False)
        assert code == 1 and "diverged" in out, out + err  # another agent: another answer
    code, out, err = _cli(f"tasks --runs --db '{db}' --json", cwd, env, installed=False)
    runs = json.loads(out)
    assert [(r["run"], r["source"], r["final_answer"]) for r in runs] == [
        (f"{task}@1", "client", FIRST),
        (f"{task}@2", "verify", SECOND),
    ]
    return task, env


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> tuple[Path, str, dict[str, str], Path]:
    cwd = tmp_path_factory.mktemp("runs")
    db = cwd / "runs.db"
    task, env = two_runs(db, cwd)
    return db, task, env, cwd


def _export(runs, fmt: str, which: str, *, installed: bool = False) -> str:
    db, task, env, cwd = runs
    code, out, err = _cli(f"export {which} --format {fmt} --db '{db}'", cwd, env, installed=installed)
    assert code == 0, err
    return out


def test_export_of_a_run_is_that_run_alone_in_every_format(runs):
    db, task, env, cwd = runs
    events = {}
    for n in (1, 2):
        code, out, err = _cli(f"show {task}@{n} --json --db '{db}'", cwd, env, installed=False)
        events[n] = {e["position"] for e in json.loads(out)}
    assert events[1] and events[2] and not events[1] & events[2]

    # jsonl: the tape of a run imports as one run, of that run's events and answer
    for n, selector in ((1, f"{task}@1"), (2, f"{task} --run 2")):
        tape = cwd / f"run{n}.jsonl"
        tape.write_text(_export(runs, "jsonl", selector, installed=n == 1))  # the one export installed
        copy = cwd / f"run{n}.db"
        code, out, err = _cli(f"import '{tape}' --db '{copy}'", cwd, env, installed=False)
        assert code == 0, err
        code, out, err = _cli(f"tasks --runs --db '{copy}' --json", cwd, env, installed=False)
        [only] = json.loads(out)
        assert only["final_answer"] == (FIRST, SECOND)[n - 1] and only["events"] == len(events[n])
    whole = _export(runs, "jsonl", task)  # a task alone: every run, as before
    assert len(whole.splitlines()) > len(_export(runs, "jsonl", f"{task}@1").splitlines())

    # har: an entry per exchange of the run; both runs make the whole task
    har = {w: json.loads(_export(runs, "har", w))["log"]["entries"] for w in (task, f"{task}@1", f"{task}@2")}
    assert har[f"{task}@1"] and har[f"{task}@2"]
    assert len(har[f"{task}@1"]) + len(har[f"{task}@2"]) == len(har[task])
    assert all(e["request"]["url"].startswith(har[f"{task}@1"][0]["request"]["url"]) for e in har[f"{task}@1"])

    # html: the run's answer, the run's events, the selector in the title
    for n in (1, 2):
        page = _export(runs, "html", f"{task}@{n}")
        assert f"task {task}@{n}" in page
        assert {int(p) for p in re.findall(r'<tr id="ev-(\d+)"', page)} == events[n]
        assert (FIRST, SECOND)[n - 1] in page and (SECOND, FIRST)[n - 1] not in page

    # mermaid: a diagram of the run's arrows
    diagrams = {w: _export(runs, "mermaid", w) for w in (task, f"{task}@1", f"{task}@2")}
    assert "chunk-0" in diagrams[f"{task}@2"] and "chunk-0" not in diagrams[f"{task}@1"]
    assert "chunk-0" in diagrams[task]

    # otlp: the run's spans (a span per exchange); both runs make the whole task
    spans = {}
    for w in (task, f"{task}@1", f"{task}@2"):
        lines = [json.loads(line) for line in _export(runs, "otlp", w).splitlines()]
        spans[w] = sum(len(ss["spans"]) for doc in lines for rs in doc["resourceSpans"] for ss in rs["scopeSpans"])
    assert spans[f"{task}@1"] and spans[f"{task}@2"]
    assert spans[f"{task}@1"] + spans[f"{task}@2"] == spans[task]


@pytest.mark.parametrize("fmt", ["jsonl", "har", "mermaid", "html", "otlp"])
def test_export_of_a_bad_selector_is_one_line_exit_2(runs, fmt):
    """Each bad selector through the installed script in jsonl; in the other formats in process."""
    db, task, env, cwd = runs
    for which, says in (
        (f"{task}@3", "no run 3"),
        (f"{task}@x", "bad run selector"),
        (f"{task}@1 --run 2", "name two runs"),
        (f"{task} --run 0", "not a whole number"),
        ("--all --run 1", "goes with a TASK"),
    ):
        code, out, err = _cli(f"export {which} --format {fmt} --db '{db}'", cwd, env, installed=fmt == "jsonl")
        assert code == 2 and says in err and len(err.strip().splitlines()) == 1, (which, err)
        assert out == ""


def _served_answer(runs, *serve_args: str) -> str:
    db, task, env, cwd = runs
    serve = Background(
        f"{A2A} serve --db '{db}' --listen 127.0.0.1:0 {' '.join(serve_args)}", cwd, env, r"a2a-tape serve: http://"
    )
    try:
        url = re.search(r"http://127\.0\.0\.1:\d+", serve.text).group(0)  # type: ignore[union-attr]
        replayed = cwd / f"replayed-{'-'.join(serve_args) or 'default'}.db"
        code, out, err = _cli(f"record {url} 'hello blocks' --db '{replayed}' --json", cwd, env, installed=False)
        assert code == 0, err
        recorded = json.loads(out)
        # the replay answers with the task id of the run served (a verify run's agent named its own)
        assert (recorded["task_id"] == task) == ("2" not in serve_args), recorded
        return recorded["final_answer"]
    finally:
        assert serve.stop() == 0, serve.text


def test_serve_serves_the_first_run_unless_run_n_says_which(runs):
    assert _served_answer(runs) == FIRST  # the agent as first recorded
    assert _served_answer(runs, "--run", "1") == FIRST
    assert _served_answer(runs, "--run", "2") == SECOND  # the verify run's agent


def test_serve_run_refuses_a_run_that_is_no_number(runs):
    db, task, env, cwd = runs
    code, out, err = _cli(f"serve --db '{db}' --run 0", cwd, env)
    assert code == 2 and "--run" in err, err
