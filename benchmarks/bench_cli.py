"""CLI benchmarks (issue 14): what a command costs as the log grows, against a baseline in the same run.

Two logs, built once from generated JSONL tapes and cached under ``benchmarks/.cli-cache/``
(gitignored; ``--rebuild-cache`` makes them again):

- small: 100 tasks x 100 events = 10,000 events;
- big: 10,000 tasks x 100 events = 1,000,000 events (one exchange per task).

Each row is a ratio of medians over alternated rounds (subject and baseline take turns, so the
machine's load hits both alike), printed with its target:

    --help                 a2a-tape --help               vs sqlite-utils --help          <= 1.2x
    tasks --limit 5        on the small log              vs sqlite-utils tables          <= 1.5x
    tasks                  on the big log                vs the same on the small log    <= 1.3x
    grep WORD              on the big log                vs the same on the small log    <= 1.5x
    doctor (second run)    on the big log                vs the same on the small log    <= 1.5x
    import                 a2a-tape import, events/s     vs store.append_batch, events/s >= 0.6x
    export html            newest 200 (one page) and -o DIR/ (a page per task): time, largest page <= 20 MB
    diff                   peak RSS of diff big small    vs diff small small             flat (<= 1.3x)

    .venv/bin/python benchmarks/bench_cli.py              # both logs (~10 min the first time, cached after)
    .venv/bin/python benchmarks/bench_cli.py --quick      # 20 + 200 tasks x 20 events: a smoke run
    .venv/bin/python benchmarks/bench_cli.py --json       # one JSON document on stdout

Exit code 0, or 1 with ``--check`` when a target does not hold.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import msgspec

HERE = Path(__file__).resolve().parent
CACHE = HERE / ".cli-cache"
BIN = Path(sys.executable).parent
A2A_TAPE = str(BIN / "a2a-tape")
SQLITE_UTILS = str(BIN / "sqlite-utils")
GENERATOR_VERSION = 1
NEEDLE = "zebrafish"
"""The word ``grep`` looks for: planted in the same number of tasks in both logs, so both
answers show the same matches (a command costs what it shows)."""
NEEDLE_TASKS = 5
WORDS = (
    "the agent streams text in small chunks while the user waits for an answer about files "
    "tests builds logs errors retries tokens budgets tools calls results summaries plans steps"
).split()

_enc = msgspec.json.Encoder()


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# -- the generated tape ---------------------------------------------------------------------------


def tape_lines(tasks: int, per_task: int, *, seed: int = 14) -> Iterator[bytes]:
    """A JSONL tape (docs/tape-format.md) of ``tasks`` tasks of ``per_task`` events each, one
    exchange per task, in the v1.0 shape a2a-sdk 1.3.0 streams: a Task snapshot (submitted, the
    user's question in its history), WORKING, ``per_task - 3`` text chunks of one artifact
    (the first replaces, the others append, the last has ``lastChunk``), COMPLETED. Tasks follow
    one another 2 s apart; events 10 ms apart. The word :data:`NEEDLE` is in one chunk of
    :data:`NEEDLE_TASKS` tasks spread over the log. Deterministic for a seed."""
    rng = random.Random(seed)
    chunks = max(1, per_task - 3)
    every = max(1, tasks // NEEDLE_TASKS)
    yield (
        _enc.encode(
            {"type": "header", "a2a_tape": 1, "exported_at": 0.0, "exchanges": tasks, "events": tasks * (chunks + 3)}
        )
        + b"\n"
    )
    base = 1_796_000_000.0
    position = 0
    for k in range(tasks):
        tid = f"task-{k:06d}-{rng.getrandbits(32):08x}"
        ctx = f"ctx-{k:06d}"
        at = base + 2.0 * k
        question = f"question {k}: " + " ".join(rng.choice(WORDS) for _ in range(6))
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendStreamingMessage",
            "params": {"message": {"role": "user", "parts": [{"kind": "text", "text": question}]}},
        }
        yield (
            _enc.encode(
                {
                    "type": "exchange",
                    "id": k + 1,
                    "started_at": at,
                    "ended_at": at + 0.01 * (chunks + 4),
                    "url": "http://127.0.0.1:8765/",
                    "http_method": "POST",
                    "rpc_method": "SendStreamingMessage",
                    "dialect": "1.0",
                    "streaming": True,
                    "request_headers": {"A2A-Version": "1.0"},
                    "request_body": _enc.encode(body).decode(),
                    "status": 200,
                    "content_type": "text/event-stream",
                    "outcome": "closed",
                    "task_id": tid,
                    "role": "client",
                }
            )
            + b"\n"
        )
        results: list[dict] = [
            {
                "task": {
                    "id": tid,
                    "contextId": ctx,
                    "status": {"state": "TASK_STATE_SUBMITTED"},
                    "history": [
                        {
                            "messageId": f"m-{k}",
                            "contextId": ctx,
                            "taskId": tid,
                            "role": "ROLE_USER",
                            "parts": [{"text": question}],
                        }
                    ],
                }
            },
            {"statusUpdate": {"taskId": tid, "contextId": ctx, "status": {"state": "TASK_STATE_WORKING"}}},
        ]
        for c in range(chunks):
            text = " ".join(rng.choice(WORDS) for _ in range(3)) + " "
            if k % every == 0 and k // every < NEEDLE_TASKS and c == 10 % chunks:
                text = f"a {NEEDLE} swims by "
            update: dict = {
                "taskId": tid,
                "contextId": ctx,
                "artifact": {"artifactId": "art-1", "name": "out", "parts": [{"text": text}]},
            }
            if c:
                update["append"] = True
            if c == chunks - 1:
                update["lastChunk"] = True
            results.append({"artifactUpdate": update})
        results.append({"statusUpdate": {"taskId": tid, "contextId": ctx, "status": {"state": "TASK_STATE_COMPLETED"}}})
        for seq, result in enumerate(results, 1):
            position += 1
            yield (
                _enc.encode(
                    {
                        "type": "event",
                        "position": position,
                        "seq": seq,
                        "task_id": tid,
                        "exchange_id": k + 1,
                        "received_at": at + 0.01 * seq,
                        "mono": 0.01 * seq,
                        "origin": "upstream",
                        "payload": _enc.encode({"result": result, "id": 1, "jsonrpc": "2.0"}).decode(),
                    }
                )
                + b"\n"
            )


def write_tape(path: Path, tasks: int, per_task: int) -> int:
    n = 0
    with path.open("wb") as fh:
        for line in tape_lines(tasks, per_task):
            fh.write(line)
            n += 1
    return n


# -- running commands -----------------------------------------------------------------------------


class Run(msgspec.Struct):
    wall: float
    rss_kb: int
    code: int


def run(argv: list[str], *, stdout=subprocess.DEVNULL, env: dict | None = None) -> Run:
    """Run a command; its wall time and its own peak RSS (``wait4``: that child only)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=stdout, stderr=subprocess.DEVNULL, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    return Run(wall, usage.ru_maxrss, proc.returncode)


def build_log(name: str, tasks: int, per_task: int, *, fresh: bool = False) -> dict:
    """The tape and the log of ``name`` (cached), and what building them cost."""
    CACHE.mkdir(exist_ok=True)
    stem = CACHE / f"{name}-{tasks}x{per_task}-g{GENERATOR_VERSION}"
    tape, db = stem.with_suffix(".jsonl"), stem.with_suffix(".db")
    info: dict = {"tape": str(tape), "db": str(db), "tasks": tasks, "events": tasks * per_task}
    if fresh:
        for p in (tape, db, Path(f"{db}-wal"), Path(f"{db}-shm")):
            p.unlink(missing_ok=True)
    if not tape.exists():
        t0 = time.perf_counter()
        write_tape(tape, tasks, per_task)
        info["generate_s"] = time.perf_counter() - t0
    if not db.exists():
        log(f"building {db.name} ({tasks * per_task:,} events): import, then the first run of each projection")
        tmp = db.with_suffix(".building.db")
        tmp.unlink(missing_ok=True)
        r = run([A2A_TAPE, "import", str(tape), "--db", str(tmp)])
        if r.code:
            raise SystemExit(f"import of {tape} failed ({r.code})")
        info["import_s"] = r.wall
        for what, argv in (
            ("tasks_first_s", ["tasks", "--limit", "1"]),
            ("grep_first_s", ["grep", NEEDLE]),
            ("doctor_first_s", ["doctor"]),
        ):
            info[what] = run([A2A_TAPE, *argv, "--db", str(tmp)]).wall
        tmp.rename(db)
        (db.with_suffix(".build.json")).write_text(json.dumps(info))
    elif db.with_suffix(".build.json").exists():
        info.update(json.loads(db.with_suffix(".build.json").read_text()))
    return info


def alternate(a: list[str], b: list[str], rounds: int) -> tuple[float, float, float]:
    """Median wall of ``a``, of ``b``, and the median of the per-round ratios a/b."""
    ta, tb, ratios = [], [], []
    run(a), run(b)  # warm: the page cache, and any projection catching up after a code change
    for i in range(rounds):
        first, second = (a, b) if i % 2 == 0 else (b, a)
        r1, r2 = run(first).wall, run(second).wall
        wa, wb = (r1, r2) if i % 2 == 0 else (r2, r1)
        ta.append(wa)
        tb.append(wb)
        ratios.append(wa / wb)
    return statistics.median(ta), statistics.median(tb), statistics.median(ratios)


# -- import vs the store's batched append --------------------------------------------------------


def child_append(tape: str, db: str) -> None:
    """In a fresh process: the tape's events, decoded beforehand, appended with
    ``SqliteStore.append_batch`` in batches of 1000, one transaction each, the store assigning
    seq (the "batched append" of bench_store.py, which the issue quotes at 130k+ events/s);
    prints the events/s of the appends alone (no process start, no tape parsing)."""
    from a2a_tape.store import NewEvent, SqliteStore
    from a2a_tape.store.tape_lines import TapeEvent, TapeLine

    dec = msgspec.json.Decoder(TapeLine)
    events = []
    with open(tape, "rb") as fh:
        for line in fh:
            item = dec.decode(line)
            if isinstance(item, TapeEvent):
                events.append(
                    NewEvent(
                        payload=item.payload.encode(),  # type: ignore[union-attr]
                        task_id=item.task_id,
                        received_at=item.received_at,
                        mono=item.mono,
                        origin=item.origin,
                    )
                )
    with SqliteStore(db) as st:
        t0 = time.perf_counter()
        for i in range(0, len(events), 1000):
            st.append_batch(events[i : i + 1000])
        dt = time.perf_counter() - t0
    print(json.dumps({"events": len(events), "seconds": dt, "rate": len(events) / dt}))


def bench_import(tape: Path, events: int, rounds: int, work: Path) -> dict:
    imports, appends, ratios = [], [], []
    for i in range(rounds):
        db_a, db_b = work / f"imp-{i}.db", work / f"app-{i}.db"

        def do_import(db_a: Path = db_a) -> float:
            r = run([A2A_TAPE, "import", str(tape), "--db", str(db_a)])
            if r.code:
                raise SystemExit("import failed")
            return events / r.wall

        def do_append(db_b: Path = db_b) -> float:
            out = subprocess.run(
                [sys.executable, __file__, "--child-append", str(tape), str(db_b)],
                capture_output=True,
                check=True,
            ).stdout
            return json.loads(out)["rate"]

        if i % 2 == 0:
            a, b = do_import(), do_append()
        else:
            b, a = do_append(), do_import()
        imports.append(a)
        appends.append(b)
        ratios.append(a / b)
        for p in work.glob(f"*-{i}.db*"):
            p.unlink()
    return {
        "import_rate": statistics.median(imports),
        "append_rate": statistics.median(appends),
        "ratio": statistics.median(ratios),
    }


# -- the rows -------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="20 and 200 tasks of 20 events (a smoke run)")
    ap.add_argument("--rounds", type=int, default=7, help="alternated rounds per timed row (default 7)")
    ap.add_argument("--only", help="run only the rows whose name starts with this (e.g. import, grep)")
    ap.add_argument("--import-rounds", type=int, default=3)
    ap.add_argument(
        "--import-tasks", type=int, default=0, help="tasks of the import tape (default: the big log's tape itself)"
    )
    ap.add_argument("--rebuild-cache", action="store_true", help="generate and build the logs again")
    ap.add_argument("--json", action="store_true", help="one JSON document on stdout")
    ap.add_argument("--check", action="store_true", help="exit 1 when a target does not hold")
    ap.add_argument("--child-append", nargs=2, metavar=("TAPE", "DB"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child_append:
        child_append(*args.child_append)
        return 0
    per = 20 if args.quick else 100
    small_n, big_n = (20, 200) if args.quick else (100, 10_000)
    rounds = 3 if args.quick else args.rounds
    small = build_log("small", small_n, per, fresh=args.rebuild_cache)
    big = build_log("big", big_n, per, fresh=args.rebuild_cache)
    S, B = small["db"], big["db"]
    rows: list[dict] = []

    def row(name: str, subject: str, baseline: str, a: float, b: float, ratio: float, target: str, ok: bool) -> None:
        rows.append(
            {"row": name, "subject": subject, "baseline": baseline, "a": a, "b": b, "ratio": ratio, "target": target}
            | {"holds": ok}
        )
        log(f"{name:<22} {a:9.3f} vs {b:9.3f}  {ratio:6.2f}x  target {target:<8} {'yes' if ok else 'NO'}")

    def want(name: str) -> bool:
        return not args.only or name.startswith(args.only)

    if want("--help"):
        a, b, r = alternate([A2A_TAPE, "--help"], [SQLITE_UTILS, "--help"], rounds)
        row("--help", "a2a-tape --help (s)", "sqlite-utils --help (s)", a, b, r, "<= 1.2x", r <= 1.2)
    if want("tasks --limit"):
        a, b, r = alternate([A2A_TAPE, "tasks", "--limit", "5", "--db", S], [SQLITE_UTILS, "tables", S], rounds)
        row("tasks --limit 5", "small log (s)", "sqlite-utils tables (s)", a, b, r, "<= 1.2x", r <= 1.2)
    if want("tasks"):
        a, b, r = alternate([A2A_TAPE, "tasks", "--db", B], [A2A_TAPE, "tasks", "--db", S], rounds)
        row("tasks", "big log (s)", "small log (s)", a, b, r, "<= 1.1x", r <= 1.1)
    if want("grep"):
        a, b, r = alternate([A2A_TAPE, "grep", NEEDLE, "--db", B], [A2A_TAPE, "grep", NEEDLE, "--db", S], rounds)
        row(f"grep {NEEDLE}", "big log (s)", "small log (s)", a, b, r, "<= 1.1x", r <= 1.1)
    if want("doctor"):
        a, b, r = alternate([A2A_TAPE, "doctor", "--db", B], [A2A_TAPE, "doctor", "--db", S], rounds)
        row("doctor (second run)", "big log (s)", "small log (s)", a, b, r, "<= 1.1x", r <= 1.1)
    if want("channels"):
        # one task by its id prefix: the first task of either log has the same id (one seed)
        one = ["channels", "task-000000"]
        a, b, r = alternate([A2A_TAPE, *one, "--db", B], [A2A_TAPE, *one, "--db", S], rounds)
        row("channels", "big log, one task (s)", "small log, the same task (s)", a, b, r, "<= 1.1x", r <= 1.1)
    if any(want(k) for k in ("import", "export")):
        with tempfile.TemporaryDirectory(dir=HERE, prefix="bench-cli-") as tmp:
            work = Path(tmp)
            imp_tasks = args.import_tasks or big_n
            tape = Path(big["tape"])
            if imp_tasks != big_n:
                tape = work / "import.jsonl"
                write_tape(tape, imp_tasks, per)
            imp = bench_import(tape, imp_tasks * per, 1 if args.quick else args.import_rounds, work)
            row(
                "import",
                f"a2a-tape import of {imp_tasks * per:,} events (ev/s)",
                "store.append_batch, batches of 1000 (ev/s)",
                imp["import_rate"],
                imp["append_rate"],
                imp["ratio"],
                ">= 0.6x",
                imp["ratio"] >= 0.6,
            )
            # export html of the big log: one page (newest 200 by default), then a page per task
            page = work / "report.html"
            r1 = run([A2A_TAPE, "export", "--all", "--format", "html", "-o", str(page), "--db", B])
            size = page.stat().st_size if page.exists() else 0
            row(
                "export html (page)",
                "big log, newest 200 (s)",
                "size (MB)",
                r1.wall,
                size / 1e6,
                size / 20e6,
                "<= 20 MB",
                0 < size <= 20e6,
            )
            pages = work / "report"
            r2 = run([A2A_TAPE, "export", "--all", "--format", "html", "-o", f"{pages}/", "--limit", "1000", "--db", B])
            files = list(pages.glob("*.html")) if pages.exists() else []
            largest = max((p.stat().st_size for p in files), default=0)
            row(
                "export html (dir)",
                f"big log, 1000 tasks, {len(files)} pages (s)",
                "largest page (MB)",
                r2.wall,
                largest / 1e6,
                largest / 20e6,
                "<= 20 MB",
                0 < largest <= 20e6,
            )
            shutil.rmtree(pages, ignore_errors=True)
    if want("diff"):
        # diff: peak memory of a big diff against a small one (streamed pairs: flat)
        d_big = run([A2A_TAPE, "diff", B, S])
        d_small = run([A2A_TAPE, "diff", S, S])
        ratio = d_big.rss_kb / max(1, d_small.rss_kb)
        row(
            "diff peak RSS",
            f"diff big small ({d_big.wall:.1f} s), MiB",
            "diff small small, MiB",
            d_big.rss_kb / 1024,
            d_small.rss_kb / 1024,
            ratio,
            "<= 1.3x",
            ratio <= 1.3,
        )
    doc = {"small": small, "big": big, "rounds": rounds, "rows": rows}
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        print("| row | subject | baseline | subject value | baseline value | ratio | target | holds |")
        print("|---|---|---|---|---|---|---|---|")
        for x in rows:
            print(
                f"| {x['row']} | {x['subject']} | {x['baseline']} | {x['a']:,.3f} | {x['b']:,.3f} | "
                f"{x['ratio']:.2f}x | {x['target']} | {'yes' if x['holds'] else 'no'} |"
            )
    return 1 if args.check and not all(x["holds"] for x in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
