"""The JSONL tape: lossless export/import, idempotent re-import, atomic refusal of bad files.

Every import here runs both ways a tape is parsed: in the importing process (a list of lines,
a small file) and in a reader process (a large file; ``reader=True`` forces it on a small one):
the same log, the same result, the same error for the same line.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

import msgspec
import pytest

from a2a_tape.store import Exchange, NewEvent, local_note
from a2a_tape.store.tape import (
    TAPE_VERSION,
    ImportResult,
    TapeError,
    export_lines,
    import_tape,
)
from a2a_tape.store.tape_reader import reader_blocks, start_reader

from .payloads import v1_artifact, v1_status

Importer = Callable[..., ImportResult]


@pytest.fixture(params=["in-process", "reader-process"])
def tape_import(request, tmp_path: Path) -> Importer:
    """``tape_import(store, lines, **kw)``, the lines parsed here or by the reader process."""
    if request.param == "in-process":
        return import_tape
    count = itertools.count()

    def through_a_file(st, lines: Iterable[bytes], **kw) -> ImportResult:
        path = tmp_path / f"tape-{next(count)}.jsonl"
        path.write_bytes(b"".join(lines))
        with path.open("rb") as fh:
            return import_tape(st, fh, reader=True, **kw)

    return through_a_file


def fill(st) -> None:
    """A small log with the awkward cases: a task-less error, non-UTF-8 bytes, a local note."""
    ex1 = st.begin_exchange(
        Exchange(
            started_at=10.0,
            url="http://agent/",
            rpc_method="SendStreamingMessage",
            dialect="1.0",
            streaming=True,
            request_headers={"A2A-Version": "1.0"},
            request_body=b'{"m": 1}',
            status=200,
            content_type="text/event-stream",
            task_id="t1",
        )
    )
    ex2 = st.begin_exchange(  # failed before any task id was known
        Exchange(
            started_at=11.0,
            url="http://agent/",
            rpc_method="message/stream",
            dialect="0.3",
            request_body=b"\xff\xfebinary",
            status=500,
            response_body=b"<html>oops</html>",
            outcome="error",
        )
    )
    ex3 = st.begin_exchange(Exchange(started_at=12.0, url="http://agent/", rpc_method="message/stream", task_id="t2"))
    st.append_batch(
        [
            NewEvent(payload=v1_status("t1"), task_id="t1", exchange_id=ex1, received_at=10.1, mono=0.1),
            NewEvent(
                payload=b'{"jsonrpc":"2.0","id":1,"error":{"code":-32603}}',
                exchange_id=ex2,
                sse_event="error",
                received_at=11.1,
            ),
            NewEvent(
                payload=v1_artifact("t1", 0, append=False), task_id="t1", exchange_id=ex1, received_at=10.2, mono=0.2
            ),
            NewEvent(payload=b"\x80\x81 not utf-8 \x00", task_id="t2", exchange_id=ex3, received_at=12.1),
            NewEvent(payload=v1_artifact("t1", 1) + b"\r\n", task_id="t1", exchange_id=ex1, received_at=10.3, mono=0.3),
            NewEvent(
                payload=local_note("stalled", "no progress for 30 s", "t2"),
                task_id="t2",
                origin="local",
                received_at=13.0,
            ),
        ]
    )


def export(st, **kw) -> list[bytes]:
    return list(export_lines(st, **kw))


def without_exported_at(lines: list[bytes]) -> list[bytes]:
    header = msgspec.json.decode(lines[0])
    header.pop("exported_at")
    return [msgspec.json.encode(header), *lines[1:]]


def snapshot(st):
    return list(st.read_from(0)), st.exchanges()


def test_export_then_import_gives_the_same_log(backend, tape_import):
    src = backend.open("src")
    fill(src)
    lines = export(src)
    dst = backend.open("dst")
    result = tape_import(dst, lines)
    assert (result.events, result.exchanges, result.skipped) == (6, 3, 0)
    assert result.task_ids == ["t1", "t2"]
    assert snapshot(dst) == snapshot(src)  # positions, seqs, exchange ids, bytes, times, origins
    assert without_exported_at(export(dst)) == without_exported_at(lines)


def test_export_of_one_task_carries_its_exchanges_only(backend, tape_import):
    src = backend.open("src")
    fill(src)
    lines = export(src, task_ids=["t2"])
    header = msgspec.json.decode(lines[0])
    assert (header["type"], header["a2a_tape"], header["events"], header["exchanges"]) == ("header", TAPE_VERSION, 2, 1)
    dst = backend.open("dst")
    tape_import(dst, lines)
    assert [e.payload for e in dst.read_task("t2")] == [e.payload for e in src.read_task("t2")]
    assert dst.read_task("t1") == []


def test_importing_twice_changes_nothing(backend, tape_import):
    src = backend.open("src")
    fill(src)
    lines = export(src)
    dst = backend.open("dst")
    tape_import(dst, lines)
    before = snapshot(dst)
    again = tape_import(dst, lines)
    assert (again.events, again.skipped) == (0, 6)
    assert snapshot(dst) == before


def test_a_broken_line_in_the_middle_imports_nothing_and_names_the_line(backend, tape_import):
    src = backend.open("src")
    fill(src)
    lines = export(src)
    dst = backend.open("dst")
    dst.append(NewEvent(payload=b"already here", task_id="old"))
    before = snapshot(dst)
    broken = lines[:6] + [b'{"type": "event", "position": 7, "seq": \n'] + lines[6:]
    with pytest.raises(TapeError, match=r"^line 7: not a tape line"):
        tape_import(dst, broken, batch=2)  # small batches: some were flushed before the bad line
    assert snapshot(dst) == before


def test_bad_base64_names_the_line(backend, tape_import):
    dst = backend.open()
    lines = [
        b'{"type":"header","a2a_tape":1}\n',
        b'{"type":"event","position":1,"seq":1,"task_id":"t","payload_b64":"!!"}\n',
    ]
    with pytest.raises(TapeError, match="^line 2"):
        tape_import(dst, lines)
    assert dst.count_events() == 0


def test_a_non_utf8_line_is_refused_as_such(backend, tape_import):
    src = backend.open("src")
    fill(src)
    lines = export(src)
    dst = backend.open("dst")
    with pytest.raises(TapeError, match=r"line 3: .*not UTF-8"):
        tape_import(dst, lines[:2] + [b'{"type": "event", "payload": "\xff\xfe"}\n'] + lines[2:])
    assert dst.count_events() == 0 and dst.exchanges() == []


def test_a_newer_tape_version_is_refused(backend, tape_import):
    dst = backend.open()
    with pytest.raises(TapeError, match=f"tape version {TAPE_VERSION + 1} is newer"):
        tape_import(dst, [msgspec.json.encode({"type": "header", "a2a_tape": TAPE_VERSION + 1}) + b"\n"])


@pytest.mark.parametrize("content", [b"", b"\n\n  \n"], ids=["empty", "blank-lines"])
def test_an_empty_file_is_refused(backend, content, tape_import):
    dst = backend.open()
    with pytest.raises(TapeError, match="empty"):
        tape_import(dst, [content])


def test_a_file_without_header_is_refused(backend, tape_import):
    dst = backend.open()
    with pytest.raises(TapeError, match="line 1: not an a2a-tape file"):
        tape_import(dst, [b'{"type":"event","position":1,"seq":1,"task_id":"t","payload":"x"}\n'])
    assert dst.count_events() == 0


def test_a_tape_conflicting_with_the_log_imports_nothing(backend, tape_import):
    src = backend.open("src")
    fill(src)
    dst = backend.open("dst")
    dst.append(NewEvent(payload=b"different bytes", task_id="t1"))  # t1 seq 1 is taken
    with pytest.raises(Exception, match="already stored with other bytes"):
        tape_import(dst, export(src))
    assert dst.count_events() == 1 and dst.exchanges() == []


def test_the_header_always_carries_the_version_and_an_old_header_without_it_reads_as_1(backend, tape_import):
    st = backend.open()
    st.append(NewEvent(payload=b"x", task_id="t"))
    header = msgspec.json.decode(export(st)[0])
    assert header["a2a_tape"] == TAPE_VERSION
    dst = backend.open("dst")
    assert (
        tape_import(
            dst, [b'{"type":"header"}\n', b'{"type":"event","position":1,"seq":1,"task_id":"t","payload":"x"}\n']
        ).events
        == 1
    )


def test_an_event_of_an_exchange_missing_from_the_tape_names_the_line(backend, tape_import):
    dst = backend.open()
    lines = [
        b'{"type":"header","a2a_tape":1}\n',
        b'{"type":"event","position":1,"seq":1,"task_id":"t","payload":"a"}\n',
        b'{"type":"event","position":2,"seq":2,"task_id":"t","exchange_id":7,"payload":"b"}\n',
    ]
    with pytest.raises(TapeError, match="^line 3: event refers to exchange 7"):
        tape_import(dst, lines)
    assert dst.count_events() == 0


def test_an_event_without_payload_names_the_line(backend, tape_import):
    dst = backend.open()
    with pytest.raises(TapeError, match="^line 2: event without payload"):
        tape_import(
            dst, [b'{"type":"header","a2a_tape":1}\n', b'{"type":"event","position":1,"seq":1,"task_id":"t"}\n']
        )
    assert dst.count_events() == 0


def _long_tape(n: int) -> list[bytes]:
    lines = [b'{"type":"header","a2a_tape":1}\n']
    for k in range(n):
        lines.append(b'{"type":"event","position":%d,"seq":%d,"task_id":"t","payload":"{}"}\n' % (k + 1, k + 1))
    return lines


@pytest.mark.parametrize("where", [3, 511, 512, 513, 1200])
@pytest.mark.parametrize(
    "bad",
    [
        b'{"type":"event","position":1,"seq":1,"task_id":"t","payload":"{}"},{"type":"header"}\n',  # two values
        b'{"type": "event", "position": 7, "seq": \n',  # cut
        b"]\n",
        b'{"type":"event","position":1,"seq":1,"payload":"\xff"}\n',  # not UTF-8
    ],
)
def test_a_bad_line_anywhere_in_a_long_tape_is_named(backend, where, bad, tape_import):
    """Lines are read in blocks of 512, each decoded on its own: a bad line (two values on one
    line among them) is named wherever it is, block boundaries included."""
    lines = _long_tape(1500)
    lines.insert(where, bad)
    dst = backend.open()
    with pytest.raises(TapeError, match=rf"^line {where + 1}: not a tape line"):
        tape_import(dst, lines)
    assert dst.count_events() == 0


def test_blank_lines_anywhere_are_skipped(backend, tape_import):
    lines = _long_tape(1100)
    for at in (1000, 600, 512, 3, 1):
        lines.insert(at, b"  \n" if at % 2 else b"\n")
    dst = backend.open()
    assert tape_import(dst, lines).events == 1100
    assert [e.seq for e in dst.read_task("t")] == list(range(1, 1101))


def test_a_large_file_is_parsed_by_the_reader_process_and_a_small_one_here(backend, tmp_path, monkeypatch):
    """The choice is by what is left of the file: READER_MIN_BYTES or more goes to the reader."""
    from a2a_tape.store import tape_reader

    started: list[int] = []
    real = tape_reader.start_reader

    def spy(fd: int):
        started.append(fd)
        return real(fd)

    monkeypatch.setattr(tape_reader, "start_reader", spy)
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"".join(_long_tape(50)))
    with path.open("rb") as fh:
        assert import_tape(backend.open("a"), fh).events == 50
    assert started == []
    monkeypatch.setattr(tape_reader, "READER_MIN_BYTES", 100)
    with path.open("rb") as fh:
        assert import_tape(backend.open("b"), fh, reader=False).events == 50
    assert started == []
    with path.open("rb") as fh:
        assert import_tape(backend.open("c"), fh).events == 50
    assert len(started) == 1


def test_the_reader_starts_where_the_file_is_even_after_buffered_reads(backend, tmp_path):
    """The reader process shares the file's offset; this side may have read ahead into its buffer."""
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"".join(_long_tape(2000)))
    other = backend.open("other")
    with path.open("rb") as fh:
        fh.readline()  # buffered: the descriptor's offset is past the header now
        with pytest.raises(TapeError, match="^line 1: not an a2a-tape file"):
            import_tape(other, fh, reader=True)  # the reader sees the event lines first: no header
    with path.open("rb") as fh:
        assert import_tape(backend.open(), fh, reader=True).events == 2000


def test_a_pipe_is_parsed_here(backend, tmp_path):
    """What this side buffered of a pipe would be lost to a reader process: it is never used."""
    import os

    read_end, write_end = os.pipe()
    with open(write_end, "wb") as w:
        w.write(b"".join(_long_tape(20)))
    with open(read_end, "rb") as fh:
        assert import_tape(backend.open(), fh, reader=True).events == 20


def test_a_reader_that_dies_is_a_tape_error_and_imports_nothing(backend, tmp_path, monkeypatch):
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"".join(_long_tape(10)))
    monkeypatch.setattr(sys, "executable", "/bin/false")  # "python -m a2a_tape.store.tape_reader" exits 1, says nothing
    dst = backend.open()
    with path.open("rb") as fh, pytest.raises(TapeError, match=r"^the tape reader stopped \(exit status 1\)$"):
        import_tape(dst, fh, reader=True)
    assert dst.count_events() == 0


def test_leaving_the_reader_early_stops_it(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"".join(_long_tape(100_000)))  # more than the pipe holds: it is still writing
    with path.open("rb") as fh:
        proc = start_reader(fh.fileno())
        assert proc is not None
        with reader_blocks(proc) as blocks:
            assert len(next(blocks)) == 512 - 1  # the first block: the header and 511 events
            assert proc.poll() is None
    assert proc.returncode is not None  # stopped and reaped, not left running


def test_the_reader_never_imports_a_package_of_the_working_directory(backend, tmp_path, monkeypatch):
    """A user's project may hold its own ``a2a_tape/``: the reader process runs ours (``-P``)."""
    fake = tmp_path / "project" / "a2a_tape"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('the project of the user, not a2a-tape')\n")
    monkeypatch.chdir(fake.parent)
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"".join(_long_tape(30)))
    with path.open("rb") as fh:
        assert import_tape(backend.open(), fh, reader=True).events == 30


def test_long_lines_make_smaller_blocks_and_import_whole(backend, tape_import, monkeypatch):
    """A block ends at 512 lines or at _BLOCK_BYTES, whichever comes first (a tape of long lines
    is never held 512 at a time); its lines import whole, in order, either way."""
    from a2a_tape.store import tape_lines

    monkeypatch.setattr(tape_lines, "_BLOCK_BYTES", 10_000)  # the reader process keeps its own 8 MiB: same log
    body = "x" * 3000
    lines = [b'{"type":"header","a2a_tape":1}\n']
    for k in range(40):
        lines.append(
            b'{"type":"event","position":%d,"seq":%d,"task_id":"t","payload":"%d %s"}\n'
            % (k + 1, k + 1, k, body.encode())
        )
    blocks = list(tape_lines.read_tape_blocks(lines))
    assert [len(b) for b in blocks[:2]] == [5, 4] and sum(map(len, blocks)) == 41  # the header, then 3 kB lines
    dst = backend.open()
    assert tape_import(dst, lines).events == 40
    assert [bytes(e.payload).split()[0] for e in dst.read_task("t")] == [b"%d" % k for k in range(40)]


@pytest.mark.parametrize("how", ["frozen", "no-interpreter"])
def test_no_reader_where_no_python_can_start_it(backend, tmp_path, monkeypatch, how):
    """A frozen build (its executable is the app, not python) or no sys.executable: parsed here."""
    if how == "frozen":
        monkeypatch.setattr(sys, "frozen", True, raising=False)
        monkeypatch.setattr(sys, "executable", "/bin/false")  # would fail the import if it were started
    else:
        monkeypatch.setattr(sys, "executable", "")
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"".join(_long_tape(30)))
    with path.open("rb") as fh:
        assert import_tape(backend.open(), fh, reader=True).events == 30


@pytest.mark.parametrize(
    "bad, field",
    [
        (b'{"type":"event","position":1,"seq":99999999999999999999999,"task_id":"t","payload":"{}"}\n', "seq"),
        (b'{"type":"event","position":1,"seq":1,"exchange_id":9223372036854775808,"payload":"{}"}\n', "exchange_id"),
        (b'{"type":"event","position":1,"seq":1,"task_id":"t","received_at":1e300,"payload":"{}"}\n', "received_at"),
        (b'{"type":"event","position":1,"seq":1,"task_id":"t","received_at":-1e300,"payload":"{}"}\n', "received_at"),
        (b'{"type":"event","position":1,"seq":1,"task_id":"t","received_at":1e999,"payload":"{}"}\n', "received_at"),
        (b'{"type":"exchange","id":1,"status":99999999999999999999}\n', "status"),
        (b'{"type":"exchange","id":1,"started_at":1e300}\n', "started_at"),
    ],
    ids=[
        "seq-past-int64",
        "exchange-id-past-int64",
        "time-past-9999",
        "time-before-1",
        "time-1e999",
        "status",
        "start",
    ],
)
def test_a_number_the_log_cannot_keep_or_show_names_the_line(backend, bad, field, tape_import):
    """Before, a seq or status past SQLite's INTEGER ended the import with 'internal error:
    OverflowError', and a time past year 9999 was imported, then every view of it crashed."""
    dst = backend.open()
    lines = [b'{"type":"header","a2a_tape":1}\n', bad]
    with pytest.raises(TapeError, match=rf"^line 2: not a tape line \(.*`\$\.{field}`\)"):
        tape_import(dst, lines)
    assert dst.count_events() == 0 and dst.exchanges() == []


def test_a_line_nested_too_deep_names_the_line(backend, tape_import):
    """msgspec raised RecursionError on it: the import ended in an internal error."""
    deep = b"[" * 5000 + b"]" * 5000
    dst = backend.open()
    lines = [b'{"type":"header","a2a_tape":1}\n', b'{"type":"event","position":1,"seq":1,"x":' + deep + b"}\n"]
    with pytest.raises(TapeError, match=r"^line 2: not a tape line \(JSON nested too deep"):
        tape_import(dst, lines)
    assert dst.count_events() == 0
