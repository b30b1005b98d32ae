"""The provider boundary: what the app's runtime needs of one kind of agent, and nothing about its wire.

```
Provider (one per kind: codex, ...)        probe() -> ProviderInfo (version, capabilities); prepare(spec) -> runtime
ProviderRuntime (one per started agent)    run / stop; start_turn / steer / push / interrupt; events
```

A provider owns its executable, its private home under the agent's folder, the registration of `wardian mcp
serve` there, its wire shapes, its version gates and its error classification. The runtime (`wardian.app.runtime`)
reads `Capabilities`, never a provider's name, and persists every fact; a provider never touches the store.

What each delivery call may raise, and what the app does with it (docs/reference/errors.md):
- `Rejected`: certainly not admitted. The app releases the claim, and then: `StaleTurn`, offers the task again once
  the turn it named has ended; `ConversationGone` (the provider has already replaced the conversation, and says so
  with a `ConversationReplaced` event), offers it again at once, on the new conversation; `ProviderRefused` (the
  request as made is invalid for the provider: offering it again cannot help), answers the task with a correlated
  Wardian `failed` notice; any other (`ProviderUnavailable`), waits for the next dispatch opportunity.
- any other `WardianError`: the outcome is unknown. The app marks the delivery uncertain and never resends it.
Which provider answers are definite rejections is the provider's to decide, in its own package (Codex:
`wardian.providers.codex.rejections`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import anyio
import anyio.abc
from anyio.streams.memory import MemoryObjectReceiveStream

from wardian.auth.model import Credential
from wardian.home import Home
from wardian.model import AgentStatus, Interaction, Party
from wardian.overrides import ValueSyntax
from wardian.providers.approvals import ApprovalAsked
from wardian.providers.capabilities import Capabilities
from wardian.usage import TokenUsage


@dataclass(frozen=True, slots=True)
class ProviderInfo:
    """What `probe` found: the executable, its version and what that version may do."""

    executable: str
    version: str
    capabilities: Capabilities


class OutcomeStatus(StrEnum):
    DONE = "done"
    INTERRUPTED = "interrupted"
    FAILED = "failed"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class TurnOutcome:
    """A turn ended. `final_text` is the provider's choice of the turn's final answer (None: none observed)."""

    turn_id: str
    status: OutcomeStatus
    final_text: str | None = None
    error: str | None = None
    credentials_rejected: bool = False
    """The provider rejected the agent's credentials (a 401, "not logged in"): the turn's tasks get a `failed`
    notice saying so, and the agent shows `signed_out` until its next start."""
    usage: TokenUsage | None = None
    """The tokens the turn's model requests cost, as the provider reported them (None: it reported none; several
    outcomes of one turn carry it on one of them only, so it is counted once)."""


@dataclass(frozen=True, slots=True)
class StateChange:
    """The observed runtime state: idle, active (with the exact turn id), starting, off or errored."""

    status: AgentStatus
    active_turn_id: str | None
    thread_id: str | None


@dataclass(frozen=True, slots=True)
class ConversationReplaced:
    """The agent's conversation `previous` could not be used (its provider no longer has it: never materialised,
    or deleted) and the new conversation `current` took its place; `reason` is the provider's own words."""

    previous: str
    current: str
    reason: str


@dataclass(frozen=True, slots=True)
class HistoryReplayed:
    """The agent resumed conversation `thread_id` and showed its history: per task (request id) the history shows,
    the final text of its answered turn, or None when the history shows it taken but not answered. The app settles
    from it the tasks a killed app lost in that conversation (never by resending)."""

    thread_id: str
    answers: Mapping[str, str | None]


ProviderEvent = StateChange | TurnOutcome | ConversationReplaced | HistoryReplayed | ApprovalAsked


@dataclass(frozen=True, slots=True)
class TaskDelivery:
    """A task as the runtime hands it to a provider: its request id, its sender, the literal text."""

    request_id: str
    sender: Party
    text: str


@dataclass(frozen=True, slots=True)
class Started:
    """A submission the provider took: the turn it started (or will start) for the task."""

    turn_id: str
    confirmed_by_lookup: str | None = None
    """Set when the provider's answer to the submission was lost (why) and the message was then found by the id the
    app chose for it: the delivery is confirmed, not uncertain (docs/decisions/0016-opencode-chosen-message-ids.md)."""


@dataclass(frozen=True, slots=True)
class LaunchSpec:
    """Everything a provider needs to start one agent's runtime, decided by the app."""

    name: str
    uuid: str
    agent_dir: Path
    """`$WARDIAN_HOME/agents/<uuid>`: the provider keeps its private home (and its socket) under it."""
    workspace: Path
    mode: str
    overrides: tuple[str, ...]
    approve_tools: tuple[str, ...]
    home: Home
    session: str
    """A session bound to the new generation, for the registered `wardian mcp serve` (never logged)."""
    thread_id: str | None
    """The agent's conversation, to resume; None starts one."""
    log_path: Path
    pid_path: Path
    credentials: tuple[Credential, ...] = ()
    """The agent's credentials from the home's credential store (`wardian.auth`): at most one for Codex and Claude
    Code, one per OpenCode provider id. The provider hands them to its process without writing them anywhere
    (docs/guide/sign-in.md)."""
    env: Mapping[str, str] = field(default_factory=dict)
    """The agent's `--env` settings (non-secret variables, checked by `wardian.overrides.check_env`): the provider
    gives them to its process, under its own private directories and quiet variables (which win)."""
    mcp_connected: anyio.Event | None = None
    """Set once this generation's `wardian mcp serve` has listed its tools to the agent and told the app so
    (`session/announce`, sent when its registration sets `WARDIAN_MCP_ANNOUNCE=1`): a provider whose agent connects
    its MCP servers only after its conversation exists (ACP agents) waits for it before the first task."""
    approvals: str = "deny"
    """Who answers the agent's permission requests (`agent start --approvals`: `person`, `lead` or `deny`; `rules`:
    deny, with allow rules that may allow some): under any but `deny` the provider turns its agent's own approval step
    on, and hands each request to the app as an `ApprovalAsked` (`wardian.providers.asking`;
    docs/guide/approvals.md)."""


class ProviderRuntime(Protocol):
    """One started agent's provider runtime (one process, one conversation).

    A runtime may also have `warnings: list[str]`: what a person should know of its start (a key the agent's own
    config overrides, a stale login file), never a secret, filled before `run` reports the start; `wardian agent
    start` prints them (an optional attribute, so a provider without any needs nothing).
    """

    capabilities: Capabilities
    active_turn_id: str | None
    """The exact turn observed active, or None when idle."""
    submit_lock: anyio.Lock
    """Held by the runtime while a submission and its binding are in flight; taken by the provider before it
    switches conversations, and by the runtime's completion observer before it looks a turn's tasks up."""
    events: MemoryObjectReceiveStream[ProviderEvent]
    """State changes and turn outcomes in the order observed; it ends when the runtime stops. Never lossy."""

    # Read only for the app: the runtime sets them (`wardian.providers.turns.TurnState.became_ready`).
    @property
    def ready(self) -> bool:
        """The conversation is ready for deliveries."""
        ...

    @property
    def thread_id(self) -> str | None:
        """The conversation deliveries go to (None while it is not known yet)."""
        ...

    async def run(self, *, task_status: anyio.abc.TaskStatus[str | None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Start the process and the conversation; `task_status.started(thread_id)` once deliveries may begin
        (thread_id None while the conversation is not known yet). Returns when stopped."""
        ...

    def stop(self) -> None:
        """Ask `run` to end (it stops the process and ends `events`)."""
        ...

    async def wait_idle(self) -> None:
        """Return once no turn is observed active."""
        ...

    def plan_message_id(self) -> str | None:
        """The provider-facing id the next submission's message will carry, chosen before it is sent so the app can
        persist the binding first (None when the provider names it only in its answer)."""
        ...

    async def start_turn(self, task: TaskDelivery, message_id: str | None = None) -> Started:
        """Start a new turn for the task on the conversation (its message carrying `message_id` when planned);
        return its turn id (and, when a lost answer was settled by a lookup, why). Raises: Rejected (not admitted),
        WardianError (unknown outcome; `details["looked_up"]` when a lookup did not find the message)."""
        ...

    async def steer(self, task: TaskDelivery, expected_turn_id: str) -> str:
        """Add the task to the exact active turn `expected_turn_id` (needs `capabilities.steer`); return the turn id.
        Raises: StaleTurn (that turn is not active: not admitted), Rejected, WardianError (unknown outcome)."""
        ...

    async def push(self, records: Sequence[Interaction], *, timeout_s: float) -> None:
        """Put information, replies or notices into the conversation without starting a turn (needs `inject`).
        Raises: WardianError when it may not have happened (the records then stay on the receive path)."""
        ...

    async def interrupt(self, turn_id: str) -> None:
        """Interrupt the exact active turn. Raises: NotActive (no such active turn), WardianError."""
        ...

    def attach_info(self) -> dict[str, Any]:
        """How a person's terminal attaches (needs `capabilities.attach`). Raises: NotActive."""
        ...


class Provider(Protocol):
    """One kind of agent (`codex`, ...)."""

    name: str
    settings_syntax: ValueSyntax
    """What a `-c key=value` value that is not TOML means for this provider (`wardian.overrides`); the app checks
    every setting with it before it saves or applies any."""

    async def probe(self) -> ProviderInfo:
        """Find the executable and check its version. Raises: Unsupported (missing or not eligible)."""
        ...

    async def prepare(self, spec: LaunchSpec, info: ProviderInfo) -> ProviderRuntime:
        """Prepare the agent's private provider home (registering `wardian mcp serve` with `spec.session`), end a
        runtime a killed app left behind, and return the runtime to `run`.
        Raises: RegistrationConflict, CliNotFound, WardianError."""
        ...


@runtime_checkable
class OffersAtBoundary(Protocol):
    """A runtime that takes records into its running turn at the turn's next tool boundary
    (`Capabilities.push_at_boundary`)."""

    async def offer(self, record: Interaction, claim: Callable[[], Awaitable[bool]], *, timeout_s: float) -> bool:
        """Hold `record` for the running turn's next tool boundary; there, `claim` it (False: a receive took it
        first) and hand it over. True once handed over; False when not (no turn, not claimed, the turn ended first
        or `timeout_s` passed): then it was never sent."""
        ...


@runtime_checkable
class CommandProvider(Protocol):
    """A provider whose agents each name their own command line (the generic ACP provider, `acp`)."""

    def with_command(self, command: tuple[str, ...]) -> Provider:
        """The provider for the agent whose command line is `command`."""
        ...


@dataclass(frozen=True, slots=True)
class LostDelivery:
    """A task delivered into an agent's conversation whose outcome a previous app never saw (it was killed): what
    the binding recorded, and where the agent's provider keeps its files."""

    request_id: str
    thread_id: str | None
    """The conversation (session) the task was delivered into."""
    message_id: str | None
    """The provider-facing id of the delivery's message (the app chose it before sending)."""
    agent_name: str
    agent_dir: Path
    workspace: Path
    pid_path: Path


class Finding(StrEnum):
    ANSWERED = "answered"
    """The message was taken and its turn's outcome is on record: `Recovery.outcome`."""
    TAKEN = "taken"
    """The message was taken but its turn never answered (the process that would have answered is gone)."""
    NOT_FOUND = "not_found"
    """The provider has no record of the message: it may never have arrived."""


@dataclass(frozen=True, slots=True)
class Recovery:
    request_id: str
    finding: Finding
    outcome: TurnOutcome | None = None


class RecoversLost(Protocol):
    """A provider that can settle deliveries a killed app lost from its own records (an optional `Provider` method:
    a provider without it leaves every such delivery uncertain)."""

    async def recover_lost(self, deliveries: Sequence[LostDelivery]) -> list[Recovery]:
        """Per delivery (all of one agent), what the provider's own records say. Called at app start before the
        agent's runtime starts; it first ends any process the killed app left running for the agent, so a record
        is complete or definitely absent. Reads files only (never the model)."""
        ...


def lost_recoverer(provider: object) -> RecoversLost | None:
    """The provider's `recover_lost`, if it has one (Codex and OpenCode do not: their lost deliveries stay
    uncertain)."""
    return provider if callable(getattr(provider, "recover_lost", None)) else None  # type: ignore[return-value]
