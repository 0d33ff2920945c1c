"""The oracle tests (each module is marked ``oracle``: deselect them with ``-m "not oracle"``); what each oracle
cost, first installs included, is printed in a section of pytest's closing summary."""

from __future__ import annotations

import pytest

_TIMINGS: list[str] = []


def pytest_terminal_summary(terminalreporter):
    if _TIMINGS:
        terminalreporter.section("oracles: what they took")
        for line in _TIMINGS:
            terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def oracle_timing():
    """``oracle_timing("...")`` adds a line to the closing summary (and prints it, seen with ``-s``)."""

    def note(line: str) -> None:
        _TIMINGS.append(line)
        print(line)

    return note
