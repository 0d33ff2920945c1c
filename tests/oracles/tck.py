"""The official A2A TCK (a2aproject/a2a-tck, commit 410ba92) as an oracle: installed once, run against a URL,
outcomes per test. Its successor, TCK 1.0 (three bindings), is tests/oracles/tck1.py.

Where the TCK comes from: ``$A2A_TAPE_TCK_TARBALL``, else ``<repo>/../shared/oracles/a2a-tck-410ba92.tar.gz``
(CI lays ``shared/`` beside the clone; a user's checkout usually has neither, and the oracle tests then skip
saying so).

Where it goes (tests/oracles/cache.py): ``<cache>/tck/<hash of the tarball>/``: the unpacked source and a venv
of its own (``pip install -e``), because its dependencies (grpcio, pytest plugins, ...) are none of ours.

How it runs: the TCK's ``run_tck.py`` is a thin wrapper over pytest; we call pytest in the TCK's venv with the
same selection per category (path and marker expression, copied from run_tck.py's table) and its
``--json-report`` option (pytest-json-report, a TCK dependency), so every test's outcome is read, not scraped.
``A2A_AUTH_HEADERS='{"A2A-Version":"1.0"}'`` makes this TCK (which sends v1.0 method names) acceptable to
a2a-sdk 1.3.0, and ``TCK_STREAMING_TIMEOUT=2.0`` keeps streaming tests short.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from tests.oracles import allowlist
from tests.oracles.cache import (
    Unavailable,
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

KNOWN_DIFFERENCES = Path(__file__).with_name("known_tck_differences.txt")

TARBALL_ENV = "A2A_TAPE_TCK_TARBALL"
# Exactly this commit: TCK 1.0's tarball (a2a-tck-1.0-dev-*.tar.gz) lies in the same folder.
TARBALL_GLOB = "a2a-tck-410ba92*.tar.gz"
CATEGORIES_ENV = "A2A_TAPE_TCK_CATEGORIES"

# category -> (path inside the TCK, pytest marker expression or None); run_tck.py's table, with the JSON-RPC
# compliance marker that run_tck.py adds to "mandatory" when --transports names jsonrpc.
CATEGORIES: dict[str, tuple[str, str | None]] = {
    "mandatory": ("tests/mandatory/", "mandatory or mandatory_protocol or mandatory_jsonrpc"),
    "capabilities": ("tests/optional/capabilities/", None),
    "transport-equivalence": ("tests/optional/multi_transport/", "transport_equivalence"),
    "quality": ("tests/optional/quality/", None),
    "features": ("tests/optional/features/", None),
}
ALL = tuple(CATEGORIES)

TCK_ENV = {"A2A_AUTH_HEADERS": '{"A2A-Version":"1.0"}', "TCK_STREAMING_TIMEOUT": "2.0"}
CATEGORY_TIMEOUT = 900.0  # seconds; a whole category takes under two minutes against a local agent


def selected_categories() -> tuple[str, ...]:
    """``$A2A_TAPE_TCK_CATEGORIES`` (comma-separated names, or ``all``); all categories by default."""
    return chosen(os.environ.get(CATEGORIES_ENV, "all"), ALL, CATEGORIES_ENV)


@dataclass(frozen=True)
class Install:
    source: Path  # the unpacked a2a-tck directory (pytest's rootdir)
    python: Path  # the TCK venv's interpreter
    seconds: float  # what the install took in this process; 0.0 when it was already in the cache


def ensure_installed(tarball: Path | None = None) -> Install:
    """The TCK unpacked and installed in its own venv under the cache (done once per tarball)."""
    tarball = tarball or find_tarball(TARBALL_ENV, TARBALL_GLOB)
    if tarball is None:
        raise no_tarball(TARBALL_ENV, TARBALL_GLOB, "A2A TCK")
    home = cache_dir() / "tck" / digest(tarball)

    def build(home: Path) -> None:
        unpack(tarball, home / "src")
        make_venv(home / "venv", ["-e", str(source_dir(home / "src"))], home / "install.log", "the A2A TCK")

    seconds = install_once(home, build)
    return Install(source_dir(home / "src"), home / "venv" / "bin" / "python", seconds)


def source_dir(unpacked: Path) -> Path:
    """The TCK's root (where its ``run_tck.py`` is) in an unpacked tarball."""
    found = [p.parent for p in unpacked.glob("*/run_tck.py")]
    if not found:
        raise Unavailable(f"no run_tck.py in the unpacked tarball under {unpacked}")
    return found[0]


# --- one run ---------------------------------------------------------------------------------------------


class _ReportTest(msgspec.Struct):
    nodeid: str
    outcome: str


class _Report(msgspec.Struct):
    tests: list[_ReportTest] = []
    exitcode: int = 0


@dataclass
class Run:
    """The outcome of every TCK test in one set-up (``passed``, ``failed``, ``skipped``, ``error``, ...)."""

    name: str
    url: str
    outcomes: dict[str, str] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for o in self.outcomes.values():
            out[o] = out.get(o, 0) + 1
        return dict(sorted(out.items()))


def run_category(install: Install, url: str, category: str, workdir: Path) -> dict[str, str]:
    path, markers = CATEGORIES[category]
    workdir.mkdir(parents=True, exist_ok=True)
    report = workdir / f"{category}.json"
    cmd = [
        str(install.python),
        "-m",
        "pytest",
        path,
        f"--sut-url={url}",
        "--test-scope=all",
        "--transports=jsonrpc",
        "--tb=short",
        "-q",
        "-p",
        "no:cacheprovider",
        "--json-report",
        f"--json-report-file={report}",
        "--json-report-omit=collectors,keywords,log,streams,warnings",
    ]
    if markers:
        cmd += ["-m", markers]
    env = {**plain_env(), **TCK_ENV}
    with (workdir / f"{category}.log").open("wb") as out:
        subprocess.run(cmd, cwd=install.source, env=env, stdout=out, stderr=subprocess.STDOUT, timeout=CATEGORY_TIMEOUT)
    if not report.exists():
        raise AssertionError(f"the TCK wrote no report for {category} against {url}; see {workdir / category}.log")
    parsed = msgspec.json.decode(report.read_bytes(), type=_Report)
    if parsed.exitcode in (2, 3, 4):  # interrupted, internal error, usage error: not a run to compare
        raise AssertionError(f"the TCK's pytest exited {parsed.exitcode} for {category}; see {workdir / category}.log")
    return {t.nodeid: t.outcome for t in parsed.tests}


def run_tck(install: Install, name: str, url: str, categories: Iterable[str], workdir: Path) -> Run:
    run = Run(name, url)
    for category in categories:
        started = time.monotonic()
        run.outcomes.update(run_category(install, url, category, workdir / name))
        run.seconds[category] = time.monotonic() - started
    return run


# --- comparing runs --------------------------------------------------------------------------------------

ABSENT = "absent"


def differences(reference: Run, other: Run) -> dict[str, tuple[str, str]]:
    """nodeid -> (reference outcome, other outcome) for every test whose outcome differs (or is missing)."""
    out = {}
    for nodeid in sorted(set(reference.outcomes) | set(other.outcomes)):
        a = reference.outcomes.get(nodeid, ABSENT)
        b = other.outcomes.get(nodeid, ABSENT)
        if a != b:
            out[nodeid] = (a, b)
    return out


@dataclass(frozen=True)
class Known:
    setup: str  # "proxy" or "serve"
    nodeid: str
    reason: str
    sometimes: bool = False  # "serve~": may differ or agree depending on the run (not held to "now agrees")


def load_known(path: Path = KNOWN_DIFFERENCES) -> dict[tuple[str, str], Known]:
    """The allowlist: ``SETUP[~] NODEID REASON`` per line (tests/oracles/allowlist.py)."""
    return {
        (setup, nodeid): Known(setup, nodeid, line.reason, line.sometimes)
        for (setup, nodeid), line in allowlist.read(path, ("nodeid",)).items()
    }


def judge(
    setup: str, reference: Run, other: Run, known: dict[tuple[str, str], Known], categories: Iterable[str]
) -> list[str]:
    """What is wrong with ``other`` against ``reference``: unlisted differences, and listed ones now gone.

    Only allowlist lines of the categories that ran are held to account (a mandatory-only run does not
    report the quality entries as gone).
    """
    diff = differences(reference, other)
    ran = tuple(CATEGORIES[c][0] for c in categories)
    problems = []
    for nodeid, (a, b) in diff.items():
        if (setup, nodeid) not in known:
            problems.append(f"differs, not in {KNOWN_DIFFERENCES.name}: {nodeid}: direct {a}, {setup} {b}")
    for (where, nodeid), entry in sorted(known.items()):
        if where == setup and not entry.sometimes and nodeid.startswith(ran) and nodeid not in diff:
            outcome = reference.outcomes.get(nodeid, ABSENT)
            problems.append(
                f"now agrees ({outcome} both ways), remove it from {KNOWN_DIFFERENCES.name}: {setup} {nodeid}"
                f" ({entry.reason})"
            )
    return problems


def table(runs: list[Run], only_differences: bool = False) -> str:
    """A plain-text table: one line per TCK test, one column per run."""
    ids = sorted(set().union(*(r.outcomes for r in runs)))
    width = max([len(i) for i in ids] + [4])
    head = "test".ljust(width) + "".join(f"  {r.name:<8}" for r in runs)
    lines = [head, "-" * len(head)]
    for nodeid in ids:
        row = [r.outcomes.get(nodeid, ABSENT) for r in runs]
        if only_differences and len(set(row)) == 1:
            continue
        mark = "" if len(set(row)) == 1 else "  <-"
        lines.append(nodeid.ljust(width) + "".join(f"  {o:<8}" for o in row) + mark)
    lines.append("")
    for r in runs:
        took = ", ".join(f"{c} {s:.0f} s" for c, s in r.seconds.items())
        lines.append(f"{r.name}: {r.counts()} ({took})")
    return "\n".join(lines)


# --- the three set-ups -----------------------------------------------------------------------------------


@contextlib.contextmanager
def tck_agent() -> Iterator[str]:
    """A fresh a2a-sdk 1.3.0 agent (tests/support/tck_agent.py) on 127.0.0.1; yields its base URL."""
    from tests.support.servers import closed_port, serve_app
    from tests.support.tck_agent import make_tck_agent_app

    port = closed_port()  # nothing listens there; bound later by the server
    url = f"http://127.0.0.1:{port}"
    app, _ = make_tck_agent_app(url)
    with serve_app(app, port=port) as served:
        yield served


def _copy_db(src: Path, dst: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        if Path(f"{src}{suffix}").exists():
            shutil.copyfile(f"{src}{suffix}", f"{dst}{suffix}")


# Categories whose tests may run alongside another TCK run: the rest hold fixed ports (the push-notification
# webhook binds localhost:8888) or measure concurrency and timing, so the two runs take turns for them.
PARALLEL_SAFE = frozenset({"mandatory"})


def run_three_ways(install: Install, categories: Iterable[str], workdir: Path) -> tuple[Run, Run, Run]:
    """The TCK (a) against an agent, (b) through ``a2a-tape proxy`` in front of a second, identical agent,
    recording; then (c) against ``a2a-tape serve`` over a copy of that recording, ``--record-mode
    new_episodes --upstream`` the proxied agent (which still holds the tasks it ran).

    Each set-up has an agent of its own so that ListTasks sees only that run's tasks. A category of
    ``PARALLEL_SAFE`` (the mandatory tests: they mostly wait) runs beside another run; the others one run at a
    time. The proxy records every category first (a) and (b) of the safe ones at once; then serve replays
    them in the same order while (a) runs the other categories beside serve's safe ones: (a) needs nothing of
    the recording, and serve's mandatory run (most of its time) no longer waits for it.
    """
    import concurrent.futures

    from tests.oracles import tape

    categories = tuple(categories)
    safe = [c for c in categories if c in PARALLEL_SAFE]
    rest = [c for c in categories if c not in PARALLEL_SAFE]
    workdir.mkdir(parents=True, exist_ok=True)
    recording = workdir / "proxy.db"
    replayed = workdir / "serve.db"
    direct, proxied, replay = Run("direct", ""), Run("proxy", ""), Run("serve", "")

    def into(run: Run, part: Run) -> None:
        run.outcomes.update(part.outcomes)
        run.seconds.update(part.seconds)

    with (
        tck_agent() as direct_url,
        tck_agent() as proxied_url,
        concurrent.futures.ThreadPoolExecutor(2) as pool,
    ):
        direct.url = direct_url
        with tape.proxy(proxied_url, recording, workdir / "proxy.stderr") as proxy:
            proxied.url = proxy.url
            for category in safe:  # (a) and (b) at once
                sides = ((direct, direct_url), (proxied, proxy.url))
                futures = [pool.submit(run_tck, install, r.name, u, (category,), workdir) for r, u in sides]
                for run, future in zip((direct, proxied), futures):
                    into(run, future.result())
            for category in rest:
                into(proxied, run_tck(install, proxied.name, proxy.url, (category,), workdir))
        _copy_db(recording, replayed)
        extra = ("--record-mode", "new_episodes", "--upstream", proxied_url)
        with tape.serve(replayed, workdir / "serve.stderr", *extra) as served:
            replay.url = served.url
            beside = pool.submit(run_tck, install, direct.name, direct_url, rest, workdir)  # one after another
            for category in safe:
                into(replay, run_tck(install, replay.name, served.url, (category,), workdir))
            into(direct, beside.result())
            for category in rest:  # in the order the proxy recorded them
                into(replay, run_tck(install, replay.name, served.url, (category,), workdir))
    return direct, proxied, replay
