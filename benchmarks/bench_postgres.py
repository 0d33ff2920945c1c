"""PostgreSQL append throughput: our store vs a bare COPY, measured side by side in one run.

Target (issue "PostgreSQL backend"): batched append from 4 concurrent writers >= 0.5x the rate
of the same rows written by 4 concurrent bare ``COPY`` streams into the same schema.

    .venv/bin/python benchmarks/bench_postgres.py [--events 200000] [--batch 1000] [--rounds 3] [--url URL]

Without ``--url`` it starts a private server (Debian's postgresql package) on loopback.
Prints medians of the rounds and the ratio. Both sides pay the same fsync setting
(synchronous_commit on, the store's ``full`` durability).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psycopg

from a2a_tape import store
from a2a_tape.store import NewEvent

PAYLOAD = (
    b'{"result": {"artifactUpdate": {"taskId": "%s", "contextId": "ctx", "artifact": '
    b'{"artifactId": "art-1", "parts": [{"text": "chunk %d "}]}, "append": true}}, "id": 1, "jsonrpc": "2.0"}'
)


def _rows(writer: int, n: int) -> list[NewEvent]:
    return [
        NewEvent(
            payload=PAYLOAD % (f"w{writer}-t{i % 50}".encode(), i), task_id=f"w{writer}-t{i % 50}", received_at=float(i)
        )
        for i in range(n)
    ]


def _fresh_schema(server: str, name: str) -> str:
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")
        conn.execute(f"CREATE SCHEMA {name}")
    return f"{server}?options=-csearch_path%3D{name}"


def _parallel(fn, writers: int) -> float:
    barrier = threading.Barrier(writers + 1)
    threads = [threading.Thread(target=fn, args=(w, barrier)) for w in range(writers)]
    for t in threads:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    return time.perf_counter() - t0


def run_store(server: str, events: int, batch: int, writers: int, rnd: int) -> float:
    url = _fresh_schema(server, f"bench_store_{rnd}")
    store.open_store(url).close()  # schema first
    per = events // writers
    data = {w: _rows(w, per) for w in range(writers)}

    def work(w: int, barrier: threading.Barrier) -> None:
        st = store.open_store(url)
        rows = data[w]
        barrier.wait()
        for i in range(0, len(rows), batch):
            st.append_batch(rows[i : i + batch])
        st.close()

    secs = _parallel(work, writers)
    with store.open_store(url) as st:
        assert st.count_events() == per * writers and st.last_position() == per * writers
    return per * writers / secs


def run_bare_copy(server: str, events: int, batch: int, writers: int, rnd: int) -> float:
    url = _fresh_schema(server, f"bench_bare_{rnd}")
    store.open_store(url).close()  # the same schema, indexes included
    per = events // writers
    data = {w: _rows(w, per) for w in range(writers)}

    def work(w: int, barrier: threading.Barrier) -> None:
        conn = psycopg.connect(url)
        conn.execute("SET synchronous_commit = on")
        rows = data[w]
        barrier.wait()
        for i in range(0, len(rows), batch):
            with (
                conn.cursor() as cur,
                cur.copy(
                    "COPY events (position, task_id, seq, exchange_id, sse_event, payload, received_at, mono, origin) FROM STDIN"
                ) as copy,
            ):
                for k, ev in enumerate(rows[i : i + batch]):
                    pos = w * per + i + k + 1  # disjoint ranges: no coordination at all
                    copy.write_row((pos, ev.task_id, pos, None, None, ev.payload, ev.received_at, None, "upstream"))
            conn.commit()
        conn.close()

    secs = _parallel(work, writers)
    return per * writers / secs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--writers", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--url", help="an existing PostgreSQL database to use (schemas bench_* are dropped and made)")
    args = ap.parse_args()
    with contextlib.ExitStack() as stack:
        if args.url:
            server = args.url
        else:
            from tests.support.postgres import postgres_server

            server = stack.enter_context(postgres_server())
        ours, bare = [], []
        for rnd in range(args.rounds):  # interleaved, so both sides see the same machine noise
            bare.append(run_bare_copy(server, args.events, args.batch, args.writers, rnd))
            ours.append(run_store(server, args.events, args.batch, args.writers, rnd))
            print(
                f"round {rnd + 1}: bare COPY {bare[-1]:,.0f} ev/s, store.append_batch {ours[-1]:,.0f} ev/s",
                file=sys.stderr,
            )
    mb, mo = statistics.median(bare), statistics.median(ours)
    ratio = mo / mb
    print(
        f"postgres append, {args.writers} writers, batches of {args.batch}, {args.events:,} events, median of {args.rounds}:"
    )
    print(f"  bare COPY          {mb:12,.0f} events/s")
    print(f"  store.append_batch {mo:12,.0f} events/s")
    print(f"  ratio {ratio:.2f}x (target >= 0.5x): {'OK' if ratio >= 0.5 else 'BELOW TARGET'}")


if __name__ == "__main__":
    main()
