"""``a2a-tape ui --open`` hands the browser a one-time code at the server's root, never the run's
token nor its path prefix (the cookie's path: known, it would let another local server be sent
the cookie): a browser's command line is readable by every local user (``ps``). The installed
script, a ``$BROWSER`` that reports its command line through a FIFO, and real HTTP."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
from pathlib import Path

import httpx

from tests.replay.inspect.ui.conftest import SCRIPT, _interruptible, stop_ui
from tests.replay.inspect.ui.conftest import Ui as RunningUi


def _fake_browser(tmp_path: Path) -> tuple[Path, Path]:
    fifo = tmp_path / "argv.fifo"
    os.mkfifo(fifo)
    script = tmp_path / "browser"
    script.write_text(
        f"#!{sys.executable}\nimport sys\nwith open({str(fifo)!r}, 'w') as f:\n    f.write(' '.join(sys.argv[1:]))\n"
    )
    script.chmod(0o700)
    return script, fifo


def test_open_gives_the_browser_a_one_time_code_not_the_token(demo_db, tmp_path):
    script, fifo = _fake_browser(tmp_path)
    argv: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: argv.put(fifo.read_text()), daemon=True).start()
    proc = subprocess.Popen(
        [str(SCRIPT), "ui", "--db", str(demo_db), "--open", "--listen", "127.0.0.1:0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_interruptible,
        env={**os.environ, "BROWSER": str(script)},
    )
    assert proc.stdout is not None
    url = proc.stdout.readline().split(": ", 1)[1].strip()
    base, _, token = url.partition("/?token=")
    ui = RunningUi(url, base, token, proc)
    try:
        opened = argv.get(timeout=60)
        assert token and token not in opened, opened
        assert ui.prefix.strip("/") not in opened, opened
        assert opened.startswith(ui.origin + "/?code="), opened
        first = httpx.get(opened, timeout=10)
        again = httpx.get(opened, timeout=10)  # another client, no cookie
        assert first.status_code == 303 and f"a2a_tape_ui_{ui.port}={token}" in first.headers["set-cookie"]
        assert f"Path={ui.prefix}" in first.headers["set-cookie"]
        assert first.headers["location"] == ui.prefix + "/"  # into the prefix
        assert again.status_code == 404  # spent: a code read off the command line later opens nothing
    finally:
        stop_ui(ui)
