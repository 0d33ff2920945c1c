"""A command of the CLI run by ``cli.app`` in the test's process, answering as the installed console script
does in a subprocess (its exit code, stdout, stderr), without the start of a new interpreter (~0.3-0.5 s of
CPU each). A test module keeps at least one run of the installed script per promise; its other cases may run
here, where the same code decides the same exit code and prints the same lines."""

from __future__ import annotations

import contextlib
import importlib
import os
import subprocess
import threading
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def run_in_process(
    args: list[str], cwd: Path, env: Mapping[str, str | None] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[bytes]:
    """``a2a-tape ARGS`` in ``cwd`` with ``env`` over this process's environment (None: unset). An exception
    the command lets out is printed on its stderr as the interpreter prints it (a ``Traceback``, exit 1), so a
    check on what the installed script prints fails alike; a command still running after ``timeout`` seconds
    raises :class:`subprocess.TimeoutExpired`, as ``subprocess.run`` does."""
    from typer.testing import CliRunner

    from a2a_tape.cli import app

    done: list[Any] = []

    def invoke() -> None:
        fresh_consoles()
        with contextlib.chdir(cwd):
            done.append(CliRunner().invoke(app, args, env=dict(env or {})))

    runner = threading.Thread(target=invoke, daemon=True)
    runner.start()
    runner.join(timeout)
    if not done:
        raise subprocess.TimeoutExpired(["a2a-tape (in process)", *args], timeout)
    result = done[0]
    stderr = result.stderr_bytes or b""
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        stderr += "".join(traceback.format_exception(result.exception)).encode()
    return subprocess.CompletedProcess(args, result.exit_code, result.stdout_bytes, stderr)


def fresh_consoles() -> None:
    """The CLI's two consoles made anew by the next run, as in a new process: a console reads ``COLUMNS`` (and
    the rest of its environment) once, when made, so one in-process run given ``COLUMNS=100`` fixed the width
    of every later run in the same worker (a human view wrapped at 100 columns in an unrelated test)."""
    consoles = importlib.import_module("a2a_tape.cli.app")  # the module; ``a2a_tape.cli.app`` is also the app
    for console in (consoles.out, consoles.err):
        object.__setattr__(console, "_console", None)  # cli.app._LazyConsole: made again on first use


def run_text_in_process(
    args: list[str], cwd: Path | None = None, env: Mapping[str, str | None] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """:func:`run_in_process` (in ``cwd``, this process's directory if None) with stdout and stderr as text,
    decoded as ``subprocess.run(text=True)`` decodes them (UTF-8, strictly; line ends as ``\\n``)."""
    done = run_in_process(args, Path.cwd() if cwd is None else cwd, env, timeout)

    def text(raw: bytes) -> str:
        return raw.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")

    return subprocess.CompletedProcess(done.args, done.returncode, text(done.stdout), text(done.stderr))


def without_our_variables() -> dict[str, str | None]:
    """The A2A_TAPE_* variables of this process, each unset (what a test's subprocess is run without)."""
    return {k: None for k in os.environ if k.startswith("A2A_TAPE")}
