"""Run an ASGI app with uvicorn on 127.0.0.1 in a background thread.

The listening socket is bound before the thread starts, so the URL is usable at once:
connections made before uvicorn accepts wait in the socket's backlog (no sleep, no polling).
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator

import uvicorn


def bind_loopback(port: int = 0) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


@contextlib.contextmanager
def serve_app(app, *, port: int = 0) -> Iterator[str]:
    """Serve ``app`` on 127.0.0.1; yield its base URL (``http://127.0.0.1:PORT``)."""
    sock = bind_loopback(port)
    host, real_port = sock.getsockname()[:2]
    config = uvicorn.Config(app, log_level="warning", lifespan="off", timeout_graceful_shutdown=1)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield f"http://{host}:{real_port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def closed_port() -> int:
    """A loopback port with nothing listening on it."""
    sock = bind_loopback()
    port = sock.getsockname()[1]
    sock.close()
    return port
