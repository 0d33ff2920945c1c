"""The checks of cli/options.py, as rules (Hypothesis), and the plain converter against typer's own."""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path

import pytest
import typer
import typer.core
import typer.main
from hypothesis import given
from hypothesis import strategies as st

from a2a_tape.cli import app as _app  # noqa: F401 - installs the plain converter
from a2a_tape.cli import options
from a2a_tape.recorder import listen


def _call(check, value):
    """Run a parameter callback outside typer: the error is typer's BadParameter."""
    return check(None, None, value)


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_seconds_are_finite_and_positive(value):
    ok = math.isfinite(value) and 0 < value <= options.MAX_SECONDS
    if ok:
        assert _call(options.seconds, value) == value
    else:
        with pytest.raises(typer.BadParameter):
            _call(options.seconds, value)


@given(st.integers())
def test_counts_are_whole_numbers_from_1(value):
    if 1 <= value <= options.MAX_COUNT:
        assert _call(options.count, value) == value
    else:
        with pytest.raises(typer.BadParameter):
            _call(options.count, value)


@given(st.integers(min_value=-5, max_value=70000))
def test_ports(value):
    for allow_zero in (False, True):
        low = 0 if allow_zero else 1
        if low <= value <= 65535:
            assert listen.parse_port(str(value), allow_zero=allow_zero) == value
        else:
            with pytest.raises(ValueError):
                listen.parse_port(str(value), allow_zero=allow_zero)


@given(st.datetimes(min_value=dt.datetime(1970, 1, 2), max_value=dt.datetime(9998, 12, 31)))
def test_since_reads_an_iso_time_and_its_unix_seconds_alike(moment):
    moment = moment.replace(tzinfo=dt.UTC)
    assert options.parse_since(moment.isoformat()) == pytest.approx(moment.timestamp())
    assert options.parse_since(moment.isoformat().replace("+00:00", "Z")) == pytest.approx(moment.timestamp())
    assert options.parse_since(repr(moment.timestamp())) == moment.timestamp()


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e300", "yesterday", "2026-13-01", ""])
def test_since_refuses_what_is_not_a_time(value):
    with pytest.raises(ValueError):
        options.parse_since(value)


@given(st.one_of(st.text(max_size=12), st.floats()))
def test_timing_scale_is_finite_and_not_negative(value):
    """One parser for ``serve --timing`` and ``ReplayEngine(timing=...)``: a scale in [0, 1e6]."""
    from a2a_tape.replay.serve.playback import parse_timing

    try:
        scale = parse_timing(value)
    except ValueError:
        return
    assert math.isfinite(scale) and 0 <= scale <= 1e6
    assert scale > 0 or str(value).strip().lower() == "instant"


_typer_build = getattr(getattr(typer.core, "build_runtime_param", None), "__closure__", None)
needs_hook = pytest.mark.skipif(
    not getattr(typer.core, "build_runtime_param", None) or not _typer_build,
    reason="this typer converts with click's types: no plain converter is installed",
)

SAMPLES = [
    "5", " 5 ", "+3", "-0", "1_000", "1.0", "1.5", "1e3", "1e400", "0x10", "nan", "inf", "\u0663", "",
    ".", "/", "/nonexistent/x", __file__, "~",
    "true", "True", "1", "no", "off", "normal", "full", "FULL", "full ", None, ["a", "b"], (),
]  # fmt: skip


@needs_hook
@pytest.mark.parametrize("value", SAMPLES, ids=repr)
def test_the_plain_converter_agrees_with_typer(value):
    """Same value or same refusal as typer's pydantic converter, for every kind we hand it."""
    theirs_build = _typer_build[0].cell_contents  # the builder the plain one wraps

    t = typer.Typer(add_completion=False)

    @t.command()
    def f(
        i: int = 1,
        x: float = 1.0,
        e: options.Durability = options.Durability.full,
        b: bool = False,
        s: str = "",
        li: list[str] = [],  # noqa: B006
        pa: Path = Path("x"),
        lp: list[Path] = [],  # noqa: B006
        pf: Path = typer.Option(Path("x"), exists=True, dir_okay=False),
        pd: Path = typer.Option(Path("x"), exists=True, file_okay=False),
    ) -> None:
        pass

    for param in typer.main.get_command(t).params:
        kind = options._plain_kind(param.type_descriptor)
        assert kind is not None, param.name
        outcome = []
        ours = options._PlainValue(kind, param.type_descriptor.parameter_info)
        for conv in (theirs_build(param.type_descriptor), ours):
            try:
                outcome.append(repr(conv.coerce(value, param=param, ctx=None)))
            except typer.BadParameter:
                outcome.append("refused")
        assert outcome[0] == outcome[1], (param.name, value, outcome)


@needs_hook
def test_parameters_with_bounds_or_parsers_stay_with_typer():
    t = typer.Typer()

    @t.command()
    def f(n: int = typer.Option(1, min=1), p: str = typer.Option("x", parser=str.upper)) -> None:
        pass

    params = {p.name: p for p in typer.main.get_command(t).params}
    assert options._plain_kind(params["n"].type_descriptor) is None
    assert options._plain_kind(params["p"].type_descriptor) is None
