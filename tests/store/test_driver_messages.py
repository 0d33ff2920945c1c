"""A database driver's own messages pass the same redaction as ours: libpq quotes a connection
URL's password (or the whole URI) in its error texts. The installed CLI, in a subprocess; the
server is never reached (the URL does not parse, or nothing listens), so no server is needed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

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


@pytest.mark.parametrize("url", URLS)
@pytest.mark.parametrize("command", [["tasks"], ["show", "t-1"], ["export", "--all"], ["serve"], ["doctor"]])
def test_no_driver_message_prints_the_password(tmp_path, url, command):
    url = url.replace("PORT", str(closed_port()))
    env = {k: v for k, v in os.environ.items() if not k.startswith("A2A_TAPE")}
    r = subprocess.run([CLI, *command, "--db", url], cwd=tmp_path, capture_output=True, timeout=60, env=env)
    assert r.returncode == 2, r.stderr
    assert SECRET.encode() not in r.stdout + r.stderr, r.stderr
    assert b"Traceback" not in r.stderr
    assert r.stderr.count(b"\n") == 1, r.stderr
