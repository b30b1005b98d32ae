"""A second provider for the tests, speaking only through `wardian.providers.base` (no Codex anywhere): proof that
the app's runtime is provider-neutral (decision 0014). Its turns end when the test says so, and every call is recorded.

It has no steer (a task for an active agent waits for the turn to end) and an exact completion boundary, so the
app publishes each turn's final text itself; `capabilities` can be replaced per test. Its turn bookkeeping is the
providers' own (`TurnState`), as a new provider's would be.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel

from wardian import errors
from wardian.model import Interaction
from wardian.overrides import ValueSyntax
from wardian.providers.approvals import ApprovalAsked
from wardian.providers.base import (
    Capabilities,
    LaunchSpec,
    OutcomeStatus,
    ProviderInfo,
    Started,
    TaskDelivery,
    TurnOutcome,
)
from wardian.providers.turns import TurnState

FAKE_CAPABILITIES = Capabilities(steer=False, inject=True, interrupt=True, exact_completion=True)


class FakeRuntime(TurnState):
    """One started fake agent: a turn starts at `start_turn` and ends when the test plays the model (`end_turn`)."""

    def __init__(self, spec: LaunchSpec, capabilities: Capabilities) -> None:
        super().__init__(f"fake:{spec.name}", spec.thread_id)
        self.spec = spec
        self.capabilities = capabilities
        self.turns_started: list[tuple[str, TaskDelivery]] = []
        self.pushed: list[Interaction] = []
        self.interrupted: list[str] = []
        self.turn_started = anyio.Event()
        self.push_yields = 0
        self.push_faults: list[str | None] = []  # per push: None, "unavailable" or "lost"
        self._stop = anyio.Event()
        self._turn_ids = itertools.count(1)
        # When set, a turn asks this approval as it starts, before `start_turn` returns (the app has not yet bound the
        # task to the turn), and `start_turn` returns only once every other task of the app waits.
        self.ask_at_start: Callable[[str], ApprovalAsked] | None = None

    async def run(self, *, task_status: anyio.abc.TaskStatus[str | None] = anyio.TASK_STATUS_IGNORED) -> None:
        self.became_ready(self.thread_id or f"fake-thread-{self.spec.uuid[:8]}")
        task_status.started(self.thread_id)
        try:
            await self._stop.wait()
        finally:
            self.ended()

    def stop(self) -> None:
        self._stop.set()

    def plan_message_id(self) -> str | None:
        return None

    async def start_turn(self, task: TaskDelivery, message_id: str | None = None) -> Started:
        if not self.ready:
            raise errors.ProviderUnavailable("the fake runtime is not running; nothing was sent")
        if self.active_turn_id is not None:
            raise errors.DeliveryUncertain("the fake runtime was asked to start a turn while one is active")
        turn_id = f"fake-turn-{self.spec.name}-{next(self._turn_ids)}"  # unique in the store, as a provider's are
        self.turns_started.append((turn_id, task))
        self.activate(turn_id)
        self.turn_started.set()
        self.turn_started = anyio.Event()
        if self.ask_at_start is not None:
            self.emit(self.ask_at_start(turn_id))
            await anyio.wait_all_tasks_blocked()  # as a provider's acknowledgement takes its time
        return Started(turn_id)

    async def steer(self, task: TaskDelivery, expected_turn_id: str) -> str:
        raise AssertionError("the app steered a provider whose capabilities say it cannot steer")

    async def push(self, records: Sequence[Interaction], *, timeout_s: float) -> None:
        for _ in range(self.push_yields):
            await anyio.lowlevel.checkpoint()  # as a provider's I/O would: the app's other tasks run meanwhile
        fault = self.push_faults.pop(0) if self.push_faults else None
        if fault == "unavailable":
            raise errors.ProviderUnavailable("the fake runtime refused the push; nothing was sent")
        self.pushed.extend(records)
        if fault == "lost":
            raise errors.DeliveryUncertain("the fake runtime's answer to the push was lost")

    async def interrupt(self, turn_id: str) -> None:
        if turn_id != self.active_turn_id:
            raise errors.NotActive(f"turn {turn_id} is not active", field="target")
        self.interrupted.append(turn_id)
        self.end_turn(OutcomeStatus.INTERRUPTED)

    def attach_info(self) -> dict[str, Any]:
        raise errors.NotActive("the fake provider has no terminal to attach", field="agent")

    def end_turn(self, status: OutcomeStatus, final_text: str | None = None) -> str:
        """The active turn ends (the test plays the model): idle, then its outcome, as a provider reports them."""
        turn_id = self.active_turn_id
        assert turn_id is not None, "no turn is active"
        self.deactivate()
        self.emit(TurnOutcome(turn_id, status, final_text))
        return turn_id


@dataclass
class FakeProvider:
    name: str = "fake"
    capabilities: Capabilities = FAKE_CAPABILITIES
    settings_syntax: ValueSyntax = ValueSyntax.TOML_OR_STRING
    runtimes: list[FakeRuntime] = field(default_factory=list)
    # When set, a start waits in `prepare` until the test sets it (`preparing` tells the test it is waiting there).
    start_gate: anyio.Event | None = None
    preparing: anyio.Event = field(default_factory=anyio.Event)

    async def probe(self) -> ProviderInfo:
        return ProviderInfo(executable="fake", version="1.0.0", capabilities=self.capabilities)

    async def prepare(self, spec: LaunchSpec, info: ProviderInfo) -> FakeRuntime:
        self.preparing.set()
        if self.start_gate is not None:
            await self.start_gate.wait()
        runtime = FakeRuntime(spec, info.capabilities)
        self.runtimes.append(runtime)
        return runtime
