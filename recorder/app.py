"""The typer application and what every command shares: ``--db``, ``--json``, errors, exit codes.

Exit codes (DESIGN section 9): 0 done as asked; 1 the task or check failed; 2 bad usage or
bad input, with one readable line on stderr and no traceback.
"""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path
from typing import Annotated, Any, Literal, NoReturn

import click
import msgspec
import typer
import typer.core
from rich.console import Console

from a2a_tape import store
from a2a_tape.store.errors import A2ATapeError
from a2a_tape.store.redact import safe_text, safe_urls

from .capture import store_fault

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2

app = typer.Typer(
    name="a2a-tape",
    help="Record, replay and inspect A2A (Agent2Agent) task streams.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

# human output goes to stdout; progress, logs and errors to stderr
out = Console(highlight=False, soft_wrap=False)
err = Console(stderr=True, highlight=False)

DbOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        help="The log: a SQLite file or a postgresql:// URL (default: $A2A_TAPE_DB, else ./a2a-tape.db).",
        show_default=False,
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]
BusyTimeoutOption = Annotated[
    float | None,
    typer.Option(
        "--busy-timeout",
        metavar="SECONDS",
        help="How long a write waits for another process's write lock on the log before it fails (default: 30).",
        show_default=False,
    ),
]


class UsageError(A2ATapeError):
    """Bad usage or bad input: exit 2 with this one line."""


class CheckFailed(A2ATapeError):
    """The task or check failed: exit 1 with this one line."""


def fail(message: str, code: int = EXIT_BAD_INPUT) -> NoReturn:
    if code == EXIT_FAILED:
        raise CheckFailed(message)
    raise UsageError(message)


def db_location(db: str | None) -> str:
    return db or store.default_db()


def open_db(
    db: str | None,
    *,
    create: bool = False,
    durability: store.Durability = "full",
    readonly: bool | Literal["fallback"] = False,
    busy_timeout: float | None = None,
) -> store.Store:
    """Open the log; for read-only commands the file must exist already.

    ``readonly``: the command only reads (nothing is created, migrated or written; works on
    read-only media). ``"fallback"``: the command reads, but keeps a cache in the log when it can
    (the persisted projection of ``tasks`` and ``channels``): opened for writing, read-only only
    when the log cannot be written here. ``busy_timeout``: ``--busy-timeout``, checked here first.
    """
    if busy_timeout is not None and not (math.isfinite(busy_timeout) and busy_timeout > 0):
        fail(f"--busy-timeout must be a number of seconds above 0, got {busy_timeout:g}")
    loc = db_location(db)
    if not create and "://" not in loc and not Path(loc).exists():
        fail(f"no database at {loc} (record something first, or pass --db)")
    if readonly == "fallback":
        try:
            return store.open_store(loc, create=False, durability=durability, busy_timeout=busy_timeout)
        except store.ReadOnlyStore:  # read-only media, or a read-only server: read it as it is
            readonly = True
    return store.open_store(
        loc, create=create and not readonly, durability=durability, readonly=readonly, busy_timeout=busy_timeout
    )


def find_task(st: store.EventLog, task_id: str) -> str:
    """Resolve a task id, accepting a unique prefix."""
    if st.has_task(task_id):
        return task_id
    matches = st.task_ids_with_prefix(task_id) if task_id else []
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        fail(f"task id prefix '{task_id}' is ambiguous: {', '.join(matches[:5])}")
    fail(f"unknown task: {task_id} (see 'a2a-tape tasks')")


_json = msgspec.json.Encoder()


def emit_json(value: Any) -> None:
    """Print one JSON document on stdout (msgspec Structs, lists, dicts); a URL in it with a
    secret (a password, a token parameter) is redacted as on the disk."""
    doc = _json.encode(value)
    if b"://" in doc:
        doc = safe_urls(doc.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")
    sys.stdout.buffer.write(doc + b"\n")
    sys.stdout.flush()


def say(message: str) -> None:
    """One human line on stderr, through the same redaction as the disk (no secret printed)."""
    err.print(safe_text(message), markup=False, soft_wrap=True)


def _one_line(exc: BaseException) -> tuple[str, int] | None:
    """The one line and exit code for an error we know, or None."""
    fault = store_fault(exc)
    if fault is not None:
        exc = fault  # the log cannot be written (disk full, locked, read-only): exit 2, named
    if isinstance(exc, (UsageError, store.StoreError)):
        return f"a2a-tape: error: {exc}", EXIT_BAD_INPUT
    if isinstance(exc, CheckFailed):
        return f"a2a-tape: {exc}", EXIT_FAILED
    if isinstance(exc, OSError) and not isinstance(exc, ConnectionError):
        where = f": {exc.filename}" if exc.filename else ""
        return f"a2a-tape: error: {exc.strerror or exc}{where}", EXIT_BAD_INPUT
    return None


class TapeGroup(typer.core.TyperGroup):
    """Turns our errors into one line on stderr and a documented exit code (CliRunner too)."""

    def invoke(self, ctx):  # type: ignore[override]
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort, click.ClickException, click.exceptions.Exit):
            raise
        except KeyboardInterrupt:
            err.print("a2a-tape: interrupted", markup=False)
            raise typer.Exit(130) from None
        except Exception as exc:
            known = _one_line(exc)
            if known is None:
                if os.environ.get("A2A_TAPE_DEBUG"):
                    raise
                known = (f"a2a-tape: internal error: {type(exc).__name__}: {exc}", 70)
            err.print(safe_text(known[0]), markup=False, soft_wrap=True)
            raise typer.Exit(known[1]) from None


app.info.cls = TapeGroup
