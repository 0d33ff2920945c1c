"""Every content-coding layer is bounded (issue 36, item 3): a ~1.4 KB ``gzip, gzip`` answer that
decodes to ~700 MB stops at the decoded bound (:mod:`wire.codings`) in ``record`` (its card, or
its answer) and in the proxy, with one line saying why. The memory figure is in
benchmarks/bench_memory.py, not here. The first ``record`` by the installed script (one line, exit 2), the others
in process (tests/support/in_process.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx

from tests.recorder.proxy.conftest import SettleWatch, running_proxy, send_body
from tests.support.bombs import make_bomb_app
from tests.support.in_process import run_text_in_process
from tests.support.servers import serve_app

SCRIPT = str(Path(sys.executable).parent / "a2a-tape")
BOUND = "decodes past its bound"


def test_record_stops_a_card_that_decodes_past_the_bound(db_path):
    with serve_app(make_bomb_app()) as url:
        r = subprocess.run([SCRIPT, "record", url, "hello", "--db", str(db_path)], capture_output=True, text=True)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert BOUND in r.stderr and len(r.stderr.splitlines()) == 1


def test_record_stops_an_answer_that_decodes_past_the_bound(db_path):
    with serve_app(make_bomb_app(card=True)) as url:
        r = run_text_in_process(["record", url, "hello", "--db", str(db_path), "--json"])  # its result: in process
    assert "Traceback" not in r.stderr
    assert BOUND in r.stdout + r.stderr, (r.stdout, r.stderr)


def test_more_coding_layers_than_the_bound_are_refused_unread(db_path):
    with serve_app(make_bomb_app(coding="identity, gzip, gzip, gzip")) as url:
        r = run_text_in_process(["record", url, "hello", "--db", str(db_path)])  # the one line's shape: above
    assert r.returncode == 2 and "3 content codings on one body: at most 2" in r.stderr, r.stderr


def test_the_proxy_stops_an_answer_that_decodes_past_the_bound(db_path):
    with serve_app(make_bomb_app(card=True)) as url, running_proxy(url, db_path) as proxy:
        watch = SettleWatch(proxy.proxy)
        body, h = send_body("hello", stream=False)
        r = httpx.post(proxy.url + "/", content=body, headers=h, timeout=60)
        watch.wait(1)
        rows = [e for e in proxy.store.exchanges() if e.rpc_method]
    assert r.status_code >= 400 or b"error" in r.content
    assert rows and BOUND in (rows[-1].error or ""), rows[-1].error
