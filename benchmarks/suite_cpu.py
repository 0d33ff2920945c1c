"""Where the test suite's CPU goes, by process: which commands, which test modules start them.

The README's test command is CPU-bound on 2 cores (its four workers end within seconds of each other), so
its time is its CPU. This runs it (or the pytest arguments given) once with the kernel's process accounting
on, and joins each ended process's CPU with what it was started as:

- every process that ends during the run is written by the kernel (``acct(2)``: its command name, pid,
  user+system CPU), whatever it is (Chromium, PostgreSQL, node, Python);
- a ``.pth`` file put in this venv's site-packages for the run (removed after) notes for every Python
  process of the venv its pid, its ``argv`` and the ``PYTEST_CURRENT_TEST`` it inherited (the test that
  started it, set up or called).

Prints the CPU by command name, the ``a2a-tape`` processes by subcommand, and by test module (the CLI
processes a module starts, with their count). Process accounting needs root (CI and this project's
machines run as root); elsewhere it says so and stops. Figures: docs/performance.md section 35.

    .venv/bin/python benchmarks/suite_cpu.py                    # the README's test command
    .venv/bin/python benchmarks/suite_cpu.py -- tests/store -n 2
"""

from __future__ import annotations

import argparse
import collections
import ctypes
import json
import os
import struct
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_ACCT_V3 = struct.Struct("<BBHIIIIIIf8H16s")  # struct acct_v3 (linux/acct.h), 64 bytes
_TICKS = 100  # AHZ: acct_v3 counts CPU in 1/100 s

_STARTS_HOOK = """\
import json as _j, os as _o, sys as _s
try:
    with open({path!r}, "a") as _f:
        _f.write(_j.dumps({{"pid": _o.getpid(), "argv": list(getattr(_s, "argv", []))[:4],
                           "test": _o.environ.get("PYTEST_CURRENT_TEST")}}) + "\\n")
except OSError:
    pass
"""


def _comp_t(value: int) -> int:
    """acct's 16-bit float: 13 bits of mantissa, 3 of base-8 exponent."""
    return (value & 0x1FFF) << (3 * (value >> 13))


def _ended(path: Path) -> list[tuple[int, str, float]]:
    """(pid, command name, CPU seconds) of every process the kernel accounted in ``path``."""
    data = path.read_bytes()
    out = []
    for offset in range(0, len(data) - _ACCT_V3.size + 1, _ACCT_V3.size):
        f = _ACCT_V3.unpack_from(data, offset)
        if f[1] != 3:  # ac_version
            continue
        comm = f[18].split(b"\0")[0].decode(errors="replace")
        out.append((f[6], comm, (_comp_t(f[10]) + _comp_t(f[11])) / _TICKS))
    return out


def _acct(path: Path | None) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.acct(str(path).encode() if path else None) != 0:
        err = ctypes.get_errno()
        raise SystemExit(f"suite_cpu: process accounting could not start: {os.strerror(err)} (it needs root)")


def _module(test: str | None) -> str:
    return (test or "").split("::")[0] or "(no test: the session, its fixtures)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--top", type=int, default=25, help="rows per table")
    parser.add_argument("pytest_args", nargs="*", help="after --: pytest's arguments (default: -n auto -q)")
    args = parser.parse_args()
    pytest_args = args.pytest_args or ["-n", "auto", "-q", "-p", "no:cacheprovider"]
    work = Path(tempfile.mkdtemp(prefix="a2a-tape-suite-cpu-"))
    starts, accounting = work / "starts.jsonl", work / "pacct"
    accounting.touch()
    hook = Path(sysconfig.get_paths()["purelib"]) / "zz_a2a_tape_suite_cpu.pth"
    (work / "a2a_tape_suite_cpu_hook.py").write_text(_STARTS_HOOK.format(path=str(starts)))
    hook.write_text(f"import sys; sys.path.append({str(work)!r}); import a2a_tape_suite_cpu_hook\n")
    began = time.monotonic()
    try:
        _acct(accounting)
        try:
            done = subprocess.run([sys.executable, "-m", "pytest", *pytest_args], cwd=ROOT, check=False)
        finally:
            _acct(None)
    finally:
        hook.unlink(missing_ok=True)
    wall = time.monotonic() - began
    started = {}
    for line in starts.read_text().splitlines():
        d = json.loads(line)
        started[d["pid"]] = d
    ended = _ended(accounting)
    total = sum(cpu for _, _, cpu in ended)
    print(f"\npytest exited {done.returncode}; {wall:.1f} s wall; {total:.1f} s CPU in {len(ended)} processes")

    by_comm: collections.Counter[str] = collections.Counter()
    n_comm: collections.Counter[str] = collections.Counter()
    sub_cpu: collections.Counter[str] = collections.Counter()
    sub_n: collections.Counter[str] = collections.Counter()
    mod_cpu: collections.Counter[str] = collections.Counter()
    mod_subs: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for pid, comm, cpu in ended:
        by_comm[comm] += cpu
        n_comm[comm] += 1
        d = started.get(pid)
        argv = d["argv"] if d else []
        if comm == "a2a-tape" or (argv and argv[0].endswith("a2a-tape")):
            sub = (argv[1] if len(argv) > 1 else "(none)") if d else "(another venv's)"
            sub_cpu[sub] += cpu
            sub_n[sub] += 1
            module = _module(d["test"] if d else None)
            mod_cpu[module] += cpu
            mod_subs[module][sub] += 1
    print("\nCPU by command name (what the kernel calls each process):")
    for comm, cpu in by_comm.most_common(args.top):
        print(f"  {cpu:8.1f} s  {n_comm[comm]:5d}  {comm}")
    print(f"\na2a-tape processes by subcommand ({sum(sub_n.values())} processes, {sum(sub_cpu.values()):.1f} s):")
    for sub, cpu in sub_cpu.most_common(args.top):
        print(f"  {cpu:8.1f} s  {sub_n[sub]:5d}  {sub}  (mean {cpu / sub_n[sub]:.2f} s)")
    print("\na2a-tape processes by the test module that started them:")
    for module, cpu in mod_cpu.most_common(args.top):
        subs = ", ".join(f"{s} {n}" for s, n in mod_subs[module].most_common())
        print(f"  {cpu:8.1f} s  {sum(mod_subs[module].values()):5d}  {module}: {subs}")
    sys.exit(done.returncode)


if __name__ == "__main__":
    main()
