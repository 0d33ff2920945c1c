"""``a2a-tape ui`` as a command: bad input is one line and exit 2; it listens on loopback only.

The installed script throughout, but for the listen addresses refused after the first (the same
command in this process, tests/support/in_process.py: the same code refuses them alike)."""

from __future__ import annotations

import json
import re
import signal
import subprocess

import httpx
import pytest

from tests.replay.inspect.ui.conftest import SCRIPT, run, start_ui, stop_ui

REFUSED = [
    ("0.0.0.0:0", "refusing to listen on 0.0.0.0"),
    ("192.168.1.10:8080", "refusing to listen on 192.168.1.10"),
    ("[::]:0", "refusing to listen on ::"),
    ("example.com:80", "refusing to listen on example.com"),
    ("127.0.0.1", "is not HOST:PORT"),
    ("127.0.0.1:99999", "65535"),
]


@pytest.mark.parametrize("listen, says", REFUSED)
def test_a_listen_address_off_this_machine_or_malformed_is_refused(demo_db, listen, says):
    installed = listen == REFUSED[0][0]  # the others in this process
    r = run("ui", "--db", demo_db, "--no-open", "--listen", listen, timeout=30, installed=installed)
    assert r.returncode == 2 and r.stdout == ""
    [line] = r.stderr.strip().splitlines()
    assert says in line and "Traceback" not in r.stderr


def test_a_missing_log_is_one_line(tmp_path):
    r = run("ui", "--db", tmp_path / "nothing.db", "--no-open", timeout=30)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip().splitlines() == [
        f"a2a-tape: error: no database at {tmp_path / 'nothing.db'} (record something first, or pass --db)"
    ]


STOPS = {  # a signal -> (exit status, what it says on stderr): Ctrl-C as every command, kill as every server
    "ctrl-c": (signal.SIGINT, 130, ["a2a-tape: interrupted"]),  # docs/cli.md
    "sigterm": (signal.SIGTERM, 0, []),  # recorder/listen.py: it ended by the signal (-15) before
}


@pytest.mark.parametrize("stop", STOPS)
@pytest.mark.parametrize("listen", ["127.0.0.1:0", "localhost:0", "[::1]:0"])
def test_it_prints_one_line_with_its_address_and_token_and_stops_on_a_signal(demo_db, listen, stop):
    sig, status, says = STOPS[stop]
    ui = start_ui(demo_db, "--listen", listen)
    try:
        assert ui.url.startswith(("http://127.0.0.1:", "http://[::1]:")) and "/?token=" in ui.url
        with httpx.Client(timeout=10) as c:
            assert c.get(ui.url, follow_redirects=True).status_code == 200
            with c.stream("GET", ui.base + "/live/tasks", cookies={f"a2a_tape_ui_{ui.port}": ui.token}) as live:
                assert live.status_code == 200  # an open event stream does not keep it from stopping
                ui.proc.send_signal(sig)
                out, err = ui.proc.communicate(timeout=30)
    finally:
        if ui.proc.returncode is None:
            stop_ui(ui)
    assert ui.proc.returncode == status, err
    assert out == "" and err.strip().splitlines() == says


def test_json_prints_the_address_as_one_document(demo_db):
    proc = subprocess.Popen(
        [str(SCRIPT), "ui", "--db", str(demo_db), "--no-open", "--json"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        doc = json.loads(proc.stdout.readline())
        assert set(doc) == {"url", "host", "port"} and doc["host"] == "127.0.0.1"
        assert re.fullmatch(
            rf"http://127\.0\.0\.1:{doc['port']}/[A-Za-z0-9_-]{{22,}}/\?token=[A-Za-z0-9_-]+", doc["url"]
        )
        with httpx.Client(timeout=10) as c:
            assert c.get(doc["url"], follow_redirects=True).status_code == 200
    finally:
        proc.terminate()
        proc.wait(timeout=30)
