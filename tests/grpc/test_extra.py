"""gRPC is an optional extra: a plain install never imports it, and asking for gRPC without it
is bad input (one line, exit 2), never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

GRPC_MODULES = ("grpc_wire", "grpc_calls", "grpc_server", "grpc_interceptor", "grpc_replay")
"""Module names of the gRPC side (their files import grpc on use, not on import, but a plain
install has no reason to load them)."""


def _run(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "A2A_TAPE"))}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True, text=True, env=env, timeout=120
    )


def test_the_cli_and_every_module_but_the_grpc_ones_never_import_grpc():
    """Every module of every room (the CLI's every command module included) is
    imported; neither grpc nor protobuf is loaded by it."""
    done = _run(
        """
        import importlib, pkgutil, sys
        import a2a_tape, a2a_tape.cli
        names = []
        for sub in ("store", "wire", "capture", "fold", "replay", "inspection", "recorder", "cli"):
            pkg = importlib.import_module(f"a2a_tape.{sub}")
            for m in pkgutil.walk_packages(pkg.__path__, prefix=f"{pkg.__name__}."):
                if m.name.endswith(".__main__") or m.name.rsplit(".", 1)[-1] in sys.argv[1:]:
                    continue
                names.append(m.name)
                importlib.import_module(m.name)
        a2a_tape.__dir__()
        loaded = sorted(n for n in sys.modules if n == "grpc" or n.startswith(("grpc.", "google.protobuf", "a2a.")))
        print(len(names), loaded)
        """,
        *GRPC_MODULES,
    )
    assert done.returncode == 0, done.stderr
    count, loaded = done.stdout.split(" ", 1)
    assert int(count) > 50
    assert loaded.strip() == "[]"


def test_importing_a2a_tape_and_its_grpc_modules_does_not_import_grpc():
    """The gRPC modules load grpc on first use: ``import a2a_tape`` and its lazy surface stay light."""
    done = _run(
        """
        import sys
        import a2a_tape
        from a2a_tape.wire import grpc as grpc_wire
        from a2a_tape.recorder.proxy import grpc_server
        print(sorted(n for n in sys.modules if n == "grpc" or n.startswith("google.protobuf")))
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_asking_for_grpc_without_the_extra_is_one_line_and_exit_2(tmp_path):
    """The installed CLI with grpc made unimportable (as on a plain install): ``proxy --grpc-listen``
    says which extra to install, exit 2, no traceback, no log created."""
    db = tmp_path / "t.db"
    done = _run(
        """
        import sys
        sys.modules["grpc"] = None  # what a plain install looks like to an import
        from a2a_tape.cli import main
        sys.argv = ["a2a-tape", *sys.argv[1:]]
        main()
        """,
        "proxy",
        "http://127.0.0.1:9",
        "--grpc-listen",
        "127.0.0.1:0",
        "--db",
        str(db),
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "a2a-tape[grpc]" in lines[0] and "Traceback" not in done.stderr
    assert not db.exists()
