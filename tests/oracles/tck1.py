"""The official A2A TCK 1.0 (a2aproject/a2a-tck, branch 1.0-dev) as an oracle: every binding, three set-ups.

Where it comes from: ``$A2A_TAPE_TCK1_TARBALL``, else ``<repo>/../shared/oracles/a2a-tck-1.0-*.tar.gz``. Where it
goes (tests/oracles/cache.py): ``<cache>/tck/<hash of the tarball>/`` (the source and a venv of its own), and
the system under test's venv ``<cache>/tck1-sut/<hash of its requirements>/``: the TCK's own SUT ported to
a2a-sdk 1.3.0 (tests/support/tck1_sut.py) needs a2a-sdk's gRPC extra, which is none of ours.

How it runs: the TCK's ``run_tck.py`` is a thin wrapper over pytest in its root; we call that pytest the same way
(``tests/compatibility/``, ``--sut-host``, ``--transport``) with ``--junitxml``, and read every test's outcome
from the XML; the tests of level ``must`` are those a collection with ``-m must`` finds (``--level must``). The TCK reads the card at the host it is given and
talks to each binding at the URL the card names, so the proxy's and serve's rewritten cards route it.

The three set-ups, per transport, each with an agent of its own (so that ListTasks sees one run's tasks only):
``direct`` (the TCK against the SUT), ``proxy`` (through ``a2a-tape proxy``, recording into a fresh log;
``--idempotency off`` when the installed proxy has that option) and ``serve`` (``a2a-tape serve`` over a copy
of that recording, replay only). Serve gets the whole session the proxy recorded (every level), so that the
requests come in the recorded order; it is judged on the tests of level ``must``.

The push slice (issue 33): the same three set-ups with the SUT's push notifications on (``SUT_PUSH=1``) and the
TCK's push tests only (``-k push``: config create/get/list/delete and webhook delivery, the TCK's own receiver
checking the agent's POSTs; the push-not-supported tests skip), judged the same way against
``known_tck1_push_differences.txt``. Through the proxy the agent POSTs to a2a-tape's receiver, which records and
forwards each push to the TCK's webhook; against serve, serve POSTs the recorded pushes to it.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.oracles import allowlist, tape
from tests.oracles.cache import (
    ROOT,
    cache_dir,
    chosen,
    digest,
    find_tarball,
    install_once,
    make_venv,
    no_tarball,
    plain_env,
    unpack,
)
from tests.oracles.tck import ABSENT, Run, differences, source_dir
from tests.support.servers import closed_port

TARBALL_ENV = "A2A_TAPE_TCK1_TARBALL"
TARBALL_GLOB = "a2a-tck-1.0-*.tar.gz"
TRANSPORTS_ENV = "A2A_TAPE_TCK1_TRANSPORTS"
PARALLEL_ENV = "A2A_TAPE_TCK1_PARALLEL"
KNOWN_DIFFERENCES = Path(__file__).with_name("known_tck1_differences.txt")
PUSH_KNOWN_DIFFERENCES = Path(__file__).with_name("known_tck1_push_differences.txt")
PUSH_SELECTION = "push"
"""The push slice's ``-k``: the TCK's tests with push in their names (10 per binding run with push on)."""
PUSH_FILE = "tests/compatibility/core_operations/test_push_notifications.py"

SUT = ROOT / "tests" / "support" / "tck1_sut.py"
SUT_REQUIREMENTS = ("a2a-sdk[http-server,grpc]==1.3.0", "uvicorn", "starlette")

TRANSPORTS = ("jsonrpc", "http_json", "grpc")  # the TCK's names for JSON-RPC, HTTP+JSON and gRPC
WIRED = ("jsonrpc", "http_json", "grpc")  # the transports this harness runs through a2a-tape
JUDGED_LEVEL = "must"  # against serve, what a user relies on: the TCK's MUST tests
RUN_TIMEOUT = 600.0  # seconds for one TCK run; one takes about 35 s on 2 cores
START_TIMEOUT = 60.0  # seconds for the SUT to answer its card


def no_binding_yet(transport: str) -> str | None:
    """Why a2a-tape cannot be checked on ``transport`` yet, or None when it can."""
    if transport != "grpc" or proxy_has_option("--grpc-listen"):
        return None
    return "a2a-tape has no gRPC binding yet (issue 24): its proxy and serve answer no gRPC call"


def selected_transports() -> tuple[str, ...]:
    """``$A2A_TAPE_TCK1_TRANSPORTS`` (comma-separated, or ``all``); all by default."""
    return chosen(os.environ.get(TRANSPORTS_ENV, "all"), TRANSPORTS, TRANSPORTS_ENV)


# --- install ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Install:
    source: Path  # the TCK's root (pytest's rootdir and cwd)
    python: Path  # the TCK venv's interpreter
    sut_python: Path  # the SUT venv's interpreter
    seconds: float  # what installing took in this process (both at once); 0.0 when the cache had them


def ensure_installed() -> Install:
    """The TCK and the SUT's venv, each installed once into the cache (the two at once on a first use)."""
    tarball = find_tarball(TARBALL_ENV, TARBALL_GLOB)
    if tarball is None:
        raise no_tarball(TARBALL_ENV, TARBALL_GLOB, "A2A TCK 1.0")
    tck_home = cache_dir() / "tck" / digest(tarball)
    sut_home = cache_dir() / "tck1-sut" / digest("\n".join(SUT_REQUIREMENTS).encode())

    def build_tck(home: Path) -> None:
        unpack(tarball, home / "src")
        make_venv(home / "venv", ["-e", str(source_dir(home / "src"))], home / "install.log", "the A2A TCK 1.0")

    def build_sut(home: Path) -> None:
        make_venv(home / "venv", list(SUT_REQUIREMENTS), home / "install.log", "the TCK 1.0 SUT's venv")

    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        jobs = [pool.submit(install_once, tck_home, build_tck), pool.submit(install_once, sut_home, build_sut)]
        took = [job.result() for job in jobs]
    seconds = time.monotonic() - started if any(took) else 0.0
    return Install(source_dir(tck_home / "src"), tck_home / "venv/bin/python", sut_home / "venv/bin/python", seconds)


# --- the system under test -------------------------------------------------------------------------------


def _free_port_pair() -> int:
    """A loopback port P with P+1 free too (the SUT serves HTTP on P and gRPC on P+1)."""
    return closed_port(run=2)


def _answers(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        return True
    return False


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@contextlib.contextmanager
def sut(install: Install, log: Path, push: bool = False) -> Iterator[str]:
    """tests/support/tck1_sut.py in its venv on 127.0.0.1 (HTTP on a free port, gRPC on the next); yields its
    base URL once both listen. Its output goes to ``log``. ``push``: its push notifications on (``SUT_PUSH=1``)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    env = {**plain_env(), "SUT_PUSH": "1"} if push else plain_env()
    for _ in range(3):  # another process may take a port between our check and the SUT's bind
        port = _free_port_pair()
        with log.open("ab") as out:
            proc = subprocess.Popen(
                [str(install.sut_python), str(SUT), "127.0.0.1", str(port)],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
            )
        deadline = time.monotonic() + START_TIMEOUT
        while not (_answers(port) and _answers(port + 1)):
            # waiting on the process is the pause: it ends at once if the SUT exits
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=0.1)
            if proc.poll() is not None or time.monotonic() > deadline:
                break
        else:
            try:
                yield f"http://127.0.0.1:{port}"
            finally:
                _stop(proc)
            return
        _stop(proc)
    tail = log.read_text(errors="replace").strip().splitlines()[-5:]
    raise AssertionError(f"the TCK 1.0 SUT did not start ({log}): {' | '.join(tail)}")


# --- a2a-tape --------------------------------------------------------------------------------------------


@functools.cache
def _proxy_help() -> str:
    env = {**tape.clean_env(), "COLUMNS": "300", "NO_COLOR": "1", "TERM": "dumb"}
    done = subprocess.run([str(tape.tape_script()), "proxy", "--help"], capture_output=True, text=True, env=env)
    return done.stdout


def proxy_has_option(name: str) -> bool:
    """Whether the installed ``a2a-tape proxy`` has the option ``name`` (read from its ``--help``)."""
    return re.search(re.escape(name) + r"(?![\w-])", _proxy_help()) is not None


def proxy_args(upstream: str, db: Path) -> list[str]:
    """``a2a-tape proxy`` in front of ``upstream``, recording into ``db``; its gateway (answering a repeated
    messageId from the log) off when it can be: the TCK sends each set-up task as the same message."""
    args = ["proxy", upstream, "--listen", "127.0.0.1:0", "--db", str(db), "--no-recover", *_GRPC]
    if proxy_has_option("--idempotency"):
        args += ["--idempotency", "off"]
    return args


_GRPC = ["--grpc-listen", "127.0.0.1:0"]
"""The gRPC side of the proxy and of serve (issue 24): the card then names it, so the TCK's gRPC tests go
through it; the gRPC upstream is the card's gRPC interface."""


def serve_args(db: Path) -> list[str]:
    """``a2a-tape serve`` over ``db``, replay only (``--record-mode none``): every answer comes from the log."""
    return ["serve", "--listen", "127.0.0.1:0", "--db", str(db), "--record-mode", "none", *_GRPC]


def _copy_db(src: Path, dst: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        if Path(f"{src}{suffix}").exists():
            shutil.copyfile(f"{src}{suffix}", f"{dst}{suffix}")


# --- one TCK run -----------------------------------------------------------------------------------------

_RANK = {"passed": 0, "xfailed": 1, "skipped": 2, "failed": 3, "error": 4}


def node_id(classname: str, name: str, source: Path) -> str:
    """pytest's node id (``path.py::Class::test[param]``) from a junit testcase's ``classname`` and ``name``."""
    parts = classname.split(".")
    for cut in range(len(parts), 0, -1):
        path = "/".join(parts[:cut]) + ".py"
        if (source / path).is_file():
            return "::".join([path, *parts[cut:], name])
    return "::".join([classname, name])


def outcome_of(case: ET.Element) -> str:
    """A junit testcase's outcome in pytest's words (an xfail is a ``skipped`` of type ``pytest.xfail``)."""
    found = "passed"
    for child in case:
        if child.tag in ("failure", "error"):
            word = "failed" if child.tag == "failure" else "error"
        elif child.tag == "skipped":
            word = "xfailed" if child.get("type") == "pytest.xfail" else "skipped"
        else:
            continue
        found = max(found, word, key=_RANK.__getitem__)
    return found


def read_junit(path: Path, source: Path) -> dict[str, str]:
    """Every test's outcome in a junit XML report, by node id (the worst when pytest reports a test twice)."""
    out: dict[str, str] = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        nodeid = node_id(case.get("classname", ""), case.get("name", ""), source)
        word = outcome_of(case)
        out[nodeid] = max(out.get(nodeid, word), word, key=_RANK.__getitem__)
    return out


def run_tck(
    install: Install,
    setup: str,
    url: str,
    transport: str,
    workdir: Path,
    level: str | None = None,
    select: str | None = None,
) -> Run:
    """The TCK against ``url`` on one transport (``level``: ``must``, ``should``, ``may`` or all; ``select``:
    pytest's ``-k``); its outcomes."""
    workdir.mkdir(parents=True, exist_ok=True)
    junit, log = workdir / f"{setup}.xml", workdir / f"{setup}.log"
    cmd = [str(install.python), "-m", "pytest", "tests/compatibility/", f"--sut-host={url}"]
    cmd += [f"--transport={transport}", "--tb=short", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}"]
    if level:
        cmd += ["-m", level]
    if select:
        cmd += ["-k", select]
    started = time.monotonic()
    with log.open("wb") as out:
        done = subprocess.run(
            cmd, cwd=install.source, env=plain_env(), stdout=out, stderr=subprocess.STDOUT, timeout=RUN_TIMEOUT
        )
    if done.returncode not in (0, 1) or not junit.exists():  # 2-5: interrupted, internal, usage, nothing ran
        tail = log.read_text(errors="replace").strip().splitlines()[-5:]
        raise AssertionError(f"the TCK ({setup}, {transport}) exited {done.returncode}; {log}: {' | '.join(tail)}")
    run = Run(setup, url, read_junit(junit, install.source))
    run.seconds[transport] = time.monotonic() - started
    return run


# --- the three set-ups -----------------------------------------------------------------------------------


@dataclass
class Runs:
    """One transport's three runs: the SUT alone, through the proxy, against serve over the recording."""

    transport: str
    direct: Run
    proxied: Run
    replay: Run
    must: frozenset[str]  # the node ids of the TCK's tests of level must (serve is judged on those)
    serve_refused: str = ""  # what serve said when it would not start over the recording (replay then empty)
    known: Path = KNOWN_DIFFERENCES  # the allowlist these runs are judged against

    def all(self) -> list[Run]:
        return [self.direct, self.proxied, self.replay]


@functools.cache
def must_tests(install: Install) -> frozenset[str]:
    """The node ids of the TCK's tests of level ``must`` (a collection, no run: the selection is static)."""
    cmd = [str(install.python), "-m", "pytest", "tests/compatibility/", "--collect-only", "-q", "-m", JUDGED_LEVEL]
    cmd += ["-p", "no:cacheprovider"]
    done = subprocess.run(cmd, cwd=install.source, env=plain_env(), capture_output=True, text=True, timeout=300)
    found = frozenset(line for line in done.stdout.splitlines() if line.startswith("tests/compatibility/"))
    if done.returncode != 0 or not found:
        raise AssertionError(
            f"collecting the TCK's {JUDGED_LEVEL} tests failed: {done.stdout[-500:]}{done.stderr[-500:]}"
        )
    return found


def three_ways(install: Install, transport: str, workdir: Path, together: bool, push: bool = False) -> Runs:
    """``direct`` and ``proxy`` (at the same time when ``together``), then ``serve`` over the recording.
    ``push``: the push slice (the SUT's push notifications on, the TCK's push tests only), in ``workdir/push``."""
    here = workdir / "push" / transport if push else workdir / transport
    select = PUSH_SELECTION if push else None
    known = PUSH_KNOWN_DIFFERENCES if push else KNOWN_DIFFERENCES
    recording, replayed = here / "proxy.db", here / "serve.db"
    with (
        sut(install, here / "direct.sut.log", push) as direct_url,
        sut(install, here / "proxy.sut.log", push) as upstream,
    ):
        with tape.running(proxy_args(upstream, recording), here / "proxy.stderr") as proxy:
            jobs = [("direct", direct_url), ("proxy", proxy.url)]
            if together:
                with concurrent.futures.ThreadPoolExecutor(2) as pool:
                    futures = [pool.submit(run_tck, install, s, u, transport, here, select=select) for s, u in jobs]
                    direct, proxied = (f.result() for f in futures)
            else:
                direct, proxied = (run_tck(install, s, u, transport, here, select=select) for s, u in jobs)
    _copy_db(recording, replayed)
    must = must_tests(install)
    try:
        with tape.running(serve_args(replayed), here / "serve.stderr") as served:
            replay = run_tck(install, "serve", served.url, transport, here, select=select)
    except tape.TapeError as exc:  # serve refused the recording: a finding to judge, not a broken harness
        refused = str(exc).splitlines()[0]
        return Runs(transport, direct, proxied, Run("serve", ""), must, serve_refused=refused, known=known)
    return Runs(transport, direct, proxied, replay, must, known=known)


def parallelism() -> int:
    """How many TCK runs go at once (``$A2A_TAPE_TCK1_PARALLEL``): 1 (one after another), 2 (direct and proxy
    together) or 4 (two transports' direct and proxy together; the default: the TCK mostly waits, and 4 at once
    took 57-61 s where 1 took 152 s, with the same outcomes, also with both cores kept busy by other work)."""
    raw = os.environ.get(PARALLEL_ENV, "4")
    if raw not in ("1", "2", "4"):
        raise ValueError(f"{PARALLEL_ENV}: 1, 2 or 4, not {raw!r}")
    return int(raw)


def run_all(
    install: Install, transports: Iterable[str], workdir: Path, parallel: int = 4, push: bool = False
) -> dict[str, Runs]:
    """:func:`three_ways` for each transport this harness runs through a2a-tape (``push``: the push slice)."""
    wired = [t for t in transports if t in WIRED]
    together = parallel >= 2
    if parallel < 4:
        return {t: three_ways(install, t, workdir, together, push) for t in wired}
    with concurrent.futures.ThreadPoolExecutor(len(wired) or 1) as pool:
        futures = {t: pool.submit(three_ways, install, t, workdir, together, push) for t in wired}
        return {t: f.result() for t, f in futures.items()}


def push_tests(runs: Runs) -> dict[str, str]:
    """The direct outcome of each of the TCK's push tests (:data:`PUSH_FILE`) of the runs' transport."""
    mine = f"[{runs.transport}]"
    return {n: o for n, o in runs.direct.outcomes.items() if n.startswith(PUSH_FILE) and n.endswith(mine)}


# --- judging ---------------------------------------------------------------------------------------------


def load_known(path: Path = KNOWN_DIFFERENCES) -> dict[tuple[str, ...], allowlist.Line]:
    """The allowlist: ``SETUP[~] TRANSPORT NODEID REASON`` per line (tests/oracles/allowlist.py)."""
    known = allowlist.read(path, ("transport", "nodeid"))
    for line in known.values():
        if line.fields[0] not in TRANSPORTS:
            raise ValueError(f"{path.name}:{line.number}: unknown transport {line.fields[0]!r}")
    return known


def serve_misses(runs: Runs) -> dict[str, tuple[str, str]]:
    """nodeid -> (direct, serve) for every test of level ``must`` that passed directly and not against serve."""
    out = {}
    for nodeid in sorted(runs.must):
        outcome = runs.replay.outcomes.get(nodeid, ABSENT)
        if runs.direct.outcomes.get(nodeid) == "passed" and outcome != "passed":
            out[nodeid] = ("passed", outcome)
    return out


WHOLE = "*"  # the node id of a line about a whole set-up: serve refuses the recording


def judge(setup: str, runs: Runs, known: dict[tuple[str, ...], allowlist.Line]) -> list[str]:
    """What is wrong on one transport: a difference not listed, and a listed one that no longer shows.

    ``proxy``: any test whose outcome differs from direct's. ``serve``: a test at level ``must`` that passed
    directly and not against serve (a test serve passes and the agent fails is no difference); when serve would
    not start over the recording, that is one difference, listed with the node id ``*``."""
    transport = runs.transport
    if setup == "serve" and (runs.serve_refused or ("serve", transport, WHOLE) in known):
        return _judge_refusal(runs, known)
    if setup == "proxy":
        diff = differences(runs.direct, runs.proxied)
    else:
        diff = serve_misses(runs)
    problems = []
    for nodeid, (a, b) in diff.items():
        if (setup, transport, nodeid) not in known:
            problems.append(f"differs, not in {runs.known.name}: {transport} {nodeid}: direct {a}, {setup} {b}")
    for (where, on, nodeid), line in sorted(known.items()):
        if where == setup and on == transport and not line.sometimes and nodeid not in diff:
            now = f"direct {runs.direct.outcomes.get(nodeid, ABSENT)}, {setup} "
            now += (runs.proxied if setup == "proxy" else runs.replay).outcomes.get(nodeid, ABSENT)
            problems.append(
                f"no longer differs ({now}), remove line {line.number} of {runs.known.name}:"
                f" {setup} {transport} {nodeid} ({line.reason})"
            )
    return problems


def _judge_refusal(runs: Runs, known: dict[tuple[str, ...], allowlist.Line]) -> list[str]:
    line = known.get(("serve", runs.transport, WHOLE))
    if runs.serve_refused and line is None:
        return [f"serve would not start, not in {runs.known.name}: {runs.transport}: {runs.serve_refused}"]
    if not runs.serve_refused and line is not None:
        return [
            f"serve starts now: replace line {line.number} of {runs.known.name} (serve {runs.transport} *)"
            f" with the tests it misses, if any: {serve_misses(runs) or 'none'}"
        ]
    return []


def table(runs: Runs, only_differences: bool = False) -> str:
    """One line per TCK test of a transport: its level (``must`` or ``-``), its outcome in each set-up, ``<-``
    where the judge sees a difference (:func:`judge`'s rules)."""
    flagged = set(differences(runs.direct, runs.proxied))
    if not runs.serve_refused:  # else one difference, said below the table
        flagged |= set(serve_misses(runs))
    ids = sorted(set(runs.direct.outcomes) | set(runs.proxied.outcomes) | set(runs.replay.outcomes))
    width = max([len(i) for i in ids] + [4])
    head = f"{runs.transport}".ljust(width) + "  level" + "".join(f"  {r.name:<8}" for r in runs.all())
    lines = [head, "-" * len(head)]
    for nodeid in ids:
        if only_differences and nodeid not in flagged:
            continue
        row = [JUDGED_LEVEL if nodeid in runs.must else "-", *(r.outcomes.get(nodeid, ABSENT) for r in runs.all())]
        lines.append(
            nodeid.ljust(width)
            + "".join(f"  {o:<8}" if i else f"  {o:<5}" for i, o in enumerate(row))
            + ("  <-" if nodeid in flagged else "")
        )
    lines.append("")
    for r in runs.all():
        lines.append(f"{runs.transport} {r.name}: {r.counts()} ({r.seconds.get(runs.transport, 0):.0f} s)")
    if runs.serve_refused:
        lines.append(f"{runs.transport} serve did not start: {runs.serve_refused}")
    return "\n".join(lines)
