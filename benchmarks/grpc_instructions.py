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

``--streams N``: the measured messages as N concurrent streams of ``--messages / N`` each (one
channel each, as ``bench_proxy.py``'s 16-stream row; the warming likewise), not one stream.

``--cpu``: no valgrind; the CPU seconds per message of each process of the row from ``/proc`` and
``getrusage``: the relay (proxy or floor) and this process (the client and the synthetic agent, on
two loop threads of it), over the measured messages. With both cores busy (16 streams) the row's
rate is set by their sum per message.

``--profile FILE``: no valgrind; cProfile of the relay's main thread (its event loop) over the
measured messages, written to FILE (``python -m pstats FILE``): call counts per function.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import signal
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


_PROFILED = """
import cProfile, runpy, signal, sys
out, script = sys.argv[1], sys.argv[2]
prof = cProfile.Profile()
signal.signal(signal.SIGUSR1, lambda *_: prof.enable())
def _off(*_):
    prof.disable()
    prof.dump_stats(out)
signal.signal(signal.SIGUSR2, _off)
sys.argv = sys.argv[2:]
if script == "-":
    sys.argv[0] = "a2a-tape"
    from a2a_tape.cli import main
    main()
else:
    runpy.run_path(script, run_name="__main__")
"""
"""The relay under cProfile: SIGUSR1 starts profiling its main thread, SIGUSR2 stops and writes it."""


class Run:
    """How one measured run goes (:func:`measure`)."""

    def __init__(self, messages: int, warm: int, streams: int) -> None:
        self.messages, self.warm, self.streams = messages, warm, streams

    def relayed(self) -> int:
        """Messages relayed in the measured part (grpc_parts.Client opens each stream with a short call)."""
        if self.streams == 1:
            return self.messages + 10
        return self.streams * (self.messages // self.streams + 2)

    def load(self, client: grpc_parts.Client, target: str, n: int) -> None:
        if self.streams == 1:
            client.throughput(target, n)
        else:
            client.concurrent(target, self.streams, max(1, n // self.streams))


def _split(pid: int) -> list[float]:
    """A process's user and system CPU seconds and its voluntary and involuntary context switches, from ``/proc``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    out = [int(fields[11]) / tick, int(fields[12]) / tick, 0.0, 0.0]
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("voluntary_ctxt_switches:"):
            out[2] = float(line.split()[1])
        elif line.startswith("nonvoluntary_ctxt_switches:"):
            out[3] = float(line.split()[1])
    return out


def _self_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _command(how: str, argv: list[str], out: Path, profile: Path | None, *, floor: bool) -> list[str]:
    """The relay's command line: under callgrind, under cProfile, or as it is."""
    if how == "callgrind":
        prefix = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", "--dump-instr=no", "--quiet"]
        return [*prefix, sys.executable, *argv]
    if how == "profile":
        assert profile is not None
        rest = argv if floor else ["-", *argv[2:]]
        return [sys.executable, "-c", _PROFILED, str(profile.resolve()), *rest]
    return [sys.executable, *argv]


def _cpu_of(pid: int, client: grpc_parts.Client, run: Run, target: str) -> tuple[float, float]:
    """The relay's and this process's CPU seconds over the measured messages (the relay's split printed)."""
    relay0, self0, split0 = grpc_parts._cpu(pid), _self_cpu(), _split(pid)
    run.load(client, target, run.messages)
    relay, mine = grpc_parts._cpu(pid) - relay0, _self_cpu() - self0
    split = [b - a for a, b in zip(split0, _split(pid), strict=True)]
    n = run.relayed()
    sys.stdout.write(
        f"  the relay per message: user {split[0] / n * 1e6:.1f} us, system {split[1] / n * 1e6:.1f} us; "
        f"its main thread's context switches {split[2] / n:.2f} voluntary, {split[3] / n:.2f} involuntary\n"
    )
    return relay, mine


def _profile_of(proc: subprocess.Popen[bytes], client: grpc_parts.Client, run: Run, target: str, out: Path) -> None:
    proc.send_signal(signal.SIGUSR1)
    time.sleep(0.5)  # the handler runs at the loop's next turn (a wait for a signal, not a measurement)
    run.load(client, target, run.messages)
    proc.send_signal(signal.SIGUSR2)
    for _ in range(600):
        if out.exists():
            break
        time.sleep(0.1)
    time.sleep(0.5)  # the file written whole


def measure(
    code: Path,
    run: Run,
    durability: str,
    keep: Path | None = None,
    *,
    floor: bool = False,
    how: str = "callgrind",
    profile: Path | None = None,
) -> tuple[float, float]:
    """``how``: ``callgrind`` (instructions, commits), ``cpu`` (the relay's and this process's CPU
    seconds) or ``profile`` (cProfile of the relay's loop to ``profile``; (0, 0))."""
    upstream = grpc_parts.serve_upstream()
    client = grpc_parts.Client()
    with tempfile.TemporaryDirectory(prefix="a2a-tape-cg-") as tmp:
        out = Path(tmp) / "callgrind.out"
        db = str(Path(tmp) / "tape.db")
        if floor:
            port = free_port()
            script = str(ROOT / "benchmarks" / "bench_proxy.py")
            argv = [script, "--grpc-floor-serve", upstream, str(port), db, durability]
            announced = f"127.0.0.1:{port}"
        else:
            argv = ["-c", "from a2a_tape.cli import main; main()", "proxy", "http://127.0.0.1:9", "--listen"]
            argv += ["127.0.0.1:0", "--grpc-listen", "127.0.0.1:0", "--grpc-upstream", upstream, "--db", db]
            argv += ["--durability", durability, "--no-recover"]
            announced = ""
        proc = subprocess.Popen(
            _command(how, argv, out, profile, floor=floor), cwd=code, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
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
                raise SystemExit("the proxy did not start")
            run.load(client, target[0], run.warm)
            if how == "cpu":
                return _cpu_of(proc.pid, client, run, target[0])
            if how == "profile":
                assert profile is not None
                _profile_of(proc, client, run, target[0], profile)
                return 0.0, 0.0
            subprocess.run(["callgrind_control", "-z", str(proc.pid)], check=True, capture_output=True)
            run.load(client, target[0], run.messages)
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
    ap.add_argument("--messages", type=int, default=2010, help="messages measured (over all the streams)")
    ap.add_argument("--warm", type=int, default=210, help="messages of the warming stream(s)")
    ap.add_argument("--streams", type=int, default=1, help="concurrent streams (the messages shared among them)")
    ap.add_argument("--durability", choices=["full", "normal"], default="full")
    ap.add_argument("--keep", type=Path, help="copy the dump here (callgrind_annotate --inclusive=yes reads it)")
    ap.add_argument("--floor", action="store_true", help="the floor (a bare grpc.aio pass-through), not the proxy")
    ap.add_argument("--cpu", action="store_true", help="CPU per message of each process, no valgrind")
    ap.add_argument("--profile", type=Path, help="cProfile of the relay's loop to this file, no valgrind")
    args = ap.parse_args()
    run = Run(args.messages, args.warm, args.streams)
    how = "cpu" if args.cpu else "profile" if args.profile else "callgrind"
    first, second = measure(
        args.code.resolve(), run, args.durability, args.keep, floor=args.floor, how=how, profile=args.profile
    )
    relayed = run.relayed()
    what = "the floor" if args.floor else args.code
    shape = f"{args.streams} streams" if args.streams > 1 else "2 calls"
    if how == "cpu":
        sys.stdout.write(
            f"{what}: CPU per relayed message ({relayed:,} in {shape}, durability {args.durability}): the relay "
            f"{first / relayed * 1e6:.1f} us, the client and the agent {second / relayed * 1e6:.1f} us, "
            f"together {(first + second) / relayed * 1e6:.1f} us\n"
        )
        return
    if how == "profile":
        sys.stdout.write(f"{what}: cProfile of the relay's loop over {relayed:,} messages in {args.profile}\n")
        return
    sys.stdout.write(
        f"{what}: {first:,.0f} instructions for {relayed:,} messages in {shape}, "
        f"{first / relayed / 1000:,.0f} K per relayed message (durability {args.durability}); "
        f"{second:,.0f} commits of the log, {relayed / max(second, 1):.1f} messages per commit\n"
    )


if __name__ == "__main__":
    main()
