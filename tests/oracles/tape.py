"""``a2a-tape proxy`` and ``a2a-tape serve`` as the installed console script, in a subprocess.

The oracles talk to a2a-tape exactly as a user would: the script next to this interpreter, listening on
``127.0.0.1:0``, its URL read from its first stderr line (both commands print it before serving). The rest
of stderr is kept in a file so that a failing oracle can show what the process said.
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

_URL = re.compile(r"(http://127\.0\.0\.1:\d+)")
START_TIMEOUT = 60.0


class TapeError(AssertionError):
    """The a2a-tape process did not start (its stderr is in the message)."""


def tape_script() -> Path:
    """The installed ``a2a-tape`` console script of the interpreter running the tests."""
    script = Path(sys.executable).with_name("a2a-tape")
    if not script.exists():
        raise TapeError(f"no a2a-tape console script next to {sys.executable} (pip install -e . first)")
    return script


class TapeProcess:
    """A running ``a2a-tape`` command; ``url`` is where it listens."""

    def __init__(self, args: list[str], log: Path) -> None:
        self.args = args
        self.log = log
        self.proc = subprocess.Popen(
            [str(tape_script()), *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=clean_env(),
        )
        first: queue.Queue[str] = queue.Queue()
        self._drain = threading.Thread(target=self._copy_stderr, args=(first,), daemon=True)
        self._drain.start()
        try:
            line = first.get(timeout=START_TIMEOUT)
        except queue.Empty:
            self.stop()
            raise TapeError(f"a2a-tape {args[0]} printed nothing in {START_TIMEOUT:.0f} s") from None
        m = _URL.search(line)
        if not m:
            self.stop()
            raise TapeError(f"a2a-tape {args[0]} did not start: {line.strip()}\n{self.stderr()}")
        self.url = m.group(1)

    def _copy_stderr(self, first: queue.Queue[str]) -> None:
        assert self.proc.stderr is not None
        with self.log.open("wb") as out:
            told = False
            for raw in self.proc.stderr:
                out.write(raw)
                out.flush()
                if not told:
                    first.put(raw.decode(errors="replace"))
                    told = True
            if not told:
                first.put("")

    def stderr(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""

    def stop(self) -> int | None:
        """SIGTERM (uvicorn shuts down gracefully, the log is closed), SIGKILL after 15 s."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._drain.join(timeout=10)
        return self.proc.returncode


@contextlib.contextmanager
def running(args: list[str], log: Path) -> Iterator[TapeProcess]:
    proc = TapeProcess(args, log)
    try:
        yield proc
    finally:
        proc.stop()


def proxy(upstream: str, db: Path, log: Path) -> contextlib.AbstractContextManager[TapeProcess]:
    """``a2a-tape proxy UPSTREAM`` recording into ``db`` (startup recovery off: the db is new)."""
    return running(["proxy", upstream, "--listen", "127.0.0.1:0", "--db", str(db), "--no-recover"], log)


def serve(db: Path, log: Path, *extra: str) -> contextlib.AbstractContextManager[TapeProcess]:
    """``a2a-tape serve`` over ``db`` with ``extra`` options (``--record-mode``, ``--upstream``, ...)."""
    return running(["serve", "--listen", "127.0.0.1:0", "--db", str(db), *extra], log)


def clean_env() -> dict[str, str]:
    """This process's environment less what would change a2a-tape's behaviour behind our back."""
    env = dict(os.environ)
    for name in ("A2A_TAPE_DB", "A2A_TAPE_PROXY_TOKEN"):
        env.pop(name, None)
    return env
