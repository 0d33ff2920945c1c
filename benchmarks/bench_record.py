"""Recording cost against a bare consumer of the same stream, measured in the same run.

A local agent (ours, uvicorn on 127.0.0.1, in a process of its own) streams N artifact-update events (default 20,000).
Three consumers read the same stream, alternating, several rounds each (medians):

- ``bare``: httpx-sse ``aconnect_sse`` + ``aiter_sse``, doing nothing with the events;
- ``record``: the whole ``a2a-tape record`` path (card, write-ahead group-commit session with
  the CLI's default durability "normal" (WAL, no fsync), projection fold, stall watchdog),
  without a terminal to draw on; ``record-full`` is the same with an fsync per commit (reported,
  not a target: on this kind of disk one fsync alone takes ~4 ms);
- ``transport``: the bare consumer again, through ``RecordingTransport``.

Targets (issue 3): record wall time <= 1.5x bare; time to first event within 5 ms of bare
(measured from the start of the streaming request; the card fetch the recorder makes first is
reported apart). Prints ratios and exits 1 when a target is missed.

    .venv/bin/python benchmarks/bench_record.py [--events 20000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import httpx
from httpx_sse import aconnect_sse

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import store  # noqa: E402
from a2a_tape.recorder.client import send_request  # noqa: E402
from a2a_tape.recorder.demo_agent import AgentHost, Chunk, HostedTask, Status  # noqa: E402
from a2a_tape.recorder.record import RecordOptions, record  # noqa: E402
from a2a_tape.recorder.recording import Session  # noqa: E402
from a2a_tape.recorder.transport import RecordingTransport  # noqa: E402

batches: list[int] = []


def make_agent(n: int):
    async def script(host: AgentHost, task: HostedTask) -> None:
        host.emit(task, Status("working"))
        for i in range(n):
            host.emit(task, Chunk("answer", f"chunk-{i} ", append=i > 0, last_chunk=i == n - 1))
            if i % 200 == 199:
                await asyncio.sleep(0)  # let the stream drain, as a real agent's awaits would
        host.emit(task, Status("completed"))

    return AgentHost(script, name="bench-agent").app()


async def bare(url: str, transport: httpx.AsyncBaseTransport | None = None) -> tuple[float, float, int]:
    req = send_request("1.0", "go", stream=True)
    headers = {"A2A-Version": "1.0", "Content-Type": "application/json"}
    async with httpx.AsyncClient(transport=transport, timeout=None) as http:
        t0 = time.perf_counter()
        first = None
        n = 0
        async with aconnect_sse(http, "POST", url + "/", content=req.body, headers=headers) as es:
            async for _ in es.aiter_sse():
                if first is None:
                    first = time.perf_counter() - t0
                n += 1
        return time.perf_counter() - t0, first or 0.0, n


async def recorded(url: str, db: Path, durability: str = "normal") -> tuple[float, float, float, int]:
    """One ``record`` session; its wall time runs to the store's close (a checkpoint left for
    the close would be recording work too)."""
    st = store.open_store(db, durability=durability)  # type: ignore[arg-type]
    try:
        marks: dict[str, float] = {}

        class TimedSession(Session):
            def begin(self, **kw):  # type: ignore[override]
                if kw.get("rpc_method") == "SendStreamingMessage":
                    marks["send"] = time.perf_counter()
                return super().begin(**kw)

        def changed(_s: Session) -> None:  # where the terminal would be redrawn
            marks.setdefault("first", time.perf_counter())

        session = TimedSession(st, on_change=changed)
        t0 = time.perf_counter()
        res = await record(session, RecordOptions(url=url, text="go", stall_timeout=60))
        st.close()
        wall = time.perf_counter() - t0
        assert res.state == "completed", res
        batches.append(session.commits)
        return wall, marks["first"] - marks["send"], marks["send"] - t0, res.events
    finally:
        st.close()


@contextlib.contextmanager
def agent_process(n: int):
    """The agent in a process of its own (a real local agent does not share our interpreter's GIL)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    proc = subprocess.Popen([sys.executable, __file__, "--serve", str(port), "--events", str(n)])
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise SystemExit("the benchmark agent did not start") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        import uvicorn

        uvicorn.run(make_agent(args.events), host="127.0.0.1", port=args.serve, log_level="warning")
        return 0
    walls: dict[str, list[float]] = {"bare": [], "record": [], "record-full": [], "transport": []}
    firsts: dict[str, list[float]] = {k: [] for k in walls}
    card_fetch: list[float] = []
    with tempfile.TemporaryDirectory() as tmp, agent_process(args.events) as url:
        anyio.run(bare, url)  # warm-up
        for r in range(args.rounds):
            w, f, n = anyio.run(bare, url)
            walls["bare"].append(w)
            firsts["bare"].append(f)
            assert n == args.events + 3, n
            w, f, c, n = anyio.run(recorded, url, Path(tmp) / f"rec{r}.db")
            walls["record"].append(w)
            firsts["record"].append(f)
            card_fetch.append(c)
            assert n == args.events + 3, n
            w, f, c, n = anyio.run(recorded, url, Path(tmp) / f"full{r}.db", "full")
            walls["record-full"].append(w)
            firsts["record-full"].append(f)
            tr = RecordingTransport(Path(tmp) / f"tr{r}.db")
            w, f, n = anyio.run(bare, url, tr)
            tr.store.close()
            walls["transport"].append(w)
            firsts["transport"].append(f)
    med = {k: statistics.median(v) for k, v in walls.items()}
    mfirst = {k: statistics.median(v) for k, v in firsts.items()}
    print(f"{args.events} events, {args.rounds} rounds, medians")
    for k in walls:
        print(f"  {k:10s} wall {med[k] * 1000:8.1f} ms   first event {mfirst[k] * 1000:6.2f} ms")
    print(f"  (record committed in {statistics.median(batches):.0f} transactions per run, median)")
    print(f"  (record also fetched the agent card first: {statistics.median(card_fetch) * 1000:.2f} ms)")
    ratio = med["record"] / med["bare"]
    tratio = med["transport"] / med["bare"]
    dfirst = (mfirst["record"] - mfirst["bare"]) * 1000
    tfirst = (mfirst["transport"] - mfirst["bare"]) * 1000
    ok = ratio <= 1.5 and dfirst <= 5.0
    print(f"record / bare wall:     {ratio:.2f}x  (target <= 1.5x)")
    print(f"record - bare first:    {dfirst:+.2f} ms (target <= 5 ms)")
    print(f"transport / bare wall:  {tratio:.2f}x; first event {tfirst:+.2f} ms")
    fratio = med["record-full"] / med["bare"]
    ffirst = (mfirst["record-full"] - mfirst["bare"]) * 1000
    print(f"--durability full (an fsync per commit; not a target): {fratio:.2f}x wall, first event {ffirst:+.2f} ms")
    print("OK" if ok else "MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
