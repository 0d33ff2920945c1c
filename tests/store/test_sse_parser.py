"""The incremental SSE reader: the same items whatever the chunking, exact bytes, limits."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from a2a_tape.wire.sse_reader import SseItem, SseLineTooLong, SseParser


def feed_all(chunks: list[bytes], max_line: int = 1 << 20) -> list[tuple[bytes, str | None, bool]]:
    p = SseParser(max_line)
    out: list[SseItem] = []
    for c in chunks:
        out += p.feed(c)
    out += p.close()
    return [(i.data, i.event, i.comment) for i in out]


STREAM = (
    b'data: {"a": 1}\r\n\r\n'
    b": ping - 2026-11-30 02:10:16\r\n\r\n"
    b"event: error\r\n"
    b'data: {"error": {"code": -32603}}\r\n\r\n'
    b"data: line one\ndata: line two\n\n"
    b"data: \xff\xfe raw bytes\r\r"
    b"id: 7\nretry: 10\ndata: after id\n\n"
    b"data:no-space\n\n"
)
EXPECTED = [
    (b'{"a": 1}', None, False),
    (b"ping - 2026-11-30 02:10:16", None, True),
    (b'{"error": {"code": -32603}}', "error", False),
    (b"line one\nline two", None, False),
    (b"\xff\xfe raw bytes", None, False),
    (b"after id", None, False),
    (b"no-space", None, False),
]


def test_whole_stream():
    assert feed_all([STREAM]) == EXPECTED


def test_byte_by_byte():
    assert feed_all([STREAM[i : i + 1] for i in range(len(STREAM))]) == EXPECTED


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=len(STREAM)), max_size=12))
def test_any_chunking_gives_the_same_items(cuts):
    points = sorted(set(cuts))
    chunks = [STREAM[a:b] for a, b in zip([0, *points], [*points, len(STREAM)])]
    assert feed_all(chunks) == EXPECTED


def test_event_name_in_one_chunk_and_data_in_the_next():
    """The fast path must not lose an ``event:`` line that came in the previous chunk."""
    assert feed_all([b"event: error\r\n", b'data: {"x": 1}\r\n\r\n']) == [(b'{"x": 1}', "error", False)]


def test_unfinished_event_at_close_is_kept_and_marked_incomplete():
    """An item cut by the close is never dropped (it was, before the capture core)."""
    p = SseParser()
    assert p.feed(b"data: half an ev") == []
    assert p.pending
    [item] = p.close()
    assert (item.data, item.incomplete, item.raw) == (b"half an ev", True, b"data: half an ev")


def test_line_over_the_limit_raises_even_without_a_newline():
    p = SseParser(max_line=64)
    p.feed(b"data: " + b"x" * 40)
    with pytest.raises(SseLineTooLong):
        p.feed(b"y" * 40)


def test_complete_line_over_the_limit_raises():
    with pytest.raises(SseLineTooLong, match="64-byte limit"):
        feed_all([b"data: " + b"x" * 100 + b"\n\n"], max_line=64)


def test_line_at_the_limit_is_fine():
    assert feed_all([b"data: " + b"x" * 58 + b"\n\n"], max_line=64) == [(b"x" * 58, None, False)]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, len(STREAM)), max_size=12), st.booleans())
def test_feed_into_gives_what_feed_gives(cuts, whole_events):
    """The reader's ``feed_into`` (tuples, comments counted) agrees with ``feed`` whatever the
    chunking, its one-event fast path included (``whole_events``: one chunk per event)."""
    if whole_events:
        chunks = [e + b"\r\n\r\n" for e in STREAM.split(b"\r\n\r\n") if e]
    else:
        bounds = [0, *sorted(set(cuts)), len(STREAM)]
        chunks = [STREAM[a:b] for a, b in zip(bounds, bounds[1:])]
    p = SseParser()
    got: list[tuple[bytes, str | None]] = []
    comments = sum(p.feed_into(c, got) for c in chunks)
    got += [(i.data, i.event) for i in p.close() if not i.comment]
    expected = feed_all(chunks)
    assert got == [(d, e) for d, e, c in expected if not c]
    assert comments == sum(1 for *_, c in expected if c)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, len(STREAM)), max_size=12), st.booleans())
def test_raw_bytes_add_up_to_the_stream(cuts, bom):
    """Pass-through exactness: every item's ``raw`` and the close's ``tail`` are the stream, byte
    for byte, whatever the chunking (a relay that forwards them changes nothing)."""
    stream = (b"\xef\xbb\xbf" if bom else b"") + STREAM + b"data: cut by the close"
    bounds = [0, *sorted(set(cuts)), len(stream)]
    p = SseParser()
    items = []
    for a, b in zip(bounds, bounds[1:]):
        items += p.feed(stream[a:b])
    items += p.close()
    assert b"".join(i.raw for i in items) + p.tail == stream
    assert items[0].data == b'{"a": 1}'  # a leading BOM does not lose the first item
    assert items[-1].incomplete and items[-1].data == b"cut by the close"
    with_id = next(i for i in items if i.data == b"after id")
    assert (with_id.id, with_id.retry) == ("7", 10)


@pytest.mark.parametrize("eol", [b"\n", b"\r", b"\r\n"])
def test_line_ends_and_multiline_data(eol):
    chunk = b"data: a" + eol + b"data: b" + eol + b": note" + eol + eol
    p = SseParser()
    items = p.feed(chunk) + p.close()
    data = [(i.data, i.comment) for i in items]
    assert data == [(b"note", True), (b"a\nb", False)]


_payload = st.one_of(
    st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"n").replace(b"\r", b"r")),
    st.binary(max_size=40),  # a line end inside: two lines, not one event (the fast path must see it)
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(_payload, st.sampled_from([b"\n\n", b"\r\n\r\n", b"\r\r", b"\r\n\n"])), min_size=1, max_size=8),
    st.lists(st.integers(0, 400), max_size=10),
    st.sampled_from([b"", b": ka\n\n", b"event: e\n"]),
)
def test_the_fast_path_agrees_with_one_whole_parse(events, cuts, between):
    """The one-event fast path (a chunk that is one ``data:`` event, or an event split across
    reads) gives what parsing the stream in one piece gives: the same items, the same raw bytes,
    whatever the cuts and whatever comes between the events (a comment, a field line)."""
    stream = b"".join(b"data: " + p + eol + (between if k % 2 else b"") for k, (p, eol) in enumerate(events))
    bounds = [0, *sorted({c for c in cuts if c < len(stream)}), len(stream)]
    chunks = [stream[a:b] for a, b in zip(bounds, bounds[1:])]
    whole = SseParser()
    expected = whole.feed(stream) + whole.close()
    p = SseParser()
    items = [i for c in chunks for i in p.feed(c)] + p.close()
    assert [(i.data, i.event, i.comment, i.incomplete) for i in items] == [
        (i.data, i.event, i.comment, i.incomplete) for i in expected
    ]
    assert b"".join(i.raw for i in items) + p.tail == stream
    q = SseParser()
    got: list[tuple[bytes, str | None]] = []
    comments = sum(q.feed_into(c, got) for c in chunks)
    got += [(i.data, i.event) for i in q.close() if not i.comment]
    assert got == [(i.data, i.event) for i in expected if not i.comment]
    assert comments == sum(1 for i in expected if i.comment)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(_payload, st.sampled_from([b"\n\n", b"\r\n\r\n", b"\r\r", b"\r\n\n", b"\n", b"\r\n"])),
        min_size=1,
        max_size=6,
    )
)
@example([(b"a\rb", b"\r\n\r\n")])
@example([(b"a\nb", b"\n\n")])
@example([(b"a\nb", b"\r\n\r\n")])
@example([(b"a\rb", b"\n\n")])
def test_one_chunk_per_event_agrees_with_one_whole_parse(events):
    """The per-event fast path takes a chunk that is exactly one ``data:`` event: a line end
    hidden in the data (a lone CR or LF makes two lines) or a short blank line must send the chunk
    the general way, so both parses agree. (The first chunk of a stream always goes the general
    way, for a BOM: one plain event comes first.)"""
    chunks = [b"data: first\n\n"] + [b"data: " + p + eol for p, eol in events]
    whole = SseParser()
    expected = [(i.data, i.event) for i in whole.feed(b"".join(chunks)) + whole.close() if not i.comment]
    q = SseParser()
    got: list[tuple[bytes, str | None]] = []
    for c in chunks:
        q.feed_into(c, got)
    got += [(i.data, i.event) for i in q.close() if not i.comment]
    assert got == expected


@pytest.mark.parametrize(
    "line",
    [b"data: " + b"x" * 40 + b"\n", b"data: " + b"x" * 40 + b"\r", b"id: 1\n", b"event: x\n", b"\n"],
    ids=["data-lines", "cr-data-lines", "id-lines", "event-lines", "blank-lines"],
)
def test_an_event_that_never_ends_stops_at_the_limit(line):
    """Lines each within the limit, and never the blank line that ends an event (or only blank
    lines, which make no event): the reader's memory is bounded by max_line all the same."""
    p = SseParser(max_line=4096)
    with pytest.raises(SseLineTooLong, match="4096-byte limit"):
        for _ in range(100_000):
            for it in p.feed(line * 8):
                assert it.comment or len(it.raw) <= 4096
