"""Command-line values: the fixed choices (enums) and the checks every command shares.

Every value a command reads from its command line is checked here, before the command runs:
nothing is sent and nothing is written for a value that fails. A failed check raises typer's
``BadParameter`` with the parameter attached, so it prints as typer's own one-line message and
exits 2 (see :class:`a2a_tape.cli.app.TapeGroup`).

The checks are typer parameter callbacks (``callback=`` of ``typer.Option``/``typer.Argument``):
typer 0.29 no longer takes click ``ParamType`` objects, and a callback is called with the
context and the parameter by every typer release we support. Each callback returns the value
unchanged (or, for a number, as the number), so the command's own parsing stays where it was.

Also here: the exception classes of the click that the running typer uses. typer 0.29 ships its
own copy of click (``typer._click``); older releases use the ``click`` distribution. We find
them from typer itself, never by importing ``click``.

This module is imported by every command module, so it imports nothing heavy: no httpx, no
store, no replay (the URL check imports httpx only when it runs, for a command that sends).
"""

from __future__ import annotations

import math
import re
import sys
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal, cast

import typer

# -- the click that typer raises from ------------------------------------------------------

_click_exceptions = sys.modules[typer.BadParameter.__module__]  # click.exceptions or typer._click.exceptions

ClickException: type[Exception] = _click_exceptions.ClickException
"""Usage errors and bad values: what typer raises before a command runs (exit 2 for us)."""

NoArgsIsHelp: type[Exception] | None = getattr(_click_exceptions, "NoArgsIsHelpError", None)
"""click >= 8.2 raises it for a bare ``a2a-tape`` (it prints the help); older click just prints it."""

Exit: type[BaseException] = typer.Exit
Abort: type[BaseException] = typer.Abort


def short_help(help_text: str, limit: int) -> str:
    """The one-line summary of a command's help, as click makes it for ``--help``'s command list."""
    utils = sys.modules[typer.echo.__module__]  # click.utils or typer._click.utils
    return str(utils.make_default_short_help(help_text, limit))


# -- fixed choices: typer validates them and lists them in --help --------------------------


class Durability(StrEnum):
    normal = "normal"
    full = "full"

    @property
    def mode(self) -> Literal["normal", "full"]:
        """The value as the store's ``Durability`` type."""
        return self.value


class Dialect(StrEnum):
    """``--protocol``: which A2A dialect to speak (``recorder.client.ProtocolChoice``)."""

    auto = "auto"
    v1_0 = "1.0"
    v0_3 = "0.3"

    @property
    def choice(self) -> Literal["auto", "1.0", "0.3"]:
        return self.value


class OnStall(StrEnum):
    cancel = "cancel"
    resend = "resend"

    @property
    def choice(self) -> Literal["cancel", "resend"]:
        return self.value


class ExportFormat(StrEnum):
    jsonl = "jsonl"
    har = "har"
    mermaid = "mermaid"
    html = "html"
    otlp = "otlp"


# -- checks ----------------------------------------------------------------------------------

MAX_SECONDS = 1e9  # about 31 years: more is not a timeout but an overflow waiting to happen
MAX_COUNT = 2**63 - 1  # SQLite's largest integer


def _bad(ctx: typer.Context, param: typer.CallbackParam, message: str) -> typer.BadParameter:
    return typer.BadParameter(message, ctx=ctx, param=cast(Any, param))


def seconds(ctx: typer.Context, param: typer.CallbackParam, value: float | None) -> float | None:
    """A duration: a finite number of seconds > 0 (no nan, no inf)."""
    if value is None:
        return None
    if not math.isfinite(value) or not 0 < value <= MAX_SECONDS:
        raise _bad(ctx, param, f"{value!r} is not a number of seconds > 0 (at most {MAX_SECONDS:g})")
    return value


def count(ctx: typer.Context, param: typer.CallbackParam, value: int | None) -> int | None:
    """A count or a size: a whole number >= 1."""
    if value is None:
        return None
    if not 1 <= value <= MAX_COUNT:
        raise _bad(ctx, param, f"{value} is not a whole number >= 1")
    return value


def line_bytes(ctx: typer.Context, param: typer.CallbackParam, value: int) -> int:
    """``--max-line-bytes``: at least 64 (a shorter line cannot hold an SSE field)."""
    if not 64 <= value <= MAX_COUNT:
        raise _bad(ctx, param, f"{value} is too small: at least 64 bytes")
    return value


def listen(ctx: typer.Context, param: typer.CallbackParam, value: str | None) -> str | None:
    """``HOST:PORT`` to listen on; the port 0-65535 (0: any free port); None: not asked for
    (``--grpc-listen``). Read by :func:`recorder.listen.parse_listen`, the one parser of addresses."""
    from a2a_tape.recorder.listen import parse_listen  # here: only the servers take --listen

    if value is None:
        return None
    try:
        parse_listen(value)
    except ValueError as exc:
        raise _bad(ctx, param, str(exc)) from None
    return value


def check_url(value: str) -> str:
    """An http(s) URL that httpx can send to; raises ValueError saying what is wrong."""
    from urllib.parse import urlsplit

    if any(not c.isprintable() or c.isspace() for c in value):
        raise ValueError(f"'{value!r}' contains spaces or control characters")
    try:
        parts = urlsplit(value)
        port = parts.port  # raises for a port out of range or not a number
    except ValueError as exc:
        raise ValueError(f"'{value}' is not a valid URL: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"'{value}' is not an http(s) URL (http://HOST[:PORT]/...)")
    if port == 0:
        raise ValueError(f"'{value}': port 0 cannot be connected to")
    import httpx  # only commands that send get here

    try:
        httpx.URL(value)
    except httpx.InvalidURL as exc:
        raise ValueError(f"'{value}' is not a valid URL: {exc}") from None
    return value


def url(ctx: typer.Context, param: typer.CallbackParam, value: str | None) -> str | None:
    """An http(s) URL (port 1-65535)."""
    if value is None or ctx.resilient_parsing:
        return value
    try:
        return check_url(value)
    except ValueError as exc:
        raise _bad(ctx, param, str(exc)) from None


def _header_value_problem(value: str) -> str | None:
    if not value.isascii():
        return "is not ASCII"
    if any(ord(c) < 0x20 and c != "\t" or ord(c) == 0x7F for c in value):
        return "contains control characters"
    return None


def headers(ctx: typer.Context, param: typer.CallbackParam, value: list[str] | None) -> list[str]:
    """``-H 'Name: value'``: a token for the name, printable ASCII for the value."""
    from a2a_tape.store.headers import HEADER_NAME  # the one rule (here, not at import: --help stays cheap)

    for h in value or []:
        name, sep, val = h.partition(":")
        if not sep or not HEADER_NAME.fullmatch(name.strip()):
            raise _bad(ctx, param, f"{h!r} is not 'Name: value'")
        problem = _header_value_problem(val)
        if problem:
            raise _bad(ctx, param, f"the value of header '{name.strip()}' {problem}")
    return list(value or [])  # a list, never None: typer < 0.29 takes len() of what a callback returns


def header_pairs(values: list[str]) -> list[tuple[str, str]]:
    """``Name: value`` options (checked by :func:`headers`) as ``(name, value)`` pairs, both stripped."""
    pairs = []
    for h in values:
        name, _, value = h.partition(":")
        pairs.append((name.strip(), value.strip()))
    return pairs


def header_value(ctx: typer.Context, param: typer.CallbackParam, value: str | None) -> str | None:
    """A value sent in an HTTP header (a token): printable ASCII."""
    if value is None:
        return None
    problem = _header_value_problem(value)
    if problem:
        raise _bad(ctx, param, f"the value {problem}")
    return value


def parse_since(value: str | None) -> float | None:
    """``--since``: :func:`inspection.listing.parse_since` (the one rule, with the listing it filters)."""
    from a2a_tape.inspection.listing import parse_since as parse

    return parse(value)


def since(ctx: typer.Context, param: typer.CallbackParam, value: str | None) -> str | None:
    """A moment: unix seconds or an ISO time; checked here, converted by :func:`parse_since`."""
    try:
        parse_since(value)
    except ValueError as exc:
        raise _bad(ctx, param, str(exc)) from None
    return value


def timing(ctx: typer.Context, param: typer.CallbackParam, value: str) -> str:
    """``--timing``: instant, real or a finite FACTOR > 0 (:func:`replay.serve.playback.parse_timing`)."""
    from a2a_tape.replay.serve.playback import parse_timing  # here: only serve takes --timing

    try:
        parse_timing(value)
    except ValueError as exc:
        raise _bad(ctx, param, str(exc)) from None
    return value


def faults(ctx: typer.Context, param: typer.CallbackParam, value: list[str] | None) -> list[str]:
    """``--fault`` specs, parsed by the replay side (imported only for ``serve``)."""
    if not value:
        return []
    from a2a_tape.replay.serve.faults import FaultError, parse_faults

    try:
        parse_faults(*value)  # the one rule for each fault, a finite delay included
    except FaultError as exc:
        raise _bad(ctx, param, str(exc)) from None
    return list(value)


def utf8_problem(args: list[str]) -> str | None:
    """The first command-line argument that is not valid UTF-8 (bytes Python kept as surrogates)."""
    for i, arg in enumerate(args, 1):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            shown = arg.encode("utf-8", "surrogateescape").decode("ascii", "backslashreplace")
            return f"argument {i} is not valid UTF-8: '{shown}'"
    return None


# -- plain values without pydantic -------------------------------------------------------------
#
# typer 0.29 converts every value through a pydantic TypeAdapter: importing pydantic and building
# the adapters costs about 100 ms, more than the rest of `a2a-tape tasks` together. Our values are
# plain: str, int, float, bool, a StrEnum, a Path, or a list of one of them. For exactly those (no
# min/max, no parser, no file) typer's runtime-parameter builder returns a converter that does what
# typer's does, the way click always did; anything else goes to typer's own. A Path is made from
# the string and then checked by typer's own path checks (exists, readable, ...: `_typer_path_checks`),
# which take a Path as it is (pydantic only turns a string into one). A typer without that builder
# (older releases use click's types) is left as it is. Both run in CI (.ci/run: the newest releases
# in a second venv), so a typer that changes the hook is caught there.


_WHOLE_DECIMAL = re.compile(r"\s*[+-]?\d+\.0*\s*")
_TRUE = frozenset({"1", "true", "t", "yes", "y", "on"})
_FALSE = frozenset({"0", "false", "f", "no", "n", "off", ""})


class _PlainValue:
    """Converts one parameter's value(s): the interface of typer's runtime parameter (``coerce``)."""

    def __init__(self, kind: type, info: Any = None) -> None:
        self.kind = kind
        self.info = info  # typer's ParameterInfo: a Path's checks

    def coerce(self, value: Any, param: Any, ctx: Any) -> Any:
        multi = param.multiple or param.nargs == -1
        if value is None:
            return () if multi else None
        if multi:
            if isinstance(value, str):
                raise typer.BadParameter("Value must be an iterable.", ctx=ctx, param=param)
            return [self._one(v, param, ctx) for v in value]
        return self._one(value, param, ctx)

    def _one(self, value: Any, param: Any, ctx: Any) -> Any:
        kind = self.kind
        if kind is Path:
            checks = _typer_path_checks()
            assert checks is not None  # _plain_kind gives Path only when typer has them
            if not isinstance(value, (str, Path)):
                raise typer.BadParameter(f"'{value}' is not a valid path.", ctx=ctx, param=param)
            return checks(Path(value), self.info, path_type=Path, param=param, ctx=ctx)
        if isinstance(value, kind) and not (kind is int and isinstance(value, bool)):
            return value
        if kind is bool:
            word = str(value).strip().lower()
            if word in _TRUE or word in _FALSE:
                return word in _TRUE
            raise typer.BadParameter(f"'{value}' is not a valid boolean.", ctx=ctx, param=param)
        try:
            if kind in (int, float) and isinstance(value, str) and not value.isascii():
                raise ValueError  # digits of other scripts are not numbers on a command line
            if kind is int:
                if isinstance(value, str) and _WHOLE_DECIMAL.fullmatch(value):
                    return int(float(value))  # 2.0 is 2, as typer has it
                if isinstance(value, float) and not value.is_integer():
                    raise ValueError
                return int(value)
            if kind is float:
                return float(value)
            if kind is str:
                return str(value)
            return kind(value)  # a StrEnum: by value
        except (TypeError, ValueError):
            pass
        if kind is int:
            message = f"'{value}' is not a valid integer."
        elif kind is float:
            message = f"'{value}' is not a valid number."
        else:
            assert issubclass(
                kind, StrEnum
            )  # _plain_kind gives str, int, float, bool or a StrEnum; str always converts
            message = f"'{value}' is not one of {', '.join(repr(m.value) for m in kind)}."
        raise typer.BadParameter(message, ctx=ctx, param=param)


def _plain_kind(descriptor: Any) -> type | None:
    from typing import get_args, get_origin

    info = descriptor.parameter_info
    if descriptor.file_annotation is not None:
        return None
    if any(getattr(info, name, None) not in (None, False) for name in ("min", "max", "clamp", "parser")):
        return None
    annotation = descriptor.annotation
    if get_origin(annotation) is list:
        (annotation,) = get_args(annotation) or (None,)
    if annotation in (str, int, float, bool):
        plain: type = annotation
        return plain
    if annotation is Path and _typer_path_checks() is not None:
        return Path
    if isinstance(annotation, type) and issubclass(annotation, StrEnum):
        return annotation
    return None


def _typer_path_checks() -> Any:
    """typer's checks of a path value (``coerce_cli_path``: exists, file or directory, readable, ...),
    or None when this typer has none of that name (its own converter is then used)."""
    try:
        from typer._param_types import coerce_cli_path
    except ImportError:
        return None
    return coerce_cli_path


def install_plain_values() -> bool:
    """Let typer build our converter for plain parameters (see above); False when this typer has no hook."""
    import typer.core as typer_core

    build = getattr(typer_core, "build_runtime_param", None)
    if build is None or getattr(build, "plain_values", False):
        return build is not None

    def build_runtime_param(descriptor: Any) -> Any:
        try:
            kind = _plain_kind(descriptor)
        except AttributeError:  # a descriptor of another shape: typer knows best
            kind = None
        return build(descriptor) if kind is None else _PlainValue(kind, descriptor.parameter_info)

    build_runtime_param.plain_values = True  # type: ignore[attr-defined]  # a mark on the function: patched once
    typer_core.build_runtime_param = build_runtime_param  # type: ignore[attr-defined]  # typer's internal hook, replaced
    return True


def grpc_listen_problem(host: str, port: int) -> str | None:
    """Why ``--grpc-listen HOST:PORT`` cannot be served (the grpc extra missing, the port taken), as
    one line; None when it can. Said before anything starts, rather than by the server later."""
    from a2a_tape.recorder import listen as listening
    from a2a_tape.wire.grpc import GrpcUnavailable, require

    try:
        require()
        listening.bind(host, port).close()
    except GrpcUnavailable as exc:
        return str(exc)
    except OSError as exc:
        return f"cannot listen on {host}:{port}: {exc.strerror or exc}"
    return None
