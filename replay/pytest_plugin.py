"""pytest plugin for replaying a2a-tape recordings (registered through the pytest11 entry point).

Mark a test with the recording it runs against, ask for the ``a2a_tape`` fixture, and point the
client under test at ``a2a_tape.url`` (a replay server on 127.0.0.1) or hand it
``a2a_tape.transport`` (an httpx transport, sync and async, no sockets); a gRPC client dials
``a2a_tape.grpc_target`` (``HOST:PORT``, the ``grpc`` extra; the card at ``a2a_tape.url`` names it)::

    @pytest.mark.a2a_tape("recordings/sdk-v10-stream.jsonl", record_mode="none")
    def test_client(a2a_tape):
        ...

The marker takes the recording (a database or a JSONL tape; a relative path is looked up next
to the test module, then from the rootdir, then from each folder above the test module up to the
project's root: :func:`lookup_folders`; a recording made by a record mode lands in the folder
that already holds the most of its path, so beside the tapes of the same relative path:
:func:`new_recording`). A bare ``@pytest.mark.a2a_tape`` names it after the test, as
pytest-recording names a cassette: ``recordings/<test module>/<test name>.jsonl``
(:func:`default_name`). As keywords, the marker takes ``record_mode`` (none, once,
new_episodes, all), ``timing``, ``faults``, ``match``, ``match_on`` (a user's matcher, or a list:
:mod:`capture.hooks`), ``before_record_request`` / ``before_record_answer`` (what the record modes
keep, before the redaction; a hook that raised fails the test with one line), ``push_timing`` (instant, recorded: a
recording with pushes has them POSTed to the webhook the test's client registers, as ``serve``
does) and ``upstream`` (the live agent for the record modes; default ``$A2A_TAPE_UPSTREAM``). ``--a2a-tape-record-mode`` switches the record
mode of a whole run. Under ``none`` a request that was never recorded gets a JSON-RPC error
naming the closest recording, and the test fails with that line.

The ``a2a_tape_config`` fixture (pytest-recording's ``vcr_config``) gives every marker in its
scope default keywords; a marker's own win.

``--a2a-tape-verify URL`` is ``a2a-tape verify``'s gate for a suite of recordings (docs/verify.md):
each recording a test replays is first verified against the live agent at URL (once a session,
its live runs in a temporary log: the recording is never written), and a test whose recording
diverged fails with the first divergence, so a new build of the agent fails the run. An agent that
cannot be verified fails every such test with the one line verify said.
"""

from __future__ import annotations

import os
import re
import socket
import threading
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from a2a_tape.replay.serve.modes import RecordMode

if TYPE_CHECKING:  # imported when a test asks for the fixture: pytest starts as fast without it
    import pluggy

    from a2a_tape.replay.serve.engine import ReplayEngine

_OPTION = "--a2a-tape-record-mode"
_VERIFY = "--a2a-tape-verify"
_CALL_REPORT = pytest.StashKey[pytest.TestReport]()
_VERIFIED = pytest.StashKey[dict[Path, str | None]]()  # recording -> why it fails the gate (None: it holds)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("a2a-tape", "replay A2A recordings (a2a-tape)")
    group.addoption(
        _OPTION,
        action="store",
        default=None,
        choices=[m.value for m in RecordMode],
        help="Record mode for every @pytest.mark.a2a_tape test (overrides the markers): none, once, new_episodes, all.",
    )
    group.addoption(
        _VERIFY,
        action="store",
        default=None,
        metavar="URL",
        help="Verify each replayed recording against the live agent at URL first (a2a-tape verify); "
        "a test whose recording diverged fails.",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "a2a_tape(recording=None, record_mode='none', timing='instant', faults=None, match='method-text', "
        "match_on=None, before_record_request=None, before_record_answer=None, push_timing='instant', upstream=None): "
        "serve an a2a-tape recording (database or JSONL tape; default: recordings/<module>/<test>.jsonl) "
        "to this test through the a2a_tape fixture",
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pluggy.Result[pytest.TestReport], None]:
    """A test that sent a never-recorded request under ``none`` fails, even when the client under
    test swallowed the JSON-RPC error; the failure is the line naming the closest recording."""
    outcome = yield
    rep = outcome.get_result()
    if rep.when != "call":
        return
    item.stash[_CALL_REPORT] = rep
    tape = getattr(item, "funcargs", {}).get("a2a_tape")
    if not rep.passed or not isinstance(tape, A2ATape):
        return
    lines = [*tape.hook_errors, *(tape.unmatched if tape.record_mode is RecordMode.none else [])]
    if lines:
        rep.outcome = "failed"
        rep.longrepr = "\n".join(lines)


class _Server:
    """uvicorn on 127.0.0.1 in a thread; the socket is bound first, so the URL works at once."""

    def __init__(self, app: Any) -> None:
        import uvicorn

        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(128)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.server = uvicorn.Server(
            uvicorn.Config(app, log_level="warning", lifespan="off", timeout_graceful_shutdown=1)
        )
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True, name="a2a-tape-replay"
        )
        self.thread.start()

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()


class _GrpcServer:
    """The gRPC replay server (:mod:`replay.serve.grpc_server`) on 127.0.0.1, on an event loop of
    its own in a thread."""

    def __init__(self, engine: ReplayEngine) -> None:
        import asyncio

        from a2a_tape.replay.serve.grpc_server import GrpcReplay

        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True, name="a2a-tape-grpc-replay")
        self.thread.start()
        self.serving = GrpcReplay(engine).serving("127.0.0.1", 0)
        port = asyncio.run_coroutine_threadsafe(self.serving.__aenter__(), self.loop).result(timeout=30)
        self.target = f"127.0.0.1:{port}"
        engine.grpc_address = self.target  # the card served at .url names it

    def stop(self) -> None:
        import asyncio

        try:
            asyncio.run_coroutine_threadsafe(self.serving.__aexit__(None, None, None), self.loop).result(timeout=10)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout=10)
            self.loop.close()


class A2ATape:
    """What the ``a2a_tape`` fixture yields: a replay server URL, a gRPC address and in-process transports."""

    def __init__(self, engine: ReplayEngine) -> None:
        from a2a_tape.replay.serve.transport import ReplayTransport

        self.engine = engine
        self.record_mode = engine.record_mode
        self.library = engine.library
        self.transport = ReplayTransport(engine=engine)
        self.async_transport = self.transport  # one object speaks both httpx interfaces
        self._server: _Server | None = None
        self._grpc: _GrpcServer | None = None

    @property
    def url(self) -> str:
        """Base URL of a replay server on 127.0.0.1 (started on first use)."""
        if self._server is None:
            from a2a_tape.replay.serve.server import create_app

            self._server = _Server(create_app(self.engine))
        return self._server.url

    @property
    def grpc_target(self) -> str:
        """``HOST:PORT`` of a gRPC replay server on 127.0.0.1 (started on first use; the ``grpc``
        extra): the same recordings for a gRPC client, e.g. ``grpc.aio.insecure_channel(a2a_tape.grpc_target)``."""
        if self._grpc is None:
            self._grpc = _GrpcServer(self.engine)
        return self._grpc.target

    @property
    def unmatched(self) -> list[str]:
        return self.engine.unmatched

    @property
    def hook_errors(self) -> list[str]:
        """One line per user hook that raised (``before_record_*``, ``match_on``): the test fails with them."""
        return self.engine.hook_errors

    def close(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None
        if self._grpc is not None:
            self._grpc.stop()
            self._grpc = None
        self.transport.close()


def verify_gate(recording: Path, against: str) -> str | None:
    """``a2a-tape verify`` of ``recording`` against the agent at ``against`` (a process of its own,
    its live runs in a temporary log); None when every task matched, else what failed: each
    diverged task with its first divergence, or the line verify said (exit 2)."""
    import json
    import subprocess
    import sys
    import tempfile

    with tempfile.TemporaryDirectory(prefix="a2a-tape-gate-") as tmp:
        into = str(Path(tmp) / "verify.db")
        line = [sys.executable, "-m", "a2a_tape.cli", "verify", "--db", str(recording), "--against", against]
        done = subprocess.run([*line, "--into", into, "--json"], capture_output=True, text=True, check=False)
    if done.returncode == 0:
        return None
    if done.returncode != 1:
        lines = done.stderr.strip().splitlines()
        return f"{recording}: {lines[-1] if lines else f'exit {done.returncode}'}"
    report = json.loads(done.stdout)
    failed = []
    for task in report["tasks"]:
        first = task.get("first")
        if task["verdict"] == "diverged" and first is not None:
            failed.append(
                f"{recording}: {task['task_id']} diverged: {first['rule']}: {first['message']}\n"
                f"  recorded {first['recorded']['run']} #{first['recorded']['position']}: {first['recorded']['what']}\n"
                f"  live     {first['live']['run']} #{first['live']['position']}: {first['live']['what']}"
            )
    return "\n".join(failed) or f"{recording}: verify exited 1"


PROJECT_MARKERS = ("pyproject.toml", "setup.cfg", "setup.py", "tox.ini", "pytest.ini", ".git")


def lookup_folders(test_dir: Path, rootdir: Path) -> list[Path]:
    """The folders a relative recording name is looked up from, in order: next to the test file, from the
    rootdir, then from each folder above the test file, nearest first, up to the project's root
    (the first folder holding one of :data:`PROJECT_MARKERS`; else the filesystem root). Pytest
    run from ``tests/`` of a project without a config file has ``tests/`` as its rootdir: the
    walk up still finds the project's ``recordings/``."""
    bases = [test_dir, rootdir]
    for folder in test_dir.parents:
        bases.append(folder)
        if any((folder / marker).exists() for marker in PROJECT_MARKERS):
            break
    return list(dict.fromkeys(bases))


def new_recording(path: Path, folders: list[Path]) -> Path:
    """Where a recording not found yet is made: under the lookup folder that already holds the
    most of ``path``'s folders (the first such, in lookup order), so ``recordings/x.jsonl`` lands
    in the project's ``recordings/`` beside the tapes found there; when none holds any, next to
    the test file (the first folder)."""
    parents = path.parts[:-1]

    def held(folder: Path) -> int:
        n = 0
        while n < len(parents) and folder.joinpath(*parents[: n + 1]).is_dir():
            n += 1
        return n

    best = max(folders, key=held)  # max keeps the first of equals: lookup order breaks ties
    return (best if held(best) else folders[0]) / path


def default_name(node: pytest.Item) -> str:
    """The recording a bare marker names: ``recordings/<test module>/<Class.test name>.jsonl``
    (parameters kept, as characters a file system takes)."""
    module = Path(str(node.fspath)).stem
    cls = getattr(node, "cls", None)
    test = (f"{cls.__name__}." if cls is not None else "") + node.name
    return f"recordings/{module}/{re.sub(r'[^A-Za-z0-9._-]+', '_', test).strip('_')}.jsonl"


def _find_recording(request: pytest.FixtureRequest, name: str, *, create: bool) -> Path:
    """The recording's path; a missing one fails the test with one line naming where it looked
    (unless ``create``: then it is made where :func:`new_recording` says)."""
    path = Path(name)
    if path.is_absolute():
        return path
    test_dir = Path(str(request.node.fspath)).parent
    folders = lookup_folders(test_dir, Path(str(request.config.rootpath)))
    found = next((folder / path for folder in folders if (folder / path).exists()), None)
    if found is not None:
        return found
    if create:
        return new_recording(path, folders)
    looked = ", ".join(str(folder) for folder in folders)
    pytest.fail(f"a2a-tape: recording {name!r} not found under any of: {looked}", pytrace=False)


@pytest.fixture
def a2a_tape_config() -> dict[str, Any]:
    """The marker's keywords for every test that does not say otherwise (pytest-recording's
    ``vcr_config``): override it in a ``conftest.py`` or a module, e.g. to give a whole suite one
    ``match_on`` matcher or ``before_record_request`` hook. Default: nothing."""
    return {}


@pytest.fixture
def a2a_tape(request: pytest.FixtureRequest) -> Iterator[A2ATape]:
    """A replay of the recording named by ``@pytest.mark.a2a_tape(...)``: ``.url``, ``.transport``, ``.async_transport``."""
    from a2a_tape.replay.serve.engine import ReplayEngine
    from a2a_tape.replay.serve.library import Library

    marker = request.node.get_closest_marker("a2a_tape")
    if marker is None:
        pytest.fail(
            "a2a-tape: the a2a_tape fixture needs @pytest.mark.a2a_tape('path/to/recording.jsonl') "
            "(or a bare @pytest.mark.a2a_tape: a recording named after the test)",
            pytrace=False,
        )
    kw = {**request.getfixturevalue("a2a_tape_config"), **marker.kwargs}  # the marker's words win
    named = request.config.getoption(_OPTION) or kw.pop("record_mode", "none")
    kw.pop("record_mode", None)
    try:
        record_mode = RecordMode.of(named)
    except ValueError as exc:
        pytest.fail(f"a2a-tape: record_mode: {exc}", pytrace=False)
    upstream = kw.pop("upstream", None) or os.environ.get("A2A_TAPE_UPSTREAM")
    if record_mode.needs_upstream and not upstream:
        pytest.fail(
            f"a2a-tape: record_mode {record_mode} needs an upstream agent (upstream=... or $A2A_TAPE_UPSTREAM)",
            pytrace=False,
        )
    create = record_mode.records(upstream)
    name = str(marker.args[0]) if marker.args else default_name(request.node)
    path = _find_recording(request, name, create=create)
    against = request.config.getoption(_VERIFY)
    if against and path.exists():
        verdicts = request.config.stash.setdefault(_VERIFIED, {})
        if path not in verdicts:
            verdicts[path] = verify_gate(path, against)
        if verdicts[path] is not None:
            pytest.fail(f"a2a-tape verify: {verdicts[path]}", pytrace=False)
    problem = None
    try:
        library = Library.open(path, create=create)
    except Exception as exc:  # noqa: BLE001 - one readable line instead of a traceback
        problem = f"a2a-tape: cannot open recording {path}: {exc}"
    if problem is not None:  # outside the except: no chained exception text
        pytest.fail(problem, pytrace=False)
    try:
        engine = ReplayEngine(library, record_mode=record_mode, upstream=upstream, **kw)
    except (TypeError, ValueError) as exc:
        library.close()
        pytest.fail(f"a2a-tape: bad @pytest.mark.a2a_tape arguments: {exc}", pytrace=False)
    tape = A2ATape(engine)
    try:
        yield tape
    finally:
        tape.close()
        library.save()
        library.close()
    call = request.node.stash.get(_CALL_REPORT, None)
    if call is None:  # the call never reported (a request made by another fixture): say it here
        lines = [*engine.hook_errors, *(engine.unmatched if record_mode is RecordMode.none else [])]
        if lines:
            pytest.fail("\n".join(lines), pytrace=False)
