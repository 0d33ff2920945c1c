"""Where a server of ours listens (``--listen HOST:PORT``), and serving an ASGI app with uvicorn
on a socket we bind ourselves.

One parser reads ``--listen`` for every server (``serve``, ``proxy``): :func:`parse_listen`
(checked before the command runs, ``cli.options.listen``) and :func:`listen_address`,
which also keeps a server on this machine unless ``--allow-remote`` says otherwise.

Binding first means the port is known (``:0`` picks a free one) and usable at once:
connections made before uvicorn accepts wait in the backlog, so nobody polls or sleeps.
The socket is made with ``IPPROTO_TCP`` so asyncio turns Nagle off (TCP_NODELAY): without it
a stream's first small item can sit ~40 ms in the kernel. uvicorn is imported when a server
starts, not to read an address.

Every server of ours drops a connection that has not sent a whole request head within
``head_timeout`` seconds (:data:`HEAD_TIMEOUT` unless told; ``--head-timeout``) of its opening or of
its last answer: uvicorn bounds a head's size but not the time it takes, and its keep-alive
timer stops at the first byte, so a local process sending half a head and stalling would hold a
file descriptor for ever (a slow-loris). A request whose head has arrived is never cut by it: a
long stream runs as long as it runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import random
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Literal

from a2a_tape.wire.loopback import is_loopback

if TYPE_CHECKING:
    import uvicorn
    from starlette.types import ASGIApp

DEFAULT_HOST = "127.0.0.1"
HEAD_TIMEOUT = 10.0
"""Seconds a connection has to send a whole request head, from its opening or its last answer."""


def parse_port(text: str, *, allow_zero: bool) -> int:
    """A TCP port from its decimal digits: 1-65535 (0 too when ``allow_zero``: any free port)."""
    low = 0 if allow_zero else 1
    if not (text.isascii() and text.isdigit()) or not low <= int(text) <= 65535:
        raise ValueError(f"port {text!r} is not a number from {low} to 65535")
    return int(text)


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6; no host: 127.0.0.1; port 0: any free port) ->
    ``(host, port)``; ValueError saying what is wrong."""
    host, sep, port = text.rpartition(":")
    if not sep or host.startswith("[") != host.endswith("]") or not host.isprintable():
        raise ValueError(f"{text!r} is not HOST:PORT (e.g. 127.0.0.1:8080)")
    try:
        number = parse_port(port, allow_zero=True)
    except ValueError as exc:
        raise ValueError(f"{text!r}: {exc}") from None
    return host.strip("[]") or DEFAULT_HOST, number


def listen_address(text: str, *, allow_remote: bool, why: str) -> tuple[str, int]:
    """:func:`parse_listen`, and a host off this machine refused unless ``allow_remote``
    (``why``: what the server would expose, and how to mean it, said in the refusal)."""
    host, port = parse_listen(text)
    if not allow_remote and not is_loopback(host):
        raise ValueError(f"refusing to listen on {host}: {why}")
    return host, port


def bind(host: str = "127.0.0.1", port: int = 0, *, backlog: int = 512) -> socket.socket:
    """A listening TCP socket on ``host:port`` (IPv6 when the host has a colon)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(backlog)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
"""Where Linux says which ports it hands out by itself."""
LOWEST_PORT = 20000
"""A port picked to be bound later is at or above this, below the kernel's own range."""


def ephemeral_start() -> int:
    """The first port the kernel hands out by itself (a connection's own end, a server on port 0):
    Linux's ``ip_local_port_range``, else IANA's dynamic range (macOS, Windows)."""
    try:
        return int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 49152


def unused_port(host: str = "127.0.0.1", *, run: int = 1) -> int:
    """A port P free on ``host`` now, with P+1 .. P+run-1 free too, for a server started later (the
    demo's ``serve`` step, a test's agent in a process of its own), picked outside the ports the
    kernel hands out by itself: a port of that range (the kernel's pick of port 0) can be handed
    meanwhile to another program's server or connection (a client's end in TIME_WAIT holds it a
    minute), and the later bind fails with "Address already in use" (docs/performance.md section
    32). Below that range only a program asking for this very number takes it. When no run there is
    free, the kernel's pick (checked for the run's other ports)."""
    start = ephemeral_start()
    if start - run > LOWEST_PORT:
        for port in random.sample(range(LOWEST_PORT, start - run + 1), min(64, start - run + 1 - LOWEST_PORT)):
            if _free(host, port, run):
                return port
    for _ in range(50):
        sock = bind(host, 0)
        try:
            port = int(sock.getsockname()[1])
        finally:
            sock.close()
        if _free(host, port + 1, run - 1):
            return port
    raise OSError(f"no {run} adjacent free ports on {host}")


def _free(host: str, port: int, run: int) -> bool:
    """``port`` .. ``port + run - 1`` can each be bound on ``host`` now."""
    for p in range(port, port + run):
        try:
            bind(host, p).close()
        except OSError:
            return False
    return True


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


Lifespan = Literal["auto", "on", "off"]


_STOPS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))
"""The signals that end a server as Ctrl-C does: SIGTERM (``kill``, a service manager) and SIGHUP
(the terminal closed, the ssh session dropped), which would otherwise kill the process before
its cleanup (serve's write-back) runs."""


def head_timed(head_timeout: float) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol, which closes a connection that has not sent a whole request head
    ``head_timeout`` seconds after it opened or after its last answer was sent (h11 keeps a
    connection IDLE until a head is complete, so a half-sent head counts as none)."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HeadTimed(H11Protocol):
        head_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self.arm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self.arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self.disarm()
            super().connection_lost(exc)

        def arm(self) -> None:
            self.disarm()
            self.head_timer = self.loop.call_later(head_timeout, self.head_timed_out)

        def disarm(self) -> None:
            if self.head_timer is not None:
                self.head_timer.cancel()
                self.head_timer = None

        def head_timed_out(self) -> None:
            self.head_timer = None
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                self.transport.close()  # no head yet (none, or half of one): the client is dropped

    return HeadTimed


def server(
    app: ASGIApp,
    *,
    lifespan: Lifespan = "off",
    on_exit: Callable[[], None] | None = None,
    head_timeout: float = HEAD_TIMEOUT,
) -> uvicorn.Server:
    """uvicorn for ``app``, which shuts down gracefully on SIGHUP too (uvicorn itself catches
    SIGINT and SIGTERM only); ``on_exit`` (if any) is told first when a signal asks it to stop, so
    what would hold the graceful shutdown (the UI's open event streams) ends at once. A client
    that has not sent a request head within ``head_timeout`` seconds is dropped (:func:`head_timed`)."""
    import uvicorn

    config = uvicorn.Config(
        app,
        log_level="warning",
        lifespan=lifespan,
        timeout_graceful_shutdown=2,
        http=head_timed(head_timeout),
    )
    tell = on_exit

    class Server(uvicorn.Server):
        _loop: asyncio.AbstractEventLoop | None = None
        _wake: asyncio.Event | None = None

        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            if tell is not None:
                tell()
            super().handle_exit(sig, frame)
            self.wake()

        def stop(self) -> None:
            """Ask it to stop, from any thread: it starts its shutdown at once."""
            self.should_exit = True
            self.wake()

        def wake(self) -> None:
            loop, wake = self._loop, self._wake
            if loop is not None and wake is not None:
                with contextlib.suppress(RuntimeError):  # its loop has ended already
                    loop.call_soon_threadsafe(wake.set)

        async def main_loop(self) -> None:
            # uvicorn's own loop looks at should_exit every 0.1 s; this one is woken as soon as it is set
            wake = asyncio.Event()
            self._loop, self._wake = asyncio.get_running_loop(), wake
            counter = 0
            while not await self.on_tick(counter):
                counter = (counter + 1) % 864000
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wake.wait(), 0.1)

        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            await _shutdown(self, sockets)

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            with super().capture_signals():  # on leaving, it raises each signal it caught again
                main = threading.current_thread() is threading.main_thread()
                if main and _STOP_ASKED.is_set():  # a stop that came before uvicorn had the signals (_terminated)
                    self.should_exit = True
                hup = getattr(signal, "SIGHUP", None)
                previous = signal.signal(hup, self.handle_exit) if main and hup is not None else None
                try:
                    yield
                finally:
                    if previous is not None and hup is not None:
                        signal.signal(hup, previous)

    return Server(config)


async def _shutdown(srv: uvicorn.Server, sockets: list[socket.socket] | None) -> None:
    """uvicorn's graceful shutdown without its fixed pauses (0.1 s after asking the connections to close,
    then 0.1 s between looks at them): stop accepting, ask every connection to close, wait until they
    and their tasks are done (polled every 5 ms, at most the graceful timeout; past it their tasks are
    cancelled), then the lifespan's shutdown. A test starts and stops hundreds of servers: the pauses
    were most of what a stop took (0.16-0.18 s each)."""
    loop = asyncio.get_running_loop()
    for server in srv.servers:
        server.close()
    for sock in sockets or []:
        sock.close()
    state = srv.server_state
    for connection in list(state.connections):
        connection.shutdown()
    grace = srv.config.timeout_graceful_shutdown
    deadline = loop.time() + (math.inf if grace is None else grace)
    while (state.connections or state.tasks) and not srv.force_exit and loop.time() < deadline:  # noqa: ASYNC110 - uvicorn's state has no event to wait on
        await asyncio.sleep(0.005)
    if state.connections or state.tasks:
        logging.getLogger("uvicorn.error").error(
            "Cancel %s running task(s), timeout graceful shutdown exceeded", len(state.tasks)
        )
        for task in state.tasks:
            task.cancel(msg="Task cancelled, timeout graceful shutdown exceeded")
    else:
        for server in srv.servers:
            await server.wait_closed()
    if not srv.force_exit:
        await srv.lifespan.shutdown()


def run(
    app: ASGIApp,
    sock: socket.socket,
    *,
    lifespan: Lifespan = "off",
    on_exit: Callable[[], None] | None = None,
    listening: Callable[[], None] | None = None,
    head_timeout: float = HEAD_TIMEOUT,
) -> None:
    """Serve ``app`` on ``sock`` in this thread until interrupted; the socket is closed after.
    Every server of ours runs here (serve, proxy, the demo agent, ui), so they stop alike.

    SIGTERM (``kill``, a service manager, a test's stop) and SIGHUP (the terminal closed) end it
    as Ctrl-C does: uvicorn shuts down gracefully, then hands the signal back; it ends here as a
    clean exit instead of killing the process, so the caller's cleanup runs (serve writes a tape back, the proxy and ui close
    their log). ``listening`` says where it listens (the line people and scripts wait for): it is
    called once SIGTERM is handled so, never before, and a SIGTERM sent as soon as the line is
    read exits 0 too. ``on_exit``, ``head_timeout``: as :func:`server` says."""
    main = threading.current_thread() is threading.main_thread()
    _STOP_ASKED.clear()
    previous = {sig: signal.signal(sig, _terminated) for sig in _STOPS} if main else {}
    try:
        if listening is not None:
            listening()
        server(app, lifespan=lifespan, on_exit=on_exit, head_timeout=head_timeout).run(sockets=[sock])
        if _STOP_ASKED.is_set():  # a stop whose SystemExit was lost (below) still ends here as one
            raise SystemExit(0)
    finally:
        _STOP_ASKED.clear()
        sock.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


_STOP_ASKED = threading.Event()
"""A stop signal arrived while :func:`_terminated` was the handler (before uvicorn took the signals, or
when uvicorn handed one back)."""


def _terminated(signum: int, frame: object) -> None:
    # Python runs a handler between two instructions of whatever the main thread runs: when that is a
    # weakref callback or a __del__ (an import's module lock is freed by one: a server starting up imports
    # a lot), the SystemExit is printed as "Exception ignored" and lost, and the server went on to serve
    # until killed (a docs block's serve, stopped as soon as it was up, was SIGKILLed after 30 s). The flag
    # is not lost: uvicorn, once it has the signals, stops at once when it is set (Server.capture_signals),
    # and run() ends as the SystemExit would have.
    _STOP_ASKED.set()
    raise SystemExit(0)


@contextlib.contextmanager
def serving(app: ASGIApp, host: str = "127.0.0.1", port: int = 0, *, lifespan: Lifespan = "off") -> Iterator[str]:
    """Serve ``app`` in a background thread; yield its base URL; stop it on exit."""
    sock = bind(host, port, backlog=128)
    srv = server(app, lifespan=lifespan)
    thread = threading.Thread(target=srv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield url_of(sock)
    finally:
        srv.stop()  # type: ignore[attr-defined]  # server()'s class
        thread.join(timeout=10)
        sock.close()
