"""``serve`` and ``proxy`` say on stderr, one line per request, what they did with it (as mitmdump
and vcrpy's logging do): method, task, hit / miss / fault / forward, status. ``--quiet`` says
nothing per request. A recorded or requested control character never reaches the terminal."""

from __future__ import annotations

import contextlib
import json
import queue
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx

from tests.support.servers import closed_port

SCRIPT = Path(sys.executable).with_name("a2a-tape")
TAPE = Path(__file__).resolve().parents[3] / "recordings" / "sdk-v10-stream.jsonl"
ACTING = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e]")
V1 = {"A2A-Version": "1.0", "content-type": "application/json"}


class Server:
    """A server's process and its stderr, read line by line on a thread (a line never printed
    fails the test after 30 s instead of hanging it)."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.said: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.banner = self.said.get(timeout=30)
        found = re.search(r"http://127\.0\.0\.1:\d+", self.banner)
        assert found, self.banner
        self.url = found.group(0)

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.said.put(line.rstrip("\n"))

    def lines(self, n: int) -> list[str]:
        """The next ``n`` request lines it prints (a request's line is printed as it is answered; the
        proxy's startup recovery says its one line when it ends, which may be after a request's)."""
        out: list[str] = []
        try:
            while len(out) < n:
                line = self.said.get(timeout=30)
                if not line.startswith("a2a-tape proxy: startup recovery:"):
                    out.append(line)
        except queue.Empty:
            raise AssertionError("no line per request on stderr") from None
        return out

    def rest(self) -> str:
        """Everything printed after the server stopped."""
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=30)
        return "\n".join(self.said.get() for _ in range(self.said.qsize()))


@contextlib.contextmanager
def running(*args: str) -> Iterator[Server]:
    argv = [str(SCRIPT), *args, "--listen", "127.0.0.1:0"]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        try:
            yield Server(proc)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)


def send(url: str, text: str, method: str = "SendMessage", **headers: str) -> httpx.Response:
    params = {"message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": text}]}}
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return httpx.post(url + "/", json=body, headers={**V1, **headers}, timeout=30)


def test_serve_says_hit_miss_fault_per_request_and_nothing_acts(tmp_path):
    tape = tmp_path / "tape.jsonl"
    tape.write_bytes(TAPE.read_bytes())
    with running("serve", "--db", str(tape)) as srv:
        task = send(srv.url, "hello").json()["result"]["task"]["id"]
        [hit] = srv.lines(1)
        assert hit.endswith(f"POST / SendMessage task {task} hit 200"), hit
        send(srv.url, "never recorded")
        [miss] = srv.lines(1)
        assert miss.endswith("POST / SendMessage task - miss 200"), miss
        send(srv.url, "hello", **{"X-A2A-Tape-Fault": "error-after=1"})
        [fault] = srv.lines(1)
        assert fault.endswith(f"POST / SendMessage task {task} fault 200"), fault
        hostile = {"jsonrpc": "2.0", "id": 1, "method": "Get\x1b]0;owned\x07Task", "params": {"id": "t\x1b[2J\u202e"}}
        httpx.post(srv.url + "/", content=json.dumps(hostile), headers=V1)
        [refused] = srv.lines(1)
        assert not ACTING.search(refused), refused
        assert refused.endswith("POST / Get\\x1b]0;owned\\x07Task task t\\x1b[2J\\u202e error 200"), refused
        assert all(line.startswith("a2a-tape serve: ") for line in (hit, miss, fault, refused))


def test_serve_quiet_says_nothing_per_request(tmp_path):
    tape = tmp_path / "tape.jsonl"
    tape.write_bytes(TAPE.read_bytes())
    with running("serve", "--db", str(tape), "--quiet") as srv:
        send(srv.url, "hello")
        send(srv.url, "never recorded")
        assert "SendMessage" not in srv.rest()


def test_serve_says_forward_in_a_record_mode(tmp_path, sdk_agent):
    new = str(tmp_path / "new.jsonl")
    with running("serve", "--db", new, "--record-mode", "all", "--upstream", sdk_agent.url) as srv:
        send(srv.url, "hello")
        [line] = srv.lines(1)
        assert line.endswith("POST / SendMessage task - forward 200"), line


def test_proxy_says_forward_and_fault_per_request(tmp_path, sdk_agent):
    with running("proxy", sdk_agent.url, "--db", str(tmp_path / "p.db")) as px:
        task = send(px.url, "hello").json()["result"]["task"]["id"]
        [line] = px.lines(1)
        assert line == f"a2a-tape proxy: POST / SendMessage task {task} forward 200 (ok)", line
        httpx.post(
            px.url + "/",
            json={"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": "no\x1b[2J"}},
            headers=V1,
        )
        [error] = px.lines(1)
        assert not ACTING.search(error), error
        assert error.startswith("a2a-tape proxy: POST / GetTask task no\\x1b[2J forward 200"), error
    with running("proxy", f"http://127.0.0.1:{closed_port()}", "--no-recover", "--db", str(tmp_path / "q.db")) as px:
        send(px.url, "hello")
        [down] = px.lines(1)
        assert re.match(
            r"a2a-tape proxy: POST / SendMessage task - fault - \(error: upstream agent unreachable", down
        ), down
    with running("proxy", sdk_agent.url, "--quiet", "--db", str(tmp_path / "r.db")) as px:
        send(px.url, "hello")
        assert "SendMessage" not in px.rest()
