"""The operator (the person running the agents) and the app itself: sending, receiving and interrupting as the
operator, the agents' overview, the web console's login, the app's status and stop."""

from __future__ import annotations

from pydantic import ValidationInfo, field_validator, with_config
from typing_extensions import TypedDict

from wardian.model import AgentOverview, ManagedAgent
from wardian.protocol.methods.agents import AgentResult, ManagedAgentResult, agent_result, managed_agent_result
from wardian.protocol.methods.approvals import ApprovalTallyResult, approval_tally_result
from wardian.protocol.methods.base import (
    CLOSED,
    CursorField,
    LimitField,
    MessageField,
    Params,
    TargetField,
    TimeoutField,
    check_cursor,
    check_target,
    check_text,
)
from wardian.protocol.methods.usage import AgentUsageResult, agent_usage_result
from wardian.protocol.methods.worktrees import WorktreeResult
from wardian.taskpolicy import TaskPolicy


class OperatorSendParams(Params):
    """`message/send` and `task/followup` as the operator: no session; the control socket's peer uid check is what
    makes the caller the operator."""

    target: TargetField
    message: MessageField

    @field_validator("target")
    @classmethod
    def _target(cls, v: str) -> str:
        return check_target(v)

    @field_validator("message")
    @classmethod
    def _message(cls, v: str) -> str:
        return check_text(v)


class OperatorReceiveParams(Params):
    cursor: CursorField | None = None
    ack_cursor: CursorField | None = None
    limit: LimitField | None = None
    timeout_ms: TimeoutField | None = None

    @field_validator("cursor", "ack_cursor")
    @classmethod
    def _cursor(cls, v: str | None, info: ValidationInfo) -> str | None:
        return check_cursor(v, str(info.field_name))


class OperatorInterruptParams(Params):
    target: TargetField

    @field_validator("target")
    @classmethod
    def _target(cls, v: str) -> str:
        return check_target(v)


@with_config(CLOSED)
class AgentOverviewResult(TypedDict):
    agent: AgentResult
    pending: int
    in_flight: int
    host_live: bool
    """An app serves the agent's host now."""
    local: bool
    """The agent belongs to this app's host: only here can it be started or stopped."""
    managed: ManagedAgentResult | None
    """Its saved mode and settings and its conversation (a replaced one included); None for an agent no app has
    started."""
    approvals: ApprovalTallyResult | None
    """Its approvals (docs/guide/approvals.md); None when none."""
    worktree: WorktreeResult | None
    """Its git worktree's branch, commits ahead of the base and changes (docs/guide/teams.md); None: no worktree."""
    usage: AgentUsageResult | None
    """Its ended turns' token usage (docs/guide/teams.md#usage); None when no turn of it has ended."""


@with_config(CLOSED)
class AgentOverviewListResult(TypedDict):
    agents: list[AgentOverviewResult]


def agent_overview_result(o: AgentOverview, *, host_live: bool = True, local: bool = True,
                          managed: ManagedAgent | None = None,
                          worktree: WorktreeResult | None = None) -> AgentOverviewResult:
    return {"agent": agent_result(o.agent), "pending": o.pending, "in_flight": o.in_flight, "host_live": host_live,
            "local": local, "managed": managed_agent_result(managed) if managed is not None else None,
            "approvals": approval_tally_result(o.approvals), "worktree": worktree, "usage": agent_usage_result(o.usage)}


@with_config(CLOSED)
class ConsoleLoginResult(TypedDict):
    url: str  # the one-time login URL; it holds a secret: print it to its owner, never log it
    expires_at: int


@with_config(CLOSED)
class TeamPolicyResult(TypedDict):
    task_deadline_ms: int | None
    max_task_depth: int
    max_chain_tasks: int


def team_policy_result(p: TaskPolicy) -> TeamPolicyResult:
    return {"task_deadline_ms": p.task_deadline_ms, "max_task_depth": p.max_task_depth,
            "max_chain_tasks": p.max_chain_tasks}


@with_config(CLOSED)
class AppStatusResult(TypedDict):
    running: bool
    version: str
    protocol: int
    pid: int
    home: str
    started_at: int
    agents: int
    waiting: int  # waits (`mailbox/wait`, receives with a timeout) subscribed right now
    console: str | None  # the web console's address (`--console`), without any login secret; None when not served
    # The store writer's transactions since the app started, and the operations they ran: their ratio is the mean
    # group-commit batch (docs/benchmarks.md).
    store_batches: int
    store_operations: int
    task_policy: TeamPolicyResult  # the team's task deadline and loop-guard limits (`team/policy`)
