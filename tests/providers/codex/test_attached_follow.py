"""Attached mode, the person's TUI opens a new thread (`/new`) while the runtime follows another: the runtime moves to
the new thread only once the turn running on the one it follows has ended, so that turn's outcome is still observed
on its own thread (docs/providers/codex.md#attached-terminals).

The real Codex cannot be made to announce a thread at those moments on demand, so these tests play its app-server for
one connection, in its own JSON-RPC lines, through the runtime's real client, observation and follower.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio
import orjson
import pytest

from tests.providers.codex.app_server_peer import IDLE, AppServerPeer, attached_runtime, connected
from wardian.model import AgentStatus, Party
from wardian.providers.base import OutcomeStatus, ProviderEvent, StateChange, TaskDelivery, TurnOutcome
from wardian.providers.codex.runtime import CodexRuntime

pytestmark = pytest.mark.fast

OLD, NEW, TURN = "thread-old", "thread-new", "turn-1"
ANSWER = {"type": "agentMessage", "id": "msg-1", "text": "the answer on the old thread", "phase": "final_answer"}
TASK = TaskDelivery("ask_1", Party("lead", "u-lead"), "a task")
WAIT_S = 30  # a bound on each wait, never a measurement


class FollowedAppServer(AppServerPeer):
    """One connection to Codex's app-server, the agent's thread OLD: `thread/resume` of any thread answers it idle,
    `turn/start` answers TURN on OLD; the test says when Codex reports TURN started (`started`, which Codex sends
    after its answer) and ended (`complete`), and announces the TUI's new thread (`announce_thread`)."""

    def started(self) -> None:
        self.line({"method": "turn/started", "params": {"threadId": OLD, "turn": {"id": TURN, "items": []}}})

    def complete(self) -> None:
        self.line({"method": "item/completed", "params": {"threadId": OLD, "turnId": TURN, "item": ANSWER}})
        self.line({"method": "turn/completed", "params": {"threadId": OLD, "turn": {
            "id": TURN, "items": [ANSWER], "status": "completed", "error": None}}})

    async def send(self, message: bytes) -> None:
        request = orjson.loads(message)
        method, params = request["method"], request["params"]
        if method == "thread/resume":
            self.line({"id": request["id"], "result": {"thread": {
                "id": params["threadId"], "status": IDLE, "turns": []}}})
        elif method == "turn/start":
            self.line({"id": request["id"], "result": {"turn": {"id": TURN, "items": [], "status": "inProgress"}}})
        else:
            raise AssertionError(f"the fake app-server was not asked for {method}")


Scene = Callable[[CodexRuntime, FollowedAppServer], Awaitable[None]]


async def _follow(scene: Scene) -> tuple[CodexRuntime, list[ProviderEvent]]:
    """The runtime resumes OLD and follows the TUI; `scene` starts TURN and has the TUI announce NEW; then TURN ends,
    and the events run until the runtime is ready on NEW (bounded)."""
    runtime = attached_runtime(OLD)
    server = FollowedAppServer()
    events: list[ProviderEvent] = []
    async with connected(runtime, server) as client:
        with anyio.fail_after(WAIT_S):
            await runtime.conversation.open(client)
            await scene(runtime, server)
            server.complete()
            async for event in runtime.events:
                events.append(event)
                if isinstance(event, StateChange) and event.thread_id == NEW:
                    break
    return runtime, events


def _assert_followed_after_the_turn(runtime: CodexRuntime, events: list[ProviderEvent]) -> None:
    outcomes = [e for e in events if isinstance(e, TurnOutcome)]
    assert outcomes == [TurnOutcome(TURN, OutcomeStatus.DONE, "the answer on the old thread")]
    assert events[-1] == StateChange(AgentStatus.IDLE, None, NEW)  # the events stop there: the outcome came first
    assert (runtime.thread_id, runtime.active_turn_id, runtime.ready) == (NEW, None, True)


async def _announced_during_a_submission(runtime: CodexRuntime, server: FollowedAppServer) -> None:
    async with runtime.submit_lock:  # as the app's dispatcher holds it over a submission
        server.announce_thread(NEW)
        await anyio.wait_all_tasks_blocked()  # the follower has NEW, and waits for the lock
        await runtime.start_turn(TASK)
        server.started()
        await anyio.wait_all_tasks_blocked()
    await anyio.wait_all_tasks_blocked()  # whatever the follower does with the lock, it has done


def test_a_tui_thread_announced_during_a_submission_is_followed_once_its_turn_has_ended() -> None:
    """The follower took the lock right after the submission that started a turn on the old thread: it switched
    threads under that turn, whose turn/completed then no longer counted, so its task never got an outcome and the
    runtime stayed on the finished turn."""
    _assert_followed_after_the_turn(*anyio.run(_follow, _announced_during_a_submission))


async def _announced_before_codex_reports_the_start(runtime: CodexRuntime, server: FollowedAppServer) -> None:
    await runtime.start_turn(TASK)  # the answer makes the runtime active
    server.announce_thread(NEW)
    await anyio.wait_all_tasks_blocked()  # the follower has NEW, and waits for the turn's end
    server.started()
    await anyio.wait_all_tasks_blocked()


def test_a_tui_thread_announced_before_codex_reports_the_turns_start_is_followed_once_the_turn_has_ended() -> None:
    """The turn's start is seen twice (the turn/start answer, then turn/started): the second replaced the idle event
    the follower was waiting on, so it waited for ever and the runtime never followed the TUI."""
    _assert_followed_after_the_turn(*anyio.run(_follow, _announced_before_codex_reports_the_start))
