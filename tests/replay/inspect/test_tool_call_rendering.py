"""One rendering of a tool call (issue 26 item 7): ``channels``/``record`` (terminal cells) and the HTML
export and the UI (``ui.rows.tool_table``) show the same columns and name a call the same way: by its
tool, else its call id, never by the artifact that carried it. Before, the page listed whatever fields a
call had (``call_id``, ``title``, ``text`` as separate columns) and named nothing."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from a2a_tape.fold import tool_calls
from a2a_tape.fold.views import TaskView, ToolCall
from a2a_tape.inspection.ui.rows import tool_table

_text = st.one_of(st.none(), st.text(max_size=8))


@st.composite
def calls(draw: st.DrawFn) -> ToolCall:
    return ToolCall(
        artifact_id=draw(st.sampled_from(["t-1:stream:tool:p1", "tool-artifact"])),
        call_id=draw(_text),
        tool=draw(_text),
        status=draw(_text),
        title=draw(_text),
        input=draw(st.one_of(st.none(), st.text(max_size=8), st.dictionaries(st.text(max_size=3), st.integers()))),
        output=draw(st.one_of(st.none(), st.text(max_size=8))),
        error=draw(st.one_of(st.none(), st.text(max_size=8))),
        text=draw(st.text(max_size=8)),
    )


@settings(suppress_health_check=[HealthCheck.too_slow])  # drawing 4 calls of 9 fields each is slow on a loaded CI
@given(st.lists(calls(), max_size=4))
def test_the_page_and_the_terminal_show_the_same_columns_and_names(found):
    view = TaskView("t-1", None, "completed", None, "", found, [], 0, 0, 1, 1, 0.0, 0.0, [], "generic")
    table = tool_table(view)
    assert table.columns == list(tool_calls.COLUMNS)
    assert [row[0] for row in table.rows] == [tool_calls.name(c) for c in found]
    assert [row[:3] for row in table.rows] == [tool_calls.cells(c)[:3] for c in found]
    assert all(c.artifact_id not in row[0] for c, row in zip(found, table.rows, strict=True) if c.tool or c.call_id)
