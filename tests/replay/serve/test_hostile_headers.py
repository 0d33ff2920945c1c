"""A recorded header that cannot be an HTTP header (CR/LF or NUL in its value, a name that is not a
token): a tape holding one is refused at import (exit 2, the line named, nothing imported); a log
holding one (written by hand) is served without it, by serve and by ReplayTransport, never a
traceback nor a split response. Before: the tape imported, and serve dropped every card request
with a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from a2a_tape import store
from a2a_tape.replay.serve.engine import ReplayEngine
from a2a_tape.replay.serve.library import Library
from a2a_tape.replay.serve.server import create_app
from a2a_tape.replay.serve.transport import ReplayTransport
from tests.support.servers import serve_app

CLI = str(Path(sys.executable).with_name("a2a-tape"))
TAPE = Path(__file__).resolve().parents[3] / "recordings" / "sdk-v10-stream.jsonl"
CARD = "/.well-known/agent-card.json"
HOSTILE = {
    "crlf": {"x-note": "fine\r\nSet-Cookie: stolen=1"},
    "lf": {"x-note": "a\nb"},
    "nul": {"x-note": "a\x00b"},
    "name": {"x bad: y": "v"},
    "content type": {"content-type": "application/json\r\nX-Injected: 1"},
}


def _card_line(headers: dict[str, str]) -> str:
    return json.dumps(
        {
            "type": "exchange",
            "id": 99,
            "started_at": 1796004530.0,
            "url": "http://127.0.0.1:8765" + CARD,
            "http_method": "GET",
            "status": 200,
            "content_type": "application/json",
            "response_headers": {"content-type": "application/json", "etag": 'W/"1"', **headers},
            "response_body": '{"name":"hostile","url":"http://127.0.0.1:8765/"}',
            "role": "client",
        }
    )


def _cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("A2A_TAPE")}
    return subprocess.run([CLI, *args], cwd=cwd, capture_output=True, timeout=60, env=env)


@pytest.mark.parametrize("case", HOSTILE)
@pytest.mark.parametrize("command", ["import", "serve"])
def test_a_tape_with_a_header_that_is_not_one_is_refused_naming_the_line(tmp_path, case, command):
    lines = TAPE.read_text().splitlines()
    lines.insert(2, _card_line(HOSTILE[case]))  # line 3 of the tape
    tape = tmp_path / "hostile.jsonl"
    tape.write_text("\n".join(lines) + "\n")
    db = tmp_path / "log.db"
    if command == "import":
        r = _cli(["import", str(tape), "--db", str(db)], tmp_path)
    else:
        r = _cli(["serve", "--db", str(tape), "--listen", "127.0.0.1:0"], tmp_path)
    err = r.stderr.decode()
    assert r.returncode == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert "line 3" in err and "not an HTTP header" in err, err
    if command == "import":
        with store.open_store(db) as st:
            assert st.count_events() == 0 and st.exchanges() == []


def _log_with_card(db: Path, headers: dict[str, str]) -> None:
    with store.open_store(db) as st:
        with TAPE.open("rb") as fh:
            store.tape.import_tape(st, fh)
        st.begin_exchange(
            store.Exchange(
                started_at=1.0,
                url="http://127.0.0.1:8765" + CARD,
                http_method="GET",
                status=200,
                content_type="application/json",
                response_headers={"content-type": "application/json", "x-kept": "yes", **headers},
                response_body=b'{"name":"hostile","url":"http://127.0.0.1:8765/"}',
            )
        )


def _get_card(how: str, library: Library) -> httpx.Response:
    engine = ReplayEngine(library)
    if how == "serve":
        with serve_app(create_app(engine)) as url:
            return httpx.get(url + CARD)
    with httpx.Client(transport=ReplayTransport(engine=engine), base_url="http://replay") as c:
        return c.get(CARD)


@pytest.mark.parametrize("case", HOSTILE)
@pytest.mark.parametrize("how", ["serve", "transport"])
def test_a_log_with_such_a_header_is_served_without_it(tmp_path, case, how):
    db = tmp_path / "log.db"
    _log_with_card(db, HOSTILE[case])
    library = Library.open(db)
    try:
        r = _get_card(how, library)
    finally:
        library.close()
    assert r.status_code == 200 and r.json()["name"] == "hostile"
    assert r.headers["x-kept"] == "yes"
    assert "set-cookie" not in r.headers and "x-note" not in r.headers
    assert not any(k.startswith(b"x bad") for k, _ in r.headers.raw)


@pytest.mark.parametrize("how", ["serve", "transport"])
def test_a_recorded_header_beyond_latin_1_is_served_as_utf_8(tmp_path, how):
    db = tmp_path / "log.db"
    _log_with_card(db, {"x-cup": "tea ☕"})
    library = Library.open(db)
    try:
        r = _get_card(how, library)
    finally:
        library.close()
    assert r.status_code == 200
    assert dict(r.headers.raw)[b"x-cup"] == "tea ☕".encode()
