"""A client that stops reading: a raw socket that sends a request, reads the answer's head and then
nothing, with a small receive buffer. An HTTP client library would read on into buffers of its own
(or close the connection), so it could not be the client the proxy's stream buffer is about."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit


def stalled_client(url: str, body: bytes, headers: dict[str, str]) -> tuple[socket.socket, bytes]:
    """A stream request on a raw socket that then reads nothing: its head only, byte by byte."""
    parts = urlsplit(url)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: a small window
    sock.settimeout(60)
    sock.connect((parts.hostname, parts.port))
    head = ["POST / HTTP/1.1", f"Host: {parts.netloc}", f"Content-Length: {len(body)}"]
    head += [f"{k}: {v}" for k, v in headers.items()]
    sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + body)
    got = b""
    while b"\r\n\r\n" not in got:
        byte = sock.recv(1)
        assert byte, "the proxy closed before the answer's head"
        got += byte
    return sock, got
