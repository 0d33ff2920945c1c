"""The shell and Python blocks of README.md and docs/*.md, and how each is run.

A block runs as pasted unless the HTML comment just above its fence says otherwise:

- ``<!-- not run: WHY -->``: not run by the test (a browser, a benchmark, a remote server...).
- ``<!-- background, ready at "TEXT" -->``: the block's last command runs until stopped (a
  server, as in another terminal); the test goes on once it printed TEXT, and stops it with
  SIGTERM (exit 0 expected) where the section ends (the next ``## `` heading).

A block that needs a server starts it itself (``a2a-tape serve ... 2> serve.log &``, then waits
until the log says it is ready, and stops it with ``kill %1``), as a reader pastes it: nothing a
block needs is named only in a comment. Whatever a block leaves running is stopped after it.
- ``<!-- pytest file: PATH -->``: the block is a test module; the test writes it to PATH and
  runs pytest on it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHELL = ("bash", "sh", "shell")
LANGUAGES = (*SHELL, "python")
_FENCE = re.compile(r"^```(\w*)\s*$")
_MARKER = re.compile(r"^<!--\s*(.*?)\s*-->$")
_READY = re.compile(r'ready at "([^"]+)"')


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # of the opening fence, 1-based
    language: str
    text: str
    marker: str | None
    section: str  # the ``## `` heading above it

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    @property
    def not_run(self) -> str | None:
        return self.marker[len("not run:") :].strip() if self.marker and self.marker.startswith("not run:") else None

    @property
    def background(self) -> bool:
        return bool(self.marker and self.marker.startswith("background"))

    @property
    def ready(self) -> str | None:
        m = _READY.search(self.marker or "")
        return m.group(1) if m else None

    @property
    def pytest_file(self) -> str | None:
        if self.marker and self.marker.startswith("pytest file:"):
            return self.marker[len("pytest file:") :].strip()
        return None


def blocks_of(path: Path) -> list[Block]:
    """Every fenced block of ``path`` in LANGUAGES, with the marker just above it (if any)."""
    lines = path.read_text().splitlines()
    found: list[Block] = []
    section = ""
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            if lines[i].startswith("## "):
                section = lines[i]
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("```")), len(lines))
        above = next((lines[k].strip() for k in range(i - 1, -1, -1) if lines[k].strip()), "")
        marker = _MARKER.match(above)
        if m.group(1) in LANGUAGES:
            text = "\n".join(lines[i + 1 : end]) + "\n"
            found.append(Block(path, i + 1, m.group(1), text, marker.group(1) if marker else None, section))
        i = end + 1
    return found


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def commands(text: str) -> list[str]:
    """The commands of a shell block: ``\\``-continued lines joined, blank and comment lines dropped."""
    joined = re.sub(r"\\\n", " ", text)
    return [line.strip() for line in joined.splitlines() if line.strip() and not line.strip().startswith("#")]


def shell_problems(block: Block) -> list[str]:
    """What makes a shell block break when pasted, found without running it."""
    problems = []
    for command in commands(block.text):
        if command.startswith("-"):
            problems.append(
                f"{block.where}: {command.split()[0]!r} starts a command of its own "
                "(a comment after a '\\' continuation ends the command above)"
            )
    for n, line in enumerate(block.text.splitlines(), start=block.line + 1):
        if line.rstrip().endswith("\\") and "#" in line.split("\\")[0] and re.search(r"\s#", line):
            problems.append(f"{block.where}: line {n}: a comment before a '\\' continuation swallows it")
    return problems
