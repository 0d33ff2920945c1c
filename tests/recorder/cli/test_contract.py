"""The command line's contract, through the installed console script in a subprocess (the first case of each
table, and every case a process's own argv must carry; the table's other cases run the same command in
process: tests/support/in_process.py).

Every usage error and every bad value exits 2 with exactly one non-empty line on stderr, no
traceback and no "internal error"; a bad value is refused before anything is sent (a real
a2a-sdk agent on 127.0.0.1 counts the requests it gets) or written (no database file appears,
an existing one keeps its bytes).

These are the tests ``.ci/run`` also runs against the newest releases of typer, click, rich,
httpx, msgspec and starlette (a second venv): select them with ``tests/recorder/cli/test_contract.py``.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.in_process import run_in_process
from tests.support.servers import closed_port, serve_app

from .conftest import TASK, make_log

SCRIPT = Path(sys.executable).with_name("a2a-tape")  # the console script of the venv running the tests


@dataclass
class Done:
    code: int
    stdout: bytes
    stderr: str


def a2a_tape(*args: str | bytes | Path, cwd: Path, env: dict[str, str] | None = None, installed: bool = True) -> Done:
    """Run the installed ``a2a-tape`` (bytes arguments go to it as they are: not necessarily UTF-8); with
    ``installed=False`` and only text arguments, the same command in this process (tests/support/in_process.py)."""
    if not installed and not any(isinstance(a, bytes) for a in args):
        ours = {"A2A_TAPE_DB": str(cwd / "default.db"), "A2A_TAPE_DEBUG": None, **(env or {})}
        done = run_in_process([str(a) for a in args], cwd, ours)
        return Done(done.returncode, done.stdout, done.stderr.decode("utf-8", "replace"))
    argv = [str(SCRIPT), *(a if isinstance(a, bytes) else str(a) for a in args)]
    full_env = {**os.environ, "A2A_TAPE_DB": str(cwd / "default.db"), **(env or {})}
    full_env.pop("A2A_TAPE_DEBUG", None)
    r = subprocess.run(argv, cwd=cwd, env=full_env, capture_output=True, timeout=60, check=False)
    return Done(r.returncode, r.stdout, r.stderr.decode("utf-8", "replace"))


def runs_installed(table: list, argv: object) -> bool:
    """Whether a row of a parametrized table runs the installed script: its first row does (and every row
    with a bytes argument, which only a process's own argv carries: :func:`a2a_tape`); the others run the
    same command in this process, where the same code refuses them alike, ~0.3 s of CPU less each."""
    first = table[0][0] if isinstance(table[0], tuple) else table[0]
    return argv == first


def assert_usage_error(r: Done, *needles: str) -> str:
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert r.code == 2, (r.code, r.stderr)
    assert len(lines) == 1, r.stderr
    assert len(r.stderr.splitlines()) == 1, r.stderr  # and no blank lines around it
    assert "Traceback" not in r.stderr
    assert "internal error" not in r.stderr
    assert lines[0].startswith("a2a-tape: error: "), lines[0]
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def test_the_script_is_the_one_of_this_venv():
    assert SCRIPT.is_file(), f"{SCRIPT} missing: install the project into this venv (pip install -e .)"


# -- usage errors ---------------------------------------------------------------------------

USAGE_ERRORS = [
    (["show"], "Missing argument"),
    (["channels"], "Missing argument"),
    (["record", "http://127.0.0.1:1/"], "Missing argument"),
    (["tasks", "--bogus"], "No such option: --bogus"),
    (["--bogus"], "No such option: --bogus"),
    (["nosuch"], "No such command 'nosuch'"),
    (["tasks", "--limit"], "--limit"),
    (["tasks", "--limit", "x"], "--limit"),
    (["tasks", "--limit", "1.5"], "--limit"),
    (["show", TASK, "--idle-timeout", "soon"], "--idle-timeout"),
    (["record", "http://127.0.0.1:1/", "hi", "--stall-timeout", "abc"], "--stall-timeout"),
    (["record", "http://127.0.0.1:1/", "hi", "--protocol", "2.0"], "--protocol"),
    (["record", "http://127.0.0.1:1/", "hi", "--on-stall", "explode"], "--on-stall"),
    (["record", "http://127.0.0.1:1/", "hi", "--durability", "maybe"], "--durability"),
    (["proxy", "http://127.0.0.1:1/", "--durability", "maybe"], "--durability"),
    (["proxy", "http://127.0.0.1:1/", "--max-body", "big"], "--max-body"),
    (["serve", "--record-mode", "sometimes"], "--record-mode"),
    (["serve", "--match", "fuzzy"], "--match"),
    (["export", "--all", "--format", "pdf"], "--format"),
    (["probe"], "Missing argument"),
]


@pytest.mark.parametrize(("argv", "needle"), USAGE_ERRORS, ids=[" ".join(a) for a, _ in USAGE_ERRORS])
def test_usage_error_exits_2_with_one_line(tmp_path, argv, needle):
    assert_usage_error(a2a_tape(*argv, cwd=tmp_path, installed=runs_installed(USAGE_ERRORS, argv)), needle)
    assert list(tmp_path.iterdir()) == []  # nothing written, not even the default database


def test_bare_a2a_tape_prints_the_help(tmp_path):
    r = a2a_tape(cwd=tmp_path)
    assert "Traceback" not in r.stderr
    assert "Usage: a2a-tape" in r.stdout.decode() + r.stderr
    assert r.code in (0, 2)  # click >= 8.2 exits 2 for a bare group, older click 0


def test_version(tmp_path):
    from a2a_tape import __version__

    r = a2a_tape("--version", cwd=tmp_path)
    assert r.code == 0, r.stderr
    assert r.stdout.decode().strip() == f"a2a-tape {__version__}"
    assert r.stderr == ""


def test_help_exits_0(tmp_path):
    r = a2a_tape("tasks", "--help", cwd=tmp_path)
    assert r.code == 0, r.stderr
    assert b"Usage: a2a-tape tasks" in r.stdout


# -- bad values: refused before any request is sent or anything is written ------------------


class CountingAgent:
    """A real a2a-sdk agent behind an ASGI wrapper that counts every HTTP request it gets."""

    def __init__(self, url: str, app) -> None:
        self.url = url
        self._app = app
        self.requests = 0

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            self.requests += 1
        await self._app(scope, receive, send)


@contextlib.contextmanager
def counting_agent() -> Iterator[CountingAgent]:
    from tests.support.sdk_agents import make_agent_app

    port = closed_port()  # nothing listens there; bound later by the server
    url = f"http://127.0.0.1:{port}"
    app, _executor = make_agent_app(url)
    agent = CountingAgent(url, app)
    with serve_app(agent, port=port):
        yield agent


@pytest.fixture(scope="module")
def agent() -> Iterator[CountingAgent]:
    with counting_agent() as a:
        yield a


URL = "{agent}"  # replaced by the agent's URL

BAD_SENDING = [
    (["record", URL, "hi", "--stall-timeout", "nan"], "--stall-timeout"),
    (["record", URL, "hi", "--stall-timeout", "inf"], "--stall-timeout"),
    (["record", URL, "hi", "--stall-timeout", "-1"], "--stall-timeout"),
    (["record", URL, "hi", "--stall-timeout", "0"], "--stall-timeout"),
    (["record", URL, "hi", "--max-line-bytes", "10"], "--max-line-bytes"),
    (["record", URL, "hi", "--max-line-bytes", "-5"], "--max-line-bytes"),
    (["record", URL, "hi", "-H", "no colon"], "--header"),
    (["record", URL, "hi", "-H", "X-Name: caf\u00e9"], "not ASCII"),
    (["record", URL, "hi", "-H", b"X-Name: \xff\xfe"], "not valid UTF-8"),
    (["record", URL, b"\xff\xfe bytes"], "not valid UTF-8"),
    (["record", URL, "hi", "--context-id", b"\xc3\x28"], "not valid UTF-8"),
    (["probe", URL, "--timeout", "-1"], "--timeout"),
    (["probe", URL, "--timeout", "nan"], "--timeout"),
    (["probe", URL, "--token", "bad\u00e9token"], "--token"),
    (["proxy", URL, "--listen", "127.0.0.1:99999"], "--listen"),
    (["proxy", URL, "--listen", "127.0.0.1:-1"], "--listen"),
    (["proxy", URL, "--listen", "127.0.0.1"], "--listen"),
    (["proxy", URL, "--idempotency-ttl", "nan"], "--idempotency-ttl"),
    (["proxy", URL, "--idempotency-ttl", "0"], "--idempotency-ttl"),
    (["proxy", URL, "--stall-timeout", "inf"], "--stall-timeout"),
    (["proxy", URL, "--max-body", "0"], "--max-body"),
    (["recover", "--upstream", URL, "--stall-timeout", "nan"], "--stall-timeout"),
    (["serve", "--upstream", URL, "--record-mode", "all", "--timing", "inf"], "--timing"),
    (["serve", "--upstream", URL, "--record-mode", "all", "--timing", "0"], "--timing"),
    (["serve", "--upstream", URL, "--record-mode", "all", "--timing", "nan"], "--timing"),
    (["serve", "--upstream", URL, "--record-mode", "all", "--timing", "-2"], "--timing"),
    (["serve", "--upstream", URL, "--record-mode", "all", "--fault", "delay=inf"], "--fault"),
    (["serve", "--upstream", URL, "--record-mode", "all", "--listen", "127.0.0.1:70000"], "--listen"),
]


@pytest.mark.parametrize(("argv", "needle"), BAD_SENDING, ids=[repr(a[2:] or a) for a, _ in BAD_SENDING])
def test_bad_value_is_refused_before_anything_is_sent_or_written(tmp_path, agent, argv, needle):
    before = agent.requests
    db = tmp_path / "log.db"
    args = [agent.url if a == URL else a for a in argv]
    assert_usage_error(a2a_tape(*args, "--db", db, cwd=tmp_path, installed=runs_installed(BAD_SENDING, argv)), needle)
    assert agent.requests == before  # not even the agent card was fetched
    assert list(tmp_path.iterdir()) == []  # no database file, no journal


BAD_URLS = [
    ["record", "http://127.0.0.1:99999/", "hi"],
    ["record", "http://[::1", "hi"],
    ["record", "http://127.0.0.1:0/", "hi"],
    ["record", "ftp://127.0.0.1/", "hi"],
    ["record", "127.0.0.1:8080", "hi"],
    ["record", "http://exa mple/", "hi"],
    ["probe", "http://[::1"],
    ["probe", "http://127.0.0.1:65536/"],
    ["proxy", "http://[::1"],
    ["proxy", "http://127.0.0.1:99999/"],
    ["recover", "--upstream", "http://[::1"],
    ["serve", "--upstream", "http://127.0.0.1:99999/", "--record-mode", "all"],
]


@pytest.mark.parametrize("argv", BAD_URLS, ids=" ".join)
def test_bad_url_exits_2_before_anything_is_written(tmp_path, argv):
    db = tmp_path / "log.db"
    assert_usage_error(a2a_tape(*argv, "--db", db, cwd=tmp_path, installed=runs_installed(BAD_URLS, argv)))
    assert list(tmp_path.iterdir()) == []


def test_the_agent_counts_requests_when_the_values_are_good(tmp_path, agent):
    """The control for the tests above: a good command does reach the agent."""
    before = agent.requests
    r = a2a_tape(
        "record", agent.url, "hello", "--stall-timeout", "30", "--db", tmp_path / "ok.db", "--json", cwd=tmp_path
    )
    assert r.code == 0, r.stderr
    assert agent.requests > before
    assert (tmp_path / "ok.db").exists()


@pytest.fixture
def log_file(tmp_path) -> Path:
    path = tmp_path / "log" / "log.db"
    path.parent.mkdir()
    make_log(path)
    return path


BAD_READING = [
    (["tasks", "--since", "nan"], "--since"),
    (["tasks", "--since", "inf"], "--since"),
    (["tasks", "--since", "-inf"], "--since"),
    (["tasks", "--since", "1e300"], "--since"),
    (["tasks", "--since", "yesterday"], "--since"),
    (["tasks", "--limit", "0"], "--limit"),
    (["tasks", "--limit", "-3"], "--limit"),
    (["tasks", "--limit", "99999999999999999999999"], "--limit"),
    (["show", TASK, "--follow", "--idle-timeout", "nan"], "--idle-timeout"),
    (["show", TASK, "--follow", "--idle-timeout", "-1"], "--idle-timeout"),
    (["show", b"\xff\xfe"], "not valid UTF-8"),
    (["channels", b"eae9\xff"], "not valid UTF-8"),
    (["doctor", b"\x80"], "not valid UTF-8"),
    (["grep", "chunk", "--task", b"\xff"], "not valid UTF-8"),
    (["export", b"\xff"], "not valid UTF-8"),
    (["tasks", "--context", b"\xff"], "not valid UTF-8"),
]


@pytest.mark.parametrize(("argv", "needle"), BAD_READING, ids=[repr(a) for a, _ in BAD_READING])
def test_bad_value_to_a_read_command_leaves_the_log_as_it_was(tmp_path, log_file, argv, needle):
    before = {p.name: p.read_bytes() for p in log_file.parent.iterdir()}
    installed = runs_installed(BAD_READING, argv)
    assert_usage_error(a2a_tape(*argv, "--db", log_file, cwd=tmp_path, installed=installed), needle)
    assert {p.name: p.read_bytes() for p in log_file.parent.iterdir()} == before


def test_a_non_utf8_database_path_is_refused(tmp_path):
    assert_usage_error(a2a_tape("tasks", "--db", b"/tmp/\xff.db", cwd=tmp_path), "not valid UTF-8")
