"""A second provider for the tests, speaking only through `wardian.providers.base` (no Codex anywhere): proof that
the app's runtime is provider-neutral (decision 0014). Its turns end when the test says so, and every call is recorded.

It has no steer (a task for an active agent waits for the turn to end) and an exact completion boundary, so the
app publishes each turn's final text itself; `capabilities` can be replaced per test.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
from anyio.streams.memory import MemoryObjectReceiveStream

from wardian import errors
from wardian.model import AgentStatus, Interaction
from wardian.overrides import ValueSyntax
from wardian.providers.base import (
    Capabilities,
    LaunchSpec,
    OutcomeStatus,
    ProviderEvent,
    ProviderInfo,
    Started,
    StateChange,
    TaskDelivery,
    TurnOutcome,
)
from wardian.providers.events import EventStream

FAKE_CAPABILITIES = Capabilities(steer=False, inject=True, interrupt=True, exact_completion=True)


@dataclass
class FakeRuntime:
    spec: LaunchSpec
    capabilities: Capabilities
    ready: bool = False
    thread_id: str | None = None
    active_turn_id: str | None = None
    submit_lock: anyio.Lock = field(default_factory=anyio.Lock)
    turns_started: list[tuple[str, TaskDelivery]] = field(default_factory=list)
    pushed: list[Interaction] = field(default_factory=list)
    interrupted: list[str] = field(default_factory=list)
    turn_started: anyio.Event = field(default_factory=anyio.Event)
    push_yields: int = 0
    push_faults: list[str | None] = field(default_factory=list)  # per push: None, "unavailable" or "lost"

    def __post_init__(self) -> None:
        self._events = EventStream(f"fake:{self.spec.name}")
        self.events: MemoryObjectReceiveStream[ProviderEvent] = self._events.receive
        self._stop = anyio.Event()
        self._idle = anyio.Event()
        self._idle.set()
        self._turn_ids = itertools.count(1)

    async def run(self, *, task_status: anyio.abc.TaskStatus[str | None] = anyio.TASK_STATUS_IGNORED) -> None:
        self.thread_id = self.spec.thread_id or f"fake-thread-{self.spec.uuid[:8]}"
        self.ready = True
        self._events.emit(StateChange(AgentStatus.IDLE, None, self.thread_id))
        task_status.started(self.thread_id)
        try:
            await self._stop.wait()
        finally:
            self.ready = False
            self._events.emit(StateChange(AgentStatus.OFF, None, self.thread_id))
            self._events.close()

    def stop(self) -> None:
        self._stop.set()

    async def wait_idle(self) -> None:
        await self._idle.wait()

    def plan_message_id(self) -> str | None:
        return None

    async def start_turn(self, task: TaskDelivery, message_id: str | None = None) -> Started:
        if not self.ready:
            raise errors.ProviderUnavailable("the fake runtime is not running; nothing was sent")
        if self.active_turn_id is not None:
            raise errors.DeliveryUncertain("the fake runtime was asked to start a turn while one is active")
        turn_id = f"fake-turn-{next(self._turn_ids)}"
        self.active_turn_id = turn_id
        self._idle = anyio.Event()
        self.turns_started.append((turn_id, task))
        self._events.emit(StateChange(AgentStatus.ACTIVE, turn_id, self.thread_id))
        self.turn_started.set()
        self.turn_started = anyio.Event()
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
        self.active_turn_id = None
        self._idle.set()
        self._events.emit(StateChange(AgentStatus.IDLE, None, self.thread_id))
        self._events.emit(TurnOutcome(turn_id, status, final_text))
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
