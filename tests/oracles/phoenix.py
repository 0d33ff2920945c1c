"""Arize Phoenix as an OTLP oracle: a trace backend people run, which ingests OTLP/HTTP, keeps the spans in
SQLite and answers a REST query API (``GET /v1/projects/default/spans``).

Why a venv of its own: Phoenix (with its server, SQLAlchemy, GraphQL, pandas...) weighs ~850 MB, none of it
ours; it is installed once per version under the oracles' cache (:mod:`tests.oracles.cache`), about a minute
the first time. Where it cannot be installed, the test skips saying why.

:func:`running_phoenix` starts ``phoenix serve`` on free loopback ports, its working directory (SQLite
database) under the test's tmp dir, with its telemetry, its downloads and its code sandboxes off, and
yields its URL once its API answers.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx

from tests.oracles.cache import cache_dir, install_once, make_venv, plain_env
from tests.support.servers import closed_port

VERSION = "20.26.1"
START_TIMEOUT = 120.0
INGEST_TIMEOUT = 60.0


def ensure_installed() -> Path:
    """The ``phoenix`` script of a venv holding arize-phoenix (installed once; :class:`cache.Unavailable` when
    it cannot be)."""
    home = cache_dir() / "phoenix" / VERSION

    def build(into: Path) -> None:
        make_venv(into / "venv", [f"arize-phoenix=={VERSION}"], into / "install.log", f"arize-phoenix {VERSION}")

    install_once(home, build)
    return home / "venv" / "bin" / "phoenix"


@contextlib.contextmanager
def running_phoenix(script: Path, workdir: Path) -> Iterator[str]:
    port = closed_port()
    url = f"http://127.0.0.1:{port}"
    workdir.mkdir(parents=True, exist_ok=True)
    env = {
        **plain_env(),
        "PHOENIX_WORKING_DIR": str(workdir),
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(closed_port()),
        "PHOENIX_TELEMETRY_ENABLED": "false",
        "PHOENIX_ALLOW_EXTERNAL_RESOURCES": "false",
        "PHOENIX_ALLOWED_SANDBOX_PROVIDERS": "NONE",
    }
    log = workdir / "phoenix.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([str(script), "serve"], env=env, cwd=workdir, stdout=out, stderr=subprocess.STDOUT)
    try:
        _until(lambda: _get(url, "/v1/projects") is not None, START_TIMEOUT, proc, log, "answer")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def spans(
    url: str, expected: int, proc_log: Path | None = None, keep: Callable[[dict[str, Any]], bool] | None = None
) -> list[dict[str, Any]]:
    """The spans Phoenix holds (those ``keep`` keeps), once it has ingested ``expected`` of them (it writes
    them in the background)."""
    got: list[dict[str, Any]] = []

    def read() -> bool:
        nonlocal got
        got = []
        cursor = None
        while True:
            page = _get(url, "/v1/projects/default/spans", {"limit": 1000, **({"cursor": cursor} if cursor else {})})
            if page is None:
                return False
            got.extend(s for s in page["data"] if keep is None or keep(s))
            cursor = page.get("next_cursor")
            if not cursor:
                return len(got) >= expected

    _until(read, INGEST_TIMEOUT, None, proc_log, f"hold {expected} spans (it has {len(got)})")
    return got


def _get(url: str, path: str, params: dict[str, Any] | None = None) -> Any:
    try:
        r = httpx.get(url + path, params=params, timeout=10)
    except httpx.HTTPError:
        return None
    return r.json() if r.status_code == 200 else None


def _until(done: Any, timeout: float, proc: subprocess.Popen[bytes] | None, log: Path | None, what: str) -> None:
    deadline = time.monotonic() + timeout
    delay = 0.05
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:] if log else ""
            raise AssertionError(f"phoenix exited with {proc.returncode}: {tail}")
        if done():
            return
        time.sleep(delay)  # a bounded poll for a process we cannot be told about, not a synchronisation
        delay = min(delay * 2, 1.0)
    raise AssertionError(f"phoenix did not {what} within {timeout:.0f} s (log: {log})")
