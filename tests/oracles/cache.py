"""Where the oracles install what they need: a cache outside the clone, one folder per pinned input.

The cache is ``$A2A_TAPE_CACHE``, else ``$XDG_CACHE_HOME/a2a-tape``, else ``~/.cache/a2a-tape``. Each install
lives in a folder named after a hash of what it was made from (a tarball, a list of requirements, npm's lock
file), so a new pin installs anew beside the old one. A file lock serialises concurrent first installs; a
marker file written last makes a half-done install count as absent.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
INSTALL_TIMEOUT = 900.0  # seconds for one install step (a venv, a pip install)


class Unavailable(Exception):
    """An oracle cannot be had here (its source is missing, or its install failed); the message says why."""


def find_tarball(env: str, glob: str) -> Path | None:
    """An oracle's tarball: ``$ENV`` when set, else the newest ``GLOB`` in ``<repo>/../shared/oracles/`` (where CI
    lays ``shared/`` beside the clone)."""
    given = os.environ.get(env)
    if given:
        path = Path(given).expanduser()
        return path if path.is_file() else None
    found = sorted((ROOT.parent / "shared" / "oracles").glob(glob))
    return found[-1] if found else None


def no_tarball(env: str, glob: str, what: str) -> Unavailable:
    where = os.environ.get(env) or str(ROOT.parent / "shared" / "oracles" / glob)
    return Unavailable(f"the {what} tarball is not here ({where}); set {env}=PATH to run it")


def chosen(raw: str, known: tuple[str, ...], what: str) -> tuple[str, ...]:
    """The names a comma-separated ``raw`` chooses among ``known`` (``all`` or nothing: every one); a ValueError
    naming ``what`` (the option or variable) for an unknown name."""
    raw = raw.strip()
    if raw in ("", "all"):
        return known
    names = tuple(n.strip() for n in raw.split(",") if n.strip())
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"{what}: unknown {unknown}; known: {', '.join(known)}")
    return names


def cache_dir() -> Path:
    if os.environ.get("A2A_TAPE_CACHE"):
        return Path(os.environ["A2A_TAPE_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "a2a-tape"


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def digest(*parts: bytes | Path) -> str:
    """16 hex digits of SHA-256 over ``parts`` (a path counts as its file's bytes)."""
    h = hashlib.sha256()
    for part in parts:
        if isinstance(part, Path):
            with part.open("rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
        else:
            h.update(part)
    return h.hexdigest()[:16]


def install_once(home: Path, build: Callable[[Path], None]) -> float:
    """``build(home)`` into an empty ``home`` unless a finished install is there; the seconds it took (0.0 when
    the cache had it)."""
    ready = home / "installed"
    with locked(home.with_suffix(".lock")):
        if ready.exists():
            return 0.0
        started = time.monotonic()
        shutil.rmtree(home, ignore_errors=True)
        home.mkdir(parents=True)
        build(home)
        ready.write_text("ok\n")
        return time.monotonic() - started


def unpack(tarball: Path, into: Path) -> None:
    into.mkdir(parents=True, exist_ok=True)
    with tarfile.open(tarball) as tar:
        if hasattr(tarfile, "data_filter"):  # Python >= 3.11.4: no absolute paths, links out, devices
            tar.extractall(into, filter="data")
        else:
            tar.extractall(into)


def make_venv(venv: Path, pip_args: list[str], log: Path, what: str) -> Path:
    """A venv at ``venv`` with ``pip install PIP_ARGS`` done (output in ``log``); its interpreter."""
    python = venv / "bin" / "python"
    steps = [
        [sys.executable, "-m", "venv", str(venv)],
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *pip_args],
    ]
    with log.open("wb") as out:
        for cmd in steps:
            try:
                done = subprocess.run(
                    cmd, stdout=out, stderr=subprocess.STDOUT, timeout=INSTALL_TIMEOUT, env=plain_env()
                )
            except subprocess.TimeoutExpired:
                raise Unavailable(f"installing {what} took more than {INSTALL_TIMEOUT:.0f} s (log: {log})") from None
            if done.returncode != 0:
                tail = log.read_text(errors="replace").strip().splitlines()[-3:]
                raise Unavailable(f"installing {what} failed ({' '.join(cmd[-3:])}): {' | '.join(tail)}")
    return python


def plain_env() -> dict[str, str]:
    """Our environment less what belongs to our own interpreter and pytest run."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PYTHON", "VIRTUAL_ENV", "COV_"))}
    env.pop("A2A_TAPE_DB", None)
    return env
