"""One notation in every ``--help`` (issue 26 item 5), through the installed CLI: values are UPPER
words or their choices (``URL``, ``N``, ``SECONDS``, ``HOST:PORT``, ``[full|normal]``), never typer's
``{url}``, ``<str>`` or ``<list[str]>``; a default is ``[default: ...]``, never ``(default: ...)``."""

from __future__ import annotations

import re

import pytest

from a2a_tape.cli import COMMANDS

from .test_contract import a2a_tape

OPTION = re.compile(r"^  (?:-\w, )?(--[\w-]+)(?: (\S+))?(?:\s{2,}|$)")
ARGUMENT_SECTION = re.compile(r"^Arguments:\n((?:  .*\n|\s*\n)*)", re.M)
UPPER = re.compile(r"^(?:[A-Z][A-Z0-9_:]*|\[[\w.|+-]+\])(?:\.\.\.)?$")


def _help(command: str, tmp_path) -> str:
    r = a2a_tape(command, "--help", cwd=tmp_path, env={"COLUMNS": "100"})
    assert r.code == 0, r.stderr
    return r.stdout.decode()


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_help_says_values_and_defaults_one_way(command, tmp_path):
    text = _help(command, tmp_path)
    usage = text.splitlines()[0]
    assert usage.startswith(f"Usage: a2a-tape {command} [OPTIONS]"), usage
    for word in usage.split()[4:]:
        assert UPPER.match(word.strip("[]") if word.startswith("[") and word.endswith("]") else word), usage
    assert not re.search(r"<[\w\[\]|., ]+>", text), text  # typer's <str>, <int>, <list[str]>
    assert "(default" not in text, text
    for line in text.splitlines():
        found = OPTION.match(line)  # a flag has no value: its help follows after two spaces
        if found and found.group(2):
            assert UPPER.match(found.group(2)), line
    section = ARGUMENT_SECTION.search(text)
    for line in section.group(1).splitlines() if section else ():
        if line.startswith("  ") and not line.startswith("   "):
            assert UPPER.match(line.split()[0]), line
