"""The ``a2a-tape`` command line: the composition root, and the one place that names the commands.

Each command lives in a module of its own (``cli/*.py``), declared there with typer's
decorators on that module's ``app``. :data:`COMMANDS` says which module holds which command and
gives its line in ``a2a-tape --help``, in the order a newcomer meets them (the demo; recording and
replaying; inspecting; recovering; moving recordings); the module is imported only when the command runs or its
own help is shown, so a read-only command costs what it reads and nothing more.
"""

from __future__ import annotations

from a2a_tape.cli.app import Command, TapeGroup, app

__all__ = ["COMMANDS", "app", "main"]

COMMANDS: dict[str, Command] = {
    "demo": Command(
        "record", "Start a built-in demo agent on 127.0.0.1, record one session, show it, say what to try next."
    ),
    "record": Command(
        "record", "Send TEXT to the live agent at URL, record every raw event, follow the recovery tree."
    ),
    "proxy": Command(
        "proxy",
        "Recording reverse proxy: clients talk to it as to the agent; every item is recorded, then forwarded.",
    ),
    "serve": Command("serve", "Replay the recordings as a fake A2A agent (loopback only unless --allow-remote)."),
    "verify": Command(
        "verify",
        "Send each recorded task's requests again to a live agent, record the answer as a new run of the task "
        "(source verify), compare it with the recording at contract level, name the first divergence.",
    ),
    "tasks": Command("inspect", "List recorded tasks, newest (by last event) first."),
    "show": Command(
        "inspect", "The timeline of raw events of one task: its latest run, or the run TASK@N (--run N) names."
    ),
    "channels": Command(
        "inspect", "The rebuilt channels of one task: final answer, reasoning, tool calls, artifacts, faults."
    ),
    "doctor": Command("doctor", "List lifecycle and contract faults, with the event positions involved."),
    "diff": Command(
        "doctor",
        "Compare two tasks, two runs of one task (TASK@1 TASK@2), or two databases (tasks paired by request), "
        "ids and timestamps normalised.",
    ),
    "grep": Command("doctor", "Search payloads (text parts, data parts, metadata, errors, notes) across tasks."),
    "ui": Command("ui", "A live local web view of the log: tasks, a task's waterfall and answer, diffs (read-only)."),
    "recover": Command(
        "proxy", "Run the startup recovery once: resume or FAIL every task left in flight; say what was done."
    ),
    "probe": Command(
        "proxy",
        "Black-box checks: duplicate message idempotent, terminal state survives a dropped stream, no endless stall.",
    ),
    "import": Command(
        "tape", "Import JSONL tapes into the database, atomically (a bad line in any file imports nothing)."
    ),
    "export": Command("tape", "Export one task, or the whole log with --all."),
    "copy": Command("tape", "Copy every recording from SRC to DST (SQLite <-> PostgreSQL), losslessly and atomically."),
    "rm": Command(
        "manage", "Remove tasks from the log: their events, exchanges and projection rows (a LOCAL note says so)."
    ),
    "prune": Command("manage", "Remove every finished task (or, with --older-than, those last heard of before then)."),
}

TapeGroup.table = COMMANDS


def main() -> None:
    app()


if __name__ == "__main__":
    main()
