"""Where an export goes: ``-o FILE``, ``-o DIR/`` (html: a page per task), ``-o -`` or no ``-o``
(standard output).

The rules, in one place for every export format:

- an empty ``-o ''`` names no file: bad usage (it is not the current directory);
- ``-o -`` is standard output, as no ``-o`` is (every format has a one-stream form: the tape,
  HAR, Mermaid, one html page); a directory is asked for by a trailing slash or an existing
  directory, never by ``-``;
- the output is never the log being read (``-o log.db --db log.db`` would empty the log);
- a file we create is owner-only (:mod:`a2a_tape.store.files`);
- an error writing the output names the output ("cannot write out.har: No space left on
  device"), never the log.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, NoReturn, cast

import typer

from a2a_tape.store.files import open_private

STDOUT = "-"


def checked(ctx: typer.Context, param: typer.CallbackParam, value: str | None) -> str | None:
    """``-o``: anything but an empty path (typer would read ``''`` as the current directory)."""
    if value is not None and not value.strip():
        raise typer.BadParameter(
            "an empty path names no file (give a FILE, a DIR/ for html, or - for standard output)",
            ctx=ctx,
            param=cast(Any, param),
        )
    return value


@dataclass(frozen=True)
class Output:
    """``-o`` as given (None or ``-``: standard output)."""

    text: str | None

    @property
    def to_stdout(self) -> bool:
        return self.text is None or self.text == STDOUT

    @property
    def path(self) -> Path:
        assert self.text is not None and not self.to_stdout  # a file or a directory
        return Path(self.text)

    @property
    def directory(self) -> bool:
        """A directory: typed with a trailing slash, or one that exists."""
        return not self.to_stdout and (str(self.text).endswith(("/", os.sep)) or self.path.is_dir())

    @property
    def name(self) -> str:
        return "standard output" if self.to_stdout else str(self.text)

    def check_apart_from(self, log: str) -> None:
        """Refuse an output that is the log (or tape) being read: writing it would destroy it."""
        if self.to_stdout or "://" in log:
            return
        try:
            same = os.path.samefile(self.path, log)
        except OSError:  # one of them does not exist: not the same file
            return
        if same:
            _refuse(f"-o {self.text} is the log being read ({log}): write the export to another file")

    @contextmanager
    def stream(self) -> Iterator[IO[bytes]]:
        """The binary stream to write to (a file created owner-only, or standard output); an
        error writing it is bad input naming the output."""
        import sys

        try:
            if self.to_stdout:
                yield sys.stdout.buffer
                sys.stdout.flush()
            else:
                with open_private(self.path) as fh:
                    yield fh
        except BrokenPipeError:  # the reader went away (| head): as a2a-tape answers it elsewhere
            raise
        except OSError as exc:
            self.failed(exc)

    def failed(self, exc: OSError) -> NoReturn:
        """One line for an error writing the output (a file of a directory export names itself)."""
        where = exc.filename if exc.filename and not self.to_stdout else self.name
        _refuse(f"cannot write {where}: {exc.strerror or exc}")


def _refuse(message: str) -> NoReturn:
    from a2a_tape.cli.app import fail

    fail(message)
