"""The one rule of every view's HTML: a recorded string is text. Whatever an agent sends, what a
template prints of it parses back to that string (a control character or a bidirectional
override shown as its escape), and makes no element but the escapes' own."""

from __future__ import annotations

import html.parser

from hypothesis import given
from hypothesis import strategies as st

from a2a_tape.inspection.ui.render import environment, text

CONTROLS = {c for c in map(chr, range(0x2070)) if c not in "\n\t" and (ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F)}
CONTROLS |= set("\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


class _Read(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.text = ""

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, attrs))

    def handle_data(self, data):
        self.text += data


def shown(value: str) -> str:
    """What a person should read: the string, each control character as its escape."""
    return "".join(
        (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}") if c in CONTROLS else c for c in value
    )


@given(st.text(alphabet=st.characters(codec="utf-8") | st.sampled_from(sorted(CONTROLS) + list("<>&\"'"))))
def test_any_recorded_string_is_shown_as_text(value):
    out = str(text(value))
    reader = _Read()
    reader.feed(f"<pre>{out}</pre>")
    reader.close()
    assert reader.text == shown(value)
    assert [tag for tag, _ in reader.tags] == ["pre"] + ["span"] * sum(c in CONTROLS for c in value)
    assert all(attrs == [("class", "ctl")] for tag, attrs in reader.tags[1:])


@given(st.text(alphabet=st.characters(codec="utf-8") | st.sampled_from(sorted(CONTROLS) + list("<>&\"'"))))
def test_a_template_prints_every_value_through_it_and_attributes_keep_theirs(value):
    tpl = environment().from_string('<p title="{{ v }}" data-v="{{ v|attr }}">{{ v }}</p>')
    reader = _Read()
    reader.feed(tpl.render(v=value))
    reader.close()
    tag, attrs = reader.tags[0]
    assert tag == "p" and [name for name, _ in attrs] == ["title", "data-v"]  # nothing broke out
    assert dict(attrs)["data-v"] == value  # |attr keeps the value exactly (a form's task id)
    assert [t for t, _ in reader.tags[1:]] == ["span"] * sum(c in CONTROLS for c in value)
    assert reader.text == shown(value)
