"""What a recording proxy is told (``a2a-tape proxy``'s options, a test's): :class:`ProxyConfig`."""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from functools import cached_property

import httpx

from a2a_tape import store
from a2a_tape.recorder.proxy.idempotency import Idempotency, OnKeyConflict
from a2a_tape.recorder.proxy.plumbing import Upstream
from a2a_tape.recorder.proxy.relay import DEFAULT_SLOW_CLIENT_TIMEOUT, DEFAULT_STREAM_BUFFER
from a2a_tape.store.redact import Redactor
from a2a_tape.wire.loopback import LOOPBACK_ONLY, Guard
from a2a_tape.wire.served import MAX_REQUEST

DEFAULT_MAX_BODY = MAX_REQUEST
DEFAULT_CONNECT_TIMEOUT = 10.0
DEFAULT_FIRST_BYTE_TIMEOUT = 300.0
DEFAULT_READ_TIMEOUT = 300.0


@dataclass
class ProxyConfig:
    upstream: str
    durability: store.Durability = "full"
    token: str | None = None
    max_body: int = DEFAULT_MAX_BODY
    idempotency_ttl: float = 24 * 3600.0
    recover_on_start: bool = True
    stall_timeout: float = 30.0
    redactor: Redactor = field(default_factory=Redactor)
    on_key_conflict: OnKeyConflict = OnKeyConflict.forward
    idempotency: Idempotency = Idempotency.on  # off: every request goes upstream, repeats included
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT  # to open the connection to the upstream
    first_byte_timeout: float = DEFAULT_FIRST_BYTE_TIMEOUT  # from the request sent to the answer's head
    read_timeout: float = DEFAULT_READ_TIMEOUT  # the longest silence inside an answer's body
    guard: Guard = LOOPBACK_ONLY  # who may talk to it besides loopback programs (wire.loopback)
    push: bool = True  # webhooks a client registers go through the push receiver (proxy --push-receiver off: False)
    push_socket: socket.socket | None = None  # the receiver's own listener (--push-receiver HOST:PORT); None: ours
    upstream_auth: tuple[str, str] | None = None  # (user, password) given apart from the URL (a file, the env)
    inject_traceparent: bool = False  # start a W3C traceparent when the client sent none (docs/otel.md)
    continue_traceparent: bool = False  # a client's traceparent goes on with the proxy's span as its parent
    traceparent_metadata: bool = False  # the traceparent sent also goes in the message's metadata (A2A#2026)
    stream_buffer: int = DEFAULT_STREAM_BUFFER  # bytes of a stream held for its clients (relay.Window)
    slow_client_timeout: float = DEFAULT_SLOW_CLIENT_TIMEOUT  # seconds a client may stay that far behind

    @cached_property
    def target(self) -> Upstream:
        parsed = Upstream.parse(self.upstream)
        if self.upstream_auth is None:
            return parsed
        return Upstream(parsed.origin, httpx.BasicAuth(*self.upstream_auth))

    @property
    def origin(self) -> str:
        """The upstream's ``scheme://host:port``, without credentials."""
        return self.target.origin

    @property
    def shown_upstream(self) -> str:
        """The upstream URL fit for a log line: its password and secret query values redacted."""
        return self.redactor.url(self.upstream)
