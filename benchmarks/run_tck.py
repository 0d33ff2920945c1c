"""The official A2A TCKs, long form: every test three ways, and the table of outcomes.

    .venv/bin/python benchmarks/run_tck.py                       # TCK 410ba92, all categories (~5 min on 2 cores)
    .venv/bin/python benchmarks/run_tck.py --categories mandatory
    .venv/bin/python benchmarks/run_tck.py --differences         # only the tests whose outcome changes
    .venv/bin/python benchmarks/run_tck.py --keep DIR            # keep reports, logs and the recordings in DIR
    .venv/bin/python benchmarks/run_tck.py --tck 1.0             # TCK 1.0, every binding a2a-tape has
    .venv/bin/python benchmarks/run_tck.py --tck 1.0 --transports http_json --parallel 1 --keep DIR
    .venv/bin/python benchmarks/run_tck.py --tck 1.0 --push      # TCK 1.0's push slice (SUT_PUSH=1, -k push)

TCK 1.0's set-ups are those of tests/oracles/test_tck1.py: per transport, its own SUT (tests/support/tck1_sut.py)
directly, through ``a2a-tape proxy``, and ``a2a-tape serve`` over that recording at level ``must``; its
allowlist is tests/oracles/known_tck1_differences.txt.

The three set-ups are those of tests/oracles/test_tck.py (docs/oracles.md): (a) an a2a-sdk 1.3.0 agent directly,
(b) through ``a2a-tape proxy`` (recording), (c) ``a2a-tape serve`` over that recording with
``--record-mode new_episodes``. The TCK comes from ``$A2A_TAPE_TCK_TARBALL`` or ``../shared/oracles/`` and is
installed once into the cache (``$XDG_CACHE_HOME/a2a-tape/tck``). Exit status: 0 when every difference is on
tests/oracles/known_tck_differences.txt and every entry there still differs, 1 otherwise, 2 when the TCK is
not available.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import logging

from tests.oracles import tck, tck1
from tests.oracles.cache import Unavailable, chosen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="the A2A TCK directly, through the proxy and against serve")
    parser.add_argument("--categories", default="all", help=f"comma-separated, or all ({', '.join(tck.ALL)})")
    parser.add_argument("--differences", action="store_true", help="list only the tests whose outcome differs")
    parser.add_argument("--keep", type=Path, help="directory for the reports, logs and databases (kept)")
    parser.add_argument("--tck", choices=("410ba92", "1.0"), default="410ba92", help="which TCK (default 410ba92)")
    parser.add_argument("--transports", default="jsonrpc,http_json", help="TCK 1.0: comma-separated transports")
    parser.add_argument("--parallel", type=int, choices=(1, 2, 4), default=4, help="TCK 1.0: runs at once")
    parser.add_argument(
        "--push", action="store_true", help="TCK 1.0: the push slice (the SUT's push notifications on, push tests)"
    )
    args = parser.parse_args(argv)
    if args.tck == "1.0":
        return main_tck1(args)
    # The agents run in this process; a2a-sdk logs every bad request the TCK sends on purpose.
    for name in ("a2a", "opentelemetry", "asyncio"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    try:
        categories = chosen(args.categories, tck.ALL, "--categories")
        install = tck.ensure_installed()
    except (ValueError, Unavailable) as exc:
        print(f"run_tck: {exc}", file=sys.stderr)
        return 2
    if install.seconds:
        print(f"installed the TCK into {install.python.parents[1]} in {install.seconds:.0f} s", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="a2a-tape-tck-") as tmp:
        workdir = args.keep or Path(tmp)
        started = time.monotonic()
        direct, proxied, replay = tck.run_three_ways(install, categories, workdir)
        took = time.monotonic() - started
        print(tck.table([direct, proxied, replay], only_differences=args.differences))
        known = tck.load_known()
        problems = tck.judge("proxy", direct, proxied, known, categories)
        problems += tck.judge("serve", direct, replay, known, categories)
        print(f"\nthree runs in {took:.0f} s; {len(problems)} problems against {tck.KNOWN_DIFFERENCES.name}")
        for p in problems:
            print("  " + p)
        if args.keep:
            print(f"reports, logs and databases kept in {workdir}")
    return 1 if problems else 0


def main_tck1(args: argparse.Namespace) -> int:
    try:
        transports = chosen(args.transports, tck1.TRANSPORTS, "--transports")
        install = tck1.ensure_installed()
    except (ValueError, Unavailable) as exc:
        print(f"run_tck: {exc}", file=sys.stderr)
        return 2
    if install.seconds:
        print(f"installed TCK 1.0 and its SUT's venv in {install.seconds:.0f} s", file=sys.stderr)
    for t in transports:
        if t not in tck1.WIRED:
            why = tck1.no_binding_yet(t) or "not wired in tests/oracles/tck1.py yet"
            print(f"run_tck: {t} left out: {why}", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="a2a-tape-tck1-") as tmp:
        workdir = args.keep or Path(tmp)
        started = time.monotonic()
        runs = tck1.run_all(install, transports, workdir, args.parallel, push=args.push)
        took = time.monotonic() - started
        allowlist = tck1.PUSH_KNOWN_DIFFERENCES if args.push else tck1.KNOWN_DIFFERENCES
        known = tck1.load_known(allowlist)
        problems = []
        for r in runs.values():
            print(tck1.table(r, only_differences=args.differences), end="\n\n")
            problems += tck1.judge("proxy", r, known) + tck1.judge("serve", r, known)
        print(
            f"{len(runs)} transports in {took:.0f} s ({args.parallel} runs at once); {len(problems)} problems"
            f" against {allowlist.name}"
        )
        for p in problems:
            print("  " + p)
        if args.keep:
            print(f"junit reports, logs and databases kept in {workdir}")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
