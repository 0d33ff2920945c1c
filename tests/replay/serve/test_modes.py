"""The record and match modes are one definition (replay/serve/modes.py) read by serve, the engine,
ReplayTransport and the pytest plugin: the same rule on every path.

The rule that had drifted: which modes may create a recording that does not exist yet. serve
created one for any mode but ``none`` (an empty file left behind by a refused ``--record-mode
once`` without ``--upstream``); ReplayTransport only for ``once`` and ``all`` (``new_episodes``
on a new tape failed: "no recording at ..."); the plugin when a mode records and an upstream is
given. Now: a mode creates a recording exactly when it can record into it (not ``none``, and a
live agent to record from).
"""

from __future__ import annotations

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from a2a_tape.cli import app
from a2a_tape.replay.serve.engine import ReplayEngine
from a2a_tape.replay.serve.library import Library
from a2a_tape.replay.serve.matching import Matcher
from a2a_tape.replay.serve.modes import MatchMode, RecordMode
from a2a_tape.replay.serve.transport import ReplayTransport
from a2a_tape.store import decode_item
from tests.replay._record import headers_for, request_body

RECORDING = ["once", "new_episodes", "all"]


@pytest.mark.parametrize("mode", RECORDING)
def test_every_recording_mode_starts_a_new_tape_through_the_transport(sdk_agent, tmp_path, mode):
    tape = tmp_path / "new.jsonl"
    with httpx.Client(transport=ReplayTransport(tape, record_mode=mode, upstream=sdk_agent.url)) as c:
        reply = c.post("http://r.test/", content=request_body("send", "1.0", text="hello"), headers=headers_for("1.0"))
    assert decode_item(reply.content).body.state == "completed"
    assert sdk_agent.executor.executions == 1
    assert tape.is_file() and tape.read_bytes().count(b"\n") > 1  # recorded: replayable offline now


@pytest.mark.parametrize("mode", ["none", *RECORDING])
def test_serve_without_an_upstream_creates_no_recording(tmp_path, mode):
    """Bad input writes nothing: no mode records without a live agent, so none creates the file."""
    db = tmp_path / "missing.db"
    res = CliRunner().invoke(app, ["serve", "--db", str(db), "--record-mode", mode, "--listen", "127.0.0.1:0"])
    assert res.exit_code == 2, res.output
    assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr
    assert not db.exists() and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("mode", list(RecordMode))
@pytest.mark.parametrize("upstream", [None, "http://127.0.0.1:9"])
def test_a_mode_creates_a_recording_exactly_when_it_can_record_into_it(mode, upstream):
    assert mode.records(upstream) == (mode is not RecordMode.none and upstream is not None)
    assert mode.needs_upstream == (mode in (RecordMode.new_episodes, RecordMode.all))


@given(st.text())
def test_a_mode_is_read_from_its_name_or_refused_naming_the_choices(name):
    for kind, what in ((RecordMode, "record mode"), (MatchMode, "match mode")):
        if name in {m.value for m in kind}:
            assert kind.of(name) == name and str(kind.of(name)) == name
        else:
            with pytest.raises(ValueError, match=f"unknown {what}") as info:
                kind.of(name)
            assert all(m.value in str(info.value) for m in kind)


def test_the_engine_and_the_matcher_refuse_an_unknown_mode(tmp_path):
    lib = Library.open(tmp_path / "x.db", create=True)
    try:
        with pytest.raises(ValueError, match="unknown record mode 'sometimes'"):
            ReplayEngine(lib, record_mode="sometimes")
        with pytest.raises(ValueError, match="record mode all needs an upstream"):
            ReplayEngine(lib, record_mode="all")
    finally:
        lib.close()
    with pytest.raises(ValueError, match="unknown match mode 'fuzzy'"):
        Matcher([], "fuzzy")
