"""A database driver's own messages pass the same redaction as ours: libpq quotes a connection
URL's password (or the whole URI) in its error texts. The installed CLI, in a subprocess, for ``serve``
with every URL and for each other command with one URL; the other pairs run the same command in process. The server is never reached (the URL does not parse, or
nothing listens), so no server is needed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.in_process import run_in_process, without_our_variables
from tests.support.servers import closed_port

CLI = str(Path(sys.executable).with_name("a2a-tape"))
SECRET = "SEKRETpw"

pytest.importorskip("psycopg")


# PORT is a port nothing listens on, chosen when the test runs: the test ids stay the same in every
# collection (pytest-xdist's workers must collect the same ids)
URLS = [
    f"postgresql://a2a:Ab%zz{SECRET}@127.0.0.1:PORT/db",  # libpq: invalid percent-encoded token: "Ab%zz..."
    f"postgresql://a2a:{SECRET}@[::1:PORT/db",  # libpq quotes the whole URI: the bracket is not closed
    f"postgresql://a2a@127.0.0.1:PORT/db?sslpassword={SECRET}",
    f"postgresql://a2a@127.0.0.1:PORT/db?password={SECRET}&connect_timeout=5",
    f"postgresql://a2a:{SECRET}@127.0.0.1:PORT/db",
]


COMMANDS = [["tasks"], ["show", "t-1"], ["export", "--all"], ["serve"], ["doctor"]]


def installed(url: str, command: list[str]) -> bool:
    """``serve`` (a server) always; another command with the URL of its own place in the tables."""
    return command == ["serve"] or URLS.index(url) == COMMANDS.index(command)


@pytest.mark.parametrize("url", URLS)
@pytest.mark.parametrize("command", COMMANDS)
def test_no_driver_message_prints_the_password(tmp_path, url, command):
    argv = [*command, "--db", url.replace("PORT", str(closed_port()))]
    if installed(url, command):
        env = {k: v for k, v in os.environ.items() if not k.startswith("A2A_TAPE")}
        r = subprocess.run([CLI, *argv], cwd=tmp_path, capture_output=True, timeout=60, env=env)
    else:
        r = run_in_process(argv, tmp_path, without_our_variables(), timeout=60)
    assert r.returncode == 2, r.stderr
    assert SECRET.encode() not in r.stdout + r.stderr, r.stderr
    assert b"Traceback" not in r.stderr
    assert r.stderr.count(b"\n") == 1, r.stderr
