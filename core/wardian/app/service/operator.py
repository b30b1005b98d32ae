"""The operator (the person running the agents, vouched for by the control socket) and the app itself: sending,
receiving and interrupting as the operator, the agents' overview, the web console's login, the app's status and
stop."""

from __future__ import annotations

import logging
import os
from dataclasses import replace
from typing import TYPE_CHECKING

from wardian import __version__, errors
from wardian.app.service.agents import interrupt_as, offline
from wardian.app.service.mailbox import receive_as
from wardian.app.service.messages import admit
from wardian.app.service.registry import handlers
from wardian.app.service.worktrees import states
from wardian.model import PROTOCOL_VERSION, AgentOverview, HostInfo, InteractionKind, ManagedAgent
from wardian.protocol.methods import (
    AgentOverviewListResult,
    AppStatusResult,
    ConsoleLoginResult,
    EmptyParams,
    InterruptResult,
    OkResult,
    OperatorFollowupParams,
    OperatorInterruptParams,
    OperatorReceiveParams,
    OperatorSendParams,
    ReceiveResult,
    SendResult,
    agent_overview_result,
    team_policy_result,
)
from wardian.store import Store, approvals, chains, hosts, roster, usage, worktrees
from wardian.store.worktrees import Worktree
from wardian.taskpolicy import TaskPolicy

if TYPE_CHECKING:
    from wardian.app.service.app import AppService

log = logging.getLogger("wardian.app")


@handlers.serves("operator/send")
async def operator_send(app: AppService, p: OperatorSendParams) -> SendResult:
    return await admit(app, p, InteractionKind.INFORMATION)


@handlers.serves("operator/followup")
async def operator_followup(app: AppService, p: OperatorFollowupParams) -> SendResult:
    return await admit(app, p, InteractionKind.TASK)


@handlers.serves("operator/receive")
async def operator_receive(app: AppService, p: OperatorReceiveParams) -> ReceiveResult:
    return await receive_as(app, p, None)


@handlers.serves("operator/interrupt")
async def operator_interrupt(app: AppService, p: OperatorInterruptParams) -> InterruptResult:
    return await interrupt_as(app, p.target, None)


def _overview(store: Store) -> tuple[list[AgentOverview], list[HostInfo], str | None, dict[str, ManagedAgent],
                                     dict[int, Worktree]]:
    """`agent/overview`'s reads, in one transaction: the agents with their task counts, the hosts, the host this
    app serves, what the app keeps to start each agent (by UUID), and their worktrees (by agent id)."""
    tallies, used = approvals.tallies(store), usage.by_agent(store)
    rows = [replace(o, approvals=tallies.get(o.agent.id), usage=used.get(o.agent.id))
            for o in roster.agents_overview(store)]
    return (rows, hosts.list_hosts(store), store.host, {m.uuid: m for m in roster.managed_agents(store)},
            worktrees.by_agent(store))


@handlers.serves("agent/overview")
async def agent_overview(app: AppService, p: EmptyParams) -> AgentOverviewListResult:
    rows, all_hosts, mine, managed, trees = await app.writer.call(_overview)
    down = {h.name for h in all_hosts if not h.live}
    rows = [replace(o, agent=offline(o.agent)) if o.agent.host in down else o for o in rows]
    shown = await states(rows, mine, trees) if trees else {}
    return {"agents": [agent_overview_result(o, host_live=o.agent.host not in down,
                                             local=o.agent.host in (None, mine),
                                             managed=managed.get(o.agent.uuid),
                                             worktree=shown.get(o.agent.id)) for o in rows]}


@handlers.serves("console/login")
async def console_login(app: AppService, p: EmptyParams) -> ConsoleLoginResult:
    if app.console is None:
        raise errors.Unsupported("this app serves no web console; start it with `wardian app start --console` "
                                 "(or `wardian app run --console`)", field="console")
    url, expires_at = app.console.mint_login()
    log.info("console login URL issued (valid once, until %d)", expires_at)  # never the URL: it holds the secret
    return {"url": url, "expires_at": expires_at}


@handlers.serves("app/status")
async def status(app: AppService, p: EmptyParams) -> AppStatusResult:
    agents, policy = await app.writer.call(_status_reads)
    return {"running": True, "version": __version__, "protocol": PROTOCOL_VERSION, "pid": os.getpid(),
            "home": str(app.home.root), "started_at": app.started_at, "agents": agents,
            "waiting": app.signals.waiting(), "console": app.console.address if app.console else None,
            "store_batches": app.writer.batches, "store_operations": app.writer.operations,
            "task_policy": team_policy_result(policy)}


def _status_reads(store: Store) -> tuple[int, TaskPolicy]:
    """`app/status`'s reads, in one store operation: how many agents, and the team's task policy."""
    return len(roster.list_agents(store)), chains.policy(store)


@handlers.serves("app/stop")
async def app_stop(app: AppService, p: EmptyParams) -> OkResult:
    # The answer is written first; the server stops the app right after (see ControlServer).
    app.stop_requested = True
    return {"ok": True}
