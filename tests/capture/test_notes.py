"""A decision of ours reaches the log only through capture/notes.py, and its text is scrubbed by the
exchange's scrubber whoever builds it: the capture core (a Capture with the call's credentials), a
``record`` session (its redactor and the headers the user gave), a proxy or the push receiver (the
path's Redactor). tests/packaging/test_one_rule.py keeps every other module from building one."""

from __future__ import annotations

import msgspec
import pytest

from a2a_tape.capture.exchange import Capture
from a2a_tape.capture.notes import failed_event, note_event
from a2a_tape.recorder.session import Session
from a2a_tape.store import open_store
from a2a_tape.store.redact import Redactor

TOKEN = "s3cr3t-t0ken-value"


def _scrubbers(tmp_path):
    session = Session(open_store(tmp_path / "log.db"), Redactor())
    session.secrets.append(TOKEN)
    return {
        "capture": Capture(Redactor(), secrets=[f"Bearer {TOKEN}"]),
        "session": session,
        "redactor": Redactor(),
    }


DETAILS = [
    f"upstream said: bad header Authorization: Bearer {TOKEN}",
    f"retrying http://agent.example/a2a?api_key={TOKEN}",
]


@pytest.mark.parametrize("kind", ["capture", "session", "redactor"])
@pytest.mark.parametrize("detail", DETAILS, ids=["header-in-text", "key-in-url"])
def test_a_note_never_carries_a_secret(tmp_path, kind, detail):
    scrub = _scrubbers(tmp_path)[kind]
    note = note_event(scrub, "retry", detail, task_id="t1", exchange_id=3)
    failed = failed_event(scrub, "t1", "c1", detail)
    for ev in (note, failed):
        assert TOKEN.encode() not in ev.payload, (kind, ev.payload)
        assert ev.origin == "local"
        msgspec.json.decode(ev.payload)  # still JSON
    assert note.exchange_id == 3 and note.task_id == "t1"
    assert b"[redacted]" in note.payload


def test_a_secret_only_the_exchange_knows_is_scrubbed(tmp_path):
    """A credential the client sent in a header, echoed in an error text without its header's name:
    only the exchange's own scrubber knows it; the path's redactor alone would not."""
    text = f"agent answered 401 for token {TOKEN}"
    for kind in ("capture", "session"):
        assert TOKEN.encode() not in note_event(_scrubbers(tmp_path)[kind], "error", text).payload
