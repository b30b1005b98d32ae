"""The turn bookkeeping every provider runtime keeps (`wardian.providers.turns.TurnState`): what it reports when a
conversation changes and when a turn's start is seen twice, whichever provider's wire said so."""

from __future__ import annotations

import anyio
import pytest

from wardian.model import AgentStatus
from wardian.providers.base import ProviderEvent, StateChange
from wardian.providers.turns import TurnState

pytestmark = pytest.mark.fast  # the fast tier (scripts/check test-fast)


def _events(state: TurnState) -> list[ProviderEvent]:
    """What `state` reported, through the OFF its end adds."""
    state.ended()
    events: list[ProviderEvent] = []
    with state.events:
        while True:
            try:
                events.append(state.events.receive_nowait())
            except anyio.EndOfStream:
                return events


def test_a_conversation_made_ready_in_place_of_another_has_no_active_turn() -> None:
    """A runtime that moves to another conversation (Codex: a replaced thread, or the thread a person's TUI opened)
    no longer observes the turns of the one it left: a turn left running there is not its active turn."""

    async def main() -> tuple[str | None, list[ProviderEvent]]:
        state = TurnState("test", "thread-1")
        state.became_ready("thread-1")
        state.activate("turn-1")
        state.became_ready("thread-2")
        return state.active_turn_id, _events(state)

    active, events = anyio.run(main)
    assert active is None
    assert events[-2:] == [StateChange(AgentStatus.IDLE, None, "thread-2"), StateChange(AgentStatus.OFF, None,
                                                                                         "thread-2")]


def test_a_wait_for_idle_begun_before_a_turns_start_is_seen_again_ends_with_that_turn() -> None:
    """A provider may see one turn start twice (Codex: the turn/start answer, then turn/started); whoever waits for
    idle in between is woken by the turn's end, not left on a superseded event."""

    async def main() -> bool:
        state = TurnState("test", "thread-1")
        state.became_ready("thread-1")
        state.activate("turn-1")
        woken = anyio.Event()

        async def wait() -> None:
            await state.wait_idle()
            woken.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(wait)
            await anyio.wait_all_tasks_blocked()
            state.activate("turn-1")
            state.deactivate()
            with anyio.move_on_after(5):
                await woken.wait()
            tg.cancel_scope.cancel()
        _events(state)
        return woken.is_set()

    assert anyio.run(main)
