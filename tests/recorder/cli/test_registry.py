"""One place names the commands (cli.py), and the choices the CLI offers are the engine's."""

from __future__ import annotations

import importlib

import typer.main

from a2a_tape.cli import COMMANDS, options


def _module_commands(module: str) -> dict:
    built = typer.main.get_command(importlib.import_module(f"a2a_tape.cli.{module}").app)
    return getattr(built, "commands", None) or {built.name: built}


def test_every_command_of_every_module_is_in_the_table_and_back():
    declared = {}
    for module in {c.module for c in COMMANDS.values()}:
        for name in _module_commands(module):
            declared[name] = module
    assert declared == {name: c.module for name, c in COMMANDS.items()}


def test_the_summary_in_the_table_is_the_first_paragraph_of_the_command_help():
    for name, entry in COMMANDS.items():
        cmd = _module_commands(entry.module)[name]
        first = (cmd.help or "").split("\n\n")[0].strip()
        assert " ".join(first.split()) == entry.summary, name


def test_serve_offers_the_replay_servers_own_modes():
    """One definition per vocabulary: serve's --record-mode and --match are the enums the engine,
    the transport and the pytest plugin read (replay/serve/modes.py), not copies of them."""
    import typing

    from a2a_tape.cli.serve import serve_cmd
    from a2a_tape.replay.serve.modes import MatchMode, RecordMode

    hints = typing.get_type_hints(serve_cmd, include_extras=True)
    assert typing.get_args(hints["record_mode"])[0] is RecordMode
    assert typing.get_args(hints["match"])[0] is MatchMode
    assert not hasattr(options, "RecordMode") and not hasattr(options, "MatchMode")


def test_the_exception_classes_come_from_the_click_typer_runs_on():
    assert issubclass(typer.BadParameter, options.ClickException)
    assert options.Exit is typer.Exit


def test_the_lazy_consoles_behave_as_consoles():
    """``out``/``err`` are made on first use; rich uses them as context managers too (Live, Progress)."""
    from a2a_tape.cli.app import err, out

    with err as console:
        assert console.stderr
    saved = out._width
    out.width = 123
    try:
        assert out.width == 123
    finally:
        out._width = saved
