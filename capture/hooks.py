"""A user's hooks on what is recorded and replayed, as vcrpy and pytest-recording name them.

- ``before_record_request(request) -> request | None``: what the log keeps of a request. Return
  the request (changed with :func:`dataclasses.replace`, or as it came) or None: the exchange is
  not recorded at all (it still goes to the agent as the client sent it).
- ``before_record_answer(answer) -> answer | None``: what the log keeps of each answer item (an
  SSE item of a stream, a whole JSON answer). Return it, changed or not, or None: that item is not
  recorded (the client still gets it as the agent sent it).
- ``match_on``: one matcher or several (all must agree, as vcrpy's list): ``matcher(request,
  recorded)`` decides whether a replayed request may be answered by a recorded send. ``False`` or
  an ``AssertionError`` (its message says why, in the miss's error line) is a no; anything else a
  yes. It narrows the match mode's candidates; with ``match="order"`` it alone decides.

The built-in redaction runs after ``before_record_*`` on whatever the hook returns (headers, URL
secrets, configured JSON paths), so a hook can never put a secret on disk; a hook sees the
request and the answer as they are on the wire, in memory only. A hook that raises is one
:class:`HookError` naming the hook and the error, raised to the caller; what was recorded before
it stays in the log, and the exchange it broke ends ``error`` saying why.

Every recording path that takes hooks runs them here, in :class:`capture.exchange.Capture`
(``RecordingTransport``, serve's recording modes behind the pytest plugin and ``ReplayTransport``);
the matcher runs in :class:`replay.serve.matching.Matcher`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from a2a_tape.store.errors import A2ATapeError
from a2a_tape.store.redact import Redactor, credential_parts


class HookError(A2ATapeError):
    """A user's hook (``before_record_request``, ``before_record_answer``, a ``match_on`` matcher)
    raised: one line naming the hook and its error (the hook's own exception is the cause)."""


class NotRecorded(A2ATapeError):
    """``before_record_request`` returned None: this exchange is passed on, never recorded (a signal
    between the recording paths and :class:`capture.exchange.Capture`; it never reaches a caller)."""


def _json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None


@dataclass(frozen=True, slots=True)
class A2ARequest:
    """One request as a hook sees it: the A2A ``method`` (``message/send``, ``SendStreamingMessage``,
    ``agent-card``, ...), the ``url``, the ``http_method``, the ``headers`` as (name, value) pairs
    and the ``body`` bytes. A recorded request's headers and body are as the log keeps them
    (redacted). Change one with :func:`dataclasses.replace`."""

    method: str | None
    url: str
    http_method: str
    headers: tuple[tuple[str, str], ...]
    body: bytes

    def json(self) -> Any:
        """The body as JSON (None when it is none)."""
        return _json(self.body)

    def header(self, name: str) -> str | None:
        """The first value of the header ``name`` (any case), or None."""
        low = name.lower()
        return next((v for k, v in self.headers if k.lower() == low), None)

    @property
    def text(self) -> str:
        """The text parts of the message a send carries, joined ("" for any other request)."""
        doc = self.json()
        if not isinstance(doc, dict):
            return ""
        params = doc.get("params", doc) if "method" in doc else doc  # JSON-RPC, or HTTP+JSON's body
        message = params.get("message") if isinstance(params, dict) else None
        parts = message.get("parts") if isinstance(message, dict) else None
        if not isinstance(parts, list):
            return ""
        return "".join(p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str))


@dataclass(frozen=True, slots=True)
class A2AAnswer:
    """One answer item as ``before_record_answer`` sees it: its ``body`` (an SSE item's data or a
    whole JSON answer), its SSE ``event`` name (None outside a stream) and the ``request`` it
    answers (as recorded: after ``before_record_request``)."""

    request: A2ARequest
    body: bytes
    event: str | None = None

    def json(self) -> Any:
        """The body as JSON (None when it is none)."""
        return _json(self.body)


class BeforeRecordRequest(Protocol):
    """``before_record_request``: the request to record, or None to record nothing of it."""

    def __call__(self, request: A2ARequest, /) -> A2ARequest | None: ...


class BeforeRecordAnswer(Protocol):
    """``before_record_answer``: the answer item to record, or None to leave it out."""

    def __call__(self, answer: A2AAnswer, /) -> A2AAnswer | None: ...


class RequestMatcher(Protocol):
    """A ``match_on`` matcher: whether ``request`` (the one being replayed) may be answered by the
    send ``recorded``. ``False`` or ``AssertionError`` is a no; anything else (``True``, ``None``) a yes."""

    def __call__(self, request: A2ARequest, recorded: A2ARequest, /) -> bool | None: ...


_T = TypeVar("_T")


def _said(exc: BaseException) -> str:
    """What an exception of the user's says, on one line."""
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}".rstrip(": ")


def _checked(hook: Callable[..., _T], what: str, *args: Any) -> _T:
    """``hook(*args)``; what it raises becomes one :class:`HookError` line."""
    try:
        return hook(*args)
    except Exception as exc:
        raise HookError(f"{what} raised {_said(exc)}") from exc


def _typed(value: object, kind: type, what: str) -> None:
    if value is not None and not isinstance(value, kind):
        raise HookError(
            f"{what} returned {type(value).__name__}: return the {kind.__name__} it was given (changed) or None"
        )


@dataclass(frozen=True, slots=True)
class RecordHooks:
    """The before-record hooks of one recorder (either may be None)."""

    request: BeforeRecordRequest | None = None
    answer: BeforeRecordAnswer | None = None

    @classmethod
    def of(
        cls, request: BeforeRecordRequest | None = None, answer: BeforeRecordAnswer | None = None
    ) -> RecordHooks | None:
        """The hooks, None when neither is given (the paths then run as they always did)."""
        for hook, name in ((request, "before_record_request"), (answer, "before_record_answer")):
            if hook is not None and not callable(hook):
                raise TypeError(f"{name} must be a function, not {type(hook).__name__}")
        return cls(request, answer) if request is not None or answer is not None else None

    def on_request(self, asked: A2ARequest, redactor: Redactor) -> A2ARequest:
        """The request to record; :class:`NotRecorded` when the hook dropped it. The line of a
        hook that raised has the request's credentials (``redactor``'s rules) scrubbed: it may quote them."""
        if self.request is None:
            return asked
        try:
            kept = _checked(self.request, "before_record_request", asked)
        except HookError as exc:
            told = redactor.url_secrets(asked.url)[1] + redactor.secret_values(asked.headers)
            raise HookError(redactor.text(str(exc), credential_parts(s for s in told if s))) from exc.__cause__
        _typed(kept, A2ARequest, "before_record_request")
        if kept is None:
            raise NotRecorded
        return kept

    def on_answers(
        self, raw: Sequence[tuple[bytes, str | None]], asked: A2ARequest
    ) -> tuple[list[int], list[tuple[bytes, str | None]], HookError | None]:
        """The items to record: (their indices in ``raw``, the items as the hook returned them,
        the hook's error that stopped at the next one, if any)."""
        if self.answer is None:
            return list(range(len(raw))), list(raw), None
        kept: list[int] = []
        items: list[tuple[bytes, str | None]] = []
        for k, (body, event) in enumerate(raw):
            try:
                out = _checked(self.answer, "before_record_answer", A2AAnswer(asked, body, event))
                _typed(out, A2AAnswer, "before_record_answer")
            except HookError as exc:
                return kept, items, exc
            if out is not None:
                kept.append(k)
                items.append((out.body, out.event))
        return kept, items, None


def matches(matchers: Sequence[RequestMatcher], request: A2ARequest, recorded: A2ARequest) -> str | None:
    """None when every matcher says yes; else why not (an ``AssertionError``'s message, or the
    matcher's name). A matcher that raises anything else is a :class:`HookError`."""
    for matcher in matchers:
        name = getattr(matcher, "__name__", type(matcher).__name__)
        try:
            said = matcher(request, recorded)
        except AssertionError as exc:
            why = " ".join(str(exc).split())
            return f"{name}: {why}" if why else f"{name} said no"
        except Exception as exc:
            raise HookError(f"match_on matcher {name} raised {_said(exc)}") from exc
        if said is False:
            return f"{name} said no"
    return None


def matchers_of(match_on: RequestMatcher | Sequence[RequestMatcher] | None) -> tuple[RequestMatcher, ...]:
    """``match_on`` as a tuple of matchers (one function, or a list of them, or None: none)."""
    if match_on is None:
        return ()
    found = (match_on,) if callable(match_on) else tuple(match_on)
    for m in found:
        if not callable(m):
            raise TypeError(f"match_on takes functions, not {type(m).__name__}")
    return found
