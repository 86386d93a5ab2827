"""What the dashboard's poller asks for (``ui.server``): the union of the open pages' partitions,
and a pause that backs off while nothing changes. Pure: a source without brokers, no sockets."""

from __future__ import annotations

import asyncio

from floodmark.ui.server import MAX_BACKOFF, Dashboard, next_pause_s
from floodmark.ui.source import ClusterView


class NoBrokers:
    def __init__(self) -> None:
        self.described = 0

    def describe(self) -> ClusterView:
        self.described += 1
        return ClusterView("bootstrap", [], None, {})

    def bootstrap(self) -> str:
        return "127.0.0.1:9"


def test_pause_doubles_while_nothing_changes_and_halves_on_a_change() -> None:
    pause, pauses = 0.5, []
    for _ in range(6):
        pause = next_pause_s(pause, 0.5, changed=False)
        pauses.append(pause)
    assert pauses == [1.0, 2.0, 4.0, 4.0, 4.0, 4.0] and 0.5 * MAX_BACKOFF == 4.0
    assert next_pause_s(4.0, 0.5, changed=True) == 2.0
    assert next_pause_s(0.5, 0.5, changed=True) == 0.5


def test_focus_is_the_union_of_the_open_streams() -> None:
    async def run() -> None:
        d = Dashboard(NoBrokers(), 500)
        assert d.focus() is None  # nobody focused: every partition
        d.focuses = [frozenset({("a", 0)}), frozenset({("b", 1)})]
        assert d.focus() == {("a", 0), ("b", 1)}
        d.focuses.append(None)  # a stream that wants everything
        assert d.focus() is None

    asyncio.run(run())


def test_an_unchanged_refresh_sends_nothing() -> None:
    async def run() -> None:
        source = NoBrokers()
        d = Dashboard(source, 500)
        d.focuses = [frozenset({("a", 0)})]
        assert await d.refresh() is True
        assert d.snapshot is not None and d.snapshot["focus"] == [["a", 0]]
        assert d.covers(frozenset({("a", 0)})) and not d.covers(None)
        version = d.version
        assert await d.refresh() is False and d.version == version
        assert source.described == 2

    asyncio.run(run())


def test_sizes_and_rates_alone_are_sent_but_do_not_shorten_the_pause() -> None:
    from floodmark.ui.source import Registration

    class OneTopic(NoBrokers):
        def describe(self) -> ClusterView:
            self.described += 1
            return ClusterView("bootstrap", [], None, {("a", 0): Registration(1, 0, (1,), (1,))})

    async def run() -> None:
        d = Dashboard(OneTopic(), 500)
        assert await d.refresh() is True
        assert d.snapshot is not None and d.snapshot["topics"][0]["records_in_per_s"] is None
        version = d.version
        # The next slow refresh finds only a new rate (records stopped a moment ago).
        d.stats.observe = lambda sample: {"a": {"records_in_per_s": 3.0}}  # type: ignore[method-assign]
        d.refreshes = 0
        assert await d.refresh() is False  # no change for the pause...
        assert d.version == version + 1  # ...but the pages get the new rate
        assert d.snapshot["topics"][0]["records_in_per_s"] == 3.0

    asyncio.run(run())
