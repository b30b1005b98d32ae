"""The app's change feed (decision 0018): what wakes the console's live views after a store commit that changed
something."""

from __future__ import annotations

import anyio
import pytest
from anyio.lowlevel import checkpoint

from wardian.app.signals import ChangeFeed

pytestmark = pytest.mark.fast  # the fast tier (scripts/check test-fast)


def test_a_change_after_the_version_a_view_saw_is_never_missed() -> None:
    """Subscribe-before-look: a view reads at version V, a commit lands before it waits; its wait returns at once."""
    async def main() -> None:
        feed = ChangeFeed()
        seen = feed.version
        feed.changed()  # between the view's read and its wait
        with anyio.fail_after(5):
            assert await feed.next_change(seen) == seen + 1

    anyio.run(main)


def test_every_waiting_view_wakes_on_one_change_and_on_close() -> None:
    async def main() -> None:
        feed = ChangeFeed()
        woke: list[int] = []

        async def view() -> None:
            woke.append(await feed.next_change(feed.version))

        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                for _ in range(3):
                    tg.start_soon(view)
                await anyio.wait_all_tasks_blocked()
                feed.changed()
            assert woke == [1, 1, 1]
            async with anyio.create_task_group() as tg:
                tg.start_soon(view)
                await anyio.wait_all_tasks_blocked()
                feed.wake_all()  # the console is closing: the view wakes without a change
            assert woke[-1] == 1

    anyio.run(main)


def test_a_change_with_nobody_waiting_only_counts() -> None:
    async def main() -> None:
        feed = ChangeFeed()
        for _ in range(1000):
            feed.changed()
        await checkpoint()
        assert feed.version == 1000
        assert feed._event is None

    anyio.run(main)
