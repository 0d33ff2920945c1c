"""One parser of addresses to listen on (recorder/listen.py), for every server we start.

``serve`` and ``proxy`` each had one (``cmd_serve.parse_listen``, ``proxy.check_listen``), next to
the command line's own check (``options.listen``): the proxy's accepted any digits as a port
(``int('99999')``, ``int('８０')``), kept away from a socket only by the option check running
first. Now the option check, ``serve`` and ``proxy`` read the address with the same function.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from a2a_tape import store
from a2a_tape.cli import app
from a2a_tape.recorder.listen import is_loopback, listen_address, parse_listen

SCRIPT = Path(sys.executable).with_name("a2a-tape")
TAPE = Path(__file__).parents[2] / "recordings" / "sdk-v10-stream.jsonl"

SERVERS = {
    "serve": (["serve"], "the replay server is for this machine; add --allow-remote to mean it"),
    "proxy": (["proxy", "http://127.0.0.1:9"], "the proxy forwards credentials; add --allow-remote to mean it"),
    "ui": (["ui"], "the UI shows the whole log, to this machine only (127.0.0.1, ::1)"),
}


@given(st.text(max_size=40))
def test_any_text_is_an_address_with_a_port_in_range_or_one_reason(text):
    try:
        host, port = parse_listen(text)
    except ValueError as exc:
        assert str(exc).isprintable()  # one line, and nothing of the input reaches a terminal as a control
        return
    assert 0 <= port <= 65535 and host.isprintable()
    assert text.endswith(f":{port}") and text.rpartition(":")[2].isascii()
    try:
        listen_address(text, allow_remote=False, why="why")
    except ValueError as exc:
        assert str(exc).isprintable()


@pytest.mark.parametrize(
    "text, expected",
    [
        ("127.0.0.1:8080", ("127.0.0.1", 8080)),
        (":0", ("127.0.0.1", 0)),
        ("[::1]:9", ("::1", 9)),
        ("localhost:65535", ("localhost", 65535)),
    ],
)
def test_addresses(text, expected):
    assert parse_listen(text) == expected


@pytest.mark.parametrize("text", ["127.0.0.1", "127.0.0.1:99999", "127.0.0.1:-1", "127.0.0.1:８０", "[::1:80", "x:"])
def test_not_addresses(text):
    with pytest.raises(ValueError):
        parse_listen(text)


@pytest.mark.parametrize("host", ["127.0.0.1", "127.1.2.3", "localhost", "::1"])
def test_loopback_hosts(host):
    assert is_loopback(host)
    assert listen_address(f"[{host}]:0" if ":" in host else f"{host}:0", allow_remote=False, why="w") == (host, 0)


@pytest.mark.parametrize("host", ["0.0.0.0", "10.1.2.3", "::", "example.com", "128.0.0.1"])
def test_a_host_off_this_machine_needs_allow_remote(host):
    text = f"[{host}]:80" if ":" in host else f"{host}:80"
    with pytest.raises(ValueError, match=f"refusing to listen on {host}: why"):
        listen_address(text, allow_remote=False, why="why")
    assert listen_address(text, allow_remote=True, why="why") == (host, 80)


@pytest.mark.parametrize("server", SERVERS)
@pytest.mark.parametrize(
    "value, needle",
    [
        ("127.0.0.1:99999", "is not a number from 0 to 65535"),
        ("127.0.0.1:８０", "is not a number from 0 to 65535"),
        ("nonsense", "is not HOST:PORT"),
        ("10.1.2.3:0", "refusing to listen on 10.1.2.3"),
    ],
)
def test_every_server_reads_listen_alike(tmp_path, server, value, needle):
    argv, why = SERVERS[server]
    res = CliRunner().invoke(app, [*argv, "--listen", value, "--db", str(tmp_path / "x.db")])
    assert res.exit_code == 2, res.output
    [line] = res.stderr.strip().splitlines()
    assert needle in line and "Traceback" not in line
    if needle.startswith("refusing"):
        assert why in line
    assert not (tmp_path / "x.db").exists()


RUNNING = {  # every server of ours, as a user starts it: (argv, what it says once it listens)
    "serve": (["serve", "--db", str(TAPE), "--listen", "127.0.0.1:0"], r"a2a-tape serve: http://"),
    "proxy": (["proxy", "http://127.0.0.1:9", "--listen", "127.0.0.1:0", "--db", "DB"], r"a2a-tape proxy: listening"),
    "demo agent": (["demo", "--agent-only", "--listen", "127.0.0.1:0"], r"the demo agent at http://"),
    "ui": (["ui", "--db", "DB", "--listen", "127.0.0.1:0", "--no-open"], r"a2a-tape ui: http://"),
}


@pytest.mark.skipif(not SCRIPT.exists(), reason="needs the installed console script")
@pytest.mark.parametrize("server", RUNNING)
def test_sigterm_ends_every_server_with_exit_0(tmp_path, server):
    """``kill`` (a service manager, a script's cleanup) stops a server as Ctrl-C does, and it exits
    0 after its shutdown (recorder/listen.py ``run``), saying at most one line. Sent as soon as the
    line saying where it listens is read: that line came before the signal was handled so, and
    serve, the proxy and the demo agent ended by it (-15) when it came at once; ``ui`` ran its own
    uvicorn loop and always did."""
    argv, ready = RUNNING[server]
    store.open_store(tmp_path / "log.db").close()  # an empty log (ui reads it, the proxy adds to it)
    argv = [a.replace("DB", str(tmp_path / "log.db")) for a in argv]
    proc = subprocess.Popen(
        [str(SCRIPT), *argv], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path
    )
    assert proc.stdout is not None
    said = [proc.stdout.readline()]  # the line saying where it listens comes first
    while said[-1] and not re.search(ready, said[-1]):
        said.append(proc.stdout.readline())
    assert said[-1], f"{server} ended before listening: {''.join(said)}"
    proc.send_signal(signal.SIGTERM)
    try:
        rest, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:  # pragma: no cover - a server that does not stop is a failure
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, rest
    assert len(rest.strip().splitlines()) <= 1 and "Traceback" not in rest, rest


def test_a_stop_lets_the_answer_under_way_end_then_runs_the_lifespan_shutdown():
    """``serving`` (every in-process server: the demo agent, the tests' agents and proxies) stops without
    uvicorn's fixed pauses (recorder/listen.py ``_shutdown``), and still gracefully: asked to stop while an
    answer is under way, it takes no new connection, the answer ends whole, and the app's lifespan
    shutdown runs after it."""
    import asyncio
    import socket
    import threading
    import time

    import httpx

    from a2a_tape.recorder.listen import serving

    said: list[str] = []
    begun, release = threading.Event(), threading.Event()

    async def app(scope, receive, send):
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                said.append(message["type"])
                await send({"type": message["type"] + ".complete"})
                if message["type"] == "lifespan.shutdown":
                    return
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"half ", "more_body": True})
        begun.set()
        await asyncio.get_running_loop().run_in_executor(None, release.wait, 10)
        await send({"type": "http.response.body", "body": b"and the rest"})
        said.append("answered")

    server = serving(app, lifespan="on")
    url = server.__enter__()
    port = int(url.rsplit(":", 1)[1])
    got: list[bytes] = []
    client = threading.Thread(target=lambda: got.append(httpx.get(url, timeout=10).content))
    client.start()
    assert begun.wait(10)
    stopper = threading.Thread(target=server.__exit__, args=(None, None, None))
    stopper.start()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # polling for the condition: the listening socket is closed
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        except OSError:
            break
        time.sleep(0.005)
    else:
        raise AssertionError("the server still took connections after it was asked to stop")
    release.set()
    client.join(10)
    stopper.join(10)
    assert not stopper.is_alive()
    assert got == [b"half and the rest"]
    assert said == ["lifespan.startup", "answered", "lifespan.shutdown"]


def test_a_port_picked_to_bind_later_is_below_the_kernels_range_and_free_with_its_run() -> None:
    """``unused_port``: the port (and, for a run, the ports after it) can be bound now, and none of
    them is one the kernel hands out by itself (a connection's end or a port-0 server could take it
    before the later bind: the demo's and the oracles' "Address already in use" beside a busy run)."""
    from a2a_tape.recorder.listen import LOWEST_PORT, bind, ephemeral_start, unused_port

    for run in (1, 2, 3):
        port = unused_port("127.0.0.1", run=run)
        assert LOWEST_PORT <= port and port + run - 1 < ephemeral_start(), (port, run)
        socks = [bind("127.0.0.1", p) for p in range(port, port + run)]
        for s in socks:
            s.close()


# A server's stop that lands where Python cannot raise it. A hand-written trigger: the real race (a SIGTERM
# arriving while the main thread runs a weakref callback, as a freed import lock's is, during a server's
# start-up) happened once in a full run and cannot be timed from outside; here the signal is sent from
# inside such a callback, so its SystemExit is printed as "Exception ignored" and lost, every time.
_LOST_STOP = """
import os, signal, sys, weakref
from a2a_tape.recorder import listen

async def app(scope, receive, send):
    pass

class Held:
    pass

def lose_a_stop():
    held = Held()
    def stop(_):
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(100_000):  # the handler runs here, in the callback: its SystemExit is lost
            pass
    ref = weakref.ref(held, stop)
    del held
    print("stop sent", flush=True)

listen.run(app, listen.bind("127.0.0.1", 0), listening=lose_a_stop)
print("ended", flush=True)
"""


def test_a_stop_lost_in_a_weakref_callback_still_ends_the_server_with_exit_0():
    """recorder/listen.py's stop flag: before it, the server went on serving until killed (a docs block's
    ``serve`` was SIGKILLed 30 s after its SIGTERM in a full run)."""
    r = subprocess.run([sys.executable, "-c", _LOST_STOP], capture_output=True, text=True, timeout=30)
    assert "Exception ignored" in r.stderr, r.stderr  # the trigger did lose the SystemExit
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    assert r.stdout.splitlines() == ["stop sent"], r.stdout  # ended as a SystemExit, not by returning
