"""What ``a2a-tape demo`` suggests next: commands that run as printed, in the order printed.

Each step is one shell line (the command, then its explanation as a ``#`` comment), so it
pastes as it is. They hold together on a fresh machine:

- the demo's task is read where the demo wrote it (its ``--db``, else ``$A2A_TAPE_DB`` or
  ``./a2a-tape.db``, as the demo itself chose);
- the replay is recorded into a database of its own: ``serve`` answers with the recorded task
  id, and recording that answer into the demo's database would add the replay's events to the
  demo's task (22 events, and ``doctor`` errors a2a-tape caused itself);
- the program is named as it was started: ``a2a-tape`` when that is the one on PATH, else the
  path typed (``.venv/bin/a2a-tape`` before the virtual environment is activated);
- the message sent to ``serve`` is the demo's own text, the one the recording answers
  (``--match method-text``), on a port that was free when the demo ended and that no other program
  is handed meanwhile (:func:`a2a_tape.recorder.listen.unused_port`).
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class Step:
    argv: list[str]
    what: str
    long_lived: bool = False  # runs until Ctrl-C (another terminal)

    @property
    def command(self) -> str:
        return " ".join(shlex.quote(a) for a in self.argv)


def lines(steps: list[Step]) -> list[str]:
    """One shell line per step, the explanations as comments (aligned, unless a command is long)."""
    width = min(40, max(len(s.command) for s in steps))
    return [f"{s.command.ljust(width)}  # {s.what}" for s in steps]


def program(argv0: str | None = None) -> str:
    """How to name this program in a command: ``a2a-tape`` when PATH finds this very script, else
    the path it was started by."""
    started = argv0 if argv0 is not None else sys.argv[0]
    on_path = shutil.which("a2a-tape")
    if on_path is not None and os.path.exists(started) and os.path.samefile(on_path, started):
        return "a2a-tape"  # the one PATH finds
    if os.path.basename(started) != "a2a-tape" or not os.path.exists(started):
        return "a2a-tape"  # python -m, an in-process test runner: the usual name
    return started


def next_steps(task_id: str, db: str | None, demo_db: str, text: str, port: int, me: str = "a2a-tape") -> list[Step]:
    """The steps, in order; ``db`` is the demo's ``--db`` as given (None: the default it used);
    ``me``: how to name the program (:func:`program`)."""
    short = task_id[:8]
    dbarg = ["--db", db] if db else []
    url = f"http://127.0.0.1:{port}"
    return [
        Step([me, "channels", short, *dbarg], "the rebuilt channels: answer, reasoning, tool calls"),
        Step([me, "show", short, *dbarg, "--json"], "every raw event as received"),
        Step([me, "doctor", short, *dbarg], "lifecycle and contract faults (exit 1 on an error)"),
        Step([me, "tasks", *dbarg], "every recorded task"),
        Step([me, "ui", *dbarg], "the log in a browser, live (until Ctrl-C)", long_lived=True),
        Step(
            [me, "serve", *dbarg, "--listen", f"127.0.0.1:{port}"],
            "replay the recordings as a fake A2A agent (another terminal; until Ctrl-C)",
            long_lived=True,
        ),
        Step(
            [me, "record", url, text, *dbarg],
            "record the replay: a new run of the task, the demo's own stays as it was",
        ),
        Step([me, "tasks", "--runs", *dbarg], "the task's runs: the demo's, and the replay recorded back"),
        Step(
            [me, "demo", "--agent-only"],
            "the demo agent alone, for your own client (until Ctrl-C)",
            long_lived=True,
        ),
    ]
