"""Generate docs/cli.md, the CLI reference, from the ``--help`` of every ``a2a-tape`` command.

    python docs/gen_cli.py           # rewrite docs/cli.md
    python docs/gen_cli.py --check   # exit 1 when docs/cli.md is out of date (what the test checks)

The help text is the single source: edit a command's docstring or option help, then rerun this.
Help is rendered at a fixed width so the file does not depend on the terminal.
"""

from __future__ import annotations

import sys
from pathlib import Path

DOC = Path(__file__).resolve().parent / "cli.md"
WIDTH = 100

HEADER = """# a2a-tape command line reference

Generated from `a2a-tape --help` and `a2a-tape COMMAND --help` by `python docs/gen_cli.py`;
do not edit by hand (a test fails when this file and the help disagree).

Every command takes `--db PATH` (default: `$A2A_TAPE_DB`, else `./a2a-tape.db`). Read-only
commands take `--json`: one JSON document on stdout, nothing else there. Exit codes: 0 done as
asked; 1 the task or check failed (a FAILED task, a diff found, a doctor error, no grep match);
2 bad usage or bad input, with one line on stderr.

## JSON output

A task's `state` is one of `submitted`, `working`, `input-required`, `auth-required`, `completed`,
`failed`, `canceled`, `rejected` or `unknown` (nothing said it yet), whichever dialect the agent
spoke. A send answered by a lone Message that names no task is not a task: `record --json` and
each row of `tasks --json` say `"kind": "message"` with `task_id` and `state` null, and name it by
`message_id` (and `context_id`); `a2a-tape show MESSAGE_ID` (or the context id) prints its events.
Every other row says `"kind": "task"`.
"""


def _help(args: list[str]) -> str:
    from typer.testing import CliRunner

    from a2a_tape.recorder.cli import app

    result = CliRunner().invoke(
        app,
        [*args, "--help"],
        prog_name="a2a-tape",
        terminal_width=WIDTH,
        max_content_width=WIDTH,
        catch_exceptions=False,
    )
    if result.exit_code != 0:
        raise SystemExit(f"a2a-tape {' '.join(args)} --help exited {result.exit_code}")
    return "\n".join(line.rstrip() for line in result.stdout.strip("\n").splitlines())


def commands() -> list[str]:
    import typer.main

    from a2a_tape.recorder.cli import app

    return list(typer.main.get_command(app).commands)  # type: ignore[attr-defined]


def render() -> str:
    parts = [HEADER, "## a2a-tape\n", "```text", _help([]), "```\n"]
    for name in commands():
        parts += [f"## a2a-tape {name}\n", "```text", _help([name]), "```\n"]
    return "\n".join(parts)


def main(argv: list[str]) -> int:
    root = str(DOC.parent.parent)
    if root not in sys.path:
        sys.path.insert(0, root)
    text = render()
    if "--check" in argv:
        if not DOC.exists() or DOC.read_text(encoding="utf-8") != text:
            print("docs/cli.md is out of date: run python docs/gen_cli.py", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(text, encoding="utf-8")
    print(f"wrote {DOC}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
