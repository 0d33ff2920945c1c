"""The typer application and what every command shares: ``--db``, ``--json``, errors, exit codes.

Exit codes (docs/cli.md): 0 done as asked; 1 the task or check failed; 2 bad usage or bad
input, with one readable line on stderr and no traceback; 70 a bug in a2a-tape (one line; set
``A2A_TAPE_DEBUG=1`` for the traceback); 130 interrupted.

Commands are registered lazily: ``cli.py`` names each command and the module that
defines it, and :class:`TapeGroup` imports that module only when the command runs (or its help
is asked for). A read-only command so never imports the proxy, the replay server, httpx,
starlette or uvicorn. Each command module declares its commands on its own :func:`commands`
app, with typer's usual decorators.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, NoReturn

import typer
import typer.core

from a2a_tape import store
from a2a_tape.cli import options
from a2a_tape.store.errors import A2ATapeError

if TYPE_CHECKING:
    from rich.console import Console

    from a2a_tape.fold.runs import Run
    from a2a_tape.inspection.messages import LoneMessage

options.install_plain_values()  # plain values without pydantic on typer >= 0.29 (see options.py)

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 70  # EX_SOFTWARE: a bug in a2a-tape, never an answer to bad input
EXIT_INTERRUPTED = 130

app = typer.Typer(
    name="a2a-tape",
    help="Record, replay and inspect A2A (Agent2Agent) task streams.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},  # every command's context inherits it
)


def commands() -> typer.Typer:
    """The app a command module declares its commands on (mounted lazily by :class:`TapeGroup`)."""
    return typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)


class _LazyConsole:
    """A rich Console made on first use: ``--help``, ``--version`` and ``--json`` never import rich."""

    def __init__(self, **kwargs: Any) -> None:
        object.__setattr__(self, "_kwargs", kwargs)
        object.__setattr__(self, "_console", None)

    def _get(self) -> Console:
        console: Console | None = object.__getattribute__(self, "_console")
        if console is None:
            from a2a_tape.cli.console import VisibleConsole

            console = VisibleConsole(**object.__getattribute__(self, "_kwargs"))
            object.__setattr__(self, "_console", console)
        return console

    def __getattr__(self, name: str) -> Any:
        return getattr(self._get(), name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._get(), name, value)

    # special methods are looked up on the type, not through __getattr__ (rich's Live does `with console`)
    def __enter__(self) -> Console:
        return self._get().__enter__()

    def __exit__(self, *exc: Any) -> None:
        self._get().__exit__(*exc)


# human output goes to stdout; progress, logs and errors to stderr
out: Console = _LazyConsole(highlight=False, soft_wrap=False)  # type: ignore[assignment]  # forwards to a Console
err: Console = _LazyConsole(stderr=True, highlight=False)  # type: ignore[assignment]  # forwards to a Console

DbOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        metavar="PATH",
        help="The log: a SQLite file or a postgresql:// URL.",
        show_default="$A2A_TAPE_DB, else ./a2a-tape.db",
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]
BusyTimeoutOption = Annotated[
    float | None,
    typer.Option(
        "--busy-timeout",
        metavar="SECONDS",
        help="How long a write waits for another process's write lock on the log before it fails.",
        show_default="30",
        callback=options.seconds,
    ),
]
ListenOption = Annotated[
    str,
    typer.Option(metavar="HOST:PORT", help="Where to listen (port 0: any free port).", callback=options.listen),
]
HeadTimeoutOption = Annotated[
    float,
    typer.Option(
        "--head-timeout",
        metavar="SECONDS",
        help="Drop a connection that has not sent a whole request head this long after it opened "
        "or after its last answer (a stalled client holds no file descriptor).",
        callback=options.seconds,
    ),
]
AllowRemoteOption = Annotated[
    bool, typer.Option("--allow-remote", help="Allow --listen on a non-loopback address (and any Host).")
]
AllowHostOption = Annotated[
    list[str],
    typer.Option(
        metavar="HOST", help="Also answer requests naming this host (Host header, or a web page's Origin); repeatable."
    ),
]
GrpcListenOption = Annotated[
    str | None,
    typer.Option(
        metavar="HOST:PORT",
        help="Also answer gRPC clients here (needs the grpc extra); the card names it.",
        show_default=False,
        callback=options.listen,
    ),
]
QuietOption = Annotated[
    bool, typer.Option("--quiet", "-q", help="No line per request on stderr (the banner and errors stay).")
]
TaskArgument = Annotated[
    str, typer.Argument(help="Task id (or a unique prefix); TASK@N for its run N, else its latest run.")
]
RunOption = Annotated[
    int | None,
    typer.Option(
        "--run",
        metavar="N",
        help="Run N of the task (as TASK@N; 1 is the first recorded; default: the latest; 'a2a-tape tasks --runs' lists them).",
        show_default=False,
        callback=options.count,
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
    when the log cannot be written here. Either reads a tape as it reads a database, and refuses
    a file that holds no log (:func:`a2a_tape.store.open_for_reading` decides both).
    ``busy_timeout``: ``--busy-timeout`` (checked by :func:`options.seconds`, the one duration rule).
    """
    loc = db_location(db)
    if not create and "://" not in loc and not Path(loc).exists():
        fail(f"no database at {loc} (record something first, or pass --db)")
    if readonly:
        return store.open_for_reading(
            loc, keep_cache=readonly == "fallback", durability=durability, busy_timeout=busy_timeout
        )
    return store.open_store(loc, create=create, durability=durability, busy_timeout=busy_timeout)


def find_task(st: store.EventLog, task_id: str) -> str:
    """Resolve a task id, accepting a unique prefix."""
    matches = store.tasks_named(st, task_id)
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        fail(f"task id prefix '{task_id}' is ambiguous: {', '.join(matches[:5])}")
    fail(f"unknown task: {task_id} (see 'a2a-tape tasks')")


def find_task_or_message(st: store.Recordings, key: str) -> str | LoneMessage:
    """A task id (:func:`find_task`'s rules), else the lone Message reply ``key`` names (its
    message id or context id, or a unique prefix): what ``show``, ``channels`` and ``export`` take."""
    from a2a_tape.inspection.messages import find_message

    if not st.has_task(key):
        lone = find_message(st, key)
        if lone is not None:
            return lone
    return find_task(st, key)


def find_run(st: store.EventLog, text: str, run: int | None = None) -> tuple[str, int | None]:
    """A task and the run a selector names: ``TASK@N`` (or ``TASK`` with ``--run N``) as
    ``(task id, N)``, a task alone as ``(task id, None)`` (its latest run). A bad selector: one
    line, exit 2."""
    from a2a_tape.fold.runs import BadSelector, read_selector  # only the commands that read runs

    try:
        task, number = read_selector(st, text, run)
    except BadSelector as exc:
        fail(str(exc))
    return find_task(st, task), number


def find_export(st: store.Recordings, text: str, run: int | None = None) -> tuple[Any, str | LoneMessage, str | None]:
    """What ``export`` reads for ``TASK``, ``TASK@N`` or ``TASK --run N`` (:func:`find_run`'s
    rules): the log to read it from (for a run named, the log as that run shows it:
    :class:`a2a_tape.fold.runs.RunLog`), the task id or the lone Message reply, and the run's
    selector (None: the task's every run). A bad selector: one line, exit 2."""
    from a2a_tape.fold.runs import RunLog
    from a2a_tape.inspection.messages import find_message

    lone = None if st.has_task(text) else find_message(st, text)
    if lone is not None:
        if run is not None:
            fail(f"{text} is a lone Message reply (no task): it has no runs")
        return st, lone, None
    task_id, number = find_run(st, text, run)
    if number is None:
        return st, task_id, None
    one = load_run(st, task_id, number)
    return RunLog(st, one), task_id, one.selector


def load_run(st: store.Recordings, task_id: str, number: int | None) -> Run:
    """Run ``number`` of a task (its latest when None); none such: one line, exit 2."""
    from a2a_tape.fold.runs import BadSelector, pick_run, task_runs

    try:
        return pick_run(task_runs(st, task_id), task_id, number)
    except BadSelector as exc:
        fail(str(exc))


def listen_address(text: str, *, allow_remote: bool, why: str, option: str = "--listen") -> tuple[str, int]:
    """``--listen`` (or ``option``: ``--grpc-listen``, named in a refusal) as ``(host, port)``; off
    this machine only with ``--allow-remote`` (one line, exit 2)."""
    from a2a_tape.recorder.listen import listen_address as parse  # here: only the servers take --listen

    try:
        return parse(text, allow_remote=allow_remote, why=why)
    except ValueError as exc:
        fail(str(exc) if option == "--listen" else f"{option}: {exc}")


def listen_and_serve(
    asgi: Any,
    host: str,
    port: int,
    banner: Callable[[str], str],
    *,
    lifespan: Literal["auto", "on", "off"] = "off",
    head_timeout: float | None = None,
) -> None:
    """Bind ``host:port`` (a refusal: one line, exit 2), say ``banner(url)`` on stderr, serve until
    Ctrl-C; a client without a whole request head after ``head_timeout`` seconds is dropped
    (``recorder.listen.HEAD_TIMEOUT`` unless told)."""
    from a2a_tape.recorder import listen as listening  # asyncio and uvicorn, for the servers only

    try:
        sock = listening.bind(host, port)
    except OSError as exc:
        fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}")
    url = listening.url_of(sock)

    def say_banner() -> None:
        say(banner(url))
        sys.stderr.flush()

    timeout = listening.HEAD_TIMEOUT if head_timeout is None else head_timeout
    listening.run(asgi, sock, lifespan=lifespan, listening=say_banner, head_timeout=timeout)


def emit_json(value: Any) -> None:
    """Print one JSON document on stdout (msgspec Structs, lists, dicts); a URL in it with a
    secret (a password, a token parameter) is redacted as on the disk."""
    import msgspec

    from a2a_tape.store.redact import safe_urls

    doc = msgspec.json.encode(value)
    if b"://" in doc:
        doc = safe_urls(doc.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")
    sys.stdout.buffer.write(doc + b"\n")
    sys.stdout.flush()


def stream_json(rows: Iterable[Any]) -> int:
    """One JSON list on stdout, written a row at a time (memory stays flat); returns how many rows."""
    import msgspec

    enc = msgspec.json.Encoder()
    write = sys.stdout.buffer.write
    write(b"[")
    n = 0
    for row in rows:
        write(enc.encode(row) if n == 0 else b"," + enc.encode(row))
        n += 1
    write(b"]\n")
    sys.stdout.flush()
    return n


def say(message: str) -> None:
    """One human line on stderr, through the same redaction as the disk (no secret printed)."""
    from a2a_tape.store.redact import safe_text

    err.print(safe_text(message), markup=False, soft_wrap=True)


def _one_line(exc: BaseException) -> tuple[str, int] | None:
    """The one line and exit code for an error we know, or None."""
    from a2a_tape.store.driver_errors import store_fault  # no httpx: this runs whatever failed

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


# a major release known to break us (pyproject's upper bounds): httpx 1.0 drops httpx.ReadTimeout,
# httpx.AsyncBaseTransport and friends, so importing our HTTP side fails
_BREAKING_MAJOR = {"httpx": 1}


def _dependency_line(exc: BaseException) -> tuple[str, int] | None:
    """An import that failed because an installed dependency is a release outside our bounds:
    one line naming it and the fix (exit 2), not an internal error."""
    if not isinstance(exc, (ImportError, AttributeError)):
        return None
    from importlib import metadata

    for name, major in _BREAKING_MAJOR.items():
        try:
            version = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
        head = version.split(".", 1)[0]
        if head.isdigit() and int(head) >= major:
            return (
                f"a2a-tape: error: {name} {version} is installed, and a2a-tape works with {name} < {major}.0 "
                f"only ({type(exc).__name__}: {exc}); install a supported one: pip install '{name}<{major}'",
                EXIT_BAD_INPUT,
            )
    return None


def _usage_line(exc: Exception) -> str:
    """typer's own message for a usage error, on one line, with where to find the usage."""
    text = " ".join(exc.format_message().split())  # type: ignore[attr-defined]  # a UsageError of either click copy
    ctx = getattr(exc, "ctx", None)
    hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
    return f"a2a-tape: error: {text}{hint}"


@dataclass(frozen=True)
class Command:
    """One command of the command line: the module that defines it, and its line in ``--help``."""

    module: str
    summary: str


class TapeGroup(typer.core.TyperGroup):
    """The root command: mounts each command from its module on first use, and owns the exit codes.

    Every way out goes through :meth:`main`: usage errors and bad values (whatever click typer
    runs on) and our own errors print one line on stderr and exit 2 (1 for a failed check);
    anything else is a bug: one line, exit 70 (``A2A_TAPE_DEBUG=1`` re-raises it).
    """

    table: Mapping[str, Command] = {}  # set by cli.py, the one place that names the commands
    _loaded: dict[str, Any]

    def list_commands(self, ctx: Any) -> list[str]:
        return list(self.table)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        from a2a_tape.cli.notation import uniform  # one notation in every --help (UPPER metavars)

        if cmd_name not in self.table:
            return None
        loaded = self.__dict__.setdefault("_loaded", {})
        if cmd_name not in loaded:
            module = importlib.import_module(f"{__package__}.{self.table[cmd_name].module}")
            built = typer.main.get_command(module.app)
            found = getattr(built, "commands", None)
            loaded[cmd_name] = uniform(found[cmd_name] if found is not None else built)
        return loaded[cmd_name]

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """The command list of ``--help`` from the table: no command module is imported for it."""
        if not self.table:
            return
        limit = formatter.width - 6 - max(len(name) for name in self.table)
        rows = [(name, options.short_help(c.summary, limit)) for name, c in self.table.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            _say("a2a-tape: interrupted")
            raise typer.Exit(EXIT_INTERRUPTED) from None

    def main(  # type: ignore[override]  # windows_expand_args (newer click) arrives in **extra
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        code = self._run(list(sys.argv[1:] if args is None else args), prog_name, complete_var, **extra)
        if standalone_mode:
            sys.exit(code)
        return code

    def _run(self, args: list[str], prog_name: str | None, complete_var: str | None, **extra: Any) -> int:
        problem = options.utf8_problem(args)
        if problem is not None:
            _say(f"a2a-tape: error: {problem}")
            return EXIT_BAD_INPUT
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except Exception as exc:
            if options.NoArgsIsHelp is not None and isinstance(exc, options.NoArgsIsHelp):
                exc.show()  # type: ignore[attr-defined]  # the help, as asked by a bare `a2a-tape`
                return EXIT_BAD_INPUT
            if isinstance(exc, options.ClickException):
                _say(_usage_line(exc))
                return EXIT_BAD_INPUT
            if isinstance(exc, options.Abort):
                _say("a2a-tape: aborted")
                return EXIT_FAILED
            known = _one_line(exc) or _dependency_line(exc)
            if known is None:
                if os.environ.get("A2A_TAPE_DEBUG"):
                    raise
                known = (f"a2a-tape: internal error: {type(exc).__name__}: {exc}", EXIT_INTERNAL)
            _say(known[0])
            return known[1]
        return rv if isinstance(rv, int) else EXIT_OK


def say_line(line: str) -> None:
    """One line on stderr as errors are written (:func:`_say`): the servers' line per request."""
    _say(line)


def _say(line: str) -> None:
    """One line on stderr: never wrapped, never styled, redacted as the disk is (no secret printed),
    nothing in it acting on the terminal (inspection.visible)."""
    from a2a_tape.inspection.visible import visible
    from a2a_tape.store.redact import safe_text

    sys.stderr.write(visible(" ".join(safe_text(line).splitlines()), lines=False) + "\n")
    sys.stderr.flush()


def _print_version(value: bool) -> None:
    if value:
        import a2a_tape

        sys.stdout.write(f"a2a-tape {a2a_tape.__version__}\n")
        raise typer.Exit(EXIT_OK)


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", is_eager=True, callback=_print_version, help="Print the version and exit."),
    ] = False,
) -> None:
    """Record, replay and inspect A2A (Agent2Agent) task streams."""


app.info.cls = TapeGroup
