"""``a2a-tape record`` (one live session, recorded write-ahead) and ``a2a-tape demo``."""

from __future__ import annotations

import atexit
import contextlib
import gc
import socket
import time
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from a2a_tape.cli import options
from a2a_tape.cli.app import (
    BusyTimeoutOption,
    DbOption,
    JsonOption,
    ListenOption,
    commands,
    db_location,
    emit_json,
    err,
    fail,
    listen_address,
    listen_and_serve,
    open_db,
    out,
    say,
)
from a2a_tape.cli.export_otlp import OtlpEndpointOption
from a2a_tape.cli.options import Dialect, Durability, OnStall
from a2a_tape.wire.sse_reader import DEFAULT_MAX_LINE

# The module holds what typer reads (the commands and their options); the recorder, httpx,
# anyio, the store and rich load in the command's body, so `record --help` costs typer alone.
if TYPE_CHECKING:
    from rich.console import Console
    from rich.live import Live

    from a2a_tape.recorder.record import RecordOptions, RecordResult
    from a2a_tape.recorder.session import Session
    from a2a_tape.recorder.turns import Turn

app = commands()


class _LiveView:
    """Redraws the channels after each recorded chunk (the log already has it), at most every 50 ms."""

    def __init__(self, console: Console, title: str) -> None:
        self.console = console
        self.title = title
        self.live: Live | None = None
        self._last = 0.0

    def __enter__(self) -> _LiveView:
        if self.console.is_terminal:
            from rich.live import Live

            self.live = Live(console=self.console, auto_refresh=False, transient=True)
            self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.__exit__(None, None, None)

    def changed(self, session: Session) -> None:
        if self.live is None:
            return
        now = time.monotonic()
        if now - self._last < 0.05 and self._last:
            return
        self._last = now
        from a2a_tape.recorder.live import render

        self.live.update(render(session.fold, title=self.title), refresh=True)


class BindingOption(StrEnum):
    """``--binding``: which binding to call the agent in (``recorder.client.BindingChoice``)."""

    auto = "auto"
    jsonrpc = "jsonrpc"
    http_json = "http+json"

    @property
    def choice(self) -> Literal["auto", "jsonrpc", "http+json"]:
        return self.value


DurabilityOption = Annotated[
    Durability,
    typer.Option(
        "--durability",
        help="normal: each commit survives a crash of a2a-tape (WAL, no fsync); "
        "full: also a power loss (an fsync per commit, milliseconds on most disks).",
    ),
]


def run_record(
    opts: RecordOptions,
    db: str | None,
    redact: list[str],
    *,
    json: bool,
    title: str = "",
    durability: Durability = Durability.normal,
    busy_timeout: float | None = None,
    otlp_endpoint: str | None = None,
) -> tuple[RecordResult, Session]:
    import anyio

    from a2a_tape.cli.export_otlp import check_live, live_export
    from a2a_tape.recorder.client import NotAnAgent
    from a2a_tape.recorder.record import record
    from a2a_tape.recorder.session import Session
    from a2a_tape.store.errors import WouldWait
    from a2a_tape.store.redact import build_redactor, safe_text

    redactor = build_redactor(redact)
    collector = check_live(otlp_endpoint)
    st = open_db(db, create=True, durability=durability.mode, busy_timeout=busy_timeout)
    with st, live_export(st, collector) as live:
        if live is not None:
            opts.on_exchange_end = live.ended
        view = _LiveView(out, title or safe_text(opts.url, redactor))
        session = Session(st, redactor, on_change=None if json else view.changed)
        with view:
            try:
                result = anyio.run(record, session, opts)
            except NotAnAgent as exc:
                fail(str(exc))
            except KeyboardInterrupt:
                # what was recorded stays; the interruption is noted if the log takes it at once:
                # another process holding its lock must not keep a Ctrl-C waiting
                with contextlib.suppress(WouldWait), st.without_waiting():
                    session.abandon("interrupted by the user (Ctrl-C)")
                raise
    return result, session


def report(result: RecordResult, session: Session, db: str | None, *, json: bool, title: str = "") -> None:
    from a2a_tape.store.redact import safe_text

    lone = result.task_id is None and session.fold.lone_message
    if json:
        emit_json(
            {
                "kind": "message" if lone else "task",
                "task_id": result.task_id,
                "message_id": session.fold.reply_id if lone else None,
                "context_id": result.context_id or (session.fold.reply_context if lone else None),
                "state": None if lone else result.state,
                "final_answer": result.final_answer,
                "events": result.events,
                "recovered": result.recovered,
                "stalled": result.stalled,
                "error": safe_text(result.error, session.redactor, session.secrets) if result.error else None,
                "local_events": session.local_events,
                "pushes": result.pushes,
                "db": db_location(db),
            }
        )
    else:
        from a2a_tape.inspection.words import count
        from a2a_tape.recorder.live import render

        plain = not out.is_terminal  # a pipe or a file: the answer unboxed and unwrapped
        out.print(render(session.fold, title=title, done=True, plain=plain), soft_wrap=plain)
        where = f"task {result.task_id}" if result.task_id else "the exchange"
        what = "a lone message, no task" if lone else result.state
        pushed = "" if result.pushes is None else f" and {count(result.pushes, 'push', 'pushes')} to its webhook"
        say(
            f"recorded {count(result.events, 'event')} of {where} ({what}){pushed} into {db_location(db)}"
            + (f"; recovery: {', '.join(result.recovered)}" if result.recovered else "")
        )
    if result.exit_code != 0:
        say(f"a2a-tape: {result.error or 'the task ended ' + result.state}")


BindingArg = Annotated[
    BindingOption,
    typer.Option(
        "--binding",
        help="auto (the card's first interface a2a-tape speaks, said on stderr), jsonrpc or http+json.",
    ),
]
NoGetTaskArg = Annotated[
    bool,
    typer.Option("--no-get-task", help="Do not ask the agent for the task once after its stream (GetTask, recorded)."),
]


PushReceiverArg = Annotated[
    str | None,
    typer.Option(
        "--push-receiver",
        metavar="HOST:PORT",
        help="Register a webhook with the send: a2a-tape's push receiver on this loopback address (port 0: any "
        "free one), which records each push notification the agent POSTs as an exchange of the task (docs/replay.md).",
    ),
]
PushWebhookArg = Annotated[
    str | None,
    typer.Option(
        "--push-webhook",
        metavar="URL",
        help="With --push-receiver: deliver each recorded push to this webhook too (its answer is recorded); "
        "without it the receiver answers the agent itself.",
        callback=options.url,
    ),
]
PushWaitArg = Annotated[
    float,
    typer.Option(
        "--push-wait",
        metavar="SECONDS",
        help="With --push-receiver: once the task has ended, how long to wait for the push of its end.",
        callback=options.seconds,
    ),
]


def push_socket(value: str | None) -> socket.socket | None:
    """The push receiver's listener for ``record --push-receiver HOST:PORT`` (None: no webhook), or exit 2."""
    if value is None:
        return None
    from a2a_tape.recorder.listen import bind

    why = "the push receiver takes an agent's POSTs on this machine (loopback only)"
    host, port = listen_address(value, allow_remote=False, why=why, option="--push-receiver")
    try:
        return bind(host, port)
    except OSError as exc:
        fail(f"--push-receiver: cannot listen on {host}:{port}: {exc.strerror or exc}")


@app.command("record")
def record_cmd(
    url: Annotated[
        str,
        typer.Argument(
            help="Base URL of the A2A agent (its card is at URL/.well-known/agent-card.json).", callback=options.url
        ),
    ],
    text: Annotated[str, typer.Argument(help="The message to send.")],
    protocol: Annotated[
        Dialect, typer.Option("--protocol", help="auto (prefer 1.0 when the card offers it), 1.0 or 0.3.")
    ] = Dialect.auto,
    binding: BindingArg = BindingOption.auto,
    no_get_task: NoGetTaskArg = False,
    no_stream: Annotated[
        bool, typer.Option("--no-stream", help="Send message/send and poll instead of streaming.")
    ] = False,
    context_id: Annotated[str | None, typer.Option("--context-id", help="Continue this context.")] = None,
    continue_task: Annotated[
        str | None,
        typer.Option(
            "--continue",
            metavar="TASK",
            help="The next turn of TASK (in --db): the same task while it waits or runs, else a new task "
            "in its context that refers to it (A2A's rules; a lone reply: its context).",
        ),
    ] = None,
    file: Annotated[
        list[Path] | None,
        typer.Option(
            "--file",
            metavar="PATH",
            help="Send this file too, as a file part (its bytes inline, its type guessed from its name; repeatable).",
        ),
    ] = None,
    data: Annotated[
        list[str] | None,
        typer.Option("--data", metavar="JSON", help="Send this JSON value too, as a data part (repeatable)."),
    ] = None,
    message_id: Annotated[
        str | None, typer.Option("--message-id", help="Use this messageId.", show_default="a new UUID")
    ] = None,
    header: Annotated[
        list[str] | None,
        typer.Option(
            "--header",
            "-H",
            help="Extra request header 'Name: value', printable ASCII (repeatable).",
            callback=options.headers,
        ),
    ] = None,
    stall_timeout: Annotated[
        float,
        typer.Option(
            "--stall-timeout",
            help="Seconds without progress while SUBMITTED/WORKING before the task counts as stalled.",
            callback=options.seconds,
        ),
    ] = 120.0,
    on_stall: Annotated[
        OnStall, typer.Option("--on-stall", help="cancel the task, or resend (a new task, same contextId).")
    ] = OnStall.cancel,
    redact: Annotated[
        list[str] | None,
        typer.Option(
            "--redact", help="Also redact this header name, or JSON path (a.b.c / $.a.b) in bodies (repeatable)."
        ),
    ] = None,
    max_line_bytes: Annotated[
        int, typer.Option("--max-line-bytes", help="Longest SSE line, or event, accepted.", callback=options.line_bytes)
    ] = DEFAULT_MAX_LINE,
    durability: DurabilityOption = Durability.normal,
    otlp_endpoint: OtlpEndpointOption = None,
    push_receiver: PushReceiverArg = None,
    push_webhook: PushWebhookArg = None,
    push_wait: PushWaitArg = 10.0,
    db: DbOption = None,
    json: JsonOption = False,
    busy_timeout: BusyTimeoutOption = None,
) -> None:
    """Send TEXT to the live agent at URL, record every raw event, follow the recovery tree."""
    from a2a_tape.recorder.record import RecordOptions

    if push_webhook is not None and push_receiver is None:
        fail("--push-webhook goes with --push-receiver HOST:PORT (where the agent's pushes are received)")
    parts = [*(_file_part(p) for p in file or []), *(_data_part(d) for d in data or [])]
    turn = _next_turn(db, continue_task) if continue_task is not None else None
    if turn is not None:
        if context_id is not None and context_id != turn.context_id:
            fail(f"--continue {continue_task} is in context {turn.context_id}, not --context-id {context_id}: give one")
        context_id = turn.context_id
    receiver = push_socket(push_receiver)  # bound last: a usage error above leaves no socket open
    if turn is not None and not json:
        say(f"a2a-tape: {turn.describe}")
    opts = RecordOptions(
        url=url,
        text=text,
        protocol=protocol.choice,
        binding=binding.choice,
        get_task=not no_get_task,
        say=say,
        stream=not no_stream,
        context_id=context_id,
        message_id=message_id,
        task_id=turn.task_id if turn is not None else None,
        reference_task_ids=turn.reference_task_ids if turn is not None else (),
        parts=parts,
        headers=options.header_pairs(header or []),
        stall_timeout=stall_timeout,
        on_stall=on_stall.choice,
        max_line=max_line_bytes,
        push_socket=receiver,
        push_webhook=push_webhook,
        push_wait=push_wait,
    )
    result, session = run_record(
        opts, db, redact or [], json=json, durability=durability, busy_timeout=busy_timeout, otlp_endpoint=otlp_endpoint
    )
    report(result, session, db, json=json)
    # Done: the log is closed (every event committed) and the report is in stdout's buffer, which
    # the interpreter's exit flushes as ever. At exit, what the process built (a long stream's
    # answer, its fold) is moved out of the collector's reach, so the finalising collection does not
    # walk it (~75 M instructions after 20,000 events); objects are still freed as the interpreter
    # ends. At exit, not now: a program that runs this command in its own process goes on as before.
    atexit.register(gc.freeze)
    raise typer.Exit(result.exit_code)


def _file_part(path: Path) -> dict[str, object]:
    """``--file PATH`` as a file part; a file that cannot be read: one line, exit 2."""
    import mimetypes

    from a2a_tape.recorder.client import file_part

    try:
        content = path.read_bytes()
    except OSError as exc:
        fail(f"--file {path}: {exc.strerror or exc}")
    media_type = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    return file_part(content, path.name, media_type)


def _data_part(text: str) -> dict[str, object]:
    """``--data JSON`` as a data part; text that is not JSON: one line, exit 2."""
    import msgspec

    from a2a_tape.recorder.client import data_part

    try:
        value = msgspec.json.decode(text)
    except msgspec.DecodeError as exc:
        fail(f"--data is not JSON ({exc}): {text[:60]!r}")
    return data_part(value)


def _next_turn(db: str | None, key: str) -> Turn:
    """What ``--continue KEY`` sends with (:mod:`recorder.turns`): the task (or lone reply) KEY
    names in the log; none: one line, exit 2."""
    from a2a_tape.cli.app import find_task_or_message
    from a2a_tape.inspection.task_views import task_view_runs
    from a2a_tape.recorder.turns import next_message_turn, next_turn

    with open_db(db, readonly=True) as st:
        found = find_task_or_message(st, key)
        if not isinstance(found, str):
            return next_message_turn(found.context_id)
        view, _ = task_view_runs(st, found)
    if view is None:  # pragma: no cover - find_task saw the task
        fail(f"unknown task: {key}")
    return next_turn(found, view.context_id, view.state)


DEMO_TEXT = "What does a2a-tape record?"


@app.command("demo")
def demo_cmd(
    agent_only: Annotated[
        bool,
        typer.Option(
            "--agent-only", help="Only run the demo agent, until Ctrl-C, for your own client (prints its URL)."
        ),
    ] = False,
    listen: ListenOption = "127.0.0.1:0",
    db: DbOption = None,
) -> None:
    """Start a built-in demo agent on 127.0.0.1, record one session, show it, say what to try next."""
    from a2a_tape.recorder import listen as listening
    from a2a_tape.recorder.demo_agent import make_demo_app
    from a2a_tape.recorder.demo_steps import lines, next_steps, program
    from a2a_tape.recorder.listen import unused_port
    from a2a_tape.recorder.record import RecordOptions

    host, port = listen_address(listen, allow_remote=False, why="the demo agent is for this machine (loopback only)")
    if agent_only:
        listen_and_serve(
            make_demo_app(), host, port, lambda url: f"a2a-tape demo: the demo agent at {url} (Ctrl-C stops it)"
        )
        return
    with listening.serving(make_demo_app(), host, port) as url:
        err.print(f"demo agent listening on {url} (in this process)", markup=False)
        opts = RecordOptions(url=url, text=DEMO_TEXT, stall_timeout=30.0)
        result, session = run_record(opts, db, [], json=False, title=f"demo agent: {DEMO_TEXT}")
    report(result, session, db, json=False, title=f"demo agent: {DEMO_TEXT}")
    if result.task_id:
        from a2a_tape.cli.inspect import show_cmd

        show_cmd(task=result.task_id, raw=False, db=db, json=False)
        out.print("\nwhat to try next (each line runs as printed):", markup=False)
        for line in lines(next_steps(result.task_id, db, db_location(db), DEMO_TEXT, unused_port(), program())):
            out.print("  " + line, markup=False, soft_wrap=True, highlight=False)
    raise typer.Exit(result.exit_code)
