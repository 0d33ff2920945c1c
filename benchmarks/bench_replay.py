"""Replay benchmark (issue 5): serving a recording vs reading it straight from the database.

One recorded stream of N events (default 100,000 a2a-sdk-shaped v1.0 artifact updates) is
served with ``instant`` timing to an httpx-sse client that parses every item; the baseline reads
the same events from the database (``SqliteStore.read_from``) in the same run. Each replay round
uses a fresh server, so it pays for reading the events and locating their JSON-RPC ids too.

Two ways of serving are measured:
- ``serve``: ``a2a-tape serve`` in its own process, as users run it (the target: >= 0.3x);
- ``in-process``: the replay app on uvicorn in a thread of the client's process (one GIL for
  server and client: shown for information).

Each round measures both sides back to back; the ratio reported is the median of the rounds'
ratios (noise on a shared machine hits both sides of a round alike), rates are medians too.

    .venv/bin/python benchmarks/bench_replay.py                # 100,000 events, 5 rounds
    .venv/bin/python benchmarks/bench_replay.py --events 20000 --rounds 3
    .venv/bin/python benchmarks/bench_replay.py --json --check # exit 1 when the target misses
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
import uvicorn  # noqa: E402
from httpx_sse import connect_sse  # noqa: E402

from a2a_tape import store  # noqa: E402
from a2a_tape.replay.serve.engine import ReplayEngine  # noqa: E402
from a2a_tape.replay.serve.library import Library  # noqa: E402
from a2a_tape.replay.serve.server import create_app  # noqa: E402
from a2a_tape.store import Exchange, NewEvent  # noqa: E402

TARGET = 0.3
TASK = "bench-task-0000-0000-000000000000"
CTX = "bench-ctx-0000-0000-000000000000"
REQUEST = (
    b'{"jsonrpc":"2.0","id":1,"method":"SendStreamingMessage","params":{"message":'
    b'{"messageId":"m-1","role":"ROLE_USER","parts":[{"text":"bench"}]}}}'
)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def build(path: Path, n: int) -> None:
    st = store.open_store(path, durability="normal")
    ex = st.begin_exchange(
        Exchange(
            url="http://bench/",
            rpc_method="SendStreamingMessage",
            dialect="1.0",
            streaming=True,
            request_body=REQUEST,
            task_id=TASK,
        )
    )
    batch: list[NewEvent] = []
    for i in range(n):
        payload = (
            b'{"result": {"artifactUpdate": {"taskId": "'
            + TASK.encode()
            + b'", "contextId": "'
            + CTX.encode()
            + b'", "artifact": {"artifactId": "art-1", "name": "out", "parts": [{"text": "chunk-'
            + str(i).encode()
            + b' "}]}, "append": true}}, "id": 1, "jsonrpc": "2.0"}'
        )
        batch.append(NewEvent(payload=payload, task_id=TASK, exchange_id=ex, mono=i * 1e-4, received_at=1.0 + i * 1e-4))
        if len(batch) == 5000:
            st.append_batch(batch)
            batch.clear()
    if batch:
        st.append_batch(batch)
    st.close()


def read_db(path: Path) -> tuple[int, float]:
    st = store.open_store(path, create=False)
    t0 = time.perf_counter()
    n = 0
    for _ev in st.read_from(0):
        n += 1
    took = time.perf_counter() - t0
    st.close()
    return n, took


class Server:
    def __init__(self, app) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/"
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.sock.close()


def consume(url: str) -> tuple[int, float]:
    with httpx.Client(timeout=60) as c:
        t0 = time.perf_counter()
        n = 0
        with connect_sse(
            c,
            "POST",
            url,
            content=REQUEST.replace(b'"id":1', b'"id":2'),
            headers={"A2A-Version": "1.0", "content-type": "application/json"},
        ) as es:
            for sse in es.iter_sse():
                if sse.data:
                    n += 1
        return n, time.perf_counter() - t0


def replay_serve(path: Path) -> tuple[int, float]:
    """``a2a-tape serve`` in a child process; timed from the request to the last item."""
    exe = Path(sys.executable).parent / "a2a-tape"
    proc = subprocess.Popen(
        [str(exe), "serve", "--db", str(path), "--listen", "127.0.0.1:0"],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
    )
    try:
        line = proc.stderr.readline().decode()  # printed once the socket is bound
        if not line.startswith("a2a-tape serve: http://"):
            raise SystemExit(f"a2a-tape serve did not start: {line}")
        return consume(line.split()[2] + "/")
    finally:
        proc.terminate()
        proc.wait(10)


def replay(path: Path) -> tuple[int, float]:
    lib = Library.open(path)
    server = Server(create_app(ReplayEngine(lib, timing="instant")))
    try:
        n, took = consume(server.url)
    finally:
        server.stop()
        lib.close()
    return n, took


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", action="store_true", help="one JSON document on stdout")
    ap.add_argument("--check", action="store_true", help="exit 1 when the target does not hold")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="a2a-tape-bench-") as tmp:
        db = Path(tmp) / "replay.db"
        log(f"building a recording of {args.events:,} events ...")
        build(db, args.events)
        base, serve, inproc = [], [], []
        for r in range(args.rounds):
            n, took = read_db(db)
            assert n == args.events, n
            base.append(n / took)
            n, took = replay_serve(db)
            assert n == args.events, f"the client got {n} items of {args.events}"
            serve.append(n / took)
            n, took = replay(db)
            assert n == args.events, f"the client got {n} items of {args.events}"
            inproc.append(n / took)
            log(
                f"round {r + 1}: database {base[-1]:,.0f} events/s; a2a-tape serve {serve[-1]:,.0f} events/s "
                f"({serve[-1] / base[-1]:.2f}x); in-process {inproc[-1]:,.0f} events/s ({inproc[-1] / base[-1]:.2f}x)"
            )
    b, s, i = statistics.median(base), statistics.median(serve), statistics.median(inproc)
    ratio = statistics.median(x / y for x, y in zip(serve, base))
    in_ratio = statistics.median(x / y for x, y in zip(inproc, base))
    ok = ratio >= TARGET
    result = {
        "events": args.events,
        "rounds": args.rounds,
        "database_events_per_s": round(b),
        "serve_events_per_s": round(s),
        "ratio": round(ratio, 3),
        "target": TARGET,
        "ok": ok,
        "in_process_events_per_s": round(i),
        "in_process_ratio": round(in_ratio, 3),
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(
            f"a2a-tape serve (instant) to an httpx-sse client: {s:,.0f} events/s vs database read {b:,.0f} events/s: "
            f"{ratio:.2f}x (target >= {TARGET}x) {'OK' if ok else 'MISSED'}"
        )
        print(f"in-process server (one GIL with the client): {i:,.0f} events/s, {in_ratio:.2f}x (for information)")
    return 1 if args.check and not ok else 0


if __name__ == "__main__":
    sys.exit(main())
