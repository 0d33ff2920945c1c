"""Running what the docs and the demo print, as a reader runs it: the installed CLI in a
subprocess, in a directory of its own, long-lived servers in the background.

A background command is ready when it prints the line that names where it listens (the CLI's
own readiness signal: the socket is bound before that line, so nobody polls); it is stopped with
SIGTERM, which every server of ours ends on as on Ctrl-C, with exit status 0.
"""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

BIN = Path(sys.executable).parent
READY_TIMEOUT = 60.0


def reader_env(home: Path) -> dict[str, str]:
    """A newcomer's environment: the installed scripts first on PATH, no $A2A_TAPE_DB, a HOME of its own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("A2A_TAPE_")}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["HOME"] = str(home)
    env["COLUMNS"] = "100"
    return env


class Background:
    """A long-lived command (a shell line) until :meth:`stop`; its output is collected as it comes."""

    def __init__(self, line: str, cwd: Path, env: dict[str, str], ready: str, *, shell_script: bool = False) -> None:
        """``line``: one command; or (``shell_script``) a script whose last command execs the server."""
        self.line = line
        # exec: the shell becomes the command, so SIGTERM reaches the server itself
        self.proc = subprocess.Popen(
            ["bash", "-e", "-c", line if shell_script else f"exec {line}"],
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.output: list[str] = []
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        self._wait_for(ready)

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def _wait_for(self, ready: str) -> None:
        while True:
            try:
                line = self._lines.get(timeout=READY_TIMEOUT)
            except queue.Empty:
                self.stop()
                raise AssertionError(f"{self.line!r} printed no {ready!r} in {READY_TIMEOUT:.0f} s") from None
            if line is None:
                self.proc.wait()
                raise AssertionError(
                    f"{self.line!r} ended ({self.proc.returncode}) before {ready!r}: {''.join(self.output)}"
                )
            self.output.append(line)
            if re.search(ready, line):
                return

    @property
    def text(self) -> str:
        return "".join(self.output)

    def stop(self) -> int:
        """SIGTERM, then its exit status (the rest of its output collected)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        while (line := self._lines.get(timeout=10)) is not None:
            self.output.append(line)
        return code


def run_line(line: str, cwd: Path, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", line], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
