"""UI benchmarks (issue 25): what ``a2a-tape ui`` costs as the log grows, against a baseline in the same run.

The logs of ``bench_cli.py`` (built once, cached under ``benchmarks/.cli-cache/``): small (100 tasks x
100 events), big (10,000 tasks x 100 events = 1,000,000 events), and long (one task of 100,000
events). Each server is the installed ``a2a-tape ui``; pages are read over HTTP with the run's
token, and in Debian's Chromium (Playwright) where the browser is the subject:

    list first page      GET / on the big log           vs the same on the small log     <= 1.3x, and <= 1 s
    long task paint      first paint of the 100,000-event task's page in Chromium       <= 1.5 s
                         (vs a 100-event task's page, for scale)
    long task scroll     the next 500 rows of that page  vs its first page's response   (scrolling is paged)
    live event           commit -> the row on screen, median of 20 (big log copy)        <= 250 ms
    memory               server peak RSS after the same pages, big log vs small log      <= 1.3x (flat)

    .venv/bin/python benchmarks/bench_ui.py            # ~2 min once the logs are cached (bench_cli.py builds them)
    .venv/bin/python benchmarks/bench_ui.py --quick    # 20 + 200 tasks, a 5,000-event task: a smoke run
    .venv/bin/python benchmarks/bench_ui.py --json     # one JSON document on stdout

Exit code 0, or 1 with ``--check`` when a target does not hold.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import msgspec

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_cli import A2A_TAPE, build_log, log  # noqa: E402  (the same cached logs)

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


class Server(msgspec.Struct):
    url: str
    base: str
    token: str
    proc: subprocess.Popen

    def client(self) -> httpx.Client:
        port = urlsplit(self.base).port  # base: http://127.0.0.1:PORT/PREFIX
        return httpx.Client(base_url=self.base, cookies={f"a2a_tape_ui_{port}": self.token}, timeout=60)

    def peak_rss_kb(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
        return 0


@contextmanager
def serving(db: str) -> Iterator[Server]:
    proc = subprocess.Popen(
        [A2A_TAPE, "ui", "--db", db, "--no-open"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("a2a-tape ui: "):
        proc.kill()
        raise SystemExit(f"a2a-tape ui did not start on {db}: {line!r}")
    url = line.split(": ", 1)[1].strip()
    base, _, token = url.partition("/?token=")
    try:
        yield Server(url, base, token, proc)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def timed_get(client: httpx.Client, path: str) -> float:
    t0 = time.perf_counter()
    r = client.get(path)
    r.raise_for_status()
    return time.perf_counter() - t0


def alternate_gets(a: tuple[httpx.Client, str], b: tuple[httpx.Client, str], rounds: int) -> tuple[float, float, float]:
    """Median seconds of GET a, of GET b, and the median of per-round ratios (alternated)."""
    timed_get(*a), timed_get(*b)  # warm
    ta, tb, ratios = [], [], []
    for i in range(rounds):
        if i % 2 == 0:
            x, y = timed_get(*a), timed_get(*b)
        else:
            y, x = timed_get(*b), timed_get(*a)
        ta.append(x)
        tb.append(y)
        ratios.append(x / y)
    return statistics.median(ta), statistics.median(tb), statistics.median(ratios)


def first_task(client: httpx.Client) -> str:
    html = client.get("/").text
    link = '<a href="' + urlsplit(str(client.base_url)).path.rstrip("/") + "/tasks/"  # under the UI's prefix
    start = html.index(link) + len(link)
    return html[start : html.index('"', start)]


def first_paint(browser, server: Server, path: str) -> float:
    """Seconds from navigation start to the first contentful paint of ``path``, in a fresh page."""
    context = browser.new_context()
    page = context.new_page()
    page.goto(server.url)
    page.goto(server.base + path)
    # the paint entry may come after goto returns (at the load event) on a busy machine: wait for it
    # (read right away, it was missing now and then, and the row's median came out NaN)
    fcp = page.evaluate(
        """() => new Promise(done => new PerformanceObserver((list, observer) => {
          const entry = list.getEntriesByName('first-contentful-paint')[0];
          if (entry) { observer.disconnect(); done(entry.startTime); }
        }).observe({type: 'paint', buffered: true}))"""
    )
    context.close()
    return float(fcp) / 1000


def live_latency(browser, db: Path, events: int) -> list[float]:
    """Milliseconds from each commit to its row on the open task page, for ``events`` events."""
    from a2a_tape import store
    from a2a_tape.store import Exchange, NewEvent

    enc = msgspec.json.Encoder()
    tid, ctx = "bench-live-task", "bench-live-ctx"

    def payload(result: dict) -> bytes:
        return enc.encode({"jsonrpc": "2.0", "id": 1, "result": result})

    st = store.open_store(db)
    ex = st.begin_exchange(
        Exchange(
            started_at=time.time(),
            url="http://127.0.0.1:9/",
            rpc_method="SendStreamingMessage",
            dialect="1.0",
            streaming=True,
            task_id=tid,
        )
    )
    st.append_batch(
        [
            NewEvent(
                payload=payload({"task": {"id": tid, "contextId": ctx, "status": {"state": "TASK_STATE_SUBMITTED"}}}),
                task_id=tid,
                exchange_id=ex,
                received_at=time.time(),
            ),
            NewEvent(
                payload=payload(
                    {"statusUpdate": {"taskId": tid, "contextId": ctx, "status": {"state": "TASK_STATE_WORKING"}}}
                ),
                task_id=tid,
                exchange_id=ex,
                received_at=time.time(),
            ),
        ]
    )
    out = []
    with serving(str(db)) as server:
        page = browser.new_page()
        page.goto(server.url)
        page.goto(f"{server.base}/tasks/{tid}")
        page.wait_for_selector("#events tr[data-position]")
        page.evaluate(
            """() => { window.__seen = {};
            new MutationObserver(() => document.querySelectorAll('#events tr[data-position]').forEach(
              tr => { if (!(tr.dataset.position in window.__seen)) window.__seen[tr.dataset.position] = Date.now(); }))
            .observe(document.getElementById('events'), {childList: true}); }"""
        )
        time.sleep(1.0)  # the page's event stream is open (its first keep-alive is not needed)
        for k in range(events):
            art = {
                "taskId": tid,
                "contextId": ctx,
                "artifact": {"artifactId": "a", "parts": [{"text": f"chunk {k} "}]},
                "append": k > 0,
            }
            [ev] = st.append_batch(
                [
                    NewEvent(
                        payload=payload({"artifactUpdate": art}), task_id=tid, exchange_id=ex, received_at=time.time()
                    )
                ]
            )
            committed = time.time() * 1000
            deadline = time.monotonic() + 10
            seen = None
            while seen is None and time.monotonic() < deadline:
                seen = page.evaluate(f"() => window.__seen['{ev.position}'] || null")
                if seen is None:
                    time.sleep(0.005)
            out.append(float("inf") if seen is None else seen - committed)
            time.sleep(0.2)  # one event every ~200 ms, as a slow agent streams
        page.close()
    st.close()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="20 and 200 tasks of 20 events, a 5,000-event task")
    ap.add_argument("--rounds", type=int, default=9, help="alternated rounds per timed row (default 9)")
    ap.add_argument("--live-events", type=int, default=20, help="events of the live row (default 20: its median)")
    ap.add_argument("--json", action="store_true", help="one JSON document on stdout")
    ap.add_argument("--check", action="store_true", help="exit 1 when a target does not hold")
    args = ap.parse_args(argv)
    per = 20 if args.quick else 100
    small_n, big_n, long_n = (20, 200, 5_000) if args.quick else (100, 10_000, 100_000)
    rounds = 3 if args.quick else args.rounds
    S = build_log("small", small_n, per)["db"]
    B = build_log("big", big_n, per)["db"]
    L = build_log("long", 1, long_n)["db"]
    rows: list[dict] = []

    def row(name: str, subject: str, baseline: str, a: float, b: float, ratio: float, target: str, ok: bool) -> None:
        rows.append(
            {"row": name, "subject": subject, "baseline": baseline, "a": a, "b": b, "ratio": ratio, "target": target}
            | {"holds": ok}
        )
        log(f"{name:<20} {a:9.3f} vs {b:9.3f}  {ratio:6.2f}x  target {target:<16} {'yes' if ok else 'NO'}")

    from playwright.sync_api import sync_playwright

    with serving(S) as small, serving(B) as big, serving(L) as long_, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        with small.client() as cs, big.client() as cb, long_.client() as cl:
            a, b, r = alternate_gets((cb, "/"), (cs, "/"), rounds)
            row("list first page", "big log (s)", "small log (s)", a, b, r, "<= 1.3x, <= 1 s", r <= 1.3 and a <= 1.0)
            long_task, short_task = first_task(cl), first_task(cs)
            paints_long, paints_short = [], []
            for _ in range(max(3, rounds // 2)):
                paints_long.append(first_paint(browser, long_, f"/tasks/{long_task}"))
                paints_short.append(first_paint(browser, small, f"/tasks/{short_task}"))
            pl, ps = statistics.median(paints_long), statistics.median(paints_short)
            row(
                "long task paint",
                f"{long_n:,}-event task (s)",
                f"{per}-event task (s)",
                pl,
                ps,
                pl / ps,
                "<= 1.5 s",
                pl <= 1.5,
            )
            html = cl.get(f"/tasks/{long_task}").text
            prefix = urlsplit(str(cl.base_url)).path.rstrip("/")  # the page's addresses are under it
            more = html[html.index(f'hx-get="{prefix}/task/rows?') + len('hx-get="') + len(prefix) :]
            more = more[: more.index('"')].replace("&amp;", "&")
            a, b, r = alternate_gets((cl, more), (cl, f"/tasks/{long_task}"), rounds)
            row("long task scroll", "next 500 rows (s)", "the page (s)", a, b, r, "paged", True)
            for path in ("/", f"/tasks/{short_task}", "/?state=completed", "/?q=zebrafish"):
                cs.get(path), cb.get(path)
            rss_small, rss_big = small.peak_rss_kb(), big.peak_rss_kb()
        with tempfile.TemporaryDirectory(dir=HERE, prefix="bench-ui-") as tmp:
            copy = Path(tmp) / "big-copy.db"
            shutil.copyfile(B, copy)
            latencies = live_latency(browser, copy, args.live_events)
        browser.close()
    med = statistics.median(latencies)
    row(
        "live event",
        f"commit -> on screen, median of {len(latencies)} (ms)",
        "worst (ms)",
        med,
        max(latencies),
        med / 250,
        "<= 250 ms",
        med <= 250,
    )
    row(
        "memory",
        "server peak RSS, big log (MB)",
        "small log (MB)",
        rss_big / 1024,
        rss_small / 1024,
        rss_big / rss_small,
        "<= 1.3x",
        rss_big / rss_small <= 1.3,
    )
    if args.json:
        json.dump({"rows": rows, "live_ms": latencies}, sys.stdout, indent=2)
        sys.stdout.write("\n")
    return 1 if args.check and not all(r["holds"] for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
