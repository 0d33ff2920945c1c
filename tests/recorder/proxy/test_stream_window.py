"""The relay's window (recorder/proxy/relay.py: Window), the rule both proxies hold a stream by:
items every reader took go at once; items kept for a late duplicate only while they fit; a reader
too far behind holds the producer back, and is dropped after its patience. Pure, in memory: the
end-to-end cases with a real agent and a client that stops reading are test_slow_client.py."""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest

from a2a_tape.recorder.proxy.relay import Window


def _window(*, keep: bool, limit: int = 100, patience: float = 60.0) -> Window[bytes]:
    return Window(len, keep=keep, limit=limit, patience=patience)


def test_items_every_reader_took_go_at_once_without_a_key():
    w = _window(keep=False)
    r = w.join()
    assert r is not None
    w.put([b"a" * 10, b"b" * 10])
    assert w.take(r) == [b"a" * 10, b"b" * 10]
    assert w.held == 0 and w.items == []
    w.leave(r)
    w.put([b"c" * 10])  # nobody reads: nothing kept
    assert w.held == 0


def test_items_are_kept_for_a_late_reader_only_while_they_fit():
    w = _window(keep=True, limit=100)
    first = w.join()
    assert first is not None
    w.put([b"x" * 40, b"y" * 40])
    w.take(first)
    late = w.join()  # fits: a duplicate reads from the first item
    assert late is not None and late.at == 0 and w.take(late) == [b"x" * 40, b"y" * 40]
    w.leave(late)
    w.put([b"z" * 40])  # past the limit: what every reader took goes
    assert w.trimmed and w.held == 40
    assert w.join() is None  # a later duplicate cannot start from the first item


@pytest.mark.parametrize("keep", [False, True])
def test_a_reader_that_catches_up_lets_the_producer_on_and_one_that_does_not_is_dropped(keep):
    async def main() -> None:
        w = _window(keep=keep, limit=100, patience=0.2)
        fast, slow = w.join(), w.join()
        assert fast is not None and slow is not None
        w.put([b"a" * 80, b"b" * 80])
        w.take(fast)
        w.take(slow, 1)  # the slow one read one item and stopped

        async def catch_up() -> None:
            await anyio.lowlevel.checkpoint()
            w.take(slow)

        async with anyio.create_task_group() as tg:
            tg.start_soon(catch_up)
            assert await w.make_room() == 0  # it caught up: nobody dropped
        w.put([b"c" * 80, b"d" * 80])
        w.take(fast)
        with anyio.fail_after(10):
            assert await w.make_room() == 1  # it never reads again: dropped after its patience
        assert slow.dropped and slow.gone.is_set() and not fast.dropped
        assert w.held <= 100

    anyio.run(main)
