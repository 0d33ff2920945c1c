"""Memory a hostile answer or client can take (issue 36, item 3).

1. The peak resident size of ``a2a-tape record`` against an agent whose card is 1,436 bytes of
   ``Content-Encoding: gzip, gzip`` decoding to ~700 MB (tests/support/bombs.py). Before the bound on
   every coding layer (wire/codings.py): ~1.4 GiB and ~20 s; with it, the run stops at the bound
   (16 MiB + 1100 per coded byte, per layer).
2. The peak resident size of ``a2a-tape proxy`` while a real a2a-sdk agent streams 96 MiB (96 events
   of 1 MiB) to a client that reads the answer's head and then nothing (tests/support/slow_client.py),
   and to a client that reads everything, for comparison. Before the stream buffer
   (recorder/proxy/relay.py: Window) the unread items piled up: a peak of 251-257 MiB (keyed or not)
   against ~97 MiB with a fast client; with it the proxy holds ``--stream-buffer`` (16 MiB) per
   stream, waits ``--slow-client-timeout``, drops the client and records the rest: ~97-100 MiB, as
   with the fast client. The peak is the proxy process's own (``VmHWM``).

    .venv/bin/python benchmarks/bench_memory.py

Prints one line per case: the peak RSS of the child (MiB) and its wall time. Figures, not checks:
the tests (tests/recorder/test_bounded_codings.py) keep the behaviour.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.bombs import make_bomb_app  # noqa: E402
from tests.support.servers import serve_app  # noqa: E402

SCRIPT = str(Path(sys.executable).parent / "a2a-tape")


def _child_peak(argv: list[str]) -> tuple[float, float, str]:
    """(peak RSS MiB, seconds, last stderr line) of one child run (wait4: its own rusage, KiB on Linux)."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _, _, usage = os.wait4(proc.pid, 0)
    err = proc.stderr.read() if proc.stderr else ""
    return usage.ru_maxrss / 1024, time.perf_counter() - start, (err.strip().splitlines() or [""])[-1]


def _proxy_peak(tmp: str, name: str, *, stalled: bool, extra: list[str]) -> tuple[float, float]:
    """(peak RSS MiB, seconds) of a proxy relaying one 96 MiB stream to a client that stops reading
    (``stalled``) or reads it all; the proxy is stopped (SIGTERM) once the stream's row is final."""
    import httpx

    from a2a_tape import store
    from tests.conftest import running_sdk_agent
    from tests.recorder.proxy.conftest import send_body
    from tests.support.slow_client import stalled_client

    db = f"{tmp}/{name}.db"
    body, headers = send_body("big 96 1048576", message_id=f"m-{name}")
    start = time.perf_counter()
    with running_sdk_agent() as agent:
        argv = [SCRIPT, "proxy", agent.url, "--listen", "127.0.0.1:0", "--db", db, "--no-recover", "--quiet", *extra]
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        assert proc.stderr is not None
        url = proc.stderr.readline().split("listening on ")[1].split()[0]
        if stalled:
            sock, _ = stalled_client(url, body, headers)
        else:
            with httpx.stream("POST", url, content=body, headers=headers, timeout=120) as resp:
                for _ in resp.iter_bytes():
                    pass
        while True:  # the recording ends (the proxy read the agent to the end)
            with store.open_store(db, readonly=True) as st:
                if any(ex.streaming and ex.ended_at is not None for ex in st.exchanges()):
                    break
            time.sleep(0.1)
        peak = _peak_rss(proc.pid)
        if stalled:
            sock.close()
        proc.terminate()
        proc.wait()
    return peak, time.perf_counter() - start


def _peak_rss(pid: int) -> float:
    """The process's own peak resident size (MiB) since its exec (``VmHWM``; the rusage of a child
    this process spawned counts this process's pages from before the exec: the agent's here)."""
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) / 1024


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for name, card in (("card", False), ("answer", True)):
            with serve_app(make_bomb_app(card=card)) as url:
                mib, secs, line = _child_peak([SCRIPT, "record", url, "hello", "--db", f"{tmp}/{name}.db"])
            print(f"record, gzip-gzip bomb as the {name}: peak {mib:.0f} MiB, {secs:.1f} s  ({line[:100]})")
        for name, stalled, extra in (
            ("fast", False, []),
            ("stalled", True, ["--slow-client-timeout", "5"]),
            ("stalled-unkeyed", True, ["--slow-client-timeout", "5", "--idempotency", "off"]),
        ):
            mib, secs = _proxy_peak(tmp, name, stalled=stalled, extra=extra)
            print(f"proxy, 96 x 1 MiB events to a {name} client: peak {mib:.0f} MiB, {secs:.1f} s")


if __name__ == "__main__":
    main()
