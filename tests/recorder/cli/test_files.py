"""Files, databases and tapes at the command line's edge (issue 23 item 8, issue 26 items 3 and 4).

The installed CLI in a subprocess, each with a private TMPDIR (a tape's temporary copy must go); the cases
beyond the first of a table that checks one rule many times run the same command in process (``installed=``
below says which; what a process alone can show, a pipe to /dev/full and the servers, stays installed):

- a read-only command never creates or initialises a database: a missing path, an empty file, a
  file that is not SQLite, another program's SQLite database: exit 2, one line, the file as it was;
- every inspection command reads a tape as it reads a database, the tape untouched;
- a command that fails before recording anything leaves no database behind.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import httpx
import msgspec
import pytest

from a2a_tape import store
from a2a_tape.store import Exchange
from a2a_tape.store.tape import import_tape
from tests.support.in_process import run_in_process, without_our_variables

CLI = str(Path(sys.executable).with_name("a2a-tape"))
TAPE = Path(__file__).resolve().parents[3] / "recordings" / "sdk-v10-stream.jsonl"
TASK = "eae94752-8d54-4221-873c-d1ce09cd1df2"  # the tape's one task


def cli(
    tmp_path: Path, *args: object, timeout: float = 120, installed: bool = True
) -> subprocess.CompletedProcess[bytes]:
    """``a2a-tape ARGS`` in ``tmp_path``, by the installed script; ``installed=False``: the same command in this
    process (tests/support/in_process.py), its temporary files in the same private directory."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("A2A_TAPE")}
    (tmp_path / "tmp").mkdir(exist_ok=True)
    env["TMPDIR"] = str(tmp_path / "tmp")  # what a tape's copy leaves behind shows here
    if not installed:
        before = tempfile.tempdir
        tempfile.tempdir = env["TMPDIR"]  # this process read TMPDIR once already
        try:
            ours = {**without_our_variables(), "TMPDIR": env["TMPDIR"]}
            return run_in_process([str(a) for a in args], tmp_path, ours, timeout)
        finally:
            tempfile.tempdir = before
    return subprocess.run(
        [CLI, *map(str, args)], cwd=tmp_path, capture_output=True, timeout=timeout, env=env, stdin=subprocess.DEVNULL
    )


def one_error_line(r: subprocess.CompletedProcess[bytes], *needles: str) -> str:
    err = r.stderr.decode()
    assert r.returncode == 2, (r.returncode, err)
    assert len(err.splitlines()) == 1 and err.startswith("a2a-tape: error: "), err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in err, (needle, err)
    return err


def _foreign_sqlite(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (body TEXT)")
    conn.commit()
    conn.close()


NOT_A_LOG: dict[str, Callable[[Path], None]] = {
    "empty file": lambda p: p.write_bytes(b""),
    "text file": lambda p: p.write_bytes(b"not a database\n"),
    "another program's SQLite": _foreign_sqlite,
}

INSTALLED_KIND = "empty file"
"""The kind of file every command is given through the installed script (the others: in process)."""

# every command that reads a log; LOG is the log under test, OTHER a good one
READERS: dict[str, list[str]] = {
    "tasks": ["tasks", "--json", "--db", "LOG"],
    "show": ["show", TASK, "--json", "--db", "LOG"],
    "channels": ["channels", TASK, "--json", "--db", "LOG"],
    "doctor": ["doctor", "--json", "--db", "LOG"],
    "doctor TASK": ["doctor", TASK, "--json", "--db", "LOG"],
    "grep": ["grep", "hello", "--json", "--db", "LOG"],
    "grep --regex": ["grep", "hel+o", "--regex", "--json", "--db", "LOG"],
    "diff LOG OTHER": ["diff", "LOG", "OTHER", "--json"],
    "diff OTHER LOG": ["diff", "OTHER", "LOG", "--json"],
    "export jsonl": ["export", TASK, "--db", "LOG"],
    "export har": ["export", "--all", "--format", "har", "--db", "LOG"],
    "export mermaid": ["export", TASK, "--format", "mermaid", "--db", "LOG"],
    "export html": ["export", TASK, "--format", "html", "--db", "LOG"],
    "export --all html": ["export", "--all", "--format", "html", "--db", "LOG"],
    "copy LOG": ["copy", "LOG", "new.db", "--json"],
}
REFUSERS = {
    **READERS,
    "ui": ["ui", "--no-open", "--db", "LOG"],
    "serve": ["serve", "--listen", "127.0.0.1:0", "--db", "LOG"],
    "recover": ["recover", "--json", "--db", "LOG"],
}


def _argv(argv: list[str], log: Path, other: Path) -> list[str]:
    return [str(log) if a == "LOG" else str(other) if a == "OTHER" else a for a in argv]


@pytest.fixture(scope="module")
def good_db(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("good") / "good.db"
    with store.open_store(path) as st, TAPE.open("rb") as fh:
        import_tape(st, fh)
    return path


def _leftovers(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in (tmp_path / "tmp").iterdir())


@pytest.mark.parametrize("make", NOT_A_LOG.values(), ids=NOT_A_LOG.keys())
@pytest.mark.parametrize("argv", REFUSERS.values(), ids=REFUSERS.keys())
def test_a_file_that_holds_no_log_is_refused_and_left_as_it_was(tmp_path, good_db, argv, make):
    """Each command through the installed script on the first kind of file (INSTALLED_KIND); on the others,
    the same command in process (the same opening code refuses them), ~0.3 s of CPU less each."""
    log = tmp_path / "x.db"
    make(log)
    before = log.read_bytes()
    r = cli(tmp_path, *_argv(argv, log, good_db), installed=make is NOT_A_LOG[INSTALLED_KIND])
    one_error_line(r, f"not an a2a-tape database: {log}")
    assert log.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tmp", "x.db"]  # no -wal, -shm, new.db
    assert _leftovers(tmp_path) == []


NAMING = {name: argv for name, argv in REFUSERS.items() if argv[0] != "diff"}  # diff: a missing path is a task id
SERVERS = ("ui", "serve")  # always installed: a refusal missed in process would leave a server running here


@pytest.mark.parametrize("argv", NAMING.values(), ids=NAMING.keys())
def test_a_missing_log_is_not_created(tmp_path, good_db, argv):
    """The first command and the servers through the installed script; the others in process (each
    command is refused by the installed script in the test above)."""
    log = tmp_path / "missing.db"
    installed = argv is next(iter(NAMING.values())) or argv[0] in SERVERS
    r = cli(tmp_path, *_argv(argv, log, good_db), installed=installed)
    one_error_line(r, str(log))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tmp"]


def _normalised(out: bytes, log: Path) -> bytes:
    """The output less the log's own name (an export names its source) and a tape's header (when
    it was exported)."""
    if out.startswith(b'{"type":"header"'):
        out = out.split(b"\n", 1)[1]
    return out.replace(str(log).encode(), b"LOG").replace(log.name.encode(), b"LOG")


@pytest.mark.parametrize("argv", READERS.values(), ids=READERS.keys())
def test_every_inspection_command_reads_a_tape_as_it_reads_the_database(tmp_path, good_db, argv):
    """The first command through the installed script; the others in process (the same opening code
    copies the tape, in this process's TMPDIR too)."""
    installed = argv is next(iter(READERS.values()))
    tape = tmp_path / "x.jsonl"
    tape.write_bytes(TAPE.read_bytes())
    db = tmp_path / "x.db"
    db.write_bytes(good_db.read_bytes())
    from_tape = cli(tmp_path, *_argv(argv, tape, good_db), installed=installed)
    assert from_tape.returncode in (0, 1), from_tape.stderr.decode()  # diff: 1 when they differ
    if argv[0] == "copy":
        (tmp_path / "new.db").rename(tmp_path / "from-tape.db")
    from_db = cli(tmp_path, *_argv(argv, db, good_db), installed=installed)
    assert (from_tape.returncode, from_tape.stderr) == (from_db.returncode, from_db.stderr.replace(b"x.db", b"x.jsonl"))
    assert _normalised(from_tape.stdout, tape) == _normalised(from_db.stdout, db)
    assert from_tape.stdout.strip()
    if argv[0] == "copy":
        assert cli(tmp_path, "diff", "from-tape.db", "new.db", installed=False).returncode == 0
    assert tape.read_bytes() == TAPE.read_bytes()  # the tape untouched
    assert _leftovers(tmp_path) == []  # its copy gone


def test_ui_reads_a_tape(tmp_path):
    tape = tmp_path / "x.jsonl"
    tape.write_bytes(TAPE.read_bytes())
    (tmp_path / "tmp").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("A2A_TAPE")} | {"TMPDIR": str(tmp_path / "tmp")}
    proc = subprocess.Popen(
        [CLI, "ui", "--no-open", "--json", "--db", str(tape)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    try:
        assert proc.stdout is not None
        where = msgspec.json.decode(proc.stdout.readline())
        page = httpx.get(where["url"], follow_redirects=True, timeout=30)
        assert page.status_code == 200 and TASK[:8] in page.text
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
    assert tape.read_bytes() == TAPE.read_bytes()
    assert _leftovers(tmp_path) == []


def test_a_damaged_tape_is_one_line(tmp_path):
    tape = tmp_path / "x.jsonl"
    lines = TAPE.read_bytes().splitlines(keepends=True)
    tape.write_bytes(b"".join([*lines[:3], b'{"type": "event", "payload": "cut\n', *lines[3:]]))
    before = tape.read_bytes()
    one_error_line(cli(tmp_path, "tasks", "--db", tape), "line 4")
    assert tape.read_bytes() == before
    assert _leftovers(tmp_path) == []


# -- a command that fails before recording anything leaves no database -----------------------


def _refused_port() -> int:
    from tests.support.servers import closed_port

    return closed_port()  # nothing listens there


def _hostile_log(path: Path) -> None:
    """A log holding a header no tape can carry (the store takes what it is given; import refuses it)."""
    with store.open_store(path) as st:
        st.begin_exchange(Exchange(started_at=1.0, url="http://agent/", response_headers={"X-Bad": "a\r\nb"}))


FAILURES: dict[str, Callable[[Path, Path], list[object]]] = {
    "record, refused connection": lambda tmp, db: ["record", f"http://127.0.0.1:{_refused_port()}", "hi", "--db", db],
    "record, no agent card": lambda tmp, db: ["record", "CARDLESS", "hi", "--db", db],
    "import, bad tape": lambda tmp, db: ["import", _bad_tape(tmp), "--db", db],
    "proxy, its port taken": lambda tmp, db: ["proxy", "CARDLESS", "--listen", "BUSY", "--db", db],
    "copy, a log no tape can carry": lambda tmp, db: ["copy", _made(tmp / "src.db", _hostile_log), db],
}


def _bad_tape(tmp: Path) -> Path:
    tape = tmp / "bad.jsonl"
    tape.write_bytes(TAPE.read_bytes().replace(b'"type":"event"', b'"type":"evnt"', 1))
    return tape


def _made(path: Path, make: Callable[[Path], None]) -> Path:
    make(path)
    return path


@pytest.fixture
def cardless() -> object:
    """A plain HTTP server that is no A2A agent (404 for the card): a real one, on loopback."""
    import http.server
    import threading

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    server.RequestHandlerClass.log_message = lambda *a: None  # type: ignore[method-assign]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("args", FAILURES.values(), ids=FAILURES.keys())
def test_a_command_that_fails_before_recording_leaves_no_database(tmp_path, cardless, args):
    """The first case and the proxy (a server) through the installed script; the others in process."""
    db = tmp_path / "new.db"
    at = f"http://127.0.0.1:{cardless.server_address[1]}"  # type: ignore[attr-defined]
    busy = f"127.0.0.1:{cardless.server_address[1]}"  # type: ignore[attr-defined]
    argv = [at if a == "CARDLESS" else busy if a == "BUSY" else a for a in args(tmp_path, db)]
    r = cli(tmp_path, *argv, installed=args is next(iter(FAILURES.values())) or argv[0] == "proxy")
    one_error_line(r)
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith("new.db")]


def test_a_failed_import_into_an_existing_log_keeps_it(tmp_path, good_db):
    db = tmp_path / "kept.db"
    db.write_bytes(good_db.read_bytes())
    one_error_line(cli(tmp_path, "import", _bad_tape(tmp_path), "--db", db))
    with store.open_store(db, readonly=True) as st:
        assert st.count_events() == 6


# -- output files ---------------------------------------------------------------------------

FORMATS = ["jsonl", "har", "mermaid", "html"]
INSTALLED_FORMAT = "jsonl"
"""The format each rule on output files is checked in through the installed script (the others: in process,
where the same writer opens, refuses and names the same files)."""


@pytest.mark.parametrize("fmt", FORMATS)
def test_an_empty_output_is_bad_usage_and_the_current_directory_is_left_alone(tmp_path, good_db, fmt):
    (tmp_path / "index.html").write_text("mine")
    r = cli(tmp_path, "export", "--all", "--format", fmt, "-o", "", "--db", good_db, installed=fmt == INSTALLED_FORMAT)
    one_error_line(r, "'-o'", "an empty path names no file")
    assert (tmp_path / "index.html").read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["index.html", "tmp"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_dash_is_standard_output(tmp_path, good_db, fmt):
    installed = fmt == INSTALLED_FORMAT
    plain = cli(tmp_path, "export", "--all", "--format", fmt, "--db", good_db, installed=installed)
    dash = cli(tmp_path, "export", "--all", "--format", fmt, "-o", "-", "--db", good_db, installed=installed)
    assert dash.returncode == plain.returncode == 0, dash.stderr
    assert _normalised(dash.stdout, good_db) == _normalised(plain.stdout, good_db) and dash.stdout
    assert not (tmp_path / "-").exists()


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_an_output_error_names_the_output_not_the_log(tmp_path, good_db, fmt):
    """``-o /dev/full`` in process but for INSTALLED_FORMAT; standard output on /dev/full is the process's
    own: installed in every format."""
    installed = fmt == INSTALLED_FORMAT
    r = cli(tmp_path, "export", "--all", "--format", fmt, "-o", "/dev/full", "--db", good_db, installed=installed)
    line = one_error_line(r, "cannot write /dev/full")
    assert "log" not in line
    with open("/dev/full", "wb") as full:
        env = {k: v for k, v in os.environ.items() if not k.startswith("A2A_TAPE")}
        piped = subprocess.run(
            [CLI, "export", "--all", "--format", fmt, "--db", str(good_db)],
            stdout=full,
            stderr=subprocess.PIPE,
            timeout=120,
            env=env,
        )
    assert piped.returncode == 2 and piped.stderr.decode().splitlines() == [
        "a2a-tape: error: cannot write standard output: No space left on device"
    ]


def test_a_page_of_a_directory_export_that_cannot_be_written_is_named(tmp_path, good_db):
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").mkdir()  # the index cannot be written: a directory stands there
    r = cli(tmp_path, "export", "--all", "--format", "html", "-o", f"{site}/", "--db", good_db)
    one_error_line(r, f"cannot write {site / 'index.html'}")


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("log", ["database", "tape"])
def test_the_output_is_never_the_log_being_read(tmp_path, good_db, fmt, log):
    path = tmp_path / ("x.db" if log == "database" else "x.jsonl")
    path.write_bytes(good_db.read_bytes() if log == "database" else TAPE.read_bytes())
    before = path.read_bytes()
    (tmp_path / "link").symlink_to(path)
    r = cli(tmp_path, "export", "--all", "--format", fmt, "-o", "link", "--db", path, installed=fmt == INSTALLED_FORMAT)
    one_error_line(r, "-o link is the log being read")
    assert path.read_bytes() == before


# -- durations ------------------------------------------------------------------------------


def _duration_options() -> list[tuple[str, str]]:
    """Every option of every command read by the one duration rule (options.seconds)."""
    import typer

    from a2a_tape.cli import COMMANDS, app, options

    root = typer.main.get_command(app)
    found = []
    for name in COMMANDS:
        command = root.get_command(None, name)  # type: ignore[attr-defined]
        for param in command.params:
            rule = getattr(param, "callback", None)
            rule = getattr(rule, "__wrapped__", rule)  # typer wraps each callback
            if rule is options.seconds:
                found.append((name, param.opts[0]))
    return found


FILLERS = {  # each command's arguments: the bad duration is refused before they are used
    "show": [TASK],
    "proxy": ["http://127.0.0.1:9"],
    "probe": ["http://127.0.0.1:9"],
    "record": ["http://127.0.0.1:9", "hi"],
    "import": ["x.jsonl"],
    "copy": ["a.db", "b.db"],
}
DURATIONS = [*_duration_options(), ("serve", "--fault delay="), ("serve", "--timing")]
INSTALLED_DURATIONS = {
    *{command: (command, option) for command, option in reversed(DURATIONS)}.values(),  # each command's first
    ("serve", "--fault delay="),  # serve's own two rules, beside options.seconds
    ("serve", "--timing"),
}


def test_the_duration_options_are_found():
    assert len(DURATIONS) >= 12 and ("serve", "--fault delay=") in DURATIONS


@pytest.mark.parametrize("value", ["inf", "-inf", "Infinity", "1e309", "nan"])
@pytest.mark.parametrize(("command", "option"), DURATIONS, ids=[" ".join(d) for d in DURATIONS])
def test_every_duration_refuses_infinity_as_it_refuses_nan(tmp_path, command, option, value):
    """Each command's first option (and serve's own rules) through the installed script with ``inf``; its
    other values and the command's other options in process (the one rule, options.seconds, refuses them
    there alike), ~0.35 s of CPU less each."""
    given = ["--fault", f"delay={value}"] if option.endswith("=") else [option, value]
    argv = [command, *FILLERS.get(command, []), *given, "--db", tmp_path / "x.db"]
    r = cli(tmp_path, *argv, timeout=60, installed=value == "inf" and (command, option) in INSTALLED_DURATIONS)
    one_error_line(r)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tmp"]


@pytest.mark.parametrize(
    "args",
    [["record", "http://127.0.0.1:9/", "hi"], ["import", TAPE]],
    ids=["record", "import"],
)
def test_a_command_that_writes_leaves_another_programs_database_alone(tmp_path, args):
    """Given another program's SQLite database as --db, a writing command refuses it (exit 2, one line)
    instead of adding our tables beside the program's own; the file is as it was."""
    db = tmp_path / "theirs.db"
    _foreign_sqlite(db)
    before = db.read_bytes()
    r = cli(tmp_path, *args, "--db", db, installed=args[0] == "record")  # import: in process
    one_error_line(r, f"not an a2a-tape database: {db}")
    assert db.read_bytes() == before
