"""Who holds a lease or a marker in the log, and whether that holder still runs. One rule for every
holder: the recovery lease and the running proxy's mark (``recorder.recovery``), a projection
being rebuilt (``fold.projection``).

An owner is named ``host:pid:nonce`` (:func:`new_owner`). Whether it is alive (:func:`owner_alive`):

- another host's: yes (nothing here can tell; its lease's expiry frees what it holds);
- another process of this host: whether that pid still runs;
- a name with this process's pid: alive while this process issued it and has not released it.
  Any other name with our pid was left by an earlier process that had the same pid (pids are
  reused; a container's first process is pid 1 every time), which is gone: without this rule its
  marker would block every later process given that pid, for ever.
"""

from __future__ import annotations

import os
import socket
import threading
import uuid

_issued: set[str] = set()  # the names this process gave out and still holds
_lock = threading.Lock()


def new_owner() -> str:
    """A name for a holder in this process: ``host:pid:nonce``, alive until :func:`release_owner`."""
    name = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    with _lock:
        _issued.add(name)
    return name


def release_owner(owner: str) -> None:
    """This process no longer holds anything under ``owner``."""
    with _lock:
        _issued.discard(owner)


def owner_alive(owner: str) -> bool:
    """Whether the holder named ``owner`` (``host:pid[:nonce]``) may still run (see the module docstring)."""
    host, _, rest = owner.partition(":")  # a host name has no colon
    pid_text = rest.partition(":")[0]
    if host != socket.gethostname() or not (pid_text.isascii() and pid_text.isdigit()):
        return True
    pid = int(pid_text)
    if pid == os.getpid():
        with _lock:
            return owner in _issued
    if pid == 0:
        return False  # no process has pid 0 (and os.kill(0, ...) would ask about our own group)
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):  # gone; a pid no process can have
        return False
    except PermissionError:  # another user's process
        return True
    return True
