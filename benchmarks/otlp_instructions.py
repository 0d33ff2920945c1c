"""Instructions per short exchange of ``proxy`` with and without ``--otlp-endpoint`` (valgrind's callgrind),
the live export's own process counted apart (docs/performance.md section 33).

The proxy is started as ``bench_proxy.py`` starts it, under ``valgrind --tool=callgrind --trace-children=yes``
(so the export's child, ``python -m a2a_tape.recorder.otlp_process``, is counted in a total of its own), in
front of bench_proxy's synthetic upstream, its collector stand-in as the collector; ``--warm`` streams of 10
events, then ``--exchanges`` more; SIGTERM; each process's ``Collected`` total. Run twice (0 measured
exchanges, then ``--exchanges``): the difference over the exchanges is the cost per exchange, the start-up
and the warm-up subtracted. The export's batches left at the end are sent at the proxy's stop, so they count.

    .venv/bin/python benchmarks/otlp_instructions.py [--exchanges 200] [--code /tmp/main-tree]

``--code DIR`` runs the proxy of another checkout of this repository (started in DIR: its ``a2a_tape``
first on ``sys.path``, this venv's libraries): a before/after pair on one machine.
"""

from __future__ import annotations

import argparse
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import bench_proxy as b


def run(code: Path, live: bool, exchanges: int, warm: int, upstream: str, collector: str) -> list[int]:
    """The ``Collected`` totals of the proxy (first) and of each process it started."""
    with tempfile.TemporaryDirectory() as tmp, b.client(timeout=600) as http:
        extra = ["--otlp-endpoint", collector] if live else []
        argv = ["valgrind", "--tool=callgrind", "--trace-children=yes", f"--callgrind-out-file={tmp}/cg.%p"]
        argv += [sys.executable, "-c", "from a2a_tape.cli import main; main()", "proxy", upstream]
        argv += ["--listen", "127.0.0.1:0", "--db", f"{tmp}/x.db", "--durability", "normal", "--no-recover", *extra]
        proc = subprocess.Popen(argv, cwd=code, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        assert proc.stderr is not None
        err = proc.stderr
        lines: queue.Queue[str] = queue.Queue()
        said: list[str] = []

        def read() -> None:
            for line in err:
                said.append(line)
                lines.put(line)

        threading.Thread(target=read, daemon=True).start()
        while not (found := re.search(r"listening on (http://127\.0\.0\.1:\d+)", lines.get(timeout=600))):
            pass
        for _ in range(warm + exchanges):
            b.stream(http, found.group(1), 10)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=600)
        totals = sorted((int(pid), int(n)) for pid, n in re.findall(r"==(\d+)== Collected : (\d+)", "".join(said)))
        assert totals, "".join(said)[-3000:]
        return [n for _, n in totals]  # the proxy started first: the lowest pid


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--exchanges", type=int, default=200)
    ap.add_argument("--warm", type=int, default=20)
    ap.add_argument("--code", type=Path, default=b.ROOT, help="the checkout whose proxy runs (default: this one)")
    args = ap.parse_args()
    upstream, collector = b.serve_upstream(), b.collector_stand_in()
    for live in (False, True):
        base = run(args.code, live, 0, args.warm, upstream, collector)
        full = run(args.code, live, args.exchanges, args.warm, upstream, collector)
        per = [(f - s) / args.exchanges / 1e6 for s, f in zip(base, full, strict=True)]
        child = f"; the export's process {per[1]:.2f} M" if len(per) > 1 else ""
        print(f"{'with' if live else 'without'} --otlp-endpoint: proxy {per[0]:.2f} M instructions/exchange{child}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
