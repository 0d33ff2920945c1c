"""Serving an ASGI app with uvicorn on a socket we bind ourselves.

Binding first means the port is known (``:0`` picks a free one) and usable at once:
connections made before uvicorn accepts wait in the backlog, so nobody polls or sleeps.
The socket is made with ``IPPROTO_TCP`` so asyncio turns Nagle off (TCP_NODELAY): without it
a stream's first small item can sit ~40 ms in the kernel.
"""

from __future__ import annotations

import contextlib
import signal
import socket
import threading
from collections.abc import Iterator
from typing import Literal

import uvicorn
from starlette.types import ASGIApp


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


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


Lifespan = Literal["auto", "on", "off"]


def server(app: ASGIApp, *, lifespan: Lifespan = "off") -> uvicorn.Server:
    return uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan=lifespan, timeout_graceful_shutdown=2))


def run(app: ASGIApp, sock: socket.socket, *, lifespan: Lifespan = "off") -> None:
    """Serve ``app`` on ``sock`` in this thread until interrupted; the socket is closed after.

    SIGTERM (``kill``, a service manager, a test's stop) ends it as Ctrl-C does: uvicorn shuts
    down gracefully, then hands the signal back; it ends here as a clean exit instead of killing
    the process, so the caller's cleanup runs (serve writes a tape back, the proxy closes its log)."""
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _terminated) if main else None
    try:
        server(app, lifespan=lifespan).run(sockets=[sock])
    finally:
        sock.close()
        if main:
            signal.signal(signal.SIGTERM, previous)


def _terminated(signum: int, frame: object) -> None:
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
        srv.should_exit = True
        thread.join(timeout=10)
        sock.close()
