"""One driver per capture path: run it against the scripted fault agent, say what came out.

Each driver records one streaming call of ``mode`` into ``db`` (a real SQLite file) the way its
path does in real use, and returns a :class:`Outcome`: what it printed (the installed console
script in a subprocess, for the command-line paths), what its client received (the paths that
pass a stream on), and the exit code. The URLs carry secrets (``user:password@`` and a secret
query parameter), the request body a secret at a configured JSON path, and the working
directory a ``[tool.a2a-tape]`` table naming what must be redacted.
"""

from __future__ import annotations

import contextlib
import functools
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import httpx

from a2a_tape import store
from a2a_tape.recorder.listen import serving
from a2a_tape.store.redact import build_redactor
from tests.capture.grpc_drivers import GRPC, run_grpc_interceptor, run_grpc_proxy
from tests.support.fault_agent import SHAPED_HEADERS
from tests.support.in_process import run_in_process, without_our_variables
from tests.support.servers import serve_app

CLI = str(Path(sys.executable).with_name("a2a-tape"))
TIMEOUT = 60  # no run of a path may take longer (a hang is a failure, not a stuck suite)

REQUEST = (
    b'{"jsonrpc":"2.0","id":"c-1","method":"message/stream","params":{"message":{"kind":"message",'
    b'"messageId":"m-1","role":"user","parts":[{"kind":"text","text":"hi"}],"metadata":{"token":"SEKRET-REQ"}}}}'
)
REST_REQUEST = (  # the same request as HTTP+JSON sends it: the params alone, v1.0
    b'{"message":{"messageId":"m-1","role":"ROLE_USER","parts":[{"text":"hi"}],"metadata":{"token":"SEKRET-REQ"}}}'
)
REST = "http+json"
"""A path's HTTP+JSON variant (``"record http+json"``): the mode's HTTP+JSON agent under ``/{mode}/rest``."""
HEADERS = {
    "content-type": "application/json",
    "accept": "text/event-stream",
    "x-agent-secret": "SEKRET-HEADER",
    **SHAPED_HEADERS,
}


@dataclass
class Outcome:
    db: Path
    printed: bytes = b""  # stdout + stderr of the command, when the path is a command
    client: bytes | None = None  # the stream bytes the path's client received, when it has one
    code: int | None = None  # the exit code of the command
    error: str | None = None  # an exception the client got, as text
    seconds: float = 0.0


def secret_url(base: str, mode: str, route: str = "") -> str:
    host = base.split("://", 1)[1]
    return f"http://alice:SEKRET-PW@{host}/{mode}/{route}?api_key=SEKRET-QUERY"


def kind(path: str) -> str:
    """A path's name without its binding (``"record http+json"`` is a ``record`` path)."""
    return path.split(" ", 1)[0]


def _stream_call(mode: str, binding: str) -> tuple[str, str, bytes, dict[str, str]]:
    """(mode path, route, body, headers) of a streaming send in ``binding``."""
    if binding == REST:
        return f"{mode}/rest", "message:stream", REST_REQUEST, {**HEADERS, "a2a-version": "1.0"}
    return mode, "", REQUEST, HEADERS


def cli(args: list[str], cwd: Path, timeout: float = TIMEOUT) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("A2A_TAPE")}
    return subprocess.run([CLI, *args], cwd=cwd, capture_output=True, timeout=timeout, env=env)


Command = Callable[[list[str], Path], subprocess.CompletedProcess]
"""How a command-line path runs its command: :func:`cli` (the installed console script) or :func:`in_process`."""


def in_process(args: list[str], cwd: Path, timeout: float = TIMEOUT) -> subprocess.CompletedProcess:
    """The same command as :func:`cli`, run by ``cli.app`` in this process (tests/support/in_process.py)."""
    return run_in_process(args, cwd, without_our_variables(), timeout)


SILENT_WAIT = 1.5
"""Seconds a path waits for the silent agent (its timeout options set to it): the answer never comes, so a short
wait proves what a long one does. The other modes keep the usual timeouts, which a loaded machine needs."""


def waits(mode: str, usual: float) -> float:
    """The timeout a path is given for ``mode``: :data:`SILENT_WAIT` for the silent agent, else ``usual``."""
    return SILENT_WAIT if mode.startswith("silent") else usual


CLIENT_MAX = 80 * 1024 * 1024  # a client stops reading an answer longer than this (past every limit of ours)


class ClientStopped(Exception):
    """The client read CLIENT_MAX bytes of an answer and let it go (an agent's endless body)."""


def _client_read(client_call) -> tuple[bytes | None, str | None]:
    try:
        return client_call(), None
    except (httpx.HTTPError, ClientStopped) as exc:
        return None, f"{type(exc).__name__}: {exc}"


def _at_most(chunks) -> bytes:
    buf = bytearray()
    for chunk in chunks:
        buf += chunk
        if len(buf) > CLIENT_MAX:
            raise ClientStopped(f"stopped reading after {len(buf)} bytes")
    return bytes(buf)


async def _at_most_async(chunks) -> bytes:
    buf = bytearray()
    async for chunk in chunks:
        buf += chunk
        if len(buf) > CLIENT_MAX:
            raise ClientStopped(f"stopped reading after {len(buf)} bytes")
    return bytes(buf)


# -- the paths -------------------------------------------------------------------------------


def run_record(base: str, mode: str, cwd: Path, *extra: str, binding: str = "jsonrpc", run: Command = cli) -> Outcome:
    db = cwd / "tape.db"
    # a log that exists, where a failure is recorded: a record that fails before recording anything
    # into a new one leaves none (tests/recorder/cli/test_files.py)
    store.open_store(db).close()
    t0 = time.monotonic()
    if binding == REST:
        mode, extra = f"{mode}/rest", ("--binding", REST, *extra)
    # a silent agent is named by the stall watch in SILENT_WAIT; a body without end by the reader's limit, which a
    # loaded machine takes longer than 3 s to reach (an event still arriving is no progress: the stall fired
    # first, once in CI's newest-release slice), so those get a stall watch that waits past the limit
    stall = "20" if mode.startswith("endless") else str(waits(mode, 3))
    r = run(["record", secret_url(base, mode), "hi", "--db", str(db), "--json", "--stall-timeout", stall, *extra], cwd)
    return Outcome(db, r.stdout + r.stderr, code=r.returncode, seconds=time.monotonic() - t0)


def run_probe(base: str, mode: str, cwd: Path, binding: str = "jsonrpc", run: Command = cli) -> Outcome:
    db = cwd / "tape.db"
    mode = f"{mode}/rest" if binding == REST else mode  # the card lists HTTP+JSON only: probe takes it
    t0 = time.monotonic()
    wait = str(waits(mode, 3))
    r = run(["probe", secret_url(base, mode), "--db", str(db), "--timeout", wait, "--token", "SEKRET-TOKEN"], cwd)
    return Outcome(db, r.stdout + r.stderr, code=r.returncode, seconds=time.monotonic() - t0)


def _transport_sync(base: str, mode: str, cwd: Path, binding: str = "jsonrpc") -> Outcome:
    from a2a_tape.recorder.transport import RecordingTransport

    db = cwd / "tape.db"
    t0 = time.monotonic()
    transport = RecordingTransport(db, redactor=build_redactor(directory=cwd))
    at, route, body, headers = _stream_call(mode, binding)

    def call() -> bytes:
        with httpx.Client(transport=transport, timeout=httpx.Timeout(waits(mode, 5.0))) as http:
            with http.stream("POST", secret_url(base, at, route), content=body, headers=headers) as resp:
                return _at_most(resp.iter_bytes())

    got, error = _client_read(call)
    return Outcome(db, client=got, error=error, seconds=time.monotonic() - t0)


def _transport_async(base: str, mode: str, cwd: Path, binding: str = "jsonrpc") -> Outcome:
    from a2a_tape.recorder.transport import RecordingTransport

    db = cwd / "tape.db"
    t0 = time.monotonic()
    at, route, body, headers = _stream_call(mode, binding)

    async def call() -> bytes:
        transport = RecordingTransport(db, redactor=build_redactor(directory=cwd))
        async with httpx.AsyncClient(transport=transport, timeout=httpx.Timeout(waits(mode, 5.0))) as http:
            async with http.stream("POST", secret_url(base, at, route), content=body, headers=headers) as resp:
                return await _at_most_async(resp.aiter_bytes())

    got, error = _client_read(lambda: anyio.run(call))
    return Outcome(db, client=got, error=error, seconds=time.monotonic() - t0)


def _post_stream(url: str, body: bytes = REQUEST, headers: dict[str, str] = HEADERS) -> bytes:
    with httpx.Client(timeout=httpx.Timeout(15.0)) as http:
        with http.stream("POST", url, content=body, headers=headers) as resp:
            return _at_most(resp.iter_bytes())


def _serve(base: str, mode: str, cwd: Path, binding: str = "jsonrpc") -> Outcome:
    from a2a_tape.replay.serve.engine import ReplayEngine
    from a2a_tape.replay.serve.library import Library
    from a2a_tape.replay.serve.server import create_app

    db = cwd / "tape.db"
    t0 = time.monotonic()
    at, route, body, headers = _stream_call(mode, binding)
    library = Library.open(str(db), create=True)
    try:
        engine = ReplayEngine(
            library,
            record_mode="all",
            upstream=f"http://alice:SEKRET-PW@{base.split('://', 1)[1]}/{at}",
            redactor=build_redactor(directory=cwd),
        )
        assert engine.forwarder is not None
        engine.forwarder.first_byte = waits(mode, 3.0)
        with serve_app(create_app(engine)) as url:
            got, error = _client_read(lambda: _post_stream(f"{url}/{route}?api_key=SEKRET-QUERY", body, headers))
    finally:
        library.save()
        library.close()
    return Outcome(db, client=got, error=error, seconds=time.monotonic() - t0)


@contextlib.contextmanager
def _proxy(upstream: str, db: Path, cwd: Path, first_byte: float = 5.0) -> Iterator[str]:
    from a2a_tape.recorder.proxy.proxy_config import ProxyConfig
    from a2a_tape.recorder.proxy.server import build_app

    st = store.open_store(db, durability="normal")
    asgi, _ = build_app(
        st,
        ProxyConfig(
            upstream=upstream,
            recover_on_start=False,
            durability="normal",
            redactor=build_redactor(directory=cwd),
            first_byte_timeout=first_byte,  # 5 s, as record gets --stall-timeout 3: the silent upstream named in time
        ),
    )
    try:
        with serving(asgi, lifespan="on") as url:
            yield url
    finally:
        st.close()


def run_proxy(base: str, mode: str, cwd: Path, agent=None, binding: str = "jsonrpc") -> Outcome:
    """The proxy forwards to its upstream's origin: the mode is served at the root of its own port
    (both bindings: JSON-RPC at ``/``, HTTP+JSON routes beside it)."""
    from tests.support.fault_agent import RawFaultAgent

    db = cwd / "tape.db"
    t0 = time.monotonic()
    _, route, body, headers = _stream_call(mode, binding)
    with serve_app((agent or RawFaultAgent()).root_app(mode)) as root:
        host = root.split("://", 1)[1]
        with _proxy(f"http://alice:SEKRET-PW@{host}", db, cwd, waits(mode, 5.0)) as url:
            got, error = _client_read(lambda: _post_stream(f"{url}/{route}?api_key=SEKRET-QUERY", body, headers))
    return Outcome(db, client=got, error=error, seconds=time.monotonic() - t0)


def run_recover(base: str, mode: str, cwd: Path, binding: str = "jsonrpc", run: Command = cli) -> Outcome:
    """``a2a-tape recover`` on a task left WORKING by a proxy (its GetTask answer recorded), then
    the recovery's stream reader (``Upstream.stream``, what a resubscribe uses) on the mode, in
    ``binding``."""
    from a2a_tape.recorder.client import send_request
    from a2a_tape.recorder.upstream import Upstream
    from a2a_tape.wire.bindings import client_of

    db = cwd / "tape.db"
    t0 = time.monotonic()
    host = base.split("://", 1)[1]
    at, route, _, _ = _stream_call(mode, binding)
    st = store.open_store(db, create=True)
    try:
        ex = st.begin_exchange(
            store.Exchange(
                started_at=time.time(),
                url=f"http://{host}/{at}/{route}",
                rpc_method="message/stream" if binding != REST else "SendStreamingMessage",
                dialect=None if binding != REST else "1.0",
                binding=None if binding != REST else REST,
                outcome="ok",
                streaming=True,
                role="proxy",
                task_id="t-1",
            )
        )
        st.append(
            store.NewEvent(
                payload=b'{"jsonrpc":"2.0","id":"x","result":{"kind":"task","id":"t-1",'
                b'"contextId":"c-1","status":{"state":"working"}}}',
                task_id="t-1",
                exchange_id=ex,
                received_at=time.time(),
            )
        )
    finally:
        st.close()
    r = run(["recover", "--db", str(db), "--stall-timeout", str(waits(mode, 3))], cwd)

    async def stream() -> None:
        st2 = store.open_store(db)
        try:
            async with httpx.AsyncClient() as http, store.GroupCommitWriter(st2) as writer:
                up = Upstream(st2, secret_url(base, at), http, writer, redactor=build_redactor(directory=cwd))
                up.call_timeout = waits(mode, 3.0)
                req = send_request("1.0" if binding == REST else "0.3", "hi", stream=True)
                await up.stream(req, secret_url(base, at), None, stall=waits(mode, 3.0), binding=client_of(binding))
        finally:
            st2.close()

    anyio.run(stream)
    return Outcome(db, r.stdout + r.stderr, code=r.returncode, seconds=time.monotonic() - t0)


_DRIVERS = {
    "record": run_record,
    "transport-sync": _transport_sync,
    "transport-async": _transport_async,
    "serve": _serve,
    "recover": run_recover,
    "probe": run_probe,
    "proxy": run_proxy,
}
PATHS = {
    **_DRIVERS,
    **{f"{name} {REST}": functools.partial(driver, binding=REST) for name, driver in _DRIVERS.items()},
    f"proxy {GRPC}": run_grpc_proxy,
    f"interceptor {GRPC}": run_grpc_interceptor,
}
"""Every path, in each binding it records (JSON-RPC; HTTP+JSON: ``"record http+json"``, ...; gRPC:
the gRPC proxy and ``RecordingInterceptor``, the paths that record gRPC)."""
COMMAND_PATHS = tuple(p for p in PATHS if kind(p) in ("record", "probe", "recover"))
"""The paths that are a command of the CLI (a driver of theirs takes ``run``: :func:`cli` or :func:`in_process`)."""
CLIENT_PATHS = tuple(
    p for p in PATHS if kind(p) in ("transport-sync", "transport-async", "serve", "proxy", "interceptor")
)


def is_grpc(path: str) -> bool:
    return path.endswith(f" {GRPC}")
