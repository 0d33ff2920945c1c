"""Commands ``proxy``, ``recover`` and ``probe``: the live side in front of an existing agent."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Annotated
from urllib.parse import urlsplit

import anyio
import typer

from a2a_tape.cli import options
from a2a_tape.cli.app import (
    EXIT_FAILED,
    AllowHostOption,
    AllowRemoteOption,
    BusyTimeoutOption,
    DbOption,
    GrpcListenOption,
    HeadTimeoutOption,
    JsonOption,
    ListenOption,
    QuietOption,
    commands,
    db_location,
    emit_json,
    fail,
    listen_address,
    listen_and_serve,
    open_db,
    out,
    say_line,
)
from a2a_tape.cli.export_otlp import OtlpEndpointOption, check_live, live_export
from a2a_tape.cli.options import Durability
from a2a_tape.recorder.listen import HEAD_TIMEOUT
from a2a_tape.recorder.proxy.idempotency import DEFAULT_TTL, Idempotency, OnKeyConflict
from a2a_tape.recorder.proxy.outcomes import request_line
from a2a_tape.recorder.proxy.proxy_config import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_FIRST_BYTE_TIMEOUT,
    DEFAULT_MAX_BODY,
    DEFAULT_READ_TIMEOUT,
    ProxyConfig,
)
from a2a_tape.recorder.proxy.relay import DEFAULT_SLOW_CLIENT_TIMEOUT, DEFAULT_STREAM_BUFFER
from a2a_tape.recorder.proxy.server import build_app
from a2a_tape.recorder.recovery import DEFAULT_STALL, RecoveryBusy, recover, running_proxy
from a2a_tape.store.redact import build_redactor, safe_text
from a2a_tape.wire.loopback import Guard

app = commands()
WHY_LOCAL = "the proxy forwards credentials; add --allow-remote to mean it"  # why --listen stays on this machine

# the proxy's options (one alias each keeps proxy_cmd a parse-call-print)
UpstreamArgument = Annotated[
    str, typer.Argument(help="Base URL of the agent to put the proxy in front of.", callback=options.url)
]
TokenOption = Annotated[
    str | None,
    typer.Option(
        envvar="A2A_TAPE_PROXY_TOKEN",
        help="Require 'Authorization: Bearer TOKEN' (or Proxy-Authorization).",
        show_default=False,
        callback=options.header_value,
    ),
]
DurabilityOption = Annotated[
    Durability,
    typer.Option(
        help="full: fsync each item before the client sees it; normal: faster, may lose the last items on power loss."
    ),
]
MaxBodyOption = Annotated[
    int, typer.Option(help="Refuse request bodies larger than this many bytes.", callback=options.count)
]
IdempotencyTtlOption = Annotated[
    float, typer.Option(help="Seconds a messageId / Idempotency-Key is remembered.", callback=options.seconds)
]
StallTimeoutOption = Annotated[
    float,
    typer.Option(
        help="Startup recovery: seconds without progress before a task is cancelled and FAILED.",
        callback=options.seconds,
    ),
]
NoRecoverOption = Annotated[bool, typer.Option("--no-recover", help="Skip the startup recovery.")]
RedactOption = Annotated[list[str], typer.Option(help="Extra header name or JSON path to redact before the disk.")]
OnKeyConflictOption = Annotated[
    OnKeyConflict,
    typer.Option(
        help="A reused messageId / Idempotency-Key with another request: forward it as a new request "
        "(a local note in the log) or reject it with a JSON-RPC error."
    ),
]
IdempotencyOption = Annotated[
    Idempotency,
    typer.Option(
        help="on: a repeated messageId / Idempotency-Key from the same caller is answered from the log; "
        "off: every request goes to the agent (and is recorded), repeats included."
    ),
]
UPSTREAM_CREDENTIALS_ENV = "A2A_TAPE_UPSTREAM_CREDENTIALS"
UpstreamCredentialsFileOption = Annotated[
    Path | None,
    typer.Option(
        metavar="FILE",
        help="A file holding the upstream agent's USER:PASSWORD (sent as Basic auth), so it is not on the "
        f"command line; or set ${UPSTREAM_CREDENTIALS_ENV}.",
        show_default=False,
    ),
]
GrpcUpstreamOption = Annotated[
    str | None,
    typer.Option(
        metavar="HOST:PORT",
        help="The agent's gRPC address.",
        show_default="the gRPC interface of its card",
    ),
]
PushReceiverOption = Annotated[
    str,
    typer.Option(
        metavar="WHERE",
        help="WHERE is on, off or HOST:PORT. Record the agent's push notifications: the webhook a client registers is given to the agent as "
        "a2a-tape's receiver, which records each POST, then delivers it to the client's webhook. on: the receiver "
        "is at the proxy's own address; HOST:PORT: on a listener of its own (an address the agent can reach); "
        "off: configs pass untouched and pushes go straight to the client.",
    ),
]
# how long the proxy waits for the upstream agent
ConnectTimeout = Annotated[
    float, typer.Option(help="Seconds to open a connection to the upstream agent.", callback=options.seconds)
]
FirstByteTimeout = Annotated[
    float,
    typer.Option(
        help="Seconds the upstream may take to start its answer (a whole message/send).", callback=options.seconds
    ),
]
ReadTimeout = Annotated[
    float,
    typer.Option(
        help="Longest silence, in seconds, inside an upstream answer (keep-alives count).", callback=options.seconds
    ),
]

StreamBufferOption = Annotated[
    int,
    typer.Option(
        help="Bytes of one stream held for its clients (unread items; items kept for a duplicate while they fit): "
        "a client further behind slows the agent down (back-pressure).",
        callback=options.count,
    ),
]
SlowClientTimeout = Annotated[
    float,
    typer.Option(
        help="Seconds a client may stay more than --stream-buffer behind; then its stream is closed, with a local "
        "note, and the rest of the answer is recorded.",
        callback=options.seconds,
    ),
]


@app.command("proxy")
def proxy_cmd(
    upstream: UpstreamArgument,
    listen: ListenOption = "127.0.0.1:8080",
    allow_remote: AllowRemoteOption = False,
    allow_host: AllowHostOption = [],
    token: TokenOption = None,
    durability: DurabilityOption = Durability.full,
    max_body: MaxBodyOption = DEFAULT_MAX_BODY,
    idempotency_ttl: IdempotencyTtlOption = DEFAULT_TTL,
    stall_timeout: StallTimeoutOption = DEFAULT_STALL,
    no_recover: NoRecoverOption = False,
    redact: RedactOption = [],
    on_key_conflict: OnKeyConflictOption = OnKeyConflict.forward,
    idempotency: IdempotencyOption = Idempotency.on,
    connect_timeout: ConnectTimeout = DEFAULT_CONNECT_TIMEOUT,
    first_byte_timeout: FirstByteTimeout = DEFAULT_FIRST_BYTE_TIMEOUT,
    read_timeout: ReadTimeout = DEFAULT_READ_TIMEOUT,
    stream_buffer: StreamBufferOption = DEFAULT_STREAM_BUFFER,
    slow_client_timeout: SlowClientTimeout = DEFAULT_SLOW_CLIENT_TIMEOUT,
    grpc_listen: GrpcListenOption = None,
    grpc_upstream: GrpcUpstreamOption = None,
    upstream_credentials_file: UpstreamCredentialsFileOption = None,
    inject_traceparent: Annotated[
        bool,
        typer.Option(
            "--inject-traceparent",
            help="Send a new W3C traceparent upstream when the client sent none (never over the client's), "
            "recorded with the exchange, so the agent's spans join its trace (docs/otel.md).",
        ),
    ] = False,
    continue_traceparent: Annotated[
        bool,
        typer.Option(
            "--continue-traceparent",
            help="When the client sent a traceparent, send upstream the same trace with this hop's span as its "
            "parent (the client's is recorded), so a chain of agents behind proxies exports one tree (docs/otel.md).",
        ),
    ] = False,
    traceparent_metadata: Annotated[
        bool,
        typer.Option(
            "--traceparent-metadata",
            help="With --inject-traceparent or --continue-traceparent: also write the traceparent sent into the "
            "message's metadata (the trace-context extension of A2A#2026), for agents that read it there; a "
            "traceparent the client sent there is read when no header carries one (docs/otel.md).",
        ),
    ] = False,
    quiet: QuietOption = False,
    otlp_endpoint: OtlpEndpointOption = None,
    push_receiver: PushReceiverOption = "on",
    head_timeout: HeadTimeoutOption = HEAD_TIMEOUT,
    db: DbOption = None,
    busy_timeout: BusyTimeoutOption = None,
) -> None:
    """Recording reverse proxy: clients talk to it as to the agent; every item is recorded, then forwarded.

    Prints a line per request on stderr once it is recorded: HTTP method and path, the A2A method,
    the task, forward (the agent answered), hit (a repeat answered from the log), refused or fault
    (the relay failed), the HTTP status and the exchange's outcome. --quiet: none.
    """
    host, port = listen_address(listen, allow_remote=allow_remote, why=WHY_LOCAL)
    redactor = build_redactor(redact)
    grpc_side = _grpc_side(grpc_listen, grpc_upstream, upstream, allow_remote) if grpc_listen else None
    collector = check_live(otlp_endpoint)
    if traceparent_metadata and not (inject_traceparent or continue_traceparent):
        fail(
            "--traceparent-metadata writes the traceparent the proxy sends: give --inject-traceparent or --continue-traceparent"
        )
    push_socket = _push_socket(push_receiver, allow_remote)
    st = open_db(db, create=True, durability=durability.mode, busy_timeout=busy_timeout)
    config = ProxyConfig(
        upstream=upstream.rstrip("/"),  # options.url checked it
        durability=durability.mode,
        token=token,
        max_body=max_body,
        idempotency_ttl=idempotency_ttl,
        recover_on_start=not no_recover,
        stall_timeout=stall_timeout,
        redactor=redactor,
        on_key_conflict=on_key_conflict,
        idempotency=idempotency,
        connect_timeout=connect_timeout,
        first_byte_timeout=first_byte_timeout,
        read_timeout=read_timeout,
        stream_buffer=stream_buffer,
        slow_client_timeout=slow_client_timeout,
        guard=Guard.of(allow_host, any_host=allow_remote),
        upstream_auth=_upstream_credentials(upstream, upstream_credentials_file),
        inject_traceparent=inject_traceparent,
        continue_traceparent=continue_traceparent,
        traceparent_metadata=traceparent_metadata,
        push=push_receiver != "off",
        push_socket=push_socket,
    )
    asgi, proxy = build_app(st, config)
    if not quiet:
        proxy.on_line = lambda ex: say_line(f"a2a-tape proxy: {request_line(ex)}")
    if grpc_side is not None:
        from a2a_tape.recorder.proxy.grpc_server import attach

        attach(asgi, proxy, *grpc_side)
    listening: list[str] = []

    def banner(url: str) -> str:  # said once bound, before the app (and its gRPC side) starts
        listening.append(url)
        proxy.listen_url = url
        pushes = f"; pushes received at {proxy.push_base}" if proxy.push_base else ""
        return f"a2a-tape proxy: listening on {url} -> {config.shown_upstream} (recording to {db_location(db)}){pushes}"

    stopped: BaseException | None = None
    # a failed start (the port taken) leaves no log this run created and never wrote (store)
    with st, live_export(st, collector) as live:
        if live is not None:  # each relayed exchange, once its row is final, to the collector
            proxy.on_settled = live.ended
        try:
            listen_and_serve(asgi, host, port, banner, lifespan="on", head_timeout=head_timeout)
        except (KeyboardInterrupt, SystemExit) as exc:
            if not listening:
                raise
            stopped = exc  # Ctrl-C or SIGTERM once it served: a stop, not a failed start; the log stays
    if stopped is not None:
        raise stopped


def _upstream_credentials(upstream: str, file: Path | None) -> tuple[str, str] | None:
    """The upstream's ``(user, password)`` from ``file`` or the environment (exit 2 when both, or
    with a URL that carries its own, or an unreadable file); None: none given that way."""
    env = os.environ.get(UPSTREAM_CREDENTIALS_ENV)
    if file is not None and env:
        fail(f"give the upstream credentials once: --upstream-credentials-file or ${UPSTREAM_CREDENTIALS_ENV}")
    if file is None and not env:
        return None
    if "@" in urlsplit(upstream).netloc:
        fail("the upstream URL carries credentials already: drop them from the URL")
    if file is not None:
        try:
            env = file.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            fail(f"cannot read --upstream-credentials-file {file}: {getattr(exc, 'strerror', None) or exc}")
    user, _, password = (env or "").strip().partition(":")
    if not user and not password:
        fail("the upstream credentials are empty: USER:PASSWORD expected")
    return user, password


def _push_socket(value: str, allow_remote: bool) -> socket.socket | None:
    """The push receiver's own listener for ``--push-receiver HOST:PORT`` (None: on, off), or exit 2."""
    if value in ("on", "off"):
        return None
    from a2a_tape.recorder.listen import bind

    host, port = listen_address(value, allow_remote=allow_remote, why=WHY_LOCAL, option="--push-receiver")
    try:
        return bind(host, port)
    except OSError as exc:
        fail(f"--push-receiver: cannot listen on {host}:{port}: {exc.strerror or exc}")


def _grpc_side(listen: str, upstream: str | None, http_upstream: str, allow_remote: bool) -> tuple[str, str, int]:
    """(the agent's gRPC target, host, port) for ``--grpc-listen``, or exit 2 with the reason."""
    from a2a_tape.recorder.proxy.grpc_server import grpc_target

    host, port = listen_address(listen, allow_remote=allow_remote, why=WHY_LOCAL, option="--grpc-listen")
    problem = options.grpc_listen_problem(host, port)
    if problem is not None:
        fail(problem)
    if upstream is None:
        found = _card_grpc_url(http_upstream)
        if found is None:
            fail("the agent's card names no gRPC interface: give its address with --grpc-upstream HOST:PORT")
        upstream = found
    return grpc_target(upstream), host, port


def _card_grpc_url(http_upstream: str) -> str | None:
    """The first gRPC interface of the agent's card (exit 2 when the card cannot be read)."""
    import httpx

    from a2a_tape.recorder import client as a2a
    from a2a_tape.wire.grpc import card_grpc_urls

    try:
        resp = httpx.get(a2a.card_url(http_upstream), timeout=10.0, follow_redirects=True)
        a2a.parse_card(resp.content, "the agent card")
    except (httpx.HTTPError, a2a.NotAnAgent) as exc:
        fail(safe_text(f"cannot read the agent's card for its gRPC address: {exc}"))
    urls = card_grpc_urls(resp.content)
    return urls[0] if urls else None


@app.command("recover")
def recover_cmd(
    upstream: Annotated[
        str | None,
        typer.Option(
            metavar="URL",
            help="Agent to resume tasks from.",
            show_default="where each task was recorded from",
            callback=options.url,
        ),
    ] = None,
    stall_timeout: Annotated[
        float,
        typer.Option(help="Seconds without progress before a task is cancelled and FAILED.", callback=options.seconds),
    ] = DEFAULT_STALL,
    db: DbOption = None,
    json: JsonOption = False,
) -> None:
    """Run the startup recovery once: resume or FAIL every task left in flight; say what was done."""
    if upstream is not None:
        upstream = upstream.rstrip("/")  # options.url checked it
    st = open_db(db)
    live = running_proxy(st)
    if live is not None:
        st.close()
        fail(f"a proxy ({live}) is recording into {db_location(db)}; it recovers when it starts: stop it first")
    try:
        report = anyio.run(lambda: recover(st, upstream, stall_timeout=stall_timeout))
    except RecoveryBusy as exc:
        fail(str(exc))
    finally:
        st.close()
    if json:
        emit_json(report)
        return
    if not (report.resumed or report.failed or report.replayed):
        out.print("nothing to recover: no task in flight", markup=False)
    for t in report.resumed:
        out.print(f"resumed  {t}", markup=False)
    for f in report.failed:
        out.print(safe_text(f"failed   {f.task_id}: {f.reason}"), markup=False, soft_wrap=True)
    for k in report.replayed:
        out.print(f"ready to replay  {k}", markup=False)


@app.command("probe")
def probe_cmd(
    url: Annotated[str, typer.Argument(help="Base URL of an agent (or of an a2a-tape proxy).", callback=options.url)],
    timeout: Annotated[
        float, typer.Option(help="Seconds each probe waits for a task to end.", callback=options.seconds)
    ] = 20.0,
    token: Annotated[
        str | None,
        typer.Option(
            envvar="A2A_TAPE_PROXY_TOKEN",
            help="Bearer token to send.",
            show_default=False,
            callback=options.header_value,
        ),
    ] = None,
    db: DbOption = None,
    json: JsonOption = False,
) -> None:
    """Black-box checks: duplicate message idempotent, terminal state survives a dropped stream, no endless stall."""
    from a2a_tape.recorder.probe import run_probes

    url = url.rstrip("/")  # options.url checked it
    st = open_db(db, create=True)
    try:
        result = anyio.run(lambda: run_probes(st, url, timeout=timeout, token=token))
    finally:
        st.close()
    if json:
        emit_json(result)
    else:
        for p in result.probes:
            mark = "ok  " if p.ok else "FAIL"
            out.print(
                safe_text(f"{mark} {p.name}: {p.detail}", secrets=[token] if token else []),
                markup=False,
                soft_wrap=True,
            )
    if result.probes and result.probes[0].name == "agent-card" and not result.probes[0].ok:
        fail(f"not an A2A agent: {result.probes[0].detail}")  # nothing could be probed: bad input, exit 2
    if not result.ok:
        raise typer.Exit(EXIT_FAILED)
