"""Agents: registering, listing, starting, stopping, attaching to, interrupting and removing them, and the sessions
they act under."""

from __future__ import annotations

from typing import Annotated, Literal, NotRequired

from pydantic import Field, field_validator, model_validator, with_config
from typing_extensions import TypedDict

from wardian import errors
from wardian.approval_rules import MAX_RULES, check_rules
from wardian.approvals import DEFAULT_TIMEOUT_MS, MAX_TIMEOUT_MS, MIN_TIMEOUT_MS, Policy
from wardian.auth.checks import check_name
from wardian.branches import check_branch, default_branch
from wardian.model import PROVIDERS, Agent, InterruptReceipt, ManagedAgent
from wardian.overrides import (
    MAX_COMMAND,
    MAX_ENV,
    MAX_OVERRIDES,
    check_command,
    check_env,
    check_override,
    masked_setting,
)
from wardian.protocol.methods.approvals import PolicyName
from wardian.protocol.methods.base import (
    CLOSED,
    AgentField,
    Params,
    PartyResult,
    Session,
    SessionParams,
    TargetField,
    check_agent_name,
    check_target,
    party_result,
)
from wardian.protocol.methods.worktrees import WorktreeParams, WorktreeRemovalResult
from wardian.protocol.tools import parse_tool_names

# --- params ------------------------------------------------------------------------------------------------


class AgentInterruptParams(SessionParams):
    target: TargetField

    @field_validator("target")
    @classmethod
    def _target(cls, v: str) -> str:
        return check_target(v)


class SessionAnnounceParams(SessionParams):
    """A managed agent's `wardian mcp serve` says it has listed its tools to the agent (no other field)."""


class AgentListParams(Params):
    session: Session | None = None


class AgentAddParams(Params):
    name: str
    provider: str
    workspace: Annotated[str, Field(min_length=1, max_length=4096)] | None = None
    auth: str | None = None
    """The name of the credential (`wardian auth login --name`) the agent's starts use; None: the default one."""
    command: Annotated[list[str], Field(max_length=MAX_COMMAND)] | None = None
    """A generic ACP agent's command line (provider `acp`, required there: `["opencode", "acp"]`); no other
    provider takes one."""
    worktree: WorktreeParams | None = None
    """Make the agent's workspace a git worktree of a repository, under the home; refused with `workspace`."""

    @model_validator(mode="after")
    def _command(self) -> AgentAddParams:
        check_command(self.provider, self.command)
        if self.worktree is not None:
            if self.workspace is not None:
                raise errors.InvalidArguments("a worktree agent's workspace is its worktree: give the repository as "
                                              "worktree.repo, not workspace", field="workspace",
                                              allowed="workspace, or worktree, not both")
            # The default branch is made of the agent's name, which may hold what git refuses (`a..b`).
            check_branch(self.worktree.branch or default_branch(self.name))
        return self

    @field_validator("auth")
    @classmethod
    def _auth(cls, v: str | None) -> str | None:
        return None if v is None else check_name(v, "auth")

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return check_agent_name(v)

    @field_validator("provider")
    @classmethod
    def _provider(cls, v: str) -> str:
        if v not in PROVIDERS:
            raise errors.InvalidProvider(f"provider {v[:40]!r} is not supported", field="provider",
                                         allowed=", ".join(PROVIDERS))
        return v


class AgentSessionParams(Params):
    agent: AgentField


class AgentStartParams(Params):
    agent: AgentField
    mode: Literal["background", "attached"] | None = None
    """None (absent): the mode of the agent's last start, else background."""
    config: Annotated[list[str], Field(max_length=MAX_OVERRIDES)] | None = None
    """The agent's `-c` settings, replacing the saved ones (kept with the agent for later starts); None (absent):
    start with the saved settings."""
    approve_tools: Annotated[list[str], Field(max_length=16)] = []  # noqa: RUF012 (pydantic copies it per instance)
    reset_settings: bool = False
    """Forget the saved `-c` settings and start without any; refused together with `config`."""
    keep_settings: bool = False
    """Start with the saved mode and settings: what leaving out `mode` and `config` does (the console's start
    button sends it); refused together with either, or with `reset_settings`. It keeps the saved tool grants
    too, unless `approve_tools` names new ones."""
    auth: str | None = None
    """The credential name this start and the later ones use (kept with the agent; `default` goes back to the
    provider's default credential); None (absent): the saved one."""
    env: Annotated[list[str], Field(max_length=MAX_ENV)] | None = None
    """The agent's `--env NAME=VALUE` settings for its provider's process (no credential's name), replacing the
    saved ones like `config`; None (absent): the saved ones."""
    approvals: PolicyName | None = None
    """Who answers the agent's permission requests (docs/guide/approvals.md), kept with the agent like `config`;
    None (absent): the saved policy (at first `deny`)."""
    approval_timeout_ms: Annotated[int, Field(ge=MIN_TIMEOUT_MS, le=MAX_TIMEOUT_MS)] | None = None
    """How long an approval waits for its answer before the default (deny) applies; kept like `approvals`; None
    (absent): the saved one (at first 10 minutes)."""
    allow: Annotated[list[str], Field(max_length=MAX_RULES)] | None = None
    """Allow rules (`Bash(git status:*)`, `edit`): a request one matches is allowed without asking
    (docs/guide/approvals.md#allow-rules). Kept like `config`, replacing the saved ones; None (absent): the saved ones
    (`reset_settings`: none)."""

    @field_validator("env")
    @classmethod
    def _env(cls, v: list[str] | None) -> list[str] | None:
        return None if v is None else [check_env(item) for item in v]

    @field_validator("auth")
    @classmethod
    def _auth(cls, v: str | None) -> str | None:
        return None if v is None else check_name(v, "auth")

    @field_validator("approve_tools")
    @classmethod
    def _tools(cls, v: list[str]) -> list[str]:
        return list(parse_tool_names(v))

    @field_validator("allow")
    @classmethod
    def _allow(cls, v: list[str] | None) -> list[str] | None:
        return None if v is None else check_rules(v)

    @field_validator("config")
    @classmethod
    def _config(cls, v: list[str] | None) -> list[str] | None:
        return None if v is None else [check_override(item) for item in v]


class AgentStopParams(Params):
    agent: AgentField


class AgentAttachParams(AgentStopParams):
    pass


class AgentRemoveParams(AgentStopParams):
    remove_worktree: bool = False
    """Remove the agent's worktree too, when it is clean (else nothing is removed), and its branch when wardian made
    it and the branch holds no commit its base lacks."""


class AgentRevokeParams(Params):
    agent: AgentField
    all: bool = False


# --- results -----------------------------------------------------------------------------------------------


@with_config(CLOSED)
class AgentResult(TypedDict):
    name: str
    uuid: str
    provider: str
    status: Literal["off", "starting", "idle", "active", "errored", "signed_out"]
    active_turn_id: str | None
    generation: int
    workspace: str | None
    created_at: int
    host: str | None
    """The host whose app serves the agent: on the embedded store, this app's host."""


def agent_result(a: Agent) -> AgentResult:
    return {"name": a.name, "uuid": a.uuid, "provider": a.provider, "status": a.status.value,
            "active_turn_id": a.active_turn_id, "generation": a.generation, "workspace": a.workspace,
            "created_at": a.created_at, "host": a.host}


@with_config(CLOSED)
class InterruptResult(TypedDict):
    interrupt_id: int
    target: PartyResult
    turn_id: str
    state: Literal["requested"]
    created_at: int


def interrupt_result(r: InterruptReceipt) -> InterruptResult:
    return {"interrupt_id": r.interrupt_id, "target": party_result(r.target), "turn_id": r.turn_id,
            "state": "requested", "created_at": r.created_at}


@with_config(CLOSED)
class HostResult(TypedDict):
    live: bool
    """An app serves the host now: its lease is unexpired (renewed by heartbeat every few seconds)."""
    heartbeat_at: int | None


@with_config(CLOSED)
class DeliveryDoubtsResult(TypedDict):
    uncertain: int
    confirmed_by_lookup: int


@with_config(CLOSED)
class ManagedAgentResult(TypedDict):
    mode: Literal["background", "attached"] | None
    """The mode of the agent's last start (a plain `agent start` uses it again)."""
    settings: list[str]
    """The `-c` settings a plain `agent start` uses again, values of secret-looking keys masked (`********`)."""
    thread_id: str | None
    """The agent's conversation (Codex thread, OpenCode session), resumed by its next start."""
    previous_thread_id: str | None
    """The conversation `thread_id` replaced, because its provider no longer had it (never materialised, deleted)."""
    thread_replaced_at: int | None
    thread_replaced_reason: str | None
    auth: str | None
    """The name of the credential its starts use (`wardian auth status` lists them); None: the provider's
    default credential. Never the secret."""
    approve_tools: list[str]
    """The wardian tools its last start granted (`--approve-tools`), which an app restart and a relaunch for new
    work grant again; [] when none."""
    env: list[str]
    """The `--env NAME=VALUE` settings a plain `agent start` uses again (never a credential: those are refused)."""
    command: list[str]
    """A generic ACP agent's command line (provider `acp`); [] for the other providers."""
    approvals: PolicyName
    """Who answers its permission requests (`--approvals`; docs/guide/approvals.md): deny when never set."""
    approval_timeout_ms: int
    """How long an approval of it waits for an answer (`--approval-timeout`): 10 minutes when never set."""
    allow: list[str]
    """Its allow rules (`--allow`; docs/guide/approvals.md#allow-rules): [] when none."""


def _policy(saved: str | None) -> PolicyName:
    return "person" if saved == Policy.PERSON else "lead" if saved == Policy.LEAD else "deny"


def managed_agent_result(a: ManagedAgent) -> ManagedAgentResult:
    mode = a.mode if a.mode in ("background", "attached") else None
    return {"mode": mode, "settings": [masked_setting(o) for o in a.overrides],
            "thread_id": a.thread_id, "previous_thread_id": a.previous_thread_id,
            "thread_replaced_at": a.thread_replaced_at, "thread_replaced_reason": a.thread_replaced_reason,
            "auth": a.auth, "approve_tools": list(a.approve_tools), "env": list(a.env),
            "command": list(a.command), "approvals": _policy(a.approvals),
            "approval_timeout_ms": a.approval_timeout_ms or DEFAULT_TIMEOUT_MS, "allow": list(a.allow)}


@with_config(CLOSED)
class AgentListResult(TypedDict):
    agents: list[AgentResult]
    caller: PartyResult | None
    deliveries: dict[str, DeliveryDoubtsResult]
    """By agent UUID, agents with any: tasks given to it whose delivery is uncertain, and those whose provider answer
    was lost but a lookup of the message found it."""
    hosts: dict[str, HostResult]
    """By host name, every host of the store: an agent whose host is not live is offline (its tasks wait)."""
    managed: NotRequired[dict[str, ManagedAgentResult]]
    """By agent UUID, for the operator only (absent when a session asks): what the app keeps to start each agent."""


@with_config(CLOSED)
class AgentSessionResult(TypedDict):
    agent: AgentResult
    session_id: str
    home: str


@with_config(CLOSED)
class AgentStartResult(TypedDict):
    agent: AgentResult
    thread_id: str | None
    generation: int
    provider_version: str
    warnings: list[str]
    """What the provider said a person should know of this start (a key the agent's config overrides, a stale
    login file), never a secret; the app log has them too."""


@with_config(CLOSED)
class AgentStopResult(TypedDict):
    agent: AgentResult
    stopped: bool


@with_config(CLOSED)
class AgentRemoveResult(TypedDict):
    agent: AgentResult
    answered: list[str]  # the request ids of its open tasks, each answered with a `failed` notice
    uncertain: list[str]  # the request ids of its tasks whose turn outcome is unknown
    worktree: WorktreeRemovalResult | None  # what became of its worktree with `remove_worktree`; else None


@with_config(CLOSED)
class WorktreeRemoveResult(TypedDict):
    agent: AgentResult
    worktree: WorktreeRemovalResult


@with_config(CLOSED)
class AgentRevokeResult(TypedDict):
    agent: AgentResult
    revoked: int


@with_config(CLOSED)
class AgentAttachResult(TypedDict):
    socket: str
    workspace: str
    codex: str
    codex_home: str
    thread_id: str | None
    config: list[str]
