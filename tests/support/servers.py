"""Run an ASGI app with uvicorn on 127.0.0.1 in a background thread (see :mod:`recorder.listen`).

The listening socket is bound before the thread starts, so the URL is usable at once:
connections made before uvicorn accepts wait in the socket's backlog (no sleep, no polling).
"""

from __future__ import annotations

import socket

from a2a_tape.recorder.listen import bind, serving


def bind_loopback(port: int = 0) -> socket.socket:
    return bind("127.0.0.1", port, backlog=128)


def serve_app(app, *, port: int = 0):
    """Serve ``app`` on 127.0.0.1; a context manager yielding its base URL (``http://127.0.0.1:PORT``)."""
    return serving(app, "127.0.0.1", port)


def closed_port() -> int:
    """A loopback port with nothing listening on it."""
    sock = bind_loopback()
    port = sock.getsockname()[1]
    sock.close()
    return port
