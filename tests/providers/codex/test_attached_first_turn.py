"""Attached mode, the first task on a TUI's brand-new thread: the runtime starts the turn before it can subscribe
(Codex cannot resume a thread that has no rollout yet), then subscribes with `thread/resume`, whose answer lists the
turn. Codex builds that listing from the rollout and its live state, and lists every unterminated turn as
`interrupted` whenever its live state shows no running turn: also in the moment after it accepted `turn/start` and
wrote the turn's start to the rollout, before its live state has taken the turn up. Under load that moment is long
enough for the subscription to fall into it, and the task was answered "interrupted" while the turn went on to
complete on the person's screen.

The real Codex cannot be made to answer in that order on demand, so these tests play its app-server for one
connection, in its own JSON-RPC lines, through the runtime's real client and observation path, in both orders: the
listing read before Codex took the turn up (the turn then runs and completes), a turn that really ended before
the subscription (its end is seen only as the thread's status changes, which Codex sends every connection), and a
turn that completed before the subscription but whose end Codex had not yet recorded where its listing reads it (it
said the thread was idle first; seen on 0.171.0 under load).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import orjson
import pytest

from tests.providers.codex.app_server_peer import IDLE, AppServerPeer, attached_runtime, connected
from wardian.model import Party
from wardian.providers.base import OutcomeStatus, ProviderEvent, StateChange, TaskDelivery, TurnOutcome
from wardian.providers.codex import threads
from wardian.providers.codex.runtime import CodexRuntime

pytestmark = pytest.mark.fast

THREAD = "01a23307-3688-7ec1-947b-9fd555741602"
TURN = "01a23307-3d01-7511-81aa-dda426cc6ed3"
ANSWER = {"type": "agentMessage", "id": "msg_mock_1_0", "text": "attached answer 42", "phase": "final_answer"}
USER = {"type": "userMessage", "id": "item-1", "content": [{"type": "text", "text": "attached question"}]}
ACTIVE = {"type": "active", "activeFlags": []}
WAIT_S = 30  # a bound on each wait, never a measurement


class TuiAppServer(AppServerPeer):
    """One connection to Codex 0.171.0's app-server while a TUI holds a brand-new thread.

    Like the real one, it sends this connection a thread's turn and item notifications only once the connection has
    subscribed (`thread/resume`), and `thread/status/changed` always. `order` says what happens after `turn/start`
    is answered: `listed_first` answers the subscribing resume with the turn listed `interrupted` on an idle thread,
    then runs the turn to completion; `ended_first` interrupts the turn before the resume, which then lists it so;
    `completed_lagging` completes the turn before the resume, which still lists it `interrupted`, and only the
    second `thread/read` after it lists it `completed`."""

    def __init__(self, order: str) -> None:
        super().__init__()
        self.order = order
        self.subscribed = False
        self.methods: list[str] = []

    def notify(self, method: str, params: dict[str, Any], *, turn_scoped: bool = True) -> None:
        if self.subscribed or not turn_scoped:
            self.line({"method": method, "params": params})

    def status(self, status: dict[str, Any]) -> None:
        self.notify("thread/status/changed", {"threadId": THREAD, "status": status}, turn_scoped=False)

    def run_turn(self) -> None:
        """Codex's live state takes the turn up, and the model answers at once."""
        self.status(ACTIVE)
        self.notify("turn/started", {"threadId": THREAD, "turn": {"id": TURN, "items": [], "status": "inProgress"}})
        self.notify("item/completed", {"threadId": THREAD, "turnId": TURN, "item": ANSWER})
        self.status(IDLE)
        self.notify("turn/completed", {"threadId": THREAD, "turn": {
            "id": TURN, "items": [ANSWER], "status": "completed", "error": None}})

    async def send(self, message: bytes) -> None:
        request = orjson.loads(message)
        method, rid = request.get("method"), request.get("id")
        self.methods.append(method)
        if rid is None:
            return
        answer: Callable[[], dict[str, Any]] | None = getattr(self, "_" + method.replace("/", "_"), None)
        assert answer is not None, f"the fake app-server was not asked for {method}"
        result = answer()
        self.line({"id": rid, **result})
        if method == "turn/start" and self.order in ("ended_first", "completed_lagging"):
            self.status(ACTIVE)  # the turn runs and is interrupted before the connection subscribes: status only
            self.status(IDLE)
        if method == "thread/resume" and self.subscribed and self.order == "listed_first":
            self.run_turn()

    def _thread_resume(self) -> dict[str, Any]:
        if "turn/start" not in self.methods:
            return {"error": {"code": -32600, "message": f"no rollout found for thread id {THREAD}"}}
        self.subscribed = True
        # Either way the thread is idle in the answer and the unterminated turn is listed interrupted.
        return {"result": {"thread": {"id": THREAD, "status": IDLE, "turns": [
            {"id": TURN, "items": [USER], "status": "interrupted", "error": None}]}}}

    def _thread_read(self) -> dict[str, Any]:
        if "turn/start" not in self.methods:
            return {"result": {"thread": {"id": THREAD, "status": IDLE, "turns": []}}}
        recorded = self.order == "completed_lagging" and self.methods.count("thread/read") > 2
        turn = ({"id": TURN, "items": [USER, ANSWER], "status": "completed", "error": None} if recorded
                else {"id": TURN, "items": [USER], "status": "interrupted", "error": None})
        return {"result": {"thread": {"id": THREAD, "status": IDLE, "turns": [turn]}}}

    def _turn_start(self) -> dict[str, Any]:
        return {"result": {"turn": {"id": TURN, "items": [], "status": "inProgress", "error": None}}}


async def _first_task(order: str) -> tuple[CodexRuntime, list[ProviderEvent]]:
    """The TUI's thread is announced and adopted, a task is delivered as its first turn, and the events run until
    that turn's outcome (bounded)."""
    runtime = attached_runtime(None)
    server = TuiAppServer(order)
    events: list[ProviderEvent] = []
    async with connected(runtime, server):
        server.announce_thread(THREAD)
        with anyio.fail_after(WAIT_S):
            async for event in runtime.events:
                events.append(event)
                if isinstance(event, StateChange) and event.status.value == "idle" and runtime.ready:
                    break
            await runtime.start_turn(TaskDelivery("ask_1", Party("lead", "u-lead"), "attached question"))
            async for event in runtime.events:
                events.append(event)
                if isinstance(event, TurnOutcome):
                    break
    return runtime, events


def test_a_first_turn_listed_interrupted_before_codex_took_it_up_ends_with_its_real_outcome() -> None:
    """The resume's listing came before Codex's live state had the turn: it is not the turn's end; the turn's own
    turn/completed is, and the task's outcome is the answer the TUI shows (once, and nothing interrupted)."""
    runtime, events = anyio.run(_first_task, "listed_first")
    outcomes = [e for e in events if isinstance(e, TurnOutcome)]
    assert outcomes == [TurnOutcome(TURN, OutcomeStatus.DONE, "attached answer 42")]
    assert runtime.active_turn_id is None
    assert runtime._idle.is_set()


def test_a_first_turn_that_ended_before_the_subscription_ends_from_the_listing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The thread went active and back to idle before the resume answered (the connection saw only the status
    changes): the turn did end, no turn/completed will come for it, and the listing is its outcome once re-reading
    has not shown it `completed`."""
    monkeypatch.setattr(threads, "LISTING_CATCH_UP_READS", 3)
    runtime, events = anyio.run(_first_task, "ended_first")
    outcomes = [e for e in events if isinstance(e, TurnOutcome)]
    assert outcomes == [TurnOutcome(TURN, OutcomeStatus.INTERRUPTED, None)]
    assert runtime.active_turn_id is None
    assert runtime._idle.is_set()


def test_a_completed_first_turn_listed_interrupted_before_codex_recorded_its_end_ends_with_its_answer() -> None:
    """The turn completed before the subscription, but Codex said the thread was idle before it recorded the turn's
    end, so the resume listed it `interrupted`: re-reading the thread shows it `completed`, and the task's outcome is
    the answer the person's screen shows."""
    runtime, events = anyio.run(_first_task, "completed_lagging")
    outcomes = [e for e in events if isinstance(e, TurnOutcome)]
    assert outcomes == [TurnOutcome(TURN, OutcomeStatus.DONE, "attached answer 42")]
    assert runtime.active_turn_id is None
    assert runtime._idle.is_set()
