"""One channel classifier: doctor, the timeline of the exports and ``channels`` all say what the
fold says (fold/profiles.py).

inspection kept a second copy (``steps.channel_of`` / ``id_channel``) that had drifted from the
fold's: it read an id's suffix whatever task it named (``other:stream:reasoning`` was reasoning,
``x:error`` an error lane), and did not know the opencode block type ``tool``. So doctor called an
opencode tool lane "text crossing channels", and the exports labelled artifacts with channels
that ``channels`` did not show.
"""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from a2a_tape.fold.fold import fold_task_events
from a2a_tape.fold.profiles import id_channel
from a2a_tape.inspection.doctor import findings
from a2a_tape.inspection.steps import summary
from a2a_tape.store import StoredEvent, decode_item
from tests.replay.inspect.builders import Tape, items
from tests.replay.inspect.conftest import cli

TASK = "task-7"
IDS = st.sampled_from(
    [
        f"{TASK}:stream",
        f"{TASK}:stream:text",
        f"{TASK}:stream:reasoning",
        f"{TASK}:stream:tool_call",
        f"{TASK}:stream:tool:call-1",
        f"{TASK}:stream:tool:",
        f"{TASK}:error",
        "other:stream:reasoning",
        "other:stream:tool:1",
        "x:error",
        "art-1",
        f"{TASK}x:stream",
    ]
)
OPENCODE = st.builds(
    lambda channel: {"opencode": {"message_id": "m1", **({"channel": channel} if channel else {})}},
    st.sampled_from([None, "final_answer", "reasoning", "tool_call", "error", "weird"]),
)
BLOCKS = st.builds(
    lambda block_type: {"shared": {"stream": {"message_id": "m1", "block_type": block_type}}},
    st.sampled_from([None, "text", "reasoning", "tool_call", "tool", "weird"]),
)
METADATA = st.one_of(st.none(), OPENCODE, BLOCKS)


def _stored(payloads: list[bytes]) -> list[StoredEvent]:
    return [StoredEvent(i, TASK, i, 1, None, p, float(i), None, "upstream") for i, p in enumerate(payloads, 1)]


@settings(max_examples=300)
@given(artifact_id=IDS, metadata=METADATA, dialect=st.sampled_from(["1.0", "0.3"]))
def test_the_timeline_labels_an_artifact_with_the_channel_the_fold_puts_it_in(artifact_id, metadata, dialect):
    it = items(dialect, TASK)
    update = it.artifact(artifact_id, "some text", metadata=metadata)
    view = fold_task_events(TASK, _stored([it.task("working"), update])).view()
    label = re.search(r" \[([a-z_]+)\] ", summary(decode_item(update), TASK))
    assert label is not None
    kept = [a.channel for a in view.artifacts if a.artifact_id == artifact_id]
    if kept:  # the fold keeps it (an opencode event without its message_id would be ignored)
        assert label.group(1) == kept[0]


@settings(max_examples=300)
@given(artifact_id=IDS, metadata=METADATA, dialect=st.sampled_from(["1.0", "0.3"]))
def test_doctor_finds_text_crossing_channels_only_where_metadata_and_id_disagree(artifact_id, metadata, dialect):
    """An id alone never crosses (without metadata the id is the channel, or no lane at all);
    metadata crosses the lane its id names when the fold puts the text elsewhere."""
    it = items(dialect, TASK)
    events = _stored([it.task("working"), it.artifact(artifact_id, "some text", metadata=metadata, last=True)])
    crossed = "text-crosses-channels" in {f.code for f in findings(TASK, events)}
    shown = fold_task_events(TASK, events).view().artifacts
    named = id_channel(TASK, artifact_id)
    if metadata is None:
        assert not crossed
    elif shown:  # kept by the fold: the channel it shows is the one doctor compares the id with
        assert crossed == (named is not None and named != shown[0].channel)


def _tool_lane_task(tmp_path):
    """opencode blocks with the block type ``tool`` on a tool lane id, and a generic artifact whose
    id only looks like another task's reasoning lane."""
    it = items("1.0", "task-tools")
    tape = Tape(tmp_path / "t.db")
    hint = {"shared": {"stream": {"block_type": "tool", "message_id": "m1", "event_id": "e1"}}}
    tape.stream(
        it,
        [
            it.task("submitted"),
            it.status("working"),
            it.artifact("task-tools:stream:tool:c1", data={"call_id": "c1", "tool": "ls"}, metadata=hint, last=True),
            it.artifact("elsewhere:stream:reasoning", "The answer", last=True),
            it.status("completed"),
        ],
    )
    tape.close()
    return tmp_path / "t.db", it.task_id


def test_doctor_does_not_call_a_tool_lane_of_block_type_tool_crossed(tmp_path):
    db, task = _tool_lane_task(tmp_path)
    r = cli("doctor", task, "--db", db, "--json")
    assert r.code == 0 and r.json()["findings"] == [], r.stdout


def test_the_exports_label_artifacts_as_channels_shows_them(tmp_path):
    db, task = _tool_lane_task(tmp_path)
    view = cli("channels", task, "--db", db, "--json").json()
    shown = {a["artifact_id"]: a["channel"] for a in view["artifacts"]}
    assert shown == {"task-tools:stream:tool:c1": "tool_call", "elsewhere:stream:reasoning": "artifact"}
    assert view["final_answer"] == "The answer"
    mermaid = cli("export", task, "--format", "mermaid", "--db", db).stdout
    html = cli("export", task, "--format", "html", "--db", db).stdout
    for artifact_id, channel in shown.items():
        short = artifact_id.replace(f"{task}:", "…:").replace(":", "#58;")  # mermaid's escape
        assert f"{short} [{channel}]" in mermaid
        assert f"{artifact_id} [{channel}]" in html
