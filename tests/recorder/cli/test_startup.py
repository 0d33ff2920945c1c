"""Start fast: a read-only command imports what it reads, never the live side or the replay server.

Each command runs in a fresh interpreter with ``-X importtime``, which lists every module imported.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from .conftest import TASK, make_log

# the live side (proxy, recorder, HTTP client and server) and the replay engine
FORBIDDEN = (
    "uvicorn",
    "starlette",
    "httpx",
    "httpx_sse",
    "anyio",
    "a2a_tape.recorder.proxy.server",
    "a2a_tape.recorder.record",
    "a2a_tape.recorder.recovery",
    "a2a_tape.replay.serve.engine",
    "a2a_tape.replay.serve.server",
)

READ_ONLY = [
    ["--help"],
    ["--version"],
    ["tasks", "--help"],
    ["tasks", "--limit", "5"],
    ["tasks", "--json"],
    ["show", TASK],
    ["show", TASK, "--json"],
    ["channels", TASK],
    ["doctor"],
    ["doctor", TASK],
    ["grep", "chunk"],
    ["export", "--all"],
    ["export", TASK, "--format", "mermaid"],
    ["diff", TASK, "other-task"],
]


def imported_modules(*args: str) -> tuple[set[str], int]:
    r = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "a2a_tape.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    names = {line.rsplit("|", 1)[1].strip() for line in r.stderr.splitlines() if line.startswith("import time:")}
    return names, r.returncode


def _forbidden(names: set[str]) -> list[str]:
    return sorted(n for n in names if any(n == f or n.startswith(f + ".") for f in FORBIDDEN))


@pytest.mark.parametrize("argv", READ_ONLY, ids=" ".join)
def test_a_read_only_command_imports_no_live_side(tmp_path, argv):
    db = tmp_path / "log.db"
    make_log(db)
    extra = ["--db", str(db)] if argv[0] not in ("--help", "--version") and "--help" not in argv else []
    names, code = imported_modules(*argv, *extra)
    assert code in (0, 1), code  # 1: doctor finds faults, diff finds differences
    assert "a2a_tape.cli.app" in names  # the listing is real
    assert _forbidden(names) == []


@pytest.mark.parametrize("argv", [["--help"], ["--version"]], ids=" ".join)
def test_help_and_version_import_no_command_module(argv):
    names, code = imported_modules(*argv)
    assert code == 0
    from a2a_tape.cli import COMMANDS

    assert not {n for n in names if n in {f"a2a_tape.cli.{c.module}" for c in COMMANDS.values()}}
    assert not {n for n in names if n.startswith("a2a_tape.replay")}


# what a command's help never needs: its command module names the options, the work loads in its body
HEAVY = ("rich", "httpx", "anyio", "asyncio", "sqlite3", "msgspec", "a2a_tape.store.sqlite", "a2a_tape.fold")


@pytest.mark.parametrize("argv", [["--help"], ["record", "--help"], ["tasks", "--help"]], ids=" ".join)
def test_help_imports_typer_and_nothing_heavy(argv):
    names, code = imported_modules(*argv)
    assert code == 0
    assert "typer" in names  # the listing is real
    assert sorted(n for n in names if any(n == h or n.startswith(h + ".") for h in HEAVY)) == []


def test_the_check_itself_sees_the_live_side_of_record(tmp_path):
    """Control: ``record`` itself (an agent that is not there) does import httpx; and not the servers."""
    names, code = imported_modules("record", "http://127.0.0.1:9", "hi", "--db", str(tmp_path / "log.db"))
    assert code != 0
    assert "httpx" in names and "a2a_tape.recorder.record" in names
    assert sorted(n for n in names if n.split(".")[0] in ("uvicorn", "starlette", "grpc")) == []


def test_tasks_json_prints_without_rich(tmp_path):
    """Rows as JSON need no terminal rendering."""
    db = tmp_path / "log.db"
    make_log(db)
    names, code = imported_modules("tasks", "--json", "--db", str(db))
    assert code == 0
    assert "a2a_tape.store.sqlite" in names
    assert not {n for n in names if n == "rich" or n.startswith("rich.")}


@pytest.mark.parametrize("command", ["tasks", "record", "record --file", "import"])
def test_a_command_converts_its_values_without_pydantic(tmp_path, command):
    """typer >= 0.29 would import pydantic (~100 ms; 300 M instructions of record's run) to convert
    plain values; options.py converts them, a Path (record --file, import FILE) included."""
    import typer.core

    db = tmp_path / "log.db"
    make_log(db)
    tape = tmp_path / "t.jsonl"
    tape.write_text("")
    argv = {
        "tasks": ["tasks", "--limit", "5"],
        "record": ["record", "http://127.0.0.1:9", "hi"],  # no agent there: the values are converted first
        "record --file": ["record", "http://127.0.0.1:9", "hi", "--file", str(tape)],
        "import": ["import", str(tape)],
    }[command]
    names, code = imported_modules(*argv, "--db", str(db))
    assert code in (0, 1, 2), code
    assert "a2a_tape.cli.app" in names  # the listing is real
    if hasattr(typer.core, "build_runtime_param"):
        assert not {n for n in names if n == "pydantic" or n.startswith("pydantic.")}
