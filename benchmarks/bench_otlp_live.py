"""What the live OTLP export costs per exchange: the work of ``proxy --otlp-endpoint``'s sender
(recorder/otlp_live.py, in the export's own process: recorder/otlp_process.py) measured alone, to profile it (issue 34, "Costs").

``bench_proxy.py --only otlp`` measures the whole proxy with and without the export, on a loaded machine
where wall time is noise; this isolates the sender, so that a profile and an instruction count say where
its CPU goes. A log of N short exchanges as the proxy records them (``bench_cli``'s tape: one exchange
of E events a task, the v1.0 shape a2a-sdk streams; role ``proxy``, one observer, 16 ms apart), then the
sender's work on them (:meth:`LiveExport.send`: each exchange's span built, its caller looked for, the
batch built as one OTLP request and POSTed by the official OTLP/HTTP exporter's client) in batches of K, as a proxy whose exchanges
end R a second gets them (K about R x the 1 s linger: 60 at the 60/s of bench_proxy's normal-durability
row), to a collector stand-in in a process of its own.

The sender is handed ids, as the export's process is: each exchange is read back from the log and
decoded (docs/performance.md section 33; the ``--read-back`` of sections 22 and 30, now the only path).

    .venv/bin/python benchmarks/bench_otlp_live.py                    # CPU per exchange (process_time)
    .venv/bin/python benchmarks/bench_otlp_live.py --profile 30       # cProfile of the sender's work, top 30
    .venv/bin/python benchmarks/bench_otlp_live.py --callgrind        # instructions per exchange (valgrind)

``--callgrind`` runs this script twice under ``valgrind --tool=callgrind``: once doing everything but the
measured batches (imports, the log, a warm-up batch: ``--phase setup``), once doing them too; the
difference over the measured exchanges is the sender's instructions per exchange, steady on a loaded
machine where wall time is not.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import pstats
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import msgspec

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from bench_cli import tape_lines  # noqa: E402

WARM = 24
"""Exchanges sent first, outside the measure (imports, the exporter's connection)."""
GAP = 0.016
"""Seconds between two exchanges' starts in the generated log (60 a second)."""


def proxy_tape(n: int, events: int, t0: float) -> Iterator[bytes]:
    """``bench_cli``'s tape of n tasks, as one proxy recorded it from ``t0`` on (role, observer, times)."""
    dec, enc = msgspec.json.Decoder(), msgspec.json.Encoder()
    for line in tape_lines(n, events):
        doc = dec.decode(line)
        if doc["type"] == "exchange":
            start = t0 + GAP * (doc["id"] - 1)
            doc.update(started_at=start, ended_at=start + 0.001 * (events + 1), role="proxy")
            doc.update(observer="bench-proxy", source="proxy", host="bench")
        elif doc["type"] == "event":
            doc["received_at"] = t0 + GAP * (doc["exchange_id"] - 1) + 0.001 * doc["seq"]
        yield enc.encode(doc) + b"\n"


@contextlib.contextmanager
def collector() -> Iterator[str]:
    """The collector stand-in of bench_proxy (it takes every POST at once), in a process of its own."""
    code = (
        "import sys, threading; sys.path.insert(0, sys.argv[1]); import bench_proxy as b; "
        "print(b.collector_stand_in(), flush=True); threading.Event().wait()"
    )
    proc = subprocess.Popen([sys.executable, "-c", code, str(HERE)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        yield proc.stdout.readline().strip()
    finally:
        proc.terminate()
        proc.wait(10)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--exchanges", type=int, default=300, help="measured exchanges (after the warm-up)")
    ap.add_argument("--events", type=int, default=10, help="events per exchange")
    ap.add_argument("--batch", type=int, default=60, help="exchanges per batch (K)")
    ap.add_argument("--phase", choices=("setup", "all"), default="all", help=argparse.SUPPRESS)
    ap.add_argument("--profile", type=int, metavar="N", help="print cProfile's top N functions (cumulative)")
    ap.add_argument("--callgrind", action="store_true", help="instructions per exchange, under valgrind")
    args = ap.parse_args(argv)
    if args.callgrind:
        return callgrind(args)

    from a2a_tape.capture.otlp import settings
    from a2a_tape.capture.otlp_send import Collector
    from a2a_tape.recorder.otlp_live import LiveExport
    from a2a_tape.store import open_store
    from a2a_tape.store.tape import import_tape

    total = WARM + args.exchanges
    with tempfile.TemporaryDirectory(dir=HERE) as tmp, collector() as url:
        db = Path(tmp) / "live.db"
        t0 = time.time()
        with open_store(db) as st:
            import_tape(st, proxy_tape(total, args.events, t0))
            ids = [ex.id for ex in st.exchanges() if ex.id is not None]
        assert len(ids) == total, len(ids)
        s = settings("0", str(db))
        parts = (lambda: open_store(db, create=False, readonly=True), Collector(url + "/v1/traces"), s)
        warm = LiveExport(*parts, where=url, since=t0)
        # the measured exchanges to a sender started after the warm-up's ended: as in a proxy, where each row
        # is read once by the sender's open rows (capture/open_exchanges.py) after it began, it reads each
        # measured row once (here at its first batch), a cost the warm-up would otherwise have taken
        live = LiveExport(*parts, where=url, since=t0 + GAP * WARM - GAP / 4)
        with open_store(db, create=False, readonly=True) as log:
            warm.send(log, ids[:WARM])
            if args.phase == "setup":
                return 0
            send = live.send
            prof = cProfile.Profile() if args.profile else None
            c0 = time.process_time()
            if prof is not None:
                prof.enable()
            for i in range(WARM, total, args.batch):
                send(log, ids[i : i + args.batch])
            if prof is not None:
                prof.disable()
            cpu = time.process_time() - c0
        assert (warm.sent, live.sent) == (WARM, args.exchanges) and live.failed == 0, (live.sent, live.failed)
    print(
        f"live OTLP sender: {args.exchanges} exchanges of {args.events} events in batches of {args.batch}: "
        f"{cpu / args.exchanges * 1e3:.3f} ms CPU per exchange"
    )
    if prof is not None:
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(args.profile)
        print(out.getvalue())
    return 0


def callgrind(args: argparse.Namespace) -> int:
    """Both phases under callgrind; the sender's instructions per measured exchange."""
    counts = {}
    for phase in ("setup", "all"):
        argv = [
            "valgrind",
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            sys.executable,
            __file__,
            "--phase",
            phase,
            "--exchanges",
            str(args.exchanges),
            "--events",
            str(args.events),
            "--batch",
            str(args.batch),
        ]
        run = subprocess.run(argv, capture_output=True, text=True, check=True)
        found = re.search(r"Collected : (\d+)", run.stderr)
        assert found, run.stderr[-2000:]
        counts[phase] = int(found.group(1))
        print(f"{phase}: {counts[phase]:,} instructions", file=sys.stderr)
    per = (counts["all"] - counts["setup"]) / args.exchanges
    print(
        f"live OTLP sender: {args.exchanges} exchanges of {args.events} events in batches of {args.batch}: "
        f"{per / 1e6:.2f} M instructions per exchange (callgrind)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
