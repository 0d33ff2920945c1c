"""The promise matrix: each promise of the capture core x each capture path (docs/design.md section 11).

Promises: no secret on disk or in what is printed; the exact bytes of every item kept; what
the client sees is what the agent sent; faults end as readable errors within the timeouts.
Paths: ``record``, ``RecordingTransport`` (sync and async), serve's recording modes,
``recover`` (and the recovery's stream reader), ``probe``, the proxy; each over JSON-RPC and over
HTTP+JSON (``"record http+json"``: the mode's HTTP+JSON agent, the path's client in that binding). The agent is the scripted
one of tests/support/fault_agent.py (a real agent cannot send a BOM or cut an item on demand).
The paths that record gRPC, the gRPC proxy and ``RecordingInterceptor`` (``"proxy grpc"``,
``"interceptor grpc"``: tests/capture/grpc_drivers.py), run the modes that have a gRPC form against
the hand-written gRPC agent (tests/support/grpc_fake.py); a mode that cannot apply to a gRPC call
(SSE framing, redirects, a body without end) is skipped with why (``grpc_drivers.NOT_GRPC``). A
gRPC answer is kept in the log as each message's JSON mapping, and the client gets its exact bytes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from a2a_tape import store
from a2a_tape.capture.exchange import OUTCOMES
from a2a_tape.store.observers import JOINS_RUN
from tests.capture import grpc_drivers
from tests.capture.drivers import CLIENT_PATHS, COMMAND_PATHS, PATHS, Outcome, cli, in_process, is_grpc, kind
from tests.support.fault_agent import SECRETS, raw_items

ALL_SECRETS = (*SECRETS, "SEKRET-TOKEN")
BYTE_MODES = ("plain", "bom", "cr", "crlf", "multiline", "fields", "nofinal", "nonutf8", "huge", "deep")
FAULT_MODES = ("silent", "redirect", "badgzip", "endless", "endlessanswer")  # endless*: without end
LIMITS = ("SSE event is longer than", "MiB limit: not read further")  # what an endless body stops at


def test_each_mode_runs_on_grpc_or_says_why_not():
    """A mode of the matrix has a gRPC form (grpc_drivers.GRPC_MODES) or a reason it has none."""
    modes = {*BYTE_MODES, *FAULT_MODES, "secret", "marked"}
    assert modes == set(grpc_drivers.GRPC_MODES) | set(grpc_drivers.NOT_GRPC)
    assert not set(grpc_drivers.GRPC_MODES) & set(grpc_drivers.NOT_GRPC)


# cells of the matrix known not to hold yet, each with why (strict xfails): none today; the proxy's
# request side (URL credentials on disk, first-byte timeout, redirects) was the last, fixed with issue 12
PENDING: dict[tuple[str, str, str], str] = {}  # (promise, path, mode) -> why it does not hold yet


def _pending(promise: str, path: str, mode: str) -> None:
    if is_grpc(path) and mode in grpc_drivers.NOT_GRPC:
        pytest.skip(f"not for gRPC: {grpc_drivers.NOT_GRPC[mode]}")
    why = PENDING.get((promise, path, mode)) or PENDING.get((promise, path, "*"))
    if why:
        pytest.xfail(why)


INSTALLED_MODE = {"bytes": "plain", "fault": "silent"}
"""The mode of a promise whose command-line paths (record, probe, recover) run the installed console script in
a subprocess (what a user starts: its own process, its real file descriptors, its exit); the promise's other
modes run the same command in this process (``drivers.in_process``: the same code, its exit code, what it
prints, an escaped exception printed as a traceback), ~0.5 s of CPU less each. The secret promise, the rows'
and the endless card run the installed script on every command-line path."""


def _run(raw_agent, path: str, mode: str, workdir: Path, promise: str | None = None) -> Outcome:
    base, _ = raw_agent
    if path in COMMAND_PATHS and promise in INSTALLED_MODE and mode != INSTALLED_MODE[promise]:
        return PATHS[path](base, mode, workdir, run=in_process)
    return PATHS[path](base, mode, workdir)


def _streams(db: Path) -> list[list[bytes]]:
    """The upstream payloads of each streaming exchange with any, in order."""
    st = store.open_store(db)
    try:
        out = []
        for ex in st.exchanges():
            assert ex.outcome in OUTCOMES or ex.outcome is None, (ex.id, ex.outcome)
            if ex.streaming and ex.id is not None:
                got = [bytes(e.payload) for e in st.read_exchange(ex.id) if e.origin == "upstream"]
                if got:
                    out.append(got)
        return out
    finally:
        st.close()


def _outcomes(db: Path) -> list[tuple[str | None, str | None]]:
    st = store.open_store(db)
    try:
        return [(ex.outcome, ex.error) for ex in st.exchanges()]
    finally:
        st.close()


def _redirect_kept(db: Path) -> bool:
    st = store.open_store(db)
    try:
        return any(
            ex.status == 301 and ex.response_headers.get("location") == "http://127.0.0.1:9/moved/"
            for ex in st.exchanges()
        )
    finally:
        st.close()


def _leaks(out: Outcome, workdir: Path, *, installed: bool) -> list[str]:
    blobs = {"printed": out.printed, "db": out.db.read_bytes()}
    wal = out.db.with_name(out.db.name + "-wal")
    if wal.exists():
        blobs["wal"] = wal.read_bytes()
    run = _installed if installed else _in_process
    for fmt in ("jsonl", "har", "mermaid", "html"):
        code, printed = run(["export", "--all", "--format", fmt, "--db", str(out.db)], workdir)
        assert code == 0, printed
        blobs[f"export {fmt}"] = printed
    for name in ("show", "tasks"):
        args = [name, "t-1", "--json", "--db", str(out.db)] if name == "show" else [name, "--db", str(out.db)]
        blobs[name] = run(args, workdir)[1]
    return sorted({f"{s} in {where}" for where, blob in blobs.items() for s in ALL_SECRETS if s.encode() in blob})


def _installed(args: list[str], cwd: Path) -> tuple[int, bytes]:
    """A command run by the installed console script in ``cwd``: (exit code, what it printed)."""
    r = cli(args, cwd)
    return r.returncode, r.stdout + r.stderr


def _in_process(args: list[str], cwd: Path) -> tuple[int, bytes]:
    """An inspection command run by ``cli.app`` in this process, in ``cwd`` (``drivers.in_process``): (exit code,
    what it printed)."""
    r = in_process(args, cwd)
    return r.returncode, r.stdout + r.stderr


INSTALLED_CLI_READS = "record"
"""The path whose recording the installed console script exports and shows (a subprocess each); the other
paths' recordings are read by the same commands in this process (what they print is the same code's)."""


@pytest.mark.parametrize("path", PATHS)
def test_no_secret_on_disk_or_printed(raw_agent, path, workdir):
    _pending("secret", path, "secret")
    out = _run(raw_agent, path, "secret", workdir)
    assert _leaks(out, workdir, installed=path == INSTALLED_CLI_READS) == []


@pytest.mark.parametrize("mode", BYTE_MODES)
@pytest.mark.parametrize("path", PATHS)
def test_exact_bytes_kept(raw_agent, path, mode, workdir):
    _pending("bytes", path, mode)
    out = _run(raw_agent, path, mode, workdir, "bytes")
    streams = _streams(out.db)
    assert streams, (out.printed, out.error)
    if is_grpc(path):  # each message's JSON mapping (the exact bytes went to the client)
        assert grpc_drivers.decoded(streams)[-1] == grpc_drivers.logged(mode)
        return
    want = raw_items(mode)
    if kind(path) == "probe":  # the probes drop streams after their first item, on purpose; a resubscribe reads all
        assert all(s in (want[:1], want) for s in streams) and want in streams, streams
        return
    assert streams[-1] == want
    if mode == "nofinal":  # the cut item is kept, and its exchange says it was cut
        assert any(o == "incomplete" for o, _ in _outcomes(out.db))


@pytest.mark.parametrize("mode", (*BYTE_MODES, "secret"))
@pytest.mark.parametrize("path", CLIENT_PATHS)
def test_client_sees_what_the_agent_sent(raw_agent, path, mode, workdir):
    _pending("client", path, mode)
    base, agent = raw_agent
    out = _run(raw_agent, path, mode, workdir)
    assert out.error is None
    assert out.client == (grpc_drivers.sent(mode) if is_grpc(path) else agent.sent(mode))


@pytest.mark.parametrize("mode", FAULT_MODES)
@pytest.mark.parametrize("path", PATHS)
def test_faults_become_readable_errors(raw_agent, path, mode, workdir):
    _pending("fault", path, mode)
    out = _run(raw_agent, path, mode, workdir, "fault")
    assert out.seconds < 30, f"{path} took {out.seconds:.1f} s on {mode}"
    text = out.printed.decode("utf-8", "replace")
    assert "Traceback" not in text and "ExceptionGroup" not in text, text
    if kind(path) == "record":
        assert out.code == 2, text
        assert len(text.strip().splitlines()) == 1, text
    if kind(path) == "probe" and mode != "endless":  # endless: the probes drop streams after one item on
        assert out.code in (1, 2), text  # purpose and judge by the task's state; the resubscribe's row names it
    rows = _outcomes(out.db)
    if mode == "redirect" and path in CLIENT_PATHS:  # transparent: the client gets the redirect itself
        assert _redirect_kept(out.db), rows
        return
    if kind(path) != "probe" or rows:
        failed = [(o, e) for o, e in rows if o not in ("ok", "replayed")]
        assert failed, rows  # the fault is in the log, named
        for _, error in failed:
            assert error and "ExceptionGroup" not in error and "TaskGroup" not in error, rows
        if mode.startswith("endless"):  # a limit stopped it (the reader's memory is bounded by it), and says so
            assert any(limit in error for _, error in failed for limit in LIMITS), rows


SOURCE = {
    "record": "client",
    "probe": "probe",
    "transport-sync": "in-process",
    "transport-async": "in-process",
    "interceptor": "in-process",
    "serve": "proxy",
    "proxy": "proxy",
    "recover": None,  # every row a recovery's: it completes the run it recovers
}
"""The source of the observer each path stamps its rows with (store/observers.py)."""


@pytest.mark.parametrize("path", PATHS)
def test_every_row_is_a_run_of_its_recorder_and_ended(raw_agent, path, workdir):
    """The capture core's sequence stamps each row it begins with the driver's observer: one
    observer per recorder, of its source; a recovery's rows (and a push's) carry none. Every row
    it begins, it ends."""
    out = _run(raw_agent, path, "plain", workdir)
    st = store.open_store(out.db)
    try:
        rows = [ex for ex in st.exchanges() if not (kind(path) == "recover" and ex.role == "proxy")]  # seeded
    finally:
        st.close()
    assert rows, out.printed
    assert [ex.id for ex in rows if ex.ended_at is None or ex.outcome is None] == [], out.printed
    joined = [ex for ex in rows if ex.role in JOINS_RUN]
    own = [ex for ex in rows if ex.role not in JOINS_RUN]
    assert [ex.observer for ex in joined] == [None] * len(joined)
    source = SOURCE[kind(path)]
    assert {ex.source for ex in own} == ({source} if source else set()), [(ex.role, ex.source) for ex in rows]
    assert len({ex.observer for ex in own}) <= 1 and None not in {ex.observer for ex in own}


@pytest.mark.parametrize("path", PATHS)
def test_an_answer_marked_as_a_replays_makes_a_run_of_source_replay(raw_agent, path, workdir):
    """An agent whose answers carry serve's replay marker (``marked``: ``plain`` with the marker) is
    recorded as a replay on every path: each row the recorder stamps says source ``replay``, one
    observer as ever (a recovery's rows still carry none); the items are ``plain``'s, unchanged."""
    _pending("source", path, "marked")
    out = _run(raw_agent, path, "marked", workdir)
    assert out.error is None, out.printed
    st = store.open_store(out.db)
    try:
        rows = [ex for ex in st.exchanges() if not (kind(path) == "recover" and ex.role == "proxy")]  # seeded
    finally:
        st.close()
    own = [ex for ex in rows if ex.role not in JOINS_RUN]
    assert {ex.source for ex in own} == ({"replay"} if SOURCE[kind(path)] else set()), [
        (ex.role, ex.rpc_method, ex.source) for ex in rows
    ]
    assert len({ex.observer for ex in own}) <= 1 and None not in {ex.observer for ex in own}
    streams = _streams(out.db)
    assert streams, out.printed
    if is_grpc(path):
        assert grpc_drivers.decoded(streams)[-1] == grpc_drivers.logged("marked")
    elif kind(path) != "probe":  # the probes drop streams after their first item, on purpose
        assert streams[-1] == raw_items("plain")


@pytest.mark.parametrize("path", ["record", "probe"])  # the paths that read the card at the URL given
def test_a_card_without_end_is_a_readable_error(raw_agent, path, workdir):
    out = _run(raw_agent, path, "endlesscard", workdir)
    assert out.seconds < 30, f"{path} took {out.seconds:.1f} s"
    text = out.printed.decode("utf-8", "replace")
    assert "Traceback" not in text, text
    if path == "record":
        assert out.code == 2 and "the agent card is larger than the 64 MiB limit" in text, text
        assert len(text.strip().splitlines()) == 1, text
    else:
        assert out.code in (1, 2) and "larger than the 64 MiB limit" in text, text
