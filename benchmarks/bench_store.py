"""Store benchmarks (issue 2): three ratios, each against a baseline measured in the same run.

1. append   store.append_batch (batches of 1000) vs a bare ``executemany`` into the same schema
            (target: >= 0.6x the baseline's events/s)
2. group    GroupCommitWriter with 16 concurrent producers at ``full`` durability vs one commit
            per event (``store.append`` in a loop), same durability (target: >= 3x)
3. rebuild  Projector.rebuild() over N stored events (default 1,000,000) vs a bare-Python reference
            fold (json.loads + dict buffers) over the same rows (target: >= 2x faster), and the
            projector's peak memory at N/4 vs N events (target: does not grow with the log)

Rates are medians of several rounds; rounds of a pair alternate so machine noise hits both
sides alike, and each ratio is the median of the per-round ratios (robust when the load
drifts). Timings on a shared 2-core VM are noisy: read the ratios, not the absolute rates.
Rebuild rounds run in fresh child processes (peak RSS per run, VmHWM, no tracemalloc overhead).

    .venv/bin/python benchmarks/bench_store.py                 # everything, about two minutes
    .venv/bin/python benchmarks/bench_store.py --quick         # smaller sizes, a smoke run
    .venv/bin/python benchmarks/bench_store.py --only rebuild --events 1000000 --rounds 5
    .venv/bin/python benchmarks/bench_store.py --json          # one JSON document on stdout

Exit code 0, or 1 with ``--check`` when a target does not hold.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import anyio  # noqa: E402

from a2a_tape import store  # noqa: E402
from a2a_tape.store import GroupCommitWriter, NewEvent  # noqa: E402

INSERT = (
    "INSERT INTO events (task_id, seq, exchange_id, sse_event, payload, received_at, mono, origin) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# -- a realistic workload -------------------------------------------------------------------
#
# v1.0 streams as a2a-sdk 1.3.0 sends them (see the captures): per task a Task snapshot
# (submitted, with the user's message), a WORKING status update, artifact updates over two
# artifacts (first chunk without "append", then "append": true, the last one "lastChunk": true),
# and a COMPLETED status update. 16 tasks stream at a time, their events interleaved.

_WORDS = (
    "the agent reads the file and finds that the parser drops a trailing chunk when the stream "
    "closes early so it adds a test for the replay of a resubscribe snapshot then runs it again"
).split()


def _text(rng: random.Random) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(rng.randint(4, 14))) + " "


def _task_events(rng: random.Random, n: int, chunks: int) -> list[tuple[str, bytes]]:
    tid = f"{rng.getrandbits(64):016x}-{n:08d}"
    ctx = f"ctx-{rng.getrandbits(48):012x}"
    pre = '{"result": {'
    post = '}, "id": 1, "jsonrpc": "2.0"}'
    evs = [
        pre + f'"task": {{"id": "{tid}", "contextId": "{ctx}", "status": {{"state": "TASK_STATE_SUBMITTED"}}, '
        f'"history": [{{"messageId": "m-{n}", "contextId": "{ctx}", "taskId": "{tid}", "role": "ROLE_USER", '
        f'"parts": [{{"text": "{_text(rng).strip()}"}}]}}]}}' + post,
        pre + f'"statusUpdate": {{"taskId": "{tid}", "contextId": "{ctx}", "status": {{"state": "TASK_STATE_WORKING", '
        f'"timestamp": "2026-11-30T02:08:56.971579Z"}}}}' + post,
    ]
    seen: set[str] = set()
    for i in range(chunks):
        art = "art-1" if rng.random() < 0.7 else "art-2"
        extra = ', "append": true' if art in seen else ""
        if i == chunks - 1:
            extra += ', "lastChunk": true'
        seen.add(art)
        evs.append(
            pre + f'"artifactUpdate": {{"taskId": "{tid}", "contextId": "{ctx}", "artifact": {{"artifactId": "{art}", '
            f'"name": "out", "parts": [{{"text": "{_text(rng)}"}}]}}{extra}}}' + post
        )
    evs.append(
        pre
        + f'"statusUpdate": {{"taskId": "{tid}", "contextId": "{ctx}", "status": {{"state": "TASK_STATE_COMPLETED", '
        f'"timestamp": "2026-11-30T02:08:57.123873Z"}}}}' + post
    )
    return [(tid, e.encode()) for e in evs]


def workload(
    total: int, *, per_task: int = 100, concurrent: int = 16, seed: int = 7
) -> Iterator[tuple[str, int, bytes]]:
    """``total`` events as (task_id, seq, payload), ``concurrent`` tasks interleaved at a time."""
    rng = random.Random(seed)
    made = 0
    next_task = 0
    active: list[tuple[list[tuple[str, bytes]], list[int]]] = []
    while made < total:
        while len(active) < concurrent:
            chunks = max(1, int(rng.gauss(per_task - 3, per_task / 4)))
            active.append((_task_events(rng, next_task, chunks), [0]))
            next_task += 1
        k = rng.randrange(len(active))
        evs, cursor = active[k]
        tid, payload = evs[cursor[0]]
        cursor[0] += 1
        yield tid, cursor[0], payload
        made += 1
        if cursor[0] == len(evs):
            active.pop(k)


def fresh_db(workdir: Path, name: str, durability: store.Durability = "full") -> Path:
    path = workdir / f"{name}.db"
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    store.SqliteStore(path, durability=durability).close()  # the real schema
    return path


def raw_connect(path: Path, synchronous: str = "FULL") -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={synchronous}")
    return conn


def median(xs: list[float]) -> float:
    return statistics.median(xs)


# -- 1. batched append ----------------------------------------------------------------------


def bench_append(workdir: Path, events: int, rounds: int, batch: int = 1000) -> dict:
    rows = [
        (tid, seq, None, None, p, 1796000000.0 + i / 1000, None, "upstream")
        for i, (tid, seq, p) in enumerate(workload(events))
    ]
    news = [NewEvent(payload=r[4], task_id=r[0], received_at=r[5]) for r in rows]
    store_rates, raw_rates = [], []
    for r in range(rounds):
        path = fresh_db(workdir, "append-raw")
        conn = raw_connect(path)
        t0 = time.perf_counter()
        for i in range(0, len(rows), batch):
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(INSERT, rows[i : i + batch])
            conn.execute("COMMIT")
        raw_rates.append(len(rows) / (time.perf_counter() - t0))
        conn.close()

        path = fresh_db(workdir, "append-store")
        with store.SqliteStore(path, durability="full") as st:
            t0 = time.perf_counter()
            for i in range(0, len(news), batch):
                st.append_batch(news[i : i + batch])
            store_rates.append(len(news) / (time.perf_counter() - t0))
            assert st.count_events() == len(news)
        log(
            f"  append round {r + 1}/{rounds}: store {store_rates[-1]:,.0f} ev/s, executemany {raw_rates[-1]:,.0f} ev/s"
        )
    s, b = median(store_rates), median(raw_rates)
    ratio = median([x / y for x, y in zip(store_rates, raw_rates)])  # paired rounds: robust to drifting load
    return {
        "name": "append",
        "what": f"store.append_batch vs bare executemany, {events:,} events in batches of {batch}, durability full",
        "subject_rate": s,
        "baseline_rate": b,
        "ratio": ratio,
        "target": 0.6,
        "holds": ratio >= 0.6,
    }


# -- 2. group commit --------------------------------------------------------------------------


def bench_group(workdir: Path, per_producer: int, rounds: int, producers: int = 16, single: int = 2000) -> dict:
    payloads = [p for _, _, p in workload(max(producers * per_producer, single))]
    group_rates, single_rates, batch_sizes = [], [], []

    async def group_run(st) -> tuple[float, float]:
        async def producer(w: GroupCommitWriter, k: int) -> None:
            tid = f"task-{k:02d}"
            for n in range(per_producer):
                await w.append(NewEvent(payload=payloads[k * per_producer + n], task_id=tid))

        t0 = time.perf_counter()
        async with GroupCommitWriter(st) as w:
            async with anyio.create_task_group() as tg:
                for k in range(producers):
                    tg.start_soon(producer, w, k)
        elapsed = time.perf_counter() - t0
        return producers * per_producer / elapsed, w.events / max(1, w.batches)

    for r in range(rounds):
        path = fresh_db(workdir, "group")
        with store.SqliteStore(path, durability="full") as st:
            rate, per_batch = anyio.run(group_run, st)
            assert st.count_events() == producers * per_producer
        group_rates.append(rate)
        batch_sizes.append(per_batch)

        path = fresh_db(workdir, "single")
        with store.SqliteStore(path, durability="full") as st:
            t0 = time.perf_counter()
            for n in range(single):
                st.append(NewEvent(payload=payloads[n], task_id=f"task-{n % producers:02d}"))
            single_rates.append(single / (time.perf_counter() - t0))
        log(
            f"  group round {r + 1}/{rounds}: group commit {group_rates[-1]:,.0f} ev/s "
            f"({per_batch:.1f} events/commit), one commit per event {single_rates[-1]:,.0f} ev/s"
        )
    g, s = median(group_rates), median(single_rates)
    ratio = median([x / y for x, y in zip(group_rates, single_rates)])
    return {
        "name": "group",
        "what": f"GroupCommitWriter, {producers} producers x {per_producer} events, vs store.append per event; durability full",
        "subject_rate": g,
        "baseline_rate": s,
        "events_per_commit": median(batch_sizes),
        "ratio": ratio,
        "target": 3.0,
        "holds": ratio >= 3.0,
    }


# -- 3. projection rebuild ----------------------------------------------------------------------


def fill_log(path: Path, events: int) -> None:
    """Write ``events`` workload rows straight into the schema (setup, not measured)."""
    conn = raw_connect(path, "OFF")
    chunk: list[tuple] = []
    conn.execute("BEGIN")
    for i, (tid, seq, p) in enumerate(workload(events)):
        chunk.append((tid, seq, None, None, p, 1796000000.0 + i / 1000, None, "upstream"))
        if len(chunk) == 10_000:
            conn.executemany(INSERT, chunk)
            chunk.clear()
    conn.executemany(INSERT, chunk)
    conn.execute("COMMIT")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def reference_fold(path: Path) -> dict[str, dict]:
    """The bare-Python reference: json.loads every payload, fold into plain dicts.

    Per task: state and one text buffer per artifact (append adds, otherwise replace),
    the same rules as the generic profile. Everything stays in memory.
    """
    conn = sqlite3.connect(path)
    tasks: dict[str, dict] = {}
    for task_id, payload in conn.execute("SELECT task_id, payload FROM events ORDER BY position"):
        try:
            obj = json.loads(payload)
        except ValueError:
            continue
        res = obj.get("result") if isinstance(obj, dict) else None
        if not isinstance(res, dict):
            continue
        t = tasks.get(task_id)
        if t is None:
            t = tasks[task_id] = {"state": "unknown", "buffers": {}, "events": 0}
        t["events"] += 1
        if "artifactUpdate" in res:
            u = res["artifactUpdate"]
            art = u.get("artifact") or {}
            text = "".join(p.get("text", "") for p in art.get("parts", ()))
            bufs = t["buffers"]
            aid = art.get("artifactId", "")
            if u.get("append") and aid in bufs:
                bufs[aid].append(text)
            else:
                bufs[aid] = [text]
        elif "statusUpdate" in res:
            t["state"] = res["statusUpdate"].get("status", {}).get("state", "unknown")
        elif "task" in res:
            task = res["task"]
            t["state"] = task.get("status", {}).get("state", "unknown")
            for art in task.get("artifacts", ()):
                t["buffers"][art.get("artifactId", "")] = ["".join(p.get("text", "") for p in art.get("parts", ()))]
    conn.close()
    return {
        tid: {"state": t["state"], "artifacts": {a: "".join(b) for a, b in t["buffers"].items()}}
        for tid, t in tasks.items()
    }


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field):
                return int(line.split()[1])
    return 0


def _rss_kb() -> int:
    return _status_kb("VmRSS:")


def _peak_rss_kb() -> int:
    """This process's peak RSS since exec.

    Not ``ru_maxrss``: Linux carries the parent's high-water mark across fork + exec, so a child
    of a big parent would report the parent's size.
    """
    return _status_kb("VmHWM:") or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _peak_kb() -> int:
    return _peak_rss_kb()  # VmHWM: ru_maxrss would report the parent's size (see above)


def child(kind: str, db: str) -> None:
    """One measured run in this fresh process; prints {"seconds", "peak_kb", "grew_kb", ...}.

    The peak is read right after the measured work, before anything is counted for the report
    (counting the projection's rows must not show up as the rebuild's memory).
    """
    import gc

    path = Path(db)
    if kind == "projector":
        from a2a_tape.fold.projection import Projector

        st = store.SqliteStore(path, durability="normal")
        proj = Projector(st)
        gc.collect()
        before = _rss_kb()
        kids0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        c0, t0 = time.process_time(), time.perf_counter()
        proj.rebuild()  # long logs: one worker process per core besides this one
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu += (kids.ru_utime - kids0.ru_utime) + (kids.ru_stime - kids0.ru_stime)  # the workers' CPU counts too
        worker_peak = kids.ru_maxrss  # KiB: the largest worker (a fresh interpreter, ~20 MiB of it imports)
        peak = _peak_kb()
        tasks = sum(1 for _ in st.projection_rows(proj.name))  # streamed in batches, after the peak
        st.close()
    elif kind == "fold":
        from a2a_tape.fold.projection import fold_events

        st = store.SqliteStore(path, durability="normal")
        gc.collect()
        before = _rss_kb()
        c0, t0 = time.process_time(), time.perf_counter()
        tasks = len(fold_events(st.read_from(0)))
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
        peak = _peak_kb()
        st.close()
    elif kind == "reference":
        gc.collect()
        before = _rss_kb()
        c0, t0 = time.process_time(), time.perf_counter()
        tasks = len(reference_fold(path))
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
        peak = _peak_kb()
    else:
        raise SystemExit(f"unknown child kind {kind}")
    out = {
        "kind": kind,
        "seconds": seconds,
        "cpu_seconds": cpu,
        "peak_kb": peak,
        "grew_kb": max(0, peak - before),
        "tasks": tasks,
    }
    if kind == "projector":
        out["worker_peak_kb"] = worker_peak
    print(json.dumps(out))


def run_child(kind: str, db: Path) -> dict:
    proc = subprocess.run(
        [sys.executable, __file__, "--child", kind, "--db", str(db)], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"child {kind} failed: {proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else proc.returncode}"
        )
    return json.loads(proc.stdout.strip().splitlines()[-1])


def bench_rebuild(workdir: Path, events: int, rounds: int) -> dict:
    try:
        import a2a_tape.fold.projection  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - the projector is another module, maybe not there yet
        return {
            "name": "rebuild",
            "what": "Projector.rebuild vs json.loads reference fold",
            "skipped": f"fold.projection: {exc}",
        }
    small = max(1, events // 4)
    big_db, small_db = workdir / "rebuild-big.db", workdir / "rebuild-small.db"
    for path, n in ((big_db, events), (small_db, small)):
        fresh_db(workdir, path.stem)
        t0 = time.perf_counter()
        fill_log(path, n)
        log(
            f"  filled {path.name} with {n:,} events in {time.perf_counter() - t0:.1f} s ({path.stat().st_size / 1e6:.0f} MB)"
        )
    proj, ref, fold = [], [], []
    for r in range(rounds):
        proj.append(run_child("projector", big_db))
        ref.append(run_child("reference", big_db))
        fold.append(run_child("fold", big_db))
        log(
            f"  rebuild round {r + 1}/{rounds}: Projector.rebuild {proj[-1]['seconds']:.2f} s "
            f"(+{proj[-1]['grew_kb'] / 1024:.0f} MiB), fold_events {fold[-1]['seconds']:.2f} s, "
            f"reference {ref[-1]['seconds']:.2f} s (+{ref[-1]['grew_kb'] / 1024:.0f} MiB)"
        )
    small_proj = [run_child("projector", small_db) for _ in range(max(1, rounds // 2))]
    small_ref = run_child("reference", small_db)
    log(
        f"  at {small:,} events: Projector.rebuild +{median([m['grew_kb'] for m in small_proj]) / 1024:.0f} MiB, reference +{small_ref['grew_kb'] / 1024:.0f} MiB"
    )
    log(
        f"  worker processes' peak RSS: {median([m.get('worker_peak_kb', 0) for m in small_proj]) / 1024:.0f} MiB at {small:,} events, "
        f"{median([m.get('worker_peak_kb', 0) for m in proj]) / 1024:.0f} MiB at {events:,}"
    )
    p_s, r_s, f_s = (median([m["seconds"] for m in xs]) for xs in (proj, ref, fold))
    p_cpu, r_cpu, f_cpu = (median([m["cpu_seconds"] for m in xs]) for xs in (proj, ref, fold))
    ratio = median([r["seconds"] / p["seconds"] for p, r in zip(proj, ref)])
    cpu_ratio = median([r["cpu_seconds"] / p["cpu_seconds"] for p, r in zip(proj, ref)])
    fold_ratio = median([r["seconds"] / f["seconds"] for f, r in zip(fold, ref)])
    mem_big = median([m["grew_kb"] for m in proj])
    mem_small = median([m["grew_kb"] for m in small_proj])
    growth = mem_big / mem_small if mem_small else float("inf")
    return {
        "name": "rebuild",
        "what": f"Projector.rebuild of {events:,} events vs a json.loads + dict reference fold over the same rows",
        "subject_seconds": p_s,
        "baseline_seconds": r_s,
        "fold_events_seconds": f_s,
        "subject_rate": events / p_s,
        "baseline_rate": events / r_s,
        "ratio": ratio,
        "fold_events_ratio": fold_ratio,
        "cpu_seconds": {"projector": p_cpu, "reference": r_cpu, "fold_events": f_cpu},
        "cpu_ratio": cpu_ratio,
        "target": 2.0,
        "tasks": proj[0]["tasks"],
        "memory": {
            "events_small": small,
            "events_big": events,
            "projector_grew_mib_small": mem_small / 1024,
            "projector_grew_mib_big": mem_big / 1024,
            "projector_growth": growth,
            "reference_grew_mib_small": small_ref["grew_kb"] / 1024,
            "reference_grew_mib_big": median([m["grew_kb"] for m in ref]) / 1024,
        },
        "holds": ratio >= 2.0,
        # "does not grow with the log": 4x the events may cost at most 1.5x the memory
        "memory_holds": growth <= 1.5,
    }


# -- main -----------------------------------------------------------------------------------------


def machine() -> dict:
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as fh:
            cpu = next((ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")), cpu)
    except OSError:
        pass
    return {
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "cpu": cpu,
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
    }


def report(results: list[dict]) -> str:
    lines = []
    for r in results:
        if "skipped" in r:
            lines.append(f"{r['name']:8} SKIPPED: {r['skipped']}")
            continue
        verdict = "holds" if r["holds"] else "DOES NOT HOLD"
        if r["name"] == "rebuild":
            m = r["memory"]
            lines.append(
                f"{r['name']:8} {r['ratio']:.2f}x faster than the reference (target >= {r['target']}x): "
                f"Projector.rebuild {r['subject_seconds']:.2f} s ({r['subject_rate']:,.0f} ev/s), "
                f"reference {r['baseline_seconds']:.2f} s; CPU time {r['cpu_ratio']:.2f}x; "
                f"fold_events in memory {r['fold_events_ratio']:.2f}x  [{verdict}]"
            )
            verdict = "holds" if r["memory_holds"] else "DOES NOT HOLD"
            lines.append(
                f"{'':8} memory: projector +{m['projector_grew_mib_small']:.0f} MiB at {m['events_small']:,} events, "
                f"+{m['projector_grew_mib_big']:.0f} MiB at {m['events_big']:,} ({m['projector_growth']:.2f}x); "
                f"reference +{m['reference_grew_mib_small']:.0f} -> +{m['reference_grew_mib_big']:.0f} MiB  [{verdict}]"
            )
        else:
            lines.append(
                f"{r['name']:8} {r['ratio']:.2f}x (target >= {r['target']}x): {r['subject_rate']:,.0f} ev/s "
                f"vs baseline {r['baseline_rate']:,.0f} ev/s  [{verdict}]"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--only", default="append,group,rebuild", help="comma-separated: append, group, rebuild")
    ap.add_argument("--events", type=int, default=1_000_000, help="events in the log to rebuild (default 1,000,000)")
    ap.add_argument("--append-events", type=int, default=200_000, help="events per append round (default 200,000)")
    ap.add_argument("--per-producer", type=int, default=500, help="events per producer in the group commit bench")
    ap.add_argument("--rounds", type=int, default=5, help="rounds per measurement (rebuild uses max(3, rounds/2))")
    ap.add_argument("--quick", action="store_true", help="small sizes: a smoke run in a few seconds")
    ap.add_argument("--dir", default=None, help="where the databases go (default: a temporary directory on disk)")
    ap.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    ap.add_argument("--check", action="store_true", help="exit 1 when a target does not hold")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--db", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(args.child, args.db)
        return 0
    if args.quick:
        args.events, args.append_events, args.per_producer, args.rounds = 40_000, 20_000, 100, 3
    wanted = [w.strip() for w in args.only.split(",") if w.strip()]
    # default under the checkout's filesystem: /tmp may be tmpfs, where fsync costs nothing
    workdir = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="bench-store-", dir=ROOT / "benchmarks"))
    workdir.mkdir(parents=True, exist_ok=True)
    results = []
    try:
        info = machine()
        log(
            f"machine: {info['platform']}, {info['cpus']} CPUs ({info['cpu']}), Python {info['python']}, SQLite {info['sqlite']}"
        )
        log(f"databases in {workdir}")
        if "append" in wanted:
            log("[1] batched append")
            results.append(bench_append(workdir, args.append_events, args.rounds))
        if "group" in wanted:
            log("[2] group commit")
            results.append(bench_group(workdir, args.per_producer, args.rounds))
        if "rebuild" in wanted:
            log("[3] projection rebuild")
            results.append(bench_rebuild(workdir, args.events, max(3, args.rounds // 2)))
    finally:
        if not args.dir:
            shutil.rmtree(workdir, ignore_errors=True)
    if args.json:
        print(json.dumps({"machine": info, "results": results}, indent=2))
    else:
        print(report(results))
    if args.check and not all(r.get("holds", False) and r.get("memory_holds", True) for r in results):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
