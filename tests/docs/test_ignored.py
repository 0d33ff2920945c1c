"""Following the README in the clone leaves ``git status`` clean: every file its commands and
snippets create (a log named by ``--db`` or ``A2A_TAPE_DB=``, an export's ``-o``, a recording
transport's database, the pytest file it asks for) is git-ignored, with SQLite's side files."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from tests.docs.blocks import ROOT

_CREATED = re.compile(
    r"(?:--db|-o|--output|--junit|2>)[ =]([^\s\"'`)]+)"
    r"|A2A_TAPE_DB=(\S+)"
    r"|Recording(?:Transport|Interceptor)\(\"([^\"]+)\""
    r"|pytest file: (\S+)"
)


def created_by_readme() -> list[str]:
    """The files the README's commands write, by name (placeholders, URLs, stdout and the golden
    recordings it reads left out)."""
    names: set[str] = set()
    for m in _CREATED.finditer((ROOT / "README.md").read_text()):
        name = next(g for g in m.groups() if g)
        if name in ("-", "on") or name.isupper() or name.endswith("/") or "://" in name:
            continue
        if name.startswith(("$", "recordings/")):
            continue
        names.add(name)
    return sorted(names)


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="not a git clone")
def test_files_the_readme_creates_are_ignored():
    names = created_by_readme()
    # the reader still finds them (a server's log a block keeps, verify's report too)
    assert {"rest.db", "client.db", "golden.db", "report.html", "serve.log", "verify.xml"} <= set(names), names
    paths = [f"{n}{side}" for n in names for side in (("", "-wal", "-shm", "-journal") if n.endswith(".db") else ("",))]
    run = subprocess.run(["git", "check-ignore", "--no-index", *paths], cwd=ROOT, capture_output=True, text=True)
    ignored = set(run.stdout.split())
    assert [p for p in paths if p not in ignored] == []
