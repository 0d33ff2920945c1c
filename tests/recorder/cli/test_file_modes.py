"""Files we create are owner-only (0600) unless the umask is stricter: a database (and its -wal and
-shm files), an imported log, every export format, an html directory. The installed CLI in a
subprocess started with the usual umask (022) on every path that creates a file; with another usual one
(002) and a strict one (077), the same commands in process under that umask (the kernel applies the umask
at each creation, as it does in the installed script), but ``demo`` (it starts servers): installed."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.in_process import run_in_process, without_our_variables

CLI = str(Path(sys.executable).with_name("a2a-tape"))
TAPE = Path(__file__).resolve().parents[3] / "recordings" / "sdk-v10-stream.jsonl"


INSTALLED_UMASK = 0o022


def _cli(args: list[str], cwd: Path, umask: int, *, installed: bool = False) -> subprocess.CompletedProcess[bytes]:
    """``a2a-tape ARGS`` started with ``umask``: by the installed script with INSTALLED_UMASK (or when
    ``installed``), else in this process with its umask set for the command's run."""
    if installed or umask == INSTALLED_UMASK:
        env = {k: v for k, v in os.environ.items() if not k.startswith("A2A_TAPE")}

        def set_umask() -> None:
            os.umask(umask)

        r = subprocess.run([CLI, *args], cwd=cwd, capture_output=True, timeout=120, env=env, preexec_fn=set_umask)
    else:
        old = os.umask(umask)
        try:
            r = run_in_process(args, cwd, without_our_variables(), timeout=120)
        finally:
            os.umask(old)
    assert r.returncode == 0, r.stderr
    return r


def _modes(paths: list[Path]) -> dict[str, str]:
    return {p.name: oct(stat.S_IMODE(p.stat().st_mode)) for p in paths}


@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077])
def test_every_file_we_create_is_owner_only(tmp_path, umask):
    expected = "0o600"  # a umask can only take bits away: one that takes the owner's leaves no usable log
    db = tmp_path / "log.db"
    _cli(["import", str(TAPE), "--db", str(db)], tmp_path, umask)
    made = [db, *(p for p in tmp_path.glob("log.db-*"))]
    for fmt in ("jsonl", "har", "mermaid", "html"):
        out = tmp_path / f"export.{fmt}"
        _cli(["export", "--all", "--format", fmt, "-o", str(out), "--db", str(db)], tmp_path, umask)
        made.append(out)
    site = tmp_path / "site"
    _cli(["export", "--all", "--format", "html", "-o", f"{site}/", "--db", str(db)], tmp_path, umask)
    made += sorted(site.iterdir())
    demo = tmp_path / "demo.db"
    _cli(["demo", "--db", str(demo)], tmp_path, umask, installed=True)
    made += [demo, *tmp_path.glob("demo.db-*")]
    assert len(made) >= 8
    assert _modes(made) == {p.name: expected for p in made}


def test_a_database_open_by_a_writer_has_owner_only_wal_and_shm(tmp_path):
    from a2a_tape import store

    old = os.umask(0o022)
    try:
        st = store.open_store(tmp_path / "w.db")
        try:
            st.append(store.NewEvent(payload=b"{}", task_id="t", received_at=0.0))
            files = sorted(tmp_path.glob("w.db*"))
            assert [p.name for p in files] == ["w.db", "w.db-shm", "w.db-wal"]
            assert _modes(files) == {p.name: "0o600" for p in files}
        finally:
            st.close()
    finally:
        os.umask(old)
