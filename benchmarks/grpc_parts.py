"""The gRPC rows of ``bench_proxy.py``: the recording gRPC proxy against calling the agent directly.

- a synthetic gRPC upstream (``SendStreamingMessage``: ``many N`` in the text -> N StreamResponse
  artifact updates, written as fast as the stream takes them), so the proxy's own cost shows;
- the proxy is the real ``a2a-tape proxy --grpc-listen`` in a subprocess, durability full;
- the floor of the first-message figure: a bare gRPC pass-through (grpc.aio, a generic handler on
  raw bytes) making the same two durable commits as the proxy (the key's claim, the first message)
  and nothing else, in a process of its own (``--grpc-floor-serve``).
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PATH = "/lf.a2a.v1.A2AService/SendStreamingMessage"


def _items(n: int, task: str) -> list[bytes]:
    from a2a.types import a2a_pb2

    return [
        a2a_pb2.StreamResponse(
            artifact_update=a2a_pb2.TaskArtifactUpdateEvent(
                task_id=task,
                context_id="ctx",
                artifact=a2a_pb2.Artifact(artifact_id="art-1", parts=[a2a_pb2.Part(text=f"chunk {i} ")]),
                append=True,
            )
        ).SerializeToString()
        for i in range(n)
    ]


def request(text: str, message_id: str) -> bytes:
    from a2a.types import a2a_pb2

    msg = a2a_pb2.Message(message_id=message_id, role=a2a_pb2.ROLE_USER, parts=[a2a_pb2.Part(text=text)])
    return a2a_pb2.SendMessageRequest(message=msg).SerializeToString()


class _Loop:
    """An asyncio loop in a daemon thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()

    def run(self, coro: Any, timeout: float = 600) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=timeout)


_KEEP: list[Any] = []


def serve_upstream() -> str:
    """The synthetic gRPC agent in a thread; its ``HOST:PORT``."""
    import grpc

    counter = iter(range(1 << 30))

    class Handler(grpc.GenericRpcHandler):
        def service(self, details: Any) -> Any:
            async def stream(req: bytes, context: Any) -> Any:
                n = int(re.search(rb"many (\d+)", req).group(1))  # type: ignore[union-attr]
                for item in _items(n, f"bench-{next(counter)}"):
                    yield item

            return grpc.unary_stream_rpc_method_handler(stream)

    loop = _Loop()

    async def start() -> int:
        server = grpc.aio.server()
        server.add_generic_rpc_handlers((Handler(),))
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        _KEEP.append((loop, server))  # a grpc.aio server stops when nothing refers to it
        return port

    return f"127.0.0.1:{loop.run(start())}"


class GrpcProxy:
    """``a2a-tape proxy --grpc-listen`` in a subprocess (its HTTP side in front of ``http_upstream``)."""

    def __init__(self, http_upstream: str, target: str, db: Path, durability: str) -> None:
        import queue

        argv = ["proxy", http_upstream, "--listen", "127.0.0.1:0", "--grpc-listen", "127.0.0.1:0"]
        argv += ["--grpc-upstream", target, "--db", str(db), "--durability", durability, "--no-recover"]
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from a2a_tape.cli import main; main()", *argv],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: [lines.put(x.decode()) for x in self.proc.stderr], daemon=True).start()  # type: ignore[union-attr]
        while True:
            m = re.search(r"gRPC on (127\.0\.0\.1:\d+)", lines.get(timeout=30))
            if m:
                self.target = m.group(1)
                return

    def cpu(self) -> float:
        return _cpu(self.proc.pid)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=15)


def _cpu(pid: int) -> float:
    """A process's user + system CPU seconds, from ``/proc``."""
    import os

    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def floor_serve(upstream: str, port: int, db: str, durability: str) -> None:
    """The bare pass-through (see the module docstring), serving until killed."""
    import grpc

    conn = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={'FULL' if durability == 'full' else 'NORMAL'}")
    conn.execute("CREATE TABLE IF NOT EXISTS rows (body BLOB)")

    def commit(body: bytes) -> None:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO rows VALUES (?)", (body,))
        conn.execute("COMMIT")

    async def main() -> None:
        channel = grpc.aio.insecure_channel(upstream)

        class Handler(grpc.GenericRpcHandler):
            def service(self, details: Any) -> Any:
                async def relay(req: bytes, context: Any) -> Any:
                    commit(req)
                    first = True
                    async for item in channel.unary_stream(details.method)(req):
                        if first:
                            commit(item)
                            first = False
                        yield item

                return grpc.unary_stream_rpc_method_handler(relay)

        server = grpc.aio.server()
        server.add_generic_rpc_handlers((Handler(),))
        server.add_insecure_port(f"127.0.0.1:{port}")
        await server.start()
        print("listening", flush=True)
        await server.wait_for_termination()

    asyncio.run(main())


class Floor:
    def __init__(self, upstream: str, db: Path, durability: str) -> None:
        from benchmarks.local_server import free_port

        port = free_port()
        cmd = [sys.executable, str(ROOT / "benchmarks" / "bench_proxy.py"), "--grpc-floor-serve"]
        self.proc = subprocess.Popen([*cmd, upstream, str(port), str(db), durability], stdout=subprocess.PIPE)
        assert self.proc.stdout is not None and self.proc.stdout.readline().strip() == b"listening"
        self.target = f"127.0.0.1:{port}"

    def cpu(self) -> float:
        """The floor process's CPU seconds (what a grpc.aio relay spends with no recording)."""
        return _cpu(self.proc.pid)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=15)


_ids = iter(range(1 << 30))


async def _stream(channel: Any, n: int) -> tuple[float, float, int]:
    """(seconds to the first message, to the end, messages) of one ``many n`` call."""
    t0 = time.perf_counter()
    first = None
    count = 0
    call = channel.unary_stream(PATH)(request(f"many {n}", f"bench-{next(_ids)}"), metadata=(("a2a-version", "1.0"),))
    async for _ in call:
        if first is None:
            first = time.perf_counter() - t0
        count += 1
    return first or 0.0, time.perf_counter() - t0, count


class Client:
    """grpc.aio channels on a loop thread: one per target (a stream), or one per concurrent stream."""

    def __init__(self) -> None:
        self.loop = _Loop()

    def throughput(self, target: str, n: int) -> float:
        async def run() -> float:
            import grpc

            async with grpc.aio.insecure_channel(target) as channel:
                await _stream(channel, 10)
                _, dt, got = await _stream(channel, n)
                assert got >= n, f"{got} messages of {n}"  # an a2a-sdk agent adds its task and statuses
                return got / dt

        return float(self.loop.run(run()))

    def concurrent(self, target: str, streams: int, n: int) -> float:
        async def run() -> float:
            import grpc

            channels = [grpc.aio.insecure_channel(target) for _ in range(streams)]
            try:
                await asyncio.gather(*(_stream(c, 2) for c in channels))
                t0 = time.perf_counter()
                done = await asyncio.gather(*(_stream(c, n) for c in channels))
                dt = time.perf_counter() - t0
            finally:
                for c in channels:
                    await c.close()
            assert sum(d[2] for d in done) == streams * n
            return streams * n / dt

        return float(self.loop.run(run()))

    def first_messages(self, targets: list[str], rounds: int) -> list[list[float]]:
        """Seconds to the first message of a one-message stream, alternating between ``targets``."""

        async def run() -> list[list[float]]:
            import grpc

            channels = [grpc.aio.insecure_channel(t) for t in targets]
            out: list[list[float]] = [[] for _ in targets]
            try:
                for i in range(rounds + 1):
                    for k, c in enumerate(channels):
                        first, _, _ = await _stream(c, 1)
                        if i:  # round 0 warms the connections
                            out[k].append(first)
            finally:
                for c in channels:
                    await c.close()
            return out

        return list(self.loop.run(run()))


def rows(
    http_upstream: str,
    tmp: str,
    *,
    rounds: int,
    events: int,
    streams: int,
    per_stream: int,
    first_rounds: int,
    durability: str,
) -> dict[str, float]:
    """The gRPC medians: throughput one stream and ``streams``, first message direct/proxy/floor."""
    upstream = serve_upstream()
    client = Client()
    tp: dict[str, list[float]] = {
        k: [] for k in ("direct", "proxy", "floor", "direct_conc", "proxy_conc", "floor_conc")
    }
    first: dict[str, list[float]] = {"direct": [], "proxy": [], "floor": []}
    cpu: list[float] = []
    floor_cpu: list[float] = []
    for rnd in range(rounds):
        proxy = GrpcProxy(http_upstream, upstream, Path(tmp) / f"grpc-{rnd}.db", durability)
        floor = Floor(upstream, Path(tmp) / f"grpc-floor-{rnd}.db", durability)
        try:
            share = first_rounds // rounds + (rnd < first_rounds % rounds)
            d, p, f = client.first_messages([upstream, proxy.target, floor.target], max(1, share))
            first["direct"] += d
            first["proxy"] += p
            first["floor"] += f
            tp["direct"].append(client.throughput(upstream, events))
            c0 = proxy.cpu()
            tp["proxy"].append(client.throughput(proxy.target, events))
            cpu.append((proxy.cpu() - c0) / (events + 10))
            c0 = floor.cpu()
            tp["floor"].append(client.throughput(floor.target, events))
            floor_cpu.append((floor.cpu() - c0) / (events + 10))
            tp["direct_conc"].append(client.concurrent(upstream, streams, per_stream))
            tp["proxy_conc"].append(client.concurrent(proxy.target, streams, per_stream))
            tp["floor_conc"].append(client.concurrent(floor.target, streams, per_stream))
        finally:
            proxy.stop()
            floor.stop()
        print(
            f"gRPC round {rnd + 1}/{rounds}: direct {tp['direct'][-1]:,.0f} msg/s, proxy {tp['proxy'][-1]:,.0f} msg/s",
            file=sys.stderr,
        )
    med = statistics.median
    return {
        **{k: med(v) for k, v in tp.items()},
        "first_direct": med(first["direct"]),
        "first_proxy": med(first["proxy"]),
        "first_floor": med(first["floor"]),
        "first_samples": len(first["proxy"]),
        "cpu": med(cpu),
        "floor_cpu": med(floor_cpu),
    }


def sdk_ratio(tmp: str, events: int, durability: str) -> float:
    """Proxy / direct throughput of a real a2a-sdk 1.3.0 agent over gRPC (its own GrpcHandler)
    streaming ``events`` chunks: the agent's cost beside the proxy's, as a user meets it."""
    import sys as _sys

    _sys.path.insert(0, str(ROOT))
    from tests.support.grpc_agents import running_grpc_agent

    client = Client()
    with running_grpc_agent() as agent:
        proxy = GrpcProxy(agent.url, agent.target, Path(tmp) / "grpc-sdk.db", durability)
        try:
            client.throughput(proxy.target, 10)
            d = [client.throughput(agent.target, events) for _ in range(2)]
            p = [client.throughput(proxy.target, events) for _ in range(2)]
        finally:
            proxy.stop()
    return statistics.median(p) / statistics.median(d)
