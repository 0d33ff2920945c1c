"""Bad input to the first commands: exit 2, one line on stderr, no traceback, nothing lost."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from a2a_tape.store import open_store
from tests.support.in_process import run_in_process

from .conftest import TASK, assert_bad_input, count_events, make_log, run_cli

READ_COMMANDS = [["show", TASK], ["show", TASK, "--json"], ["export", TASK], ["export", "--all"]]


@pytest.mark.parametrize("argv", READ_COMMANDS, ids=" ".join)
def test_read_command_on_a_missing_database(tmp_path, argv):
    db = tmp_path / "missing.db"
    assert_bad_input(run_cli(*argv, "--db", db), "no database at", str(db))
    assert not db.exists()  # a read command never creates the file


@pytest.mark.parametrize("argv", READ_COMMANDS, ids=" ".join)
def test_read_command_in_a_missing_directory(tmp_path, argv):
    assert_bad_input(run_cli(*argv, "--db", tmp_path / "nowhere" / "x.db"), "no database at")


def test_import_into_a_missing_directory(tmp_path, log_db):
    tape = tmp_path / "t.jsonl"
    assert run_cli("export", "--all", "--db", log_db, "-o", tape).code == 0
    assert_bad_input(run_cli("import", tape, "--db", tmp_path / "nowhere" / "x.db"), "does not exist")
    assert not (tmp_path / "nowhere").exists()


def test_import_where_the_parent_is_a_file(tmp_path, log_db):
    tape = tmp_path / "t.jsonl"
    assert run_cli("export", "--all", "--db", log_db, "-o", tape).code == 0
    (tmp_path / "plain").write_text("x")
    assert_bad_input(run_cli("import", tape, "--db", tmp_path / "plain" / "x.db"))


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root ignores directory permissions")
def test_import_into_a_read_only_directory(tmp_path, log_db):
    tape = tmp_path / "t.jsonl"
    assert run_cli("export", "--all", "--db", log_db, "-o", tape).code == 0
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        assert_bad_input(run_cli("import", tape, "--db", ro / "x.db"))
    finally:
        ro.chmod(0o755)


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs a read-only file system (/proc)")
def test_import_into_a_read_only_file_system(tmp_path, log_db):
    """Works as root too: nobody can create a file in /proc."""
    tape = tmp_path / "t.jsonl"
    assert run_cli("export", "--all", "--db", log_db, "-o", tape).code == 0
    assert_bad_input(run_cli("import", tape, "--db", "/proc/a2a-tape-test.db"))


@pytest.mark.parametrize("argv", [*READ_COMMANDS, ["import", "TAPE"]], ids=" ".join)
def test_a_file_that_is_not_a_database(tmp_path, log_db, argv):
    db = tmp_path / "random.db"
    junk = os.urandom(8192)
    db.write_bytes(junk)
    tape = tmp_path / "t.jsonl"
    assert run_cli("export", "--all", "--db", log_db, "-o", tape).code == 0
    argv = [str(tape) if a == "TAPE" else a for a in argv]
    assert_bad_input(run_cli(*argv, "--db", db), "not an a2a-tape database")
    assert db.read_bytes() == junk  # left exactly as it was


@pytest.mark.parametrize(
    "argv", [["show", "no-such-task"], ["show", "no-such-task", "--json"], ["export", "no-such-task"]], ids=" ".join
)
def test_unknown_task(log_db, argv):
    assert_bad_input(run_cli(*argv, "--db", log_db), "unknown task: no-such-task")
    assert count_events(log_db) == 8


def _tape(tmp_path, log_db) -> list[bytes]:
    tape = tmp_path / "good.jsonl"
    assert run_cli("export", "--all", "--db", log_db, "-o", tape).code == 0
    lines = tape.read_bytes().splitlines(keepends=True)
    assert len(lines) == 1 + 2 + 8
    return lines


def test_import_with_a_broken_line_in_the_middle_imports_nothing(tmp_path, log_db):
    lines = _tape(tmp_path, log_db)
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"".join(lines[:6] + [b'{"type": "event", "seq": 3, "payload": "trunc\n'] + lines[6:]))
    target = tmp_path / "target.db"
    make_log(target)  # already holds a log: it must come out unchanged
    with_other = tmp_path / "other.jsonl"
    # a tape of new tasks (so a successful import WOULD add events), broken in the middle
    with_other.write_bytes(
        bad.read_bytes().replace(TASK.encode(), b"fresh-task").replace(b"other-task", b"fresh-other")
    )
    for path, db in ((bad, tmp_path / "empty.db"), (with_other, target)):
        before = count_events(db) if db.exists() else None
        line = assert_bad_input(run_cli("import", path, "--db", db), "line 7")
        assert "not a tape line" in line
        if before is None:
            assert not db.exists()  # a failed import leaves no new database behind
        else:
            assert count_events(db) == before


def test_import_with_non_utf8_bytes(tmp_path, log_db):
    lines = _tape(tmp_path, log_db)
    bad = tmp_path / "latin1.jsonl"
    bad.write_bytes(
        b"".join(lines[:4] + [b'{"type": "event", "position": 9, "seq": 9, "payload": "caf\xe9"}\n'] + lines[4:])
    )
    db = tmp_path / "new.db"
    assert_bad_input(run_cli("import", bad, "--db", db), "line 5", "not UTF-8")
    assert not db.exists()  # a failed import leaves no new database behind


def test_import_of_a_file_that_does_not_exist(tmp_path, log_db):
    assert_bad_input(run_cli("import", tmp_path / "nope.jsonl", "--db", log_db), "no such file")
    assert count_events(log_db) == 8


def test_import_of_a_binary_file(tmp_path, log_db):
    junk = tmp_path / "junk.jsonl"
    junk.write_bytes(os.urandom(4096).replace(b"\n", b"x"))
    assert_bad_input(run_cli("import", junk, "--db", log_db), "line 1")
    assert count_events(log_db) == 8


def test_good_import_then_reimport(tmp_path, log_db):
    """The control case: the same tape imports, and importing again adds nothing."""
    lines = _tape(tmp_path, log_db)
    tape = tmp_path / "ok.jsonl"
    tape.write_bytes(b"".join(lines))
    db = tmp_path / "copy.db"
    first = run_cli("import", tape, "--db", db)
    assert first.code == 0, first.stderr
    assert count_events(db) == 8
    second = run_cli("import", tape, "--db", db, "--json")
    assert second.code == 0 and b'"events":0' in second.stdout
    assert count_events(db) == 8


def test_no_traceback_reaches_a_user_of_the_installed_script(tmp_path):
    """The console script itself (not CliRunner): one line and exit 2 for each bad input."""
    script = Path(sys.executable).with_name("a2a-tape")
    if not script.exists():
        pytest.skip(f"console script not installed next to {sys.executable}")
    junk = tmp_path / "junk.db"
    junk.write_bytes(os.urandom(4096))
    cases = [
        ["show", "x", "--db", str(tmp_path / "missing.db")],
        ["show", "x", "--db", str(junk)],
        ["import", str(junk), "--db", str(tmp_path / "no" / "dir.db")],
    ]
    env = {**os.environ, "COLUMNS": "40"}  # a narrow terminal must not wrap the line
    env.pop("A2A_TAPE_DEBUG", None)
    for argv in cases:
        proc = subprocess.run([str(script), *argv], capture_output=True, timeout=60, env=env)
        err = proc.stderr.decode()
        assert proc.returncode == 2, (argv, proc.returncode, err)
        assert "Traceback" not in err and len(err.splitlines()) == 1 and err.startswith("a2a-tape: error: "), (
            argv,
            err,
        )
        assert proc.stdout == b""


def test_a_database_from_a_newer_a2a_tape(tmp_path, log_db):
    import sqlite3

    conn = sqlite3.connect(log_db)
    conn.execute("PRAGMA user_version = 99")
    conn.commit()
    conn.close()
    for argv in (["show", TASK], ["export", "--all"], ["import", str(log_db)]):
        assert_bad_input(run_cli(*argv, "--db", log_db), "schema version 99", "upgrade a2a-tape")
    conn = sqlite3.connect(log_db)
    assert conn.execute("SELECT COUNT(*) FROM events").fetchone()[0] == 8
    conn.close()


def test_export_into_a_missing_directory(tmp_path, log_db):
    assert_bad_input(run_cli("export", "--all", "--db", log_db, "-o", tmp_path / "no" / "out.jsonl"))
    assert not (tmp_path / "no").exists()


def test_import_from_stdin_with_a_broken_line(tmp_path, log_db):
    from typer.testing import CliRunner

    from a2a_tape.cli import app

    lines = _tape(tmp_path, log_db)
    data = b"".join(lines[:3] + [b"{not json}\n"] + lines[3:])
    db = tmp_path / "stdin.db"
    result = CliRunner().invoke(app, ["import", "-", "--db", str(db)], input=data)
    assert result.exit_code == 2 and result.stderr.startswith("a2a-tape: error: line 4")
    assert len(result.stderr.splitlines()) == 1 and "Traceback" not in result.stderr
    assert not db.exists()  # a failed import leaves no new database behind


def _large_tape(events: int) -> list[bytes]:
    """A tape over READER_MIN_BYTES: the installed command parses it in its reader process."""
    lines = [b'{"type":"header","a2a_tape":1}\n']
    for k in range(events):
        task = b"task-%05d" % (k // 100)
        lines.append(
            b'{"type":"event","position":%d,"seq":%d,"task_id":"%s","received_at":%d.5,"payload":"{\\"n\\": %d}"}\n'
            % (k + 1, k % 100 + 1, task, 1796000000 + k, k)
        )
    return lines


def test_a_large_tape_through_the_installed_script(tmp_path):
    """The reader-process path of `import` as a user meets it: the same log as an import parsed
    in-process, and a bad line near the end is one readable line (exit 2) that imports nothing. The file
    imported by the command run in this process (it starts the same reader process); a pipe on descriptor 0
    and the bad line through the installed script."""
    from a2a_tape.store.tape import export_lines, import_tape
    from a2a_tape.store.tape_reader import READER_MIN_BYTES

    script = Path(sys.executable).with_name("a2a-tape")
    if not script.exists():
        pytest.skip(f"console script not installed next to {sys.executable}")
    lines = _large_tape(30_000)
    tape = tmp_path / "large.jsonl"
    tape.write_bytes(b"".join(lines))
    assert tape.stat().st_size >= READER_MIN_BYTES
    db, here = tmp_path / "cli.db", tmp_path / "here.db"
    done = run_in_process(["import", str(tape), "--db", str(db)], tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    with open_store(here) as st:
        import_tape(st, lines, reader=False)
    with open_store(db) as a, open_store(here) as b:
        assert list(export_lines(a))[1:] == list(export_lines(b))[1:]  # all but the header's time
    piped = tmp_path / "stdin.db"  # `import - < FILE`: the reader process reads the file on descriptor 0
    with tape.open("rb") as fh:
        proc = subprocess.run(
            [str(script), "import", "-", "--db", str(piped)], stdin=fh, capture_output=True, timeout=120
        )
    assert proc.returncode == 0, proc.stderr
    with open_store(piped) as a, open_store(here) as b:
        assert list(export_lines(a))[1:] == list(export_lines(b))[1:]

    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"".join([*lines[:29_000], b'{"type":"event","position":\n', *lines[29_000:]]))
    fresh = tmp_path / "fresh.db"
    proc = subprocess.run([str(script), "import", str(bad), "--db", str(fresh)], capture_output=True, timeout=120)
    err = proc.stderr.decode()
    assert proc.returncode == 2 and err.startswith("a2a-tape: error: line 29001: not a tape line"), err
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert not fresh.exists()  # a failed import leaves no new database behind


def _tape_readers(tape: Path) -> list[int]:
    """The pids of the tape reader processes running now that have ``tape`` open (another
    engineer's or test's imports on the same machine are not this test's)."""
    pids = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if b"a2a_tape.store.tape_reader" not in cmdline.read_bytes():
                continue
            fds = cmdline.parent / "fd"
            if any(os.readlink(fd) == str(tape) for fd in fds.iterdir()):
                pids.append(int(cmdline.parent.name))
        except OSError:  # gone meanwhile, or not ours to look into
            continue
    return pids


def test_ctrl_c_during_a_large_import_stops_the_reader_and_imports_nothing(tmp_path):
    """Ctrl-C while the reader process parses: exit 130, one line, no reader left, nothing imported."""
    import signal
    import time

    script = Path(sys.executable).with_name("a2a-tape")
    if not script.exists() or not Path("/proc/self/cmdline").exists():
        pytest.skip("needs the installed console script and /proc")
    tape = tmp_path / "large.jsonl"
    tape.write_bytes(b"".join(_large_tape(300_000)))
    db = tmp_path / "log.db"
    before = set(_tape_readers(tape))
    proc = subprocess.Popen(
        [str(script), "import", str(tape), "--db", str(db)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # a shell's background job ignores it
    )
    deadline = time.monotonic() + 30
    while not set(_tape_readers(tape)) - before:  # the condition waited for: the reader is running
        assert proc.poll() is None and time.monotonic() < deadline, "no tape reader started"
        time.sleep(0.005)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err.decode().strip().splitlines()[-1] == "a2a-tape: interrupted" and b"Traceback" not in err
    assert not set(_tape_readers(tape)) - before
    assert not db.exists()  # an interrupted import into a new database leaves none behind


@pytest.mark.parametrize("command", ["record", "import"])
def test_ctrl_c_while_a_command_waits_for_a_locked_log_ends_it_at_once(command, sdk_agent, tmp_path):
    """Another process holds the log's write lock (an import, a rebuild): ``record`` (an asyncio
    program) and ``import`` (a plain one) wait for it up to the busy timeout, and a Ctrl-C
    meanwhile ends them at once (exit 130, one line), not once the lock is released or the busy
    timeout is over. The log is left as it was."""
    import platform
    import signal
    import time

    from tests.support.locks import write_lock_held

    script = Path(sys.executable).with_name("a2a-tape")
    if not script.exists() or platform.machine() != "x86_64" or not Path("/proc/self/syscall").exists():
        pytest.skip("needs the installed console script and /proc/PID/syscall on x86_64")
    db = tmp_path / "log.db"
    open_store(db).close()
    if command == "record":
        argv = ["record", sdk_agent.url, "hello"]
    else:
        tape = tmp_path / "small.jsonl"
        tape.write_bytes(b"".join(_large_tape(20)))
        argv = ["import", str(tape)]
    with write_lock_held(db):
        proc = subprocess.Popen(
            [str(script), *argv, "--db", str(db), "--busy-timeout", "120"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # a shell's background job ignores it
        )
        deadline = time.monotonic() + 30
        while not _a_thread_waits_in_a_sleep(proc.pid):  # the condition waited for: it waits for the lock
            assert proc.poll() is None and time.monotonic() < deadline, f"{command} never waited for the lock"
            time.sleep(0.005)
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=20)
        finally:
            proc.kill()
        took = time.monotonic() - sent
    assert proc.returncode == 130, err
    assert err.decode().strip().splitlines() == ["a2a-tape: interrupted"], err
    assert took < 10, f"{took:.1f} s after Ctrl-C"  # the lock was still held: not waited out
    with open_store(db, readonly=True) as st:
        assert st.integrity_check() == "ok" and st.count_events() == 0


def _a_thread_waits_in_a_sleep(pid: int) -> bool:
    """Some thread of the process is blocked in a sleep: ours between two tries for the lock."""
    for syscall in Path(f"/proc/{pid}/task").glob("*/syscall"):
        try:
            fields = syscall.read_text().split()
        except OSError:
            continue
        if fields and fields[0] in ("230", "35"):  # x86_64 clock_nanosleep, nanosleep
            return True
    return False


def _events_so_far(db: Path) -> int:
    """Events in a log another process is writing (0 while it is still being created)."""
    from a2a_tape.store.errors import StoreError

    try:
        with open_store(db, readonly=True) as st:
            return st.count_events()
    except StoreError:
        return 0


def test_ctrl_c_while_a_commit_waits_on_a_worker_thread_ends_record_at_once(tmp_path):
    """``record --durability full`` commits on a worker thread; another process takes the lock
    mid-stream, the next commit waits for it there, and a Ctrl-C ends the run at once (before,
    only when the busy timeout was over: the task waiting for the thread cannot stop first)."""
    import platform
    import signal
    import time

    from tests.conftest import running_sdk_agent
    from tests.support.locks import write_lock_held

    script = Path(sys.executable).with_name("a2a-tape")
    if not script.exists() or platform.machine() != "x86_64":
        pytest.skip("needs the installed console script and /proc/PID/task/*/syscall on x86_64")
    db = tmp_path / "log.db"
    with running_sdk_agent(slow_delay=1.0) as agent:
        proc = subprocess.Popen(
            [
                str(script),
                "record",
                agent.url,
                "slow",
                "--db",
                str(db),
                "--durability",
                "full",
                "--busy-timeout",
                "120",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        try:
            deadline = time.monotonic() + 30
            while _events_so_far(db) == 0:  # the stream has begun
                assert proc.poll() is None and time.monotonic() < deadline, "record never recorded an event"
                time.sleep(0.01)
            with write_lock_held(db):
                while not _a_thread_waits_in_a_sleep(proc.pid):  # the next commit waits for the lock
                    assert proc.poll() is None and time.monotonic() < deadline, "no commit waited for the lock"
                    time.sleep(0.005)
                sent = time.monotonic()
                proc.send_signal(signal.SIGINT)
                out, err = proc.communicate(timeout=30)
                took = time.monotonic() - sent
        finally:
            proc.kill()
    assert proc.returncode == 130, err
    assert err.decode().strip().splitlines()[-1] == "a2a-tape: interrupted" and b"Traceback" not in err, err
    assert took < 10, f"{took:.1f} s after Ctrl-C"  # the lock was still held: not waited out
    with open_store(db, readonly=True) as st:
        assert st.integrity_check() == "ok"
