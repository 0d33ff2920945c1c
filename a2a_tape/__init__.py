"""a2a-tape: record, replay and inspect A2A (Agent2Agent) task streams.

The public, stable API is what this module exports (``__all__``); see ``docs/api.md``. Everything
under the rooms (``a2a_tape.store``, ``a2a_tape.wire``, ``a2a_tape.capture``, ``a2a_tape.fold``,
``a2a_tape.replay``, ``a2a_tape.inspection``, ``a2a_tape.recorder``, ``a2a_tape.cli``) that is not
re-exported here is internal and may change between releases.

Names are loaded on first use (PEP 562), so ``import a2a_tape`` stays cheap and a command that
only reads the log never imports httpx, starlette or uvicorn.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from a2a_tape.capture.hooks import (
        A2AAnswer,
        A2ARequest,
        BeforeRecordAnswer,
        BeforeRecordRequest,
        HookError,
        RequestMatcher,
    )
    from a2a_tape.fold.projection import ArtifactView, Fault, Projector, TaskFold, TaskView, ToolCall, fold_events
    from a2a_tape.recorder.grpc_interceptor import RecordingInterceptor
    from a2a_tape.recorder.transport import RecordingTransport
    from a2a_tape.replay.serve.faults import Faults
    from a2a_tape.replay.serve.transport import ReplayTransport
    from a2a_tape.store import (
        A2ATapeError,
        AppendConflict,
        ConnectionLost,
        DatabaseLocked,
        DiskFull,
        Exchange,
        NewEvent,
        NotADatabase,
        ReadOnlyStore,
        SchemaTooNew,
        StoredEvent,
        StoreError,
        StoreNotFound,
        StoreUnavailable,
        UnknownTask,
        decode_item,
        default_db,
        open_store,
    )

# public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    # recording and replaying with any httpx client
    "RecordingTransport": "a2a_tape.recorder.transport",
    # the same for any grpc.aio client (the grpc extra; grpc loads when one is made)
    "RecordingInterceptor": "a2a_tape.recorder.grpc_interceptor",
    "ReplayTransport": "a2a_tape.replay.serve.transport",
    "Faults": "a2a_tape.replay.serve.faults",
    # a user's hooks: a matcher (match_on) and what the log keeps (before_record_*)
    "A2ARequest": "a2a_tape.capture.hooks",
    "A2AAnswer": "a2a_tape.capture.hooks",
    "RequestMatcher": "a2a_tape.capture.hooks",
    "BeforeRecordRequest": "a2a_tape.capture.hooks",
    "BeforeRecordAnswer": "a2a_tape.capture.hooks",
    # the event log
    "open_store": "a2a_tape.store",
    "default_db": "a2a_tape.store",
    "StoredEvent": "a2a_tape.store",
    "NewEvent": "a2a_tape.store",
    "Exchange": "a2a_tape.store",
    "decode_item": "a2a_tape.store",
    # projections: the one fold and its views
    "Projector": "a2a_tape.fold.projection",
    "TaskFold": "a2a_tape.fold.projection",
    "TaskView": "a2a_tape.fold.projection",
    "ArtifactView": "a2a_tape.fold.projection",
    "ToolCall": "a2a_tape.fold.projection",
    "Fault": "a2a_tape.fold.projection",
    "fold_events": "a2a_tape.fold.projection",
    # errors: one root
    "A2ATapeError": "a2a_tape.store",
    "StoreError": "a2a_tape.store",
    "StoreNotFound": "a2a_tape.store",
    "NotADatabase": "a2a_tape.store",
    "SchemaTooNew": "a2a_tape.store",
    "AppendConflict": "a2a_tape.store",
    "UnknownTask": "a2a_tape.store",
    "StoreUnavailable": "a2a_tape.store",
    "DatabaseLocked": "a2a_tape.store",
    "DiskFull": "a2a_tape.store",
    "ReadOnlyStore": "a2a_tape.store",
    "ConnectionLost": "a2a_tape.store",
    "HookError": "a2a_tape.capture.hooks",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            value: Any = version("a2a-tape")
        except PackageNotFoundError:  # running from a source tree that was never installed
            value = "0+unknown"
    elif name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
    else:
        raise AttributeError(f"module 'a2a_tape' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
