"""A server the benchmarks start in a process of their own, on a free loopback port."""

from __future__ import annotations

import socket
import subprocess
import time


def free_port() -> int:
    """A loopback port nothing listens on now (the server binds it next), below the kernel's own
    range so that no connection's end takes it meanwhile (:func:`a2a_tape.recorder.listen.unused_port`)."""
    from a2a_tape.recorder.listen import unused_port

    return unused_port("127.0.0.1")


def wait_listening(port: int, proc: subprocess.Popen[bytes], what: str, timeout: float = 30) -> str:
    """The server's base URL once ``port`` accepts a connection; exits naming ``what`` when the
    process ends first or the timeout passes."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return f"http://127.0.0.1:{port}"
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise SystemExit(f"{what} did not start") from None
            time.sleep(0.05)
