"""Run an ASGI app with uvicorn on 127.0.0.1 in a background thread (see :mod:`recorder.listen`).

The listening socket is bound before the thread starts, so the URL is usable at once:
connections made before uvicorn accepts wait in the socket's backlog (no sleep, no polling).
"""

from __future__ import annotations

import socket

from a2a_tape.recorder.listen import bind, serving, unused_port


def bind_loopback(port: int = 0) -> socket.socket:
    return bind("127.0.0.1", port, backlog=128)


def serve_app(app, *, port: int = 0):
    """Serve ``app`` on 127.0.0.1; a context manager yielding its base URL (``http://127.0.0.1:PORT``)."""
    return serving(app, "127.0.0.1", port)


def closed_port(run: int = 1) -> int:
    """A loopback port with nothing listening on it (``run``: and the ``run - 1`` after it), picked
    below the kernel's own range (:func:`a2a_tape.recorder.listen.unused_port`): a test that starts a
    server on it later, or expects nothing there, is not beaten to it by another test's connection
    or port-0 server (docs/performance.md section 32)."""
    return unused_port("127.0.0.1", run=run)
