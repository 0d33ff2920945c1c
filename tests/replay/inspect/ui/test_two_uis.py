"""Issue 36, item 4: two ``a2a-tape ui`` on two ports of one machine, in one real browser (Chromium).

A browser sends a host's cookies to every port of it (cookies ignore ports): the cookie the first
UI set reaches the second one's port. The second never takes it: each UI's cookie is named for its
port and holds its own run's token (``inspection/ui/access.py``). Opened each with its own
address, both are readable side by side, each by its own cookie.

Kept since 4d9f950 (per-port cookie names); this test pins it with a real browser's cookie jar.
"""

from __future__ import annotations

from playwright.sync_api import Page


def test_a_ui_never_takes_the_cookie_another_ui_on_another_port_set(page: Page, serve_ui, demo_db):
    one, two = serve_ui(demo_db), serve_ui(demo_db)
    assert one.port != two.port

    assert page.goto(one.url).status == 200  # the first UI's printed address: its cookie set
    jar = page.context.cookies(two.base + "/")
    assert [c["name"] for c in jar] == [f"a2a_tape_ui_{one.port}"]  # the browser sends it to the other port too
    assert page.goto(two.base + "/").status == 401  # ... which does not take it

    assert page.goto(two.url).status == 200  # the second UI's own address
    assert page.goto(one.base + "/").status == 200  # each readable by its own cookie
    assert page.goto(two.base + "/").status == 200
    names = sorted(c["name"] for c in page.context.cookies(one.base + "/"))
    assert names == sorted([f"a2a_tape_ui_{one.port}", f"a2a_tape_ui_{two.port}"])
    values = {c["name"]: c["value"] for c in page.context.cookies(one.base + "/")}
    assert values[f"a2a_tape_ui_{one.port}"] == one.token and values[f"a2a_tape_ui_{two.port}"] == two.token
