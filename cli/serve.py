"""``a2a-tape serve``: the recordings answer as a fake A2A agent (JSON-RPC + SSE, both dialects)."""

from __future__ import annotations

from typing import Annotated

import typer

from a2a_tape.cli import options
from a2a_tape.cli.app import (
    AllowHostOption,
    AllowRemoteOption,
    GrpcListenOption,
    HeadTimeoutOption,
    ListenOption,
    QuietOption,
    commands,
    db_location,
    fail,
    listen_address,
    listen_and_serve,
    say,
    say_line,
)
from a2a_tape.inspection.words import count
from a2a_tape.recorder.listen import HEAD_TIMEOUT
from a2a_tape.replay.serve.engine import ReplayEngine
from a2a_tape.replay.serve.faults import parse_faults
from a2a_tape.replay.serve.library import Library
from a2a_tape.replay.serve.modes import MatchMode, PushTiming, RecordMode
from a2a_tape.replay.serve.server import create_app
from a2a_tape.store.redact import build_redactor
from a2a_tape.wire.loopback import Guard

app = commands()
WHY_LOCAL = "the replay server is for this machine; add --allow-remote to mean it"  # why --listen stays on this machine

# serve's options (one alias each keeps serve_cmd a parse-call-print)
TimingOption = Annotated[
    str,
    typer.Option(help="instant, real (the recorded gaps) or a factor (10: ten times faster).", callback=options.timing),
]
FaultOption = Annotated[
    list[str],
    typer.Option(
        help="drop-after=N, stall-after=N, duplicate[=N], delay=MS, error-after=N; on pushes: push-delay=MS, push-duplicate[=N|last], push-drop[=N|last], push-reorder (repeatable; per request: header X-A2A-Tape-Fault or ?fault=).",
        callback=options.faults,
    ),
]
PushTimingOption = Annotated[
    PushTiming,
    typer.Option(
        help="When a send's recorded pushes go to the webhook the client registers: instant (once the answer is "
        "out) or recorded (as long after the send as the agent made them)."
    ),
]
RecordModeOption = Annotated[
    RecordMode, typer.Option(help="none (replay only), once, new_episodes or all (the last two need --upstream).")
]
UpstreamOption = Annotated[
    str | None,
    typer.Option(
        help="The live agent that unmatched requests go to (record modes).",
        show_default=False,
        callback=options.url,
    ),
]
MatchOption = Annotated[MatchMode, typer.Option(help="method-text, strict (whole request less its ids) or order.")]
RedactOption = Annotated[
    list[str] | None,
    typer.Option(
        "--redact",
        help="Record modes: also redact this header name, or JSON path (a.b.c / $.a.b) in bodies (repeatable).",
    ),
]
ServeRunOption = Annotated[
    int | None,
    typer.Option(
        "--run",
        metavar="N",
        help="Serve run N of each task recorded by several observers (1: the first; a task with fewer runs: "
        "its last; 'a2a-tape tasks --runs' lists them). Default: the run verify --update adopted, else the "
        "agent as first recorded.",
        show_default=False,
        callback=options.count,
    ),
]
TapeOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        metavar="PATH",
        help="Database file or JSONL tape.",
        show_default="$A2A_TAPE_DB, else ./a2a-tape.db",
    ),
]


def _grpc_listen(listen: str, allow_remote: bool) -> tuple[str, int]:
    """(host, port) for ``--grpc-listen``, or exit 2: a remote host, the extra missing, a busy port."""
    host, port = listen_address(listen, allow_remote=allow_remote, why=WHY_LOCAL, option="--grpc-listen")
    problem = options.grpc_listen_problem(host, port)
    if problem is not None:
        fail(problem)
    return host, port


def _say_request(line: str) -> None:
    say_line(f"a2a-tape serve: {line}")


@app.command("serve")
def serve_cmd(
    listen: ListenOption = "127.0.0.1:8765",
    allow_remote: AllowRemoteOption = False,
    allow_host: AllowHostOption = [],
    timing: TimingOption = "instant",
    fault: FaultOption = [],
    push_timing: PushTimingOption = PushTiming.instant,
    record_mode: RecordModeOption = RecordMode.none,
    upstream: UpstreamOption = None,
    match: MatchOption = MatchMode.method_text,
    redact: RedactOption = None,
    grpc_listen: GrpcListenOption = None,
    quiet: QuietOption = False,
    head_timeout: HeadTimeoutOption = HEAD_TIMEOUT,
    run: ServeRunOption = None,
    db: TapeOption = None,
) -> None:
    """Replay the recordings as a fake A2A agent (loopback only unless --allow-remote).

    Prints a line per request on stderr: HTTP method and path, the A2A method, the task, what the
    replay did (hit: a recorded answer; miss: nothing recorded matched; fault: a recorded answer
    with a fault injected; forward: the upstream agent's answer; error: a request refused) and
    the HTTP status, and a line per push POSTed to a client's webhook. --quiet: none.
    """
    host, port = listen_address(listen, allow_remote=allow_remote, why=WHY_LOCAL)
    grpc_at = _grpc_listen(grpc_listen, allow_remote) if grpc_listen else None
    faults = parse_faults(*fault)  # options.faults checked the specs
    if record_mode.needs_upstream and not upstream:
        fail(f"--record-mode {record_mode} needs --upstream URL (the live agent to record)")
    location = db_location(db)
    records = record_mode.records(upstream)
    library = Library.open(location, create=records, readonly=not records, run=run)
    try:
        if not library.episodes and not records:
            fail(f"no recordings in {location}: nothing to serve (record something first, or pass --db)")
        engine = ReplayEngine(
            library,
            timing=timing,
            faults=faults,
            match=match,
            record_mode=record_mode,
            upstream=upstream,
            redactor=build_redactor(redact or []),
            push_timing=push_timing,
        )
        if not quiet:
            engine.pushes.log = _say_request
        said = (
            f"replaying {count(len(library.episodes), 'recorded send')} from {location} (timing {timing}, faults "
            f"{faults.describe()}, match {match}, record mode {record_mode})"
            + (f", upstream {upstream}" if upstream else "")
            + (f", run {run} of each task" if run is not None else "")
        )
        asgi = create_app(engine, Guard.of(allow_host, any_host=allow_remote), log=None if quiet else _say_request)
        if grpc_at is not None:
            from a2a_tape.replay.serve.grpc_server import attach

            attach(asgi, engine, *grpc_at, on_ready=lambda at: say(f"a2a-tape serve: gRPC on {at}"))
        listen_and_serve(
            asgi,
            host,
            port,
            lambda url: f"a2a-tape serve: {url} {said}",
            lifespan="on" if grpc_at else "off",
            head_timeout=head_timeout,
        )
    finally:
        try:
            library.save(warn=False)
        finally:
            library.close()
        for line in library.refused:
            say(f"a2a-tape serve: {line}")
