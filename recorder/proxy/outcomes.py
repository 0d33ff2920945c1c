"""What a failed relay means: the outcome word for its exchange row, one line, the client's status.

Both sides of the proxy use it: the upstream's faults (unreachable, silent past a timeout, an
answer that does not decode or breaks off) and the log's own (:func:`log_fault_line`).
"""

from __future__ import annotations

from urllib.parse import urlsplit

import httpx

from a2a_tape.capture.sending import DecodingError, FirstByteTimeout, Timeouts
from a2a_tape.recorder import client as a2a
from a2a_tape.store import Exchange
from a2a_tape.store.errors import A2ATapeError, DatabaseLocked, DiskFull, ReadOnlyStore, StoreError
from a2a_tape.wire.http_client import BodyTooLarge
from a2a_tape.wire.sse_reader import SseLineTooLong


class RelayFault(A2ATapeError):
    """A relay that could not complete; ``outcome`` and the one-line reason for the row."""

    def __init__(self, outcome: str, why: str, status: int, *, release: bool = False) -> None:
        super().__init__(why)
        self.outcome, self.why, self.status, self.release = outcome, why, status, release


def log_fault_line(exc: StoreError) -> str:
    """One line naming why the log could not be written."""
    if isinstance(exc, DiskFull):
        cause = "the disk holding it is full"
    elif isinstance(exc, DatabaseLocked):
        cause = "another process holds its write lock"
    elif isinstance(exc, ReadOnlyStore):
        cause = "it is read-only"
    else:
        cause = "the store failed"
    return f"the recording proxy cannot write its log ({cause}): {exc}"


def classify(exc: BaseException, url: str, timeouts: Timeouts, *, sent: bool = False) -> RelayFault:
    """What a failed upstream call means, as one line (``sent``: the head was already relayed)."""
    if isinstance(exc, RelayFault):
        return exc
    if isinstance(exc, FirstByteTimeout):
        return RelayFault(
            "timeout",
            f"the upstream agent accepted the request but sent no answer within {timeouts.first_byte:g} s "
            "(--first-byte-timeout)",
            504,
        )
    if isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout, httpx.UnsupportedProtocol)):
        # the request never reached the agent: its key is released, a retry may run
        return RelayFault(
            "error", f"upstream agent unreachable: {a2a.describe_http_error(exc, url)}", 502, release=True
        )
    if isinstance(exc, httpx.ReadTimeout):
        return RelayFault(
            "timeout", f"the upstream agent went silent for {timeouts.read:g} s mid-answer (--read-timeout)", 504
        )
    if isinstance(exc, (DecodingError, httpx.DecodingError)):
        return RelayFault("error", f"the upstream agent's answer does not decode: {short(exc)}", 502)
    if isinstance(exc, (BodyTooLarge, SseLineTooLong)):  # what was read is kept; the rest is not relayed
        return RelayFault("dropped" if sent else "error", f"the upstream agent's answer was cut off: {exc}", 502)
    if isinstance(exc, httpx.HTTPError):
        why = a2a.describe_http_error(exc, url)
        return RelayFault("dropped" if sent else "error", f"the upstream agent's answer broke off: {why}", 502)
    return RelayFault("error", f"proxy error: {type(exc).__name__}: {short(exc)}", 502)


def short(exc: BaseException) -> str:
    """The first line of an exception's text (160 characters at most), or its type's name."""
    text = str(exc).strip()
    return text.splitlines()[0][:160] if text else type(exc).__name__


_KIND = {"replayed": "hit", "refused": "refused", "ok": "forward", "closed": "forward"}
"""What ``proxy``'s line per request calls an exchange's outcome: ``forward`` (relayed, the agent
answered), ``hit`` (a repeat answered from the log), ``refused`` (an idempotency key clash), and
``fault`` for every failure of the relay (unreachable, timeout, dropped, incomplete, an error of ours)."""


def request_line(ex: Exchange) -> str:
    """One request as ``proxy`` reports it once its row is final: HTTP method and path, the A2A
    method, the task, forward/hit/refused/fault, the HTTP status, and the row's outcome (with its
    reason when it failed). An agent's JSON-RPC error is a ``forward``: the agent answered."""
    path = urlsplit(ex.url).path or "/"
    method = ex.rpc_method or ("agent-card" if path.endswith("agent-card.json") else "-")
    outcome = ex.outcome or "open"
    kind = _KIND.get(outcome) or ("forward" if outcome == "error" and ex.error is None else "fault")
    status = ex.status if ex.status is not None else "-"
    why = f": {ex.error}" if ex.error else ""
    return f"{ex.http_method or '-'} {path} {method} task {ex.task_id or '-'} {kind} {status} ({outcome}{why})"
