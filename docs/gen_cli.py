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

Every command takes `--db PATH`: a SQLite file or a postgresql:// URL, `$A2A_TAPE_DB` if set, else
`./a2a-tape.db`; a command that only reads takes a JSONL tape there too. Read-only commands take
`--json`: one JSON document on stdout, nothing else there. `a2a-tape --version` prints the version.
Human output never hands a terminal a recording's control characters, escape sequences or
bidirectional overrides: they are shown as `\\x1b`, `\\x9b`, `\\u202e` (`--json` and `--raw` print
the recording exactly).

A task recorded by several observers (the proxy and the client recording through it, a `serve`
replay recorded back into its log, two hosts on a shared log) has several runs, numbered 1..N in
the order of their first event: `TASK@N` names run N wherever a task is named (`channels`, `show`,
`doctor`, `diff`; `--run N` says the same), a task alone its latest run. `tasks` lists a task once
with its runs (`--runs`: a line per run). A selector that names no run (`TASK@9` of a task with
two, `TASK@x`) is one line on stderr and exit 2.

## Exit codes

| code | meaning |
|---|---|
| 0 | done as asked |
| 1 | the task or check failed: a FAILED task, a diff found, a doctor error, no grep match |
| 2 | bad usage or bad input: a missing argument, an unknown option or command, a bad value (a number that is not finite or out of range, a port outside 1-65535, a URL that cannot be sent to, an argument that is not UTF-8), a missing or unreadable database, or a file that holds no a2a-tape log (never initialised by a command that reads); one line on stderr, no traceback, and nothing was sent or written |
| 70 | a bug in a2a-tape: one line `a2a-tape: internal error: ...` on stderr; `A2A_TAPE_DEBUG=1` shows the traceback. Never the answer to bad input: please report it |
| 130 | interrupted (Ctrl-C); what was recorded stays |

A server (`serve`, `proxy`, `ui`, `demo --agent-only`) stopped by SIGTERM (`kill`, a service manager)
closes its connections and exits 0.

Every value is checked before a command sends or writes anything: seconds (`--stall-timeout`,
`--timeout`, `--idle-timeout`, `--idempotency-ttl`) are finite numbers > 0; counts and sizes
(`--limit`, `--max-body`) whole numbers >= 1; `--listen` ports 0-65535 (0: any free port), URL
ports 1-65535; `--since` a real time; `--timing` instant, real or a finite FACTOR > 0. Options
with fixed choices list them in their help. `a2a-tape` with no arguments prints the help.

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

    from a2a_tape.cli import app

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
    from a2a_tape.cli import COMMANDS

    return list(COMMANDS)


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
