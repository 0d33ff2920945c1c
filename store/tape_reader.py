"""The reader process of a large tape's import: ``python -m a2a_tape.store.tape_reader FD``.

Parses the tape at descriptor FD with :func:`a2a_tape.store.tape.import_blocks` and writes its
blocks to stdout as :data:`a2a_tape.store.tape.Frame` s, while the importing process appends the
blocks it has already sent (:func:`a2a_tape.store.tape.start_reader` starts it,
:func:`a2a_tape.store.tape.reader_blocks` reads it). It never touches the database.
"""

from __future__ import annotations

import os
import sys

import msgspec

from .tape import Frame, TapeError, import_blocks


def _send(out: int, encode: msgspec.msgpack.Encoder, frame: Frame, buf: bytearray) -> None:
    buf.clear()
    buf += b"\0\0\0\0"
    encode.encode_into(frame, buf, 4)
    buf[:4] = (len(buf) - 4).to_bytes(4, "little")
    view = memoryview(buf)
    while view:
        view = view[os.write(out, view) :]


def main(argv: list[str]) -> int:
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
    except BaseException as exc:  # one readable line for the importer, never a traceback
        _send(out, encoder, f"the tape reader failed: {type(exc).__name__}: {exc}", buf)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
