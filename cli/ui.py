"""``a2a-tape ui``: the log in a browser on this machine, read-only and live."""

from __future__ import annotations

import functools
import secrets
import sys
from typing import Annotated

import msgspec
import typer

from a2a_tape.cli import options
from a2a_tape.cli.app import (
    AllowHostOption,
    AllowRemoteOption,
    DbOption,
    HeadTimeoutOption,
    JsonOption,
    commands,
    db_location,
    fail,
    listen_address,
    open_db,
)
from a2a_tape.cli.progress import folding
from a2a_tape.inspection.task_views import task_projection
from a2a_tape.recorder import listen as listening
from a2a_tape.store import safe_location
from a2a_tape.wire.loopback import Guard

app = commands()

WHY_LOCAL = "the UI shows the whole log, to this machine only (127.0.0.1, ::1); add --allow-remote to mean it"


@app.command("ui")
def ui_cmd(
    listen: Annotated[
        str,
        typer.Option(
            help="HOST:PORT to listen on (port 0: any free port; off loopback only with --allow-remote).",
            callback=options.listen,
        ),
    ] = "127.0.0.1:0",
    allow_remote: AllowRemoteOption = False,
    allow_host: AllowHostOption = [],
    open_browser: Annotated[
        bool | None,
        typer.Option(
            "--open/--no-open",
            help="Open the address in a browser.",
            show_default="when run in a terminal",
        ),
    ] = None,
    head_timeout: HeadTimeoutOption = listening.HEAD_TIMEOUT,
    db: DbOption = None,
    json: JsonOption = False,
) -> None:
    """A live local web view of the log: tasks, a task's waterfall and answer, diffs (read-only).

    Prints one line, the address to open: under a path made for this run (anything else is 404), with
    a token made for this run, without which every page answers 401 (--json: that line as {"url",
    "host", "port"}). Stops on Ctrl-C.
    """
    host, port = listen_address(listen, allow_remote=allow_remote, why=WHY_LOCAL)
    location = db_location(db)
    st = open_db(db, readonly="fallback")  # the task projection is kept when the log can be written
    try:
        task_projection(st, folding=folding)  # up to date before the first page (a spinner on a big log)
        try:
            sock = listening.bind(host, port)
        except OSError as exc:
            fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}")
        from a2a_tape.inspection.ui.access import new_prefix
        from a2a_tape.inspection.ui.web_app import create_app

        token = secrets.token_urlsafe(24)
        prefix = new_prefix()  # the UI's path, and its cookie's: no other local server is sent the cookie
        bound = sock.getsockname()[1]
        url = f"{listening.url_of(sock)}{prefix}/?token={token}"
        # the browser gets a one-time code at the root, not the token nor the prefix: its command
        # line is readable by any local user
        code = secrets.token_urlsafe(24)
        opened = f"{listening.url_of(sock)}/?code={code}"
        guard = Guard.of(allow_host, any_host=allow_remote)
        app_ = create_app(
            st, token=token, port=bound, where=safe_location(location), prefix=prefix, guard=guard, codes={code}
        )
        # the pages' event streams end first, so they do not hold the shutdown for its grace period
        listening.run(
            app_,
            sock,
            lifespan="on",
            on_exit=app_.state.ui.follower.close_streams,
            head_timeout=head_timeout,
            listening=functools.partial(_announce, url, opened, host, bound, json=json, open_browser=open_browser),
        )
    finally:
        st.close()


def _announce(url: str, opened: str, host: str, port: int, *, json: bool, open_browser: bool | None) -> None:
    """The one line: the address with this run's prefix and token (not a recorded secret: it opens
    this process's pages, and dies with it), on stdout for people and scripts alike (not emit_json:
    its redaction would take the token out, and the line is for opening it); then the browser,
    given ``opened``: the address with a one-time code, never the token nor the prefix (a browser's
    command line is readable by every local user; a code already spent there opens nothing)."""
    line = msgspec.json.encode({"url": url, "host": host, "port": port}).decode() if json else f"a2a-tape ui: {url}"
    sys.stdout.write(line + "\n")
    sys.stdout.flush()
    if open_browser if open_browser is not None else sys.stdout.isatty():
        import webbrowser

        webbrowser.open(opened)
