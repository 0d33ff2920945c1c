"""The UI's tests: the installed ``a2a-tape ui`` over real recordings, driven by a real browser.

Playwright drives Debian's Chromium (``.ci/run`` installs it; Playwright's own browser download
is not used). Playwright and the browser are started for the first test that asks for ``browser``
and kept while the tests that follow are this directory's (each test's ``page`` in a context of
its own), then stopped before a test of another directory runs: its sync API runs an event loop
in the main thread while it is started, and a test that calls ``asyncio.run`` there (or starts
a Playwright of its own) would fail; no test here does (pytest-playwright keeps it for the whole
session, which is why it is not used). Each server is the installed script in a subprocess,
read through the one line it prints.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import pytest

from tests.replay.inspect.builders import Tape, items
from tests.support.in_process import run_text_in_process

if TYPE_CHECKING:
    from playwright.sync_api import Browser, ConsoleMessage, Page, Playwright
from tests.replay.inspect.recordings import build_opencode

SCRIPT = Path(sys.executable).with_name("a2a-tape")
RECORDINGS = Path(__file__).resolve().parents[4] / "recordings"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ESCAPES = "\x1b[31mred alert\x1b[0m and \u202eevil"
"""Text an agent sends with a terminal escape sequence and a right-to-left override in it."""


HERE = Path(__file__).resolve().parent
"""This directory: its tests share one Playwright and browser (``browser``, :func:`pytest_runtest_teardown`)."""


class _Chromium:
    """Playwright and Debian's Chromium, started on first use and kept until :meth:`stop` (one start of
    Playwright's driver and the browser costs ~1 s of CPU; each test's context is its own)."""

    def __init__(self) -> None:
        self._pw: Playwright | None = None
        self._browser: Browser | None = None

    def get(self) -> Browser:
        if self._browser is not None and not self._browser.is_connected():
            self.stop()  # a browser that went away is started again, not handed on
        if self._browser is None:
            from playwright.sync_api import expect, sync_playwright

            # expect() waits for its condition and returns as soon as it holds; its 5 s default was short for a
            # live page on a loaded 2-core machine (test_live_truth failed once in a full run, never alone)
            expect.set_options(timeout=20_000)
            self._pw = sync_playwright().start()
            try:
                self._browser = self._pw.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)
            except BaseException:
                self.stop()
                raise
        return self._browser

    def stop(self) -> None:
        pw, browser, self._pw, self._browser = self._pw, self._browser, None, None
        try:
            if browser is not None and browser.is_connected():
                browser.close()
        finally:
            if pw is not None:
                pw.stop()


_CHROMIUM = _Chromium()


@pytest.fixture
def browser() -> Browser:
    """Debian's Chromium, headless: the one started for this directory's tests (see the module's docstring)."""
    if CHROMIUM is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed (.ci/run installs it)")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    return _CHROMIUM.get()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, object, object]:
    """After a test of this directory (its fixtures torn down): Playwright stopped unless the next test is
    this directory's too (a test elsewhere may call ``asyncio.run`` in the main thread, or start its own)."""
    try:
        return (yield)
    finally:
        if nextitem is None or nextitem.path.resolve().parent != HERE:
            _CHROMIUM.stop()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A fresh page in a context of its own (no cookie of another test)."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        yield context.new_page()
    finally:
        context.close()


@dataclass
class Ui:
    """A running ``a2a-tape ui``: its address with the token, and without."""

    url: str  # as printed: http://127.0.0.1:PORT/PREFIX/?token=...
    base: str  # http://127.0.0.1:PORT/PREFIX: the UI's root (its pages are under it)
    token: str
    proc: subprocess.Popen[str]

    @property
    def port(self) -> int:
        port = urlsplit(self.base).port
        assert port is not None, self.base
        return port

    @property
    def origin(self) -> str:
        """``http://127.0.0.1:PORT``: the server, outside the UI's prefix."""
        parts = urlsplit(self.base)
        return f"{parts.scheme}://{parts.netloc}"

    @property
    def prefix(self) -> str:
        """``/PREFIX``: the path the UI lives under, and its cookie's."""
        return urlsplit(self.base).path


def page_problems(page: Page) -> list[str]:
    """What ``page`` will have done wrong, filled as it happens: a script error, a console error (a 401
    aside: tests knock without the token on purpose; and the 404 of the browser's own ``/favicon.ico``
    at the server's root, asked for by a page that names no icon, such as the 401 answer: outside the
    UI's prefix, everything is 404), a rule of its Content-Security-Policy broken (a console error
    too), a dialog opened. A module's autouse fixture asserts it empty after each test."""
    problems: list[str] = []
    page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))

    def console(msg: ConsoleMessage) -> None:
        if msg.type != "error" or "401" in msg.text:
            return
        if "404" in msg.text and urlsplit(msg.location.get("url", "")).path == "/favicon.ico":
            return
        problems.append(f"console: {msg.text}")

    page.on("console", console)
    page.on("dialog", lambda d: problems.append(f"a dialog opened: {d.message}"))
    return problems


def _interruptible() -> None:
    """In the child: Ctrl-C as a terminal sends it (a test run started in the background
    inherits SIGINT ignored, and so would the server)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_ui(db: Path | str, *extra: str) -> Ui:
    proc = subprocess.Popen(
        [str(SCRIPT), "ui", "--db", str(db), "--no-open", "--listen", "127.0.0.1:0", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_interruptible,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("a2a-tape ui: http://"):
        proc.kill()
        raise AssertionError(f"a2a-tape ui did not start: {line!r} {proc.communicate()[1][-2000:]}")
    url = line.split(": ", 1)[1].strip()
    base, _, token = url.partition("/?token=")
    return Ui(url, base, token, proc)


def stop_ui(ui: Ui) -> None:
    ui.proc.terminate()
    try:
        ui.proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:  # pragma: no cover - a server that does not stop is a failure
        ui.proc.kill()
        raise


@pytest.fixture
def serve_ui() -> Iterator:
    """``serve_ui(db)`` starts the UI on ``db``; every one started is stopped after the test."""
    started: list[Ui] = []

    def start(db: Path | str, *extra: str) -> Ui:
        ui = start_ui(db, *extra)
        started.append(ui)
        return ui

    yield start
    for ui in started:
        stop_ui(ui)


@pytest.fixture(scope="module")
def shared_ui() -> Iterator:
    """``shared_ui(db)``: the module's one UI on ``db``, for the tests that only read it (each in a browser
    context of its own); started at the first test that asks, stopped after the module."""
    started: dict[str, Ui] = {}

    def get(db: Path | str) -> Ui:
        if str(db) not in started:
            started[str(db)] = start_ui(db)
        return started[str(db)]

    yield get
    for ui in started.values():
        stop_ui(ui)


def run(*args: object, timeout: float = 120, installed: bool = True) -> subprocess.CompletedProcess[str]:
    """``a2a-tape ARGS`` by the installed script; ``installed=False``: the same command in this process
    (tests/support/in_process.py), for a test that only prepares a log or reads what its subject did."""
    if not installed:
        return run_text_in_process([str(a) for a in args], timeout=timeout)
    return subprocess.run([str(SCRIPT), *map(str, args)], capture_output=True, text=True, timeout=timeout, check=False)


@pytest.fixture(scope="session")
def golden_db(tmp_path_factory) -> Path:
    """Every golden recording (recordings/*.jsonl) in one log."""
    db = tmp_path_factory.mktemp("golden") / "golden.db"
    for tape in sorted(RECORDINGS.glob("*.jsonl")):
        r = run("import", tape, "--db", db, installed=False)
        assert r.returncode == 0, r.stderr
    return db


@pytest.fixture(scope="session")
def demo_db(tmp_path_factory) -> Path:
    """Two runs of ``a2a-tape demo`` (the demo agent, recorded by the real ``record``)."""
    db = tmp_path_factory.mktemp("demo") / "demo.db"
    for _ in range(2):
        r = run("demo", "--db", db)
        assert r.returncode == 0, r.stderr[-2000:]
    return db


HUGE = 200_000
"""Characters of the answer of the hostile log's long-answer task (past what a page shows)."""
HUGE_TAIL = "<script>x</script>"


@dataclass
class Hostile:
    db: Path
    opencode: str  # the opencode-blocks task: <script> in its answer, markup in its reasoning
    escapes: str  # a task whose answer holds ESCAPES
    huge: str  # a task whose answer is HUGE characters long, ending with <script>


@pytest.fixture(scope="session")
def hostile(tmp_path_factory) -> Hostile:
    db = tmp_path_factory.mktemp("hostile") / "hostile.db"
    tape = Tape(db)
    opencode = build_opencode(tape)
    it = items("1.0", "task-escapes-0001")
    tape.stream(
        it,
        [it.task("submitted"), it.status("working"), it.artifact("art-1", ESCAPES, last=True), it.status("completed")],
    )
    big = items("1.0", "task-huge-answer-0001")
    text = ("0123456789" * (HUGE // 10))[: HUGE - len(HUGE_TAIL)] + HUGE_TAIL
    tape.stream(big, [big.task("submitted"), big.artifact("art-1", text, last=True), big.status("completed")])
    tape.close()
    return Hostile(db, opencode, it.task_id, big.task_id)
