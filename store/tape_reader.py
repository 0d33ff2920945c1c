"""The reader process of a large tape's import, both ends of its pipe.

``python -m a2a_tape.store.tape_reader FD`` (:func:`main`) parses the tape at descriptor FD with
:func:`a2a_tape.store.tape_lines.import_blocks` and writes its blocks to stdout as :data:`Frame` s, while
the importing process (:func:`a2a_tape.store.tape.import_tape`: :func:`reader_fd`,
:func:`start_reader`, :func:`reader_blocks`) appends the blocks it has already sent. The reader
never touches the database.
"""

from __future__ import annotations

import io
import os
import signal
import stat
import subprocess
import sys
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from typing import IO

import msgspec

from a2a_tape.store.tape_lines import ImportBlock, TapeError, import_blocks

READER_MIN_BYTES = 2 << 20
"""A tape file at least this large (what is left of it) is parsed by a reader process."""


def reader_fd(lines: Iterable[bytes], reader: bool | None) -> int | None:
    """The descriptor of the regular file a reader process should parse ``lines`` from (from
    where ``lines`` has got to), or None to parse them here."""
    if reader is False or os.name != "posix" or not isinstance(lines, io.BufferedIOBase | io.RawIOBase):
        return None
    try:
        fd = lines.fileno()
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):  # a pipe: what this side buffered would be lost to the child
            return None
        at = lines.tell()
    except (OSError, ValueError):  # no descriptor (an in-memory file), closed
        return None
    if reader is None and info.st_size - at < READER_MIN_BYTES:
        return None
    os.lseek(fd, at, os.SEEK_SET)  # the child shares the offset; this side's buffer may have read ahead
    return fd


_PIPE_SIZE = 1 << 20  # Linux's default most for a pipe
Frame = ImportBlock | str | None
"""What the reader process sends, each frame prefixed by its length (4 bytes, little-endian): a
block, a :class:`TapeError`'s message (then it stops), or None at the end of the tape."""
_frame_decoder = msgspec.msgpack.Decoder(Frame)


def start_reader(fd: int) -> subprocess.Popen[bytes] | None:
    """A reader process (this module, ``python -m a2a_tape.store.tape_reader FD``) running
    :func:`import_blocks` on the tape at descriptor ``fd``; None if none can start (the import
    then parses the tape itself)."""
    import fcntl  # POSIX only, as this path is (reader_fd)

    if not sys.executable or getattr(sys, "frozen", False):  # a frozen build has no "python -m"
        return None
    try:  # the same open file (its offset too) at 3 or above: as 0 it would become the child's stdin
        own = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    except OSError:
        return None
    try:
        proc = subprocess.Popen(
            [sys.executable, "-P", "-m", "a2a_tape.store.tape_reader", str(own)],  # -P: not the cwd's a2a_tape
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,  # it reports on stdout, in its frames
            pass_fds=(own,),
        )
    except OSError:  # no processes left to start, and the like
        return None
    finally:
        os.close(own)
    assert proc.stdout is not None  # stdout=PIPE
    grow = getattr(fcntl, "F_SETPIPE_SZ", None)  # Linux
    if grow is not None:
        with suppress(OSError):  # a larger pipe: fewer switches between the two processes
            fcntl.fcntl(proc.stdout.fileno(), grow, _PIPE_SIZE)
    return proc


_HELD = frozenset({signal.SIGINT, signal.SIGTERM})


@contextmanager
def interrupts_held() -> Iterator[None]:
    """Ctrl-C and SIGTERM wait (in the main thread) until the block is left: a reader process
    started inside it is under :func:`reader_blocks` (which stops it) before an interrupt can land.
    Without it, an interrupt between the fork and that block left the reader running."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)  # a held interrupt is raised here, or just after


@contextmanager
def reader_blocks(proc: subprocess.Popen[bytes]) -> Iterator[Iterator[ImportBlock]]:
    """The blocks the reader process sends: the same checks and errors as :func:`import_blocks`
    in-process. The process is stopped and reaped when the block is left, whatever the reason."""
    assert proc.stdout is not None  # started by start_reader

    def frames(out: IO[bytes]) -> Iterator[ImportBlock]:
        while True:
            head = out.read(4)
            try:
                frame = _frame_decoder.decode(out.read(int.from_bytes(head, "little"))) if len(head) == 4 else ""
            except msgspec.DecodeError:  # cut short: it died mid-frame
                frame = ""
            if frame is None:
                return
            if isinstance(frame, str):
                proc.wait()
                raise TapeError(frame or f"the tape reader stopped (exit status {proc.returncode})")
            yield frame

    try:
        yield frames(proc.stdout)
    finally:
        proc.stdout.close()
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def _send(out: int, encode: msgspec.msgpack.Encoder, frame: Frame, buf: bytearray) -> None:
    buf.clear()
    buf += b"\0\0\0\0"
    encode.encode_into(frame, buf, 4)
    buf[:4] = (len(buf) - 4).to_bytes(4, "little")
    view = memoryview(buf)
    while view:
        view = view[os.write(out, view) :]


def main(argv: list[str]) -> int:
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _HELD)  # started under interrupts_held: its mask is inherited
    encoder = msgspec.msgpack.Encoder()
    buf = bytearray()
    out = sys.stdout.fileno()
    try:
        with os.fdopen(int(argv[1]), "rb", buffering=1 << 20) as src:
            for block in import_blocks(src):
                _send(out, encoder, block, buf)
        _send(out, encoder, None, buf)
    except TapeError as exc:
        _send(out, encoder, str(exc), buf)
    except BrokenPipeError:  # the importer stopped reading: it has its reason
        return 1
    except BaseException as exc:  # noqa: BLE001 - one readable line for the importer, never a traceback
        _send(out, encoder, f"the tape reader failed: {type(exc).__name__}: {exc}", buf)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
