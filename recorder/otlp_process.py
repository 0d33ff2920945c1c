"""The live export's process: ``proxy``/``record --otlp-endpoint`` build and send their spans in a child
process of their own, so the recording process's only cost is an exchange id written to a pipe (docs/otel.md,
docs/performance.md section 33).

The recording side (:class:`ChildExport`, what :func:`start` returns) starts ``python -m
a2a_tape.recorder.otlp_process`` and writes each ended exchange's id to its stdin, never waiting: a pipe full
(a child far behind) or a child gone costs that exchange's span, counted and said once, never the recording.
The child (:func:`main`) reads the log's location and the export's settings from the pipe's first line (a
PostgreSQL DSN may carry a password: never on its command line; the collector's environment, ``OTEL_*``
among it, is inherited), then runs :class:`recorder.otlp_live.LiveExport`, fed from the
pipe (:func:`_serve`): its own read-only connection to the log, its batches (it sleeps through a batch's
linger while the ids gather in the pipe: one wake-up a batch), its put-off calls, its one warning line on
the inherited stderr. It runs in a process group of its own and ignores SIGINT (a Ctrl-C is the recording's to handle:
:meth:`ChildExport.close` ends the child by closing the pipe, which sends what is queued); it ends by
itself at the pipe's end, so a recording process that dies leaves no child behind.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import select
import signal
import subprocess
import sys
import time
from typing import TYPE_CHECKING

from .otlp_live import BATCH, LINGER, TIMEOUT, LiveExport, timeout_setting, warning_line

if TYPE_CHECKING:
    from a2a_tape.capture.otlp_send import Collector
    from a2a_tape.store import Store

SAID = 3
"""The child's exit status once it said why it stopped (its one warning line): the parent says no more."""
PIPE_SIZE = 1 << 20
"""Bytes the child's pipe holds (Linux's default limit for a process): about 150,000 ids."""
STARTING = 2.0
"""Seconds the child may take to start (an interpreter, the exporter's imports), on top of its close's bound."""


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class ChildExport:
    """The recording process's side of the live export: :meth:`ended` writes an id to the child's pipe
    (never blocks), :meth:`close` ends the child (bounded)."""

    def __init__(self, location: str, collector: Collector, version: str, *, timeout: float = TIMEOUT) -> None:
        self.where, self.timeout = collector.url, timeout
        self.skipped = 0  # ids the pipe did not take (full: the child far behind)
        self.lost = 0  # ids written after the child was gone
        self._warned = False
        self._proc: subprocess.Popen[bytes] | None = None
        self._fd = -1
        header = {"log": location, "url": collector.url, "version": version, "since": time.time(), "timeout": timeout}
        collector.shutdown()  # the parent's was made to check the exporter's release (otlp_live.connect) only
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", __name__],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                close_fds=True,
                process_group=0,  # a Ctrl-C at the terminal is the recording's, not the child's
            )
            assert self._proc.stdin is not None
            self._fd = self._proc.stdin.fileno()
            set_size = getattr(fcntl, "F_SETPIPE_SZ", None)  # Linux only (macOS keeps its own size)
            if set_size is not None:
                with contextlib.suppress(OSError):  # room for a second of a busy proxy's ids (64 KiB otherwise)
                    fcntl.fcntl(self._fd, set_size, PIPE_SIZE)
            os.write(self._fd, json.dumps(header).encode() + b"\n")  # a line far below the pipe's size
            os.set_blocking(self._fd, False)
        except OSError as exc:
            self._gone(f"could not start ({type(exc).__name__}: {exc})")

    # -- the hot path -------------------------------------------------------------------------------

    def ended(self, exchange_id: int) -> None:
        """An exchange's row is final: its id to the child (the child reads it back from the log). Never blocks: one ``write`` of a few bytes, all or nothing (below ``PIPE_BUF``)."""
        if self._fd < 0:
            self.lost += 1
            return
        try:
            os.write(self._fd, b"%d\n" % exchange_id)
        except BlockingIOError:
            self.skipped += 1
        except OSError:  # the child is gone (EPIPE)
            self.lost += 1
            self._gone()

    def _gone(self, why: str | None = None) -> None:
        """The child cannot take ids any more: said once, unless the child said why itself."""
        proc = self._proc
        self._close_pipe()
        if why is None:
            status = None if proc is None else proc.poll()
            if status == SAID:
                self._warned = True
                return
            why = "ended" + ("" if status is None else f" (exit status {status})")
        self._warn(why)

    def _close_pipe(self) -> None:
        """The pipe's end, once: the child sends what is queued and ends."""
        fd, self._fd = self._fd, -1
        if fd >= 0 and self._proc is not None and self._proc.stdin is not None:
            with contextlib.suppress(OSError):
                self._proc.stdin.close()

    def _warn(self, why: str) -> None:
        if not self._warned:
            self._warned = True
            _stderr(warning_line(f"the process sending the spans to {self.where} {why}"))

    # -- the end ----------------------------------------------------------------------------------

    def close(self) -> None:
        """The pipe closed: the child sends what is queued and ends (within its close's bound, waited for
        here, then killed); what was not handed to it is said once (by the child, with its own count)."""
        proc = self._proc
        if proc is None:
            return
        if self._fd >= 0:
            if self.skipped:  # the child says it with what it could not send: one line
                self._tell(b"-%d\n" % self.skipped)
            self._close_pipe()
        bound = 2 * self.timeout + LINGER + STARTING  # the child's end: its linger, then two batch timeouts at most
        try:
            proc.wait(bound)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            self._warn(f"did not end within {bound:g}s (stopped)")
            return
        if proc.returncode not in (0, SAID):
            self._warn(f"ended (exit status {proc.returncode})")

    def _tell(self, line: bytes) -> None:
        """A line the child must get at the end (waiting for room in the pipe at most :attr:`timeout`)."""
        deadline = time.monotonic() + self.timeout
        while line:
            try:
                line = line[os.write(self._fd, line) :]
            except BlockingIOError:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                select.select([], [self._fd], [], left)
            except OSError:
                break
        if line:  # the child never got it: said here
            self._warn(f"was not told of {self.skipped} exchange(s) (not exported)")


def start(st: Store, collector: Collector, version: str) -> ChildExport:
    """The live export of ``st``'s exchanges to ``collector`` (:func:`recorder.otlp_live.connect`), in a
    process of its own."""
    return ChildExport(st.location, collector, version, timeout=timeout_setting())


# -- the child ----------------------------------------------------------------------------------------


def main() -> int:
    """The child: the header line, then an exchange id a line (``-N``: N ids the parent could not hand
    over), until the pipe's end; then what is left is sent (bounded) and it exits."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    said: list[str] = []

    def say(line: str) -> None:
        said.append(line)
        _stderr(line)

    fd = sys.stdin.fileno()
    try:
        from a2a_tape.capture.otlp import settings
        from a2a_tape.capture.otlp_send import Collector
        from a2a_tape.store import open_store, safe_location

        header = json.loads(_header(fd))
        location, timeout = str(header["log"]), float(header["timeout"])
        live = LiveExport(
            lambda: open_store(location, create=False, readonly=True),
            Collector(str(header["url"]), timeout=timeout),
            settings(str(header["version"]), safe_location(location)),
            where=str(header["url"]),
            timeout=timeout,
            say=say,
            since=float(header["since"]),
        )
    except Exception as exc:  # noqa: BLE001 - one line; the recording goes on without spans
        say(warning_line(f"cannot start ({type(exc).__name__}: {exc})"))
        return SAID
    log = live.open_log()
    try:
        _serve(live, log, _Ids(fd))
    finally:
        if log is not None:
            log.close()
    return SAID if said else 0


def _header(fd: int) -> bytes:
    """The pipe's first line, read a byte at a time (what follows it stays in the pipe for :class:`_Ids`)."""
    line = bytearray()
    while not line.endswith(b"\n"):
        byte = os.read(fd, 1)
        if not byte:
            break
        line += byte
    return bytes(line)


class _Ids:
    """The ids in the child's pipe, read all at once when asked (the pipe holds them meanwhile)."""

    def __init__(self, fd: int) -> None:
        self.fd, self.ended, self.skipped = fd, False, 0
        self._rest = b""
        os.set_blocking(fd, False)

    def wait(self, timeout: float | None) -> bool:
        """Whether ids (or the pipe's end) came within ``timeout`` (None: however long)."""
        return bool(select.select([self.fd], [], [], timeout)[0])

    def take(self) -> list[int]:
        """Every id in the pipe now (and whether it ended: :attr:`ended`)."""
        chunks = [self._rest]
        while True:
            try:
                chunk = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                break
            if not chunk:
                self.ended = True
                break
            chunks.append(chunk)
        *lines, self._rest = b"".join(chunks).split(b"\n")
        ids = []
        for line in lines:
            n = int(line)
            if n >= 0:
                ids.append(n)
            else:
                self.skipped -= n
        return ids


def _serve(live: LiveExport, log: Store | None, pipe: _Ids) -> None:
    """Batches until the pipe's end, then the last ones within the end's bound. The child sleeps through
    each batch's :data:`LINGER` while the ids gather in the pipe: one wake-up a batch, not one an exchange."""
    behind = False
    ids: list[int] = []
    while not pipe.ended:
        if not behind and pipe.wait(LINGER if live.put_off else None):
            time.sleep(LINGER)
        try:
            ids = pipe.take()
        except ValueError as exc:  # a line that is no id: nothing more is read; what was sent stays sent
            live.warn(f"cannot read the exchanges to export ({type(exc).__name__}: {exc})")
            ids = []
            break
        if pipe.ended:
            break
        behind = len(ids) >= BATCH
        _batches(live, log, ids, final=False)
        ids = []
    end = time.monotonic() + live.timeout
    _batches(live, log, ids, final=True, end=end)
    live.finish(pipe.skipped)


def _batches(live: LiveExport, log: Store | None, ids: list[int], *, final: bool, end: float | None = None) -> None:
    """``ids`` sent in batches of :data:`BATCH` (past ``end``, the collector is cut short: each batch fails at once)."""
    if log is None:
        return
    for i in range(0, max(len(ids), 1), BATCH):
        if end is not None and time.monotonic() > end:
            live.cut_short()
        live.send(log, ids[i : i + BATCH], final=final, waiting=ids[i + BATCH :])


if __name__ == "__main__":
    sys.exit(main())
