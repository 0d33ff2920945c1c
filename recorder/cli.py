"""The ``a2a-tape`` command line: the composition root. Each command lives in a module of its own."""

from __future__ import annotations

from . import cmd_doctor, cmd_inspect, cmd_proxy, cmd_record, cmd_serve, cmd_tape  # noqa: F401 - each module registers its commands on ``app``
from .app import app

__all__ = ["app", "main"]


def main() -> None:
    app()


if __name__ == "__main__":
    main()
