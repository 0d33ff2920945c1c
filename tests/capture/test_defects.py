"""One test per defect of issue 12 that the capture core fixes (each fails on the code before it).

``record`` runs as the installed console script in a subprocess for each promise of the process (its one-line
errors, exit 2, nothing secret printed); the runs whose result is checked (what was recorded, what record and
channels answer) and a table's rows after its first run the same command in process (tests/capture/drivers.py
``in_process``). The agent is the scripted one of tests/support/fault_agent.py.
"""

from __future__ import annotations

import json
import os
import re
import selectors
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from a2a_tape import store
from a2a_tape.capture.exchange import OUTCOMES
from tests.capture.drivers import CLI, cli, in_process
from tests.support.servers import closed_port

ROOT = Path(__file__).resolve().parents[2]


def _record(
    base: str, path: str, cwd: Path, *extra: str, timeout: float = 60, installed: bool = True
) -> subprocess.CompletedProcess:
    args = ["record", base + path, "hi", "--db", str(cwd / "tape.db"), *extra]
    return (cli if installed else in_process)(args, cwd, timeout=timeout)


def test_record_url_with_a_query_finds_the_card(raw_agent, workdir):
    """``record URL?api_key=K`` asked for ``/?api_key=K/.well-known/agent-card.json``."""
    base, _ = raw_agent
    r = _record(base, "/plain/?api_key=K-123", workdir, "--json", installed=False)
    assert r.returncode == 0, r.stderr
    st = store.open_store(workdir / "tape.db")
    try:
        card = next(ex for ex in st.exchanges() if ex.rpc_method == "agent-card")
    finally:
        st.close()
    assert card.url.split("?", 1)[0].endswith("/plain/.well-known/agent-card.json"), card.url
    assert "K-123" not in card.url  # and the key is redacted on the row


def test_record_names_a_redirect_instead_of_blaming_the_agent(raw_agent, workdir):
    base, _ = raw_agent
    r = _record(base, "/redirect/", workdir)
    err = r.stderr.decode()
    assert r.returncode == 2, err
    assert "redirect to http://127.0.0.1:9/moved/" in err
    assert "cannot connect" not in err
    assert len(err.strip().splitlines()) == 1


def test_an_item_of_another_task_does_not_lose_the_answer(raw_agent, workdir):
    """``record --json`` said ``final_answer: null`` while ``channels`` had the answer."""
    base, _ = raw_agent
    r = _record(base, "/foreign/", workdir, "--json", installed=False)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert (doc["task_id"], doc["final_answer"]) == ("t-1", "hello")
    ch = in_process(["channels", "t-1", "--json", "--db", str(workdir / "tape.db")], workdir)
    assert ch.returncode == 0, ch.stderr
    assert json.loads(ch.stdout)["final_answer"] == doc["final_answer"]


@pytest.mark.parametrize("mode", ["silent", "silentcard"])
def test_a_silent_agent_does_not_hang_record(raw_agent, workdir, mode):
    """An agent that accepts the connection and never sends a head hung ``record`` for minutes."""
    base, _ = raw_agent
    t0 = time.monotonic()
    r = _record(base, f"/{mode}/", workdir, "--stall-timeout", "2", timeout=40, installed=mode == "silent")
    took = time.monotonic() - t0
    err = r.stderr.decode()
    assert r.returncode == 2, err
    assert took < 20, took
    assert "no response head" in err and len(err.strip().splitlines()) == 1, err


SECRET_URLS = [
    "http://alice:SEKRET-PW@127.0.0.1:{port}/",
    "http://127.0.0.1:{port}/?token=SEKRET-QUERY",
    "http://127.0.0.1:{port}/?api_key=SEKRET-QUERY&x=1",
]


@pytest.mark.parametrize("url", SECRET_URLS)
def test_record_prints_no_secret_of_its_url(workdir, url):
    run = cli if url == SECRET_URLS[0] else in_process  # the table's first row through the installed script
    r = run(["record", url.format(port=closed_port()), "hi", "--db", str(workdir / "tape.db")], workdir)
    assert r.returncode == 2
    printed = r.stdout + r.stderr
    assert b"cannot connect" in printed
    assert b"SEKRET" not in printed, printed


def test_the_proxy_listening_line_prints_no_upstream_password(workdir):
    proc = subprocess.Popen(
        [
            CLI,
            "proxy",
            f"http://user:SEKRET-PASS@127.0.0.1:{closed_port()}",
            "--listen",
            "127.0.0.1:0",
            "--no-recover",
            "--db",
            str(workdir / "tape.db"),
        ],
        cwd=workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={k: v for k, v in os.environ.items() if not k.startswith("A2A_TAPE")},
    )
    try:
        sel = selectors.DefaultSelector()
        sel.register(proc.stderr, selectors.EVENT_READ)  # type: ignore[arg-type]
        assert sel.select(timeout=30), "the proxy printed nothing"
        line = proc.stderr.readline()  # type: ignore[union-attr]
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert b"listening on" in line
    assert b"SEKRET-PASS" not in line, line


def test_probe_prints_no_secret(workdir):
    r = cli(
        [
            "probe",
            f"http://bob:SEKRET-PW@127.0.0.1:{closed_port()}/?key=SEKRET-QUERY",
            "--db",
            str(workdir / "tape.db"),
            "--timeout",
            "2",
        ],
        workdir,
    )
    assert r.returncode == 2
    assert b"SEKRET" not in r.stdout + r.stderr, r.stderr


# -- redaction written once ----------------------------------------------------------------------


def test_a_payload_that_is_not_json_is_redacted_at_byte_level():
    """One invalid UTF-8 byte made the payload skip JSON-path redaction: stored in clear."""
    from a2a_tape.store.redact import MARKER, Redactor

    r = Redactor(json_paths=["result.metadata.token"])
    out, note = r.payload(b'{"result":{"metadata":{"token": "SEKRET"}},"x":"\xff"}')
    assert b"SEKRET" not in out and out.endswith(b'"x":"\xff"}') and note
    whole, note = r.payload(b'{"result":{"metadata":{"token":{"deep":"SEKRET"}}},"x":"\xff"}')
    assert whole == MARKER and note
    same = b'{"result":{"other":1},"x":"\xff"}'
    assert r.payload(same) == (same, None)  # no configured key: the exact bytes


def test_safe_text_redacts_urls_and_credentials():
    from a2a_tape.store.redact import safe_text

    line = safe_text("GET http://a:PW1@h/x?token=T1&ok=1 failed; Authorization: Bearer T2; x-api-key=T3")
    for s in ("PW1", "T1", "T2", "T3"):
        assert s not in line, line
    assert "ok=1" in line


# -- outcomes: one closed vocabulary ---------------------------------------------------------------


def test_every_outcome_written_is_in_the_vocabulary():
    """Every literal outcome the code writes is a word of ``capture.exchange.Outcome``."""
    pattern = re.compile(
        r"""(?:(?<![.\w])outcome(?:\s*:\s*\w+)?\s*=\s*|\["outcome"\]\s*=\s*|\.finish\(\s*(?:[\w.]+,\s*)?|\bcap\.end\(\s*|\b_end\(\s*\w+,\s*)"(\w+)\""""
    )
    found: dict[str, str] = {}
    for folder in ("store", "wire", "capture", "fold", "replay", "inspection", "recorder", "cli"):
        for f in (ROOT / folder).glob("*.py"):
            for m in pattern.finditer(f.read_text()):
                found.setdefault(m.group(1), f.name)
    assert found, "the scan found nothing"
    assert {w: f for w, f in found.items() if w not in OUTCOMES} == {}


# -- the log unwritable ----------------------------------------------------------------------------


def _small_fs(tmp_path: Path) -> Path:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small tmpfs needs root and mount(8)")
    where = tmp_path / "small"
    where.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(where)], capture_output=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.decode().strip()}")
    return where


def test_disk_full_during_record_is_one_line_exit_2(raw_agent, workdir, tmp_path):
    """Disk full during ``record``: exit 70 "internal error: OperationalError" before."""
    base, _ = raw_agent
    small = _small_fs(tmp_path)
    try:
        db = small / "tape.db"
        first = in_process(["record", base + "/plain/", "hi", "--db", str(db), "--json"], workdir)  # preparing
        assert first.returncode == 0, first.stderr
        filler = small / "filler"
        fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
        try:  # fill the filesystem, then give back a few kilobytes: the huge item cannot be written
            while True:
                os.write(fd, b"\0" * 4096)
        except OSError:
            pass
        finally:
            os.close(fd)
        os.truncate(filler, max(0, filler.stat().st_size - 48 * 1024))
        r = cli(["record", base + "/huge/", "hi", "--db", str(db)], workdir)
        err = r.stderr.decode()
        assert r.returncode == 2, err
        assert "Traceback" not in err and "internal error" not in err, err
        assert "full" in err.lower(), err
        assert len(err.strip().splitlines()) == 1, err
        filler.unlink()
        st = store.open_store(db)  # what it had is kept
        try:
            assert st.has_task("t-1")
        finally:
            st.close()
    finally:
        subprocess.run(["umount", "-l", str(small)], capture_output=True)
