"""opencode-a2a 1.4.0 as an oracle: the real agent (HTTP+JSON first in its card), in a venv of its own, in front
of the fake OpenCode server of :mod:`tests.oracles.fake_opencode`.

Why a venv of its own: opencode-a2a 1.4.0 pins a2a-sdk 1.2.3, our test extra pins 1.3.0 (the agent and the
client of every other test); the two cannot share an interpreter. It is installed once per version under the
oracles' cache (:mod:`tests.oracles.cache`: a file lock serialising concurrent first installs, a marker
written last). Where it cannot be installed (no registry
reachable), the oracle tests skip saying why.

:func:`running_agent` starts ``opencode-a2a serve`` on a free loopback port with the settings it requires
(static bearer authentication, an in-memory task store, the fake upstream) and yields its URL once its card
answers.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from tests.oracles.cache import cache_dir, install_once, make_venv, plain_env
from tests.support.servers import closed_port

VERSION = "1.4.0"
TOKEN = "oracle-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
START_TIMEOUT = 60.0


def ensure_installed() -> Path:
    """The ``opencode-a2a`` script of a venv holding opencode-a2a (installed once; :class:`cache.Unavailable`
    when it cannot be)."""
    home = cache_dir() / "opencode-a2a" / VERSION

    def build(into: Path) -> None:
        make_venv(into / "venv", [f"opencode-a2a=={VERSION}"], into / "install.log", f"opencode-a2a {VERSION}")

    install_once(home, build)
    return home / "venv" / "bin" / "opencode-a2a"


@contextlib.contextmanager
def running_agent(script: Path, upstream: str, workdir: Path) -> Iterator[str]:
    """``opencode-a2a serve`` in front of ``upstream`` (the fake OpenCode); yields its URL."""
    port = closed_port()
    url = f"http://127.0.0.1:{port}"
    env = {
        **plain_env(),
        "A2A_HOST": "127.0.0.1",
        "A2A_PORT": str(port),
        "A2A_PUBLIC_URL": url,
        "OPENCODE_BASE_URL": upstream,
        "A2A_TASK_STORE_BACKEND": "memory",
        "A2A_RATE_LIMIT_ENABLED": "false",
        "A2A_STATIC_AUTH_CREDENTIALS": f'[{{"scheme": "bearer", "token": "{TOKEN}", "principal": "oracle"}}]',
    }
    workdir.mkdir(parents=True, exist_ok=True)
    log = workdir / "opencode-a2a.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([str(script), "serve"], env=env, cwd=workdir, stdout=out, stderr=subprocess.STDOUT)
    try:
        _wait_for_card(url, proc, log)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def _wait_for_card(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    """Until the agent's card answers (it binds its port only once started; there is nothing to wait on)."""
    deadline = time.monotonic() + START_TIMEOUT
    delay = 0.05
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(
                f"opencode-a2a exited with {proc.returncode}: {log.read_text(errors='replace')[-2000:]}"
            )
        try:
            if httpx.get(url + "/.well-known/agent-card.json", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(delay)  # a bounded poll for a process we cannot be told about, not a synchronisation
        delay = min(delay * 2, 1.0)
    raise AssertionError(f"opencode-a2a did not answer within {START_TIMEOUT:.0f} s: {log}")
