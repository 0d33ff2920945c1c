"""The pytest plugin, as a user meets it: a test module using the marker, run by pytester.

The inner runs are subprocesses: an in-process run re-imports httpx/httpcore and leaves the outer
session's httpx mapping httpcore errors of another module generation (a ReadTimeout no longer
caught as ``httpx.ReadTimeout`` by later tests).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import running_sdk_agent

pytest_plugins = ["pytester"]

TAPE = Path(__file__).parent / "data" / "chunk-agent.jsonl"

USER_MODULE = """
import anyio
import httpx
import pytest
from httpx_sse import connect_sse

BODY = b'{"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hello"}]}}}'
HEADERS = {"A2A-Version": "1.0", "content-type": "application/json"}


@pytest.mark.a2a_tape("recordings/chunk.jsonl")
def test_stream_over_the_transport(a2a_tape):
    with httpx.Client(transport=a2a_tape.transport, base_url="http://agent") as c:
        with connect_sse(c, "POST", "/", content=BODY, headers=HEADERS) as es:
            datas = [s.data for s in es.iter_sse()]
    assert len(datas) == 6 and "TASK_STATE_COMPLETED" in datas[-1]


@pytest.mark.a2a_tape("recordings/chunk.jsonl")
def test_sdk_client_over_http(a2a_tape):
    from a2a.client import ClientConfig, ClientFactory
    from a2a.types import Message, Part, Role, SendMessageRequest, TaskState

    async def main():
        async with httpx.AsyncClient(timeout=10) as hc:
            client = await ClientFactory(ClientConfig(httpx_client=hc)).create_from_url(a2a_tape.url)
            req = SendMessageRequest(message=Message(message_id="m", role=Role.ROLE_USER, parts=[Part(text="hello")]))
            return [ev async for ev in client.send_message(req)]

    events = anyio.run(main)
    assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED


@pytest.mark.a2a_tape("recordings/chunk.jsonl")
def test_sdk_client_over_http_json(a2a_tape):
    from a2a.client import ClientConfig, ClientFactory
    from a2a.types import AgentCapabilities, AgentCard, AgentInterface, Message, Part, Role, SendMessageRequest, TaskState

    # the recorded card offers JSON-RPC only (it is served as recorded): this client is told of HTTP+JSON
    card = AgentCard(
        name="replay",
        capabilities=AgentCapabilities(streaming=True),
        supported_interfaces=[AgentInterface(protocol_binding="HTTP+JSON", protocol_version="1.0", url=a2a_tape.url)],
    )

    async def main():
        async with httpx.AsyncClient(timeout=10) as hc:
            config = ClientConfig(httpx_client=hc, supported_protocol_bindings=["HTTP+JSON"])
            client = ClientFactory(config).create(card)
            req = SendMessageRequest(message=Message(message_id="m", role=Role.ROLE_USER, parts=[Part(text="hello")]))
            return [ev async for ev in client.send_message(req)]

    events = anyio.run(main)  # a JSON-RPC recording, answered over HTTP+JSON
    assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED


@pytest.mark.a2a_tape("recordings/chunk.jsonl", faults="drop-after=2")
def test_faults_from_the_marker(a2a_tape):
    async def main():
        async with httpx.AsyncClient(transport=a2a_tape.async_transport, base_url="http://agent") as c:
            r = await c.post("/", content=BODY, headers=HEADERS)
            return r.content.count(b"data: ")

    assert anyio.run(main) == 2
"""


@pytest.fixture
def project(pytester):
    (pytester.path / "recordings").mkdir()
    shutil.copy(TAPE, pytester.path / "recordings" / "chunk.jsonl")
    return pytester


def test_marked_module_passes_offline(project):
    project.makepyfile(test_user=USER_MODULE)
    result = project.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=4)


def test_never_recorded_request_and_bad_markers_fail_clearly(project):
    """Under none, a request nobody recorded fails its test with the line naming the closest
    recording (even though this client ignores the JSON-RPC error); a missing marker or recording
    is an error with one readable line."""
    project.makepyfile(
        test_user="""
import httpx
import pytest

BODY = b'{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "something new"}]}}}'


@pytest.mark.a2a_tape("recordings/chunk.jsonl", record_mode="none")
def test_new_request(a2a_tape):
    with httpx.Client(transport=a2a_tape.transport) as c:
        r = c.post("http://agent/", content=BODY, headers={"A2A-Version": "1.0"})
    assert r.status_code == 200  # the client under test may not look at the error: the plugin does


def test_no_marker(a2a_tape):
    pass


@pytest.mark.a2a_tape("recordings/nope.jsonl")
def test_missing(a2a_tape):
    pass
"""
    )
    result = project.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1, errors=2)
    result.stdout.fnmatch_lines_random(
        [
            "*a2a-tape: no recording matches SendMessage with text 'something new'*closest recording: exchange #*",
            "*needs @pytest.mark.a2a_tape*",
            "*a2a-tape: recording 'recordings/nope.jsonl' not found under any of: *",
        ]
    )
    assert "Traceback" not in result.stdout.str()


def test_command_line_switches_the_record_mode(project, monkeypatch):
    """--a2a-tape-record-mode=all sends every request to the upstream agent and records it."""
    project.makepyfile(test_user=USER_MODULE)
    with running_sdk_agent() as agent:
        monkeypatch.setenv("A2A_TAPE_UPSTREAM", agent.url)
        result = project.runpytest_subprocess("-p", "no:cacheprovider", "--a2a-tape-record-mode=all", "-k", "transport")
        result.assert_outcomes(passed=1, deselected=3)
        assert agent.executor.executions == 1
    assert (project.path / "recordings" / "chunk.jsonl").read_bytes().count(b"\n") > TAPE.read_bytes().count(b"\n")


LOOKUP_MODULE = """
import pytest


@pytest.mark.a2a_tape("recordings/chunk.jsonl")
def test_found(a2a_tape):
    assert a2a_tape.library.source.endswith("chunk.jsonl")
"""

HOSTILE_MODULE = """
import pytest


@pytest.mark.a2a_tape("recordings/nope.jsonl")
def test_missing(a2a_tape):
    pass


@pytest.mark.a2a_tape("recordings/broken.jsonl")
def test_broken(a2a_tape):
    pass
"""


@pytest.mark.parametrize("run_from", [".", "tests"])
def test_tape_lookup_from_the_root_or_tests(project, monkeypatch, run_from):
    """A project without pyproject.toml or pytest.ini: the tape in ``recordings/`` at its root is
    found whether pytest runs from the root or from ``tests/`` (there the rootdir is ``tests/``: the
    walk up from the test file finds it). Before, from ``tests/``, set-up failed."""
    (project.path / "tests").mkdir()
    (project.path / "tests" / "test_user.py").write_text(LOOKUP_MODULE)
    monkeypatch.chdir(project.path / run_from)
    result = project.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


@pytest.mark.parametrize("run_from", [".", "tests"])
def test_missing_or_broken_tape_is_one_line(project, monkeypatch, run_from):
    """A missing tape is one line naming every folder it was looked for in, the path said once; a
    tape that does not read is one line too: no chained-exception text, no traceback."""
    (project.path / "tests").mkdir()
    (project.path / "tests" / "test_user.py").write_text(HOSTILE_MODULE)
    (project.path / "recordings" / "broken.jsonl").write_text('{"type": "header", "a2a_tape": 99}\n')
    monkeypatch.chdir(project.path / run_from)
    result = project.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(errors=2)
    out = result.stdout.str()
    tests_dir, root = project.path / "tests", project.path
    looked = f"a2a-tape: recording 'recordings/nope.jsonl' not found under any of: {tests_dir}, {root}"
    assert looked in out
    body = out.split("short test summary info")[0]  # the summary repeats it (whole where CI is set)
    assert body.count("nope.jsonl") == 1  # once: in the line
    result.stdout.fnmatch_lines(["*a2a-tape: cannot open recording *broken.jsonl: *"])
    assert "During handling" not in out and "Traceback" not in out


RECORDING_MODULE = """
import httpx
import pytest
from httpx_sse import connect_sse

BODY = b'{"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hello"}]}}}'
HEADERS = {"A2A-Version": "1.0", "content-type": "application/json"}


def ask(a2a_tape):
    with httpx.Client(transport=a2a_tape.transport, base_url="http://agent") as c:
        with connect_sse(c, "POST", "/", content=BODY, headers=HEADERS) as es:
            datas = [s.data for s in es.iter_sse()]
    assert "TASK_STATE_COMPLETED" in datas[-1]


@pytest.mark.a2a_tape("recordings/new.jsonl", record_mode="once")
def test_named(a2a_tape):
    ask(a2a_tape)


@pytest.mark.a2a_tape(record_mode="once")
def test_bare(a2a_tape):
    ask(a2a_tape)


class TestGrouped:
    @pytest.mark.a2a_tape(record_mode="once")
    @pytest.mark.parametrize("n", [1])
    def test_in_a_class(self, a2a_tape, n):
        ask(a2a_tape)
"""


@pytest.mark.parametrize("run_from", [".", "tests"])
def test_once_records_where_the_same_path_is_found_and_a_bare_marker_names_the_test(project, monkeypatch, run_from):
    """``record_mode="once"`` makes ``recordings/new.jsonl`` in the project's ``recordings/`` (where
    ``recordings/chunk.jsonl`` is found), not in ``tests/recordings/``; a bare marker records
    ``recordings/<module>/<test>.jsonl``. The next run, offline, replays both from there."""
    tests = project.path / "tests"
    tests.mkdir()
    (tests / "test_user.py").write_text(RECORDING_MODULE)
    monkeypatch.chdir(project.path / run_from)
    with running_sdk_agent() as agent:
        monkeypatch.setenv("A2A_TAPE_UPSTREAM", agent.url)
        result = project.runpytest_subprocess("-p", "no:cacheprovider")
        result.assert_outcomes(passed=3)
        assert agent.executor.executions == 3
    made = sorted(p.relative_to(project.path).as_posix() for p in project.path.rglob("*.jsonl"))
    assert made == [
        "recordings/chunk.jsonl",
        "recordings/new.jsonl",
        "recordings/test_user/TestGrouped.test_in_a_class_1.jsonl",
        "recordings/test_user/test_bare.jsonl",
    ]
    monkeypatch.delenv("A2A_TAPE_UPSTREAM")
    again = project.runpytest_subprocess("-p", "no:cacheprovider", "--a2a-tape-record-mode=none")
    again.assert_outcomes(passed=3)


def test_a_bare_marker_without_its_recording_says_which_name(project):
    project.makepyfile(
        test_user="""
import pytest


@pytest.mark.a2a_tape
def test_unrecorded(a2a_tape):
    pass
"""
    )
    result = project.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*a2a-tape: recording 'recordings/test_user/test_unrecorded.jsonl' not found under*"])
    assert "Traceback" not in result.stdout.str()
