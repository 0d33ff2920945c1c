"""Memory a hostile answer can take (issue 36, item 3): the peak resident size of ``a2a-tape
record`` against an agent whose card is 1,436 bytes of ``Content-Encoding: gzip, gzip`` decoding
to ~700 MB (tests/support/bombs.py). Before the bound on every coding layer (wire/codings.py):
~1.4 GiB and ~20 s; with it, the run stops at the bound (16 MiB + 1100 per coded byte, per layer).

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


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for name, card in (("card", False), ("answer", True)):
            with serve_app(make_bomb_app(card=card)) as url:
                mib, secs, line = _child_peak([SCRIPT, "record", url, "hello", "--db", f"{tmp}/{name}.db"])
            print(f"record, gzip-gzip bomb as the {name}: peak {mib:.0f} MiB, {secs:.1f} s  ({line[:100]})")


if __name__ == "__main__":
    main()
