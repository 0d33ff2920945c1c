"""What ``record`` prints when its output is not a terminal: the answer whole, as the agent sent it.

In a terminal the answer is a panel (rich wraps it to the width); to a pipe or a file it is a
heading and the text unboxed and unwrapped, so a log keeps the agent's lines and a long answer
costs what printing it costs (a 170 KB answer took longer to box than to record).
"""

from __future__ import annotations

import io

from rich.console import Console

from a2a_tape.recorder.live import LiveFold, render
from a2a_tape.store import decode_item
from a2a_tape.store.records import StoredEvent
from tests.capture.drivers import cli

LONG = " ".join(f"word-{i}" for i in range(2000))  # far wider than any terminal


def _fold_with(answer: str) -> LiveFold:
    fold = LiveFold()
    payload = (
        b'{"jsonrpc":"2.0","id":1,"result":{"kind":"message","messageId":"m-1","role":"agent",'
        b'"parts":[{"kind":"text","text":"' + answer.encode() + b'"}]}}'
    )
    ev = StoredEvent(1, None, 1, 1, None, payload, 0.0, None, "upstream")
    fold.apply(ev, decode_item(payload))
    return fold


def test_plain_view_keeps_a_long_answer_on_its_line():
    out = io.StringIO()
    Console(file=out, width=80, highlight=False).print(render(_fold_with(LONG), done=True, plain=True), soft_wrap=True)
    lines = out.getvalue().splitlines()
    assert LONG in lines and not any("╭" in line or "│" in line for line in lines)


def test_record_to_a_pipe_prints_the_answer_unboxed(fault_agent, tmp_path):
    run = cli(["record", fault_agent.url("ping"), "go", "--db", str(tmp_path / "t.db")], tmp_path)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.decode().splitlines()
    assert "chunk-0 chunk-1 chunk-2 chunk-3 " in lines and not any("╭" in line for line in lines), lines
