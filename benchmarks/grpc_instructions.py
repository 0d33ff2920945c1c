"""Instructions the gRPC proxy spends per relayed message (valgrind's callgrind, every thread of it).

A figure that does not move with the machine's load (docs/performance.md sections 13 and 18): the real
``a2a-tape proxy --grpc-listen`` runs under ``valgrind --tool=callgrind`` in front of the synthetic gRPC
agent of :mod:`benchmarks.grpc_parts` (artifact updates as fast as the stream takes them); one stream
of ``--warm`` messages warms the connection and the plans, then the counters are zeroed
(``callgrind_control -z``), one stream of ``--messages`` is relayed, and the counters are dumped
(``callgrind_control -d``): the dump's total over the messages.

    .venv/bin/python benchmarks/grpc_instructions.py [--messages 2010] [--durability full]
    .venv/bin/python benchmarks/grpc_instructions.py --code /tmp/main-tree   # another tree's proxy

``--code DIR`` runs the proxy of another checkout of this repository (its ``a2a_tape`` first on
``sys.path``, this venv's libraries): a before/after pair in one run, on one machine.

``--floor`` measures the floor instead of the proxy: the bare grpc.aio pass-through of
:func:`benchmarks.grpc_parts.floor_serve` (raw bytes, the same two durable commits, nothing else),
what any grpc.aio relay spends per message before it records anything.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import grpc_parts  # noqa: E402 - after the path
from benchmarks.local_server import free_port  # noqa: E402


def _total(dump: Path) -> int:
    """The instructions of a callgrind dump (its ``totals:``/``summary:`` line)."""
    for line in dump.read_text().splitlines():
        if line.startswith(("totals:", "summary:")):
            return int(line.split()[1])
    raise SystemExit(f"no totals in {dump}")


def _commits(dump: Path) -> int:
    """The SQLite commits of a callgrind dump (calls of ``sqlite3BtreeCommitPhaseTwo``, once per
    commit of the log): how the messages fell into batches, which moves the count most."""
    names: dict[str, str] = {}
    total, callee = 0, None
    for line in dump.read_text().splitlines():
        if line.startswith(("fn=", "cfn=")):
            m = re.match(r"c?fn=\((\d+)\)(?: (.*))?", line)
            if m is None:
                continue
            if m.group(2):
                names[m.group(1)] = m.group(2)
            if line.startswith("cfn="):
                callee = names.get(m.group(1))
        elif line.startswith("calls=") and callee == "sqlite3BtreeCommitPhaseTwo":
            total += int(line[6:].split()[0])
    return total


def measure(
    code: Path, messages: int, warm: int, durability: str, keep: Path | None = None, *, floor: bool = False
) -> tuple[int, int]:
    upstream = grpc_parts.serve_upstream()
    client = grpc_parts.Client()
    with tempfile.TemporaryDirectory(prefix="a2a-tape-cg-") as tmp:
        out = Path(tmp) / "callgrind.out"
        db = str(Path(tmp) / "tape.db")
        if floor:
            port = free_port()
            argv = [
                str(ROOT / "benchmarks" / "bench_proxy.py"),
                "--grpc-floor-serve",
                upstream,
                str(port),
                db,
                durability,
            ]
            announced = f"127.0.0.1:{port}"
        else:
            argv = ["-c", "from a2a_tape.cli import main; main()", "proxy", "http://127.0.0.1:9", "--listen"]
            argv += ["127.0.0.1:0", "--grpc-listen", "127.0.0.1:0", "--grpc-upstream", upstream, "--db", db]
            argv += ["--durability", durability, "--no-recover"]
            announced = ""
        proc = subprocess.Popen(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", "--dump-instr=no", "--quiet"]
            + [sys.executable, *argv],
            cwd=code,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        target: list[str] = []
        seen = threading.Event()

        def watch() -> None:
            assert proc.stdout is not None
            for raw in proc.stdout:
                line = raw.decode(errors="replace")
                m = re.search(r"gRPC on (127\.0\.0\.1:\d+)", line)
                if not target and (m or (announced and line.strip() == "listening")):
                    target.append(m.group(1) if m else announced)
                    seen.set()

        threading.Thread(target=watch, daemon=True).start()
        try:
            if not seen.wait(600):
                raise SystemExit("the proxy did not start under valgrind")
            client.throughput(target[0], warm)
            subprocess.run(["callgrind_control", "-z", str(proc.pid)], check=True, capture_output=True)
            client.throughput(target[0], messages)
            subprocess.run(["callgrind_control", "-d", str(proc.pid)], check=True, capture_output=True)
            dumps: list[Path] = []
            for _ in range(600):  # the dump is written when valgrind next runs the proxy's threads
                dumps = sorted(Path(tmp).glob("callgrind.out.*"))
                if dumps:
                    break
                time.sleep(0.1)
            if not dumps:
                raise SystemExit("callgrind wrote no dump")
            if keep is not None:  # for callgrind_annotate: where the instructions go
                shutil.copyfile(dumps[-1], keep)
            return _total(dumps[-1]), _commits(dumps[-1])
        finally:
            proc.terminate()
            proc.wait(timeout=120)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--code", type=Path, default=ROOT, help="the checkout whose proxy runs (default: this one)")
    ap.add_argument("--messages", type=int, default=2010, help="messages of the measured stream")
    ap.add_argument("--warm", type=int, default=210, help="messages of the warming stream")
    ap.add_argument("--durability", choices=["full", "normal"], default="full")
    ap.add_argument("--keep", type=Path, help="copy the dump here (callgrind_annotate --inclusive=yes reads it)")
    ap.add_argument("--floor", action="store_true", help="the floor (a bare grpc.aio pass-through), not the proxy")
    args = ap.parse_args()
    total, commits = measure(
        args.code.resolve(), args.messages, args.warm, args.durability, args.keep, floor=args.floor
    )
    relayed = args.messages + 10  # grpc_parts.Client.throughput opens each stream with a call of 10
    what = "the floor" if args.floor else args.code
    sys.stdout.write(
        f"{what}: {total:,} instructions for {relayed:,} messages in 2 calls, "
        f"{total / relayed / 1000:,.0f} K per relayed message (durability {args.durability}); "
        f"{commits:,} commits of the log, {relayed / max(commits, 1):.1f} messages per commit\n"
    )


if __name__ == "__main__":
    main()
