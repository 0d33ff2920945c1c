"""A real PostgreSQL server for the tests: ``initdb`` into a temporary directory, started on a
free loopback port, stopped at the end. Needs Debian's ``postgresql`` package (``.ci/run``
installs it). ``pg_ctl start -w`` waits for the server to accept connections: no sleeps.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator

from tests.support.servers import closed_port

MISSING = "PostgreSQL server binaries (initdb, pg_ctl) not found: install Debian's 'postgresql' package (.ci/run does)"


def _bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    cands = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return cands[-1] if cands else None


def available() -> bool:
    return _bin("initdb") is not None and _bin("pg_ctl") is not None


@contextlib.contextmanager
def postgres_server() -> Iterator[str]:
    """Yield the URL of a fresh database on a private PostgreSQL server."""
    initdb, pg_ctl = _bin("initdb"), _bin("pg_ctl")
    if not initdb or not pg_ctl:
        raise RuntimeError(MISSING)
    root = tempfile.mkdtemp(prefix="a2a-tape-pg-")
    data = os.path.join(root, "data")
    as_user: list[str] = []
    if os.geteuid() == 0:  # PostgreSQL refuses to run as root
        shutil.chown(root, "postgres", "postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
    port = closed_port()
    env = {**os.environ, "LC_ALL": "C.UTF-8"}
    subprocess.run(
        [*as_user, initdb, "-D", data, "-U", "a2a", "-A", "trust", "-E", "UTF8", "--no-sync"],
        check=True,
        capture_output=True,
        env=env,
    )
    opts = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c max_connections=100"
    subprocess.run(
        [*as_user, pg_ctl, "-D", data, "-l", os.path.join(root, "log"), "-o", opts, "-w", "-t", "60", "start"],
        check=True,
        capture_output=True,
        env=env,
    )
    try:
        subprocess.run(
            [
                "psql",
                "-h",
                "127.0.0.1",
                "-p",
                str(port),
                "-U",
                "a2a",
                "-d",
                "postgres",
                "-qc",
                "CREATE DATABASE a2a_tape",
            ],
            check=True,
            capture_output=True,
            env=env,
        )
        yield f"postgresql://a2a@127.0.0.1:{port}/a2a_tape"
    finally:
        subprocess.run([*as_user, pg_ctl, "-D", data, "-m", "immediate", "-w", "stop"], capture_output=True, env=env)
        shutil.rmtree(root, ignore_errors=True)
