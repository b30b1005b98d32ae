"""Agents: registering, listing, starting, stopping and attaching to them, interrupting their turns, removing them,
and the sessions they act under."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING

import anyio

from wardian import errors
from wardian.app import outcomes
from wardian.app.service import worktrees
from wardian.app.service.messages import caller_of
from wardian.app.service.registry import handlers
from wardian.auth.agents import check_auth_choice
from wardian.auth.model import DEFAULT_NAME
from wardian.auth.store import CredentialStore
from wardian.model import (
    Agent,
    AgentStatus,
    Caller,
    DeliveryDoubts,
    HostInfo,
    InterruptReceipt,
    ManagedAgent,
    Published,
)
from wardian.protocol.methods import (
    AgentAddParams,
    AgentAttachParams,
    AgentAttachResult,
    AgentInterruptParams,
    AgentListParams,
    AgentListResult,
    AgentRemoveParams,
    AgentRemoveResult,
    AgentResult,
    AgentRevokeParams,
    AgentRevokeResult,
    AgentSessionParams,
    AgentSessionResult,
    AgentStartParams,
    AgentStartResult,
    AgentStopParams,
    AgentStopResult,
    InterruptResult,
    OkResult,
    SessionAnnounceParams,
    WorktreeRemovalResult,
    agent_result,
    interrupt_result,
    managed_agent_result,
    party_result,
)
from wardian.providers.probe import find_command
from wardian.store import Store, approvals, hosts, ledger, mailbox, roster
from wardian.store import worktrees as worktree_rows
from wardian.store.api import Pushable
from wardian.store.worktrees import Worktree

if TYPE_CHECKING:
    from wardian.app.service.app import AppService

log = logging.getLogger("wardian.app")


def offline(agent: Agent) -> Agent:
    """An agent whose host has no live app: off, whatever its row last said, since nobody serves it."""
    return replace(agent, status=AgentStatus.OFF, active_turn_id=None)


def _target_of(store: Store, session: str | None, target: str) -> Agent:
    return roster.resolve_target(store, caller_of(store, session), target)


def _record_interrupt(store: Store, session: str | None, target: str) -> InterruptReceipt:
    caller = caller_of(store, session)
    return mailbox.record_interrupt(store, caller, roster.resolve_target(store, caller, target))


@handlers.serves("agent/interrupt")
async def interrupt(app: AppService, p: AgentInterruptParams) -> InterruptResult:
    return await interrupt_as(app, p.target, p.session)


async def interrupt_as(app: AppService, target_name: str, session: str | None) -> InterruptResult:
    """Interrupt `target_name`'s active turn for the caller `session` names (`caller_of`: a session's, or the
    operator's for None)."""
    # A provider that cannot interrupt is refused before anything is recorded.
    target = await app.writer.call(_target_of, session, target_name)
    local = app.runtime.hosts.is_mine(target.host)
    if local:
        app.runtime.check_interruptible(target.uuid)
    receipt = await app.writer.call(_record_interrupt, session, target_name)
    if local:
        await app.runtime.interrupt(receipt.target.uuid, receipt.turn_id)
    # Another host's agent: the app of that host hears of the recorded interrupt from the store and interrupts
    # the exact turn it named.
    return interrupt_result(receipt)


@handlers.serves("agent/start")
async def start_agent(app: AppService, p: AgentStartParams) -> AgentStartResult:
    if p.keep_settings and (p.config is not None or p.env is not None or p.mode is not None or p.reset_settings):
        raise errors.InvalidArguments("keep_settings starts the agent with its saved mode and config; give "
                                      "neither, nor reset_settings, with it", field="keep_settings",
                                      allowed="keep_settings alone, or mode and config without it")
    if p.reset_settings and p.config is not None:
        raise errors.InvalidArguments("reset_settings starts the agent without any -c setting; to replace the "
                                      "saved settings give config alone", field="reset_settings",
                                      allowed="reset_settings, or config, not both")
    agent = await app.writer.call(roster.resolve_agent, p.agent)
    # Everything a start is given is checked before any of it is saved, and a second start of the agent while this
    # one runs is refused with nothing saved: a refused start leaves the agent's settings, grants and sign-in as
    # they were.
    with app.runtime.launcher.starting(agent.uuid, agent.name):
        auth = await _auth_choice(app, agent.provider, agent.name, p.auth) if p.auth is not None else None
        # A plain start keeps what the last start was given: its mode and its -c settings (the agent's settings
        # travel with it, as a service's do in `docker compose`); `config` replaces them, `reset_settings` drops them.
        saved = await app.writer.call(roster.managed_agent, agent.id)
        mode = p.mode or saved.mode or "background"
        config = [] if p.reset_settings else list(saved.overrides) if p.config is None else list(p.config)
        env = [] if p.reset_settings else list(saved.env) if p.env is None else list(p.env)
        # Grants are kept with the agent too, but an explicit start grants only what it names (no --approve-tools:
        # no grants), so a person never grants a tool by omission; keep_settings (the saved start as a whole) keeps
        # them.
        grants = list(saved.approve_tools) if p.keep_settings and not p.approve_tools else list(p.approve_tools)
        info = await app.runtime.launcher.check_start(agent.id, mode, config, grants, env)
        if p.auth is not None:
            await app.writer.call(roster.set_auth, agent.id, auth)
        # Allow rules are kept like the -c settings: given, they replace the saved ones; reset_settings drops them.
        allow = [] if p.reset_settings and p.allow is None else p.allow
        await app.writer.call(approvals.set_policy, agent.id, p.approvals, p.approval_timeout_ms, allow)
        started = await app.runtime.launcher.start_agent(agent.id, mode, config, grants, env, info)
    current = await app.writer.call(roster.agent, agent.id)
    return {"agent": agent_result(current), "thread_id": started["thread_id"],
            "generation": started["generation"], "provider_version": started["provider_version"],
            "warnings": started["warnings"]}


@handlers.serves("agent/attach")
async def attach_agent(app: AppService, p: AgentAttachParams) -> AgentAttachResult:
    agent = await app.writer.call(roster.resolve_agent, p.agent)
    info = await app.runtime.launcher.attach_info(agent.id)
    return {"socket": info["socket"], "workspace": info["workspace"], "codex": info["codex"],
            "codex_home": info["codex_home"], "thread_id": info["thread_id"], "config": info["config"]}


@handlers.serves("agent/stop")
async def stop_agent(app: AppService, p: AgentStopParams) -> AgentStopResult:
    agent = await app.writer.call(roster.resolve_agent, p.agent)
    stopped = await app.runtime.stop_agent(agent.id)
    current = await app.writer.call(roster.agent, agent.id)
    return {"agent": agent_result(current), "stopped": stopped}


def _listing(store: Store, session: str | None) -> tuple[
        Caller | None, list[Agent], dict[int, DeliveryDoubts], list[HostInfo], list[ManagedAgent] | None]:
    """`agent/list`'s reads, in one transaction: the session's caller (None: the operator), the agents, their
    delivery doubts, the hosts, and for the operator what the app keeps to start each agent."""
    caller = roster.authenticate(store, session) if session is not None else None
    # What the app keeps to start each agent (its settings) is the operator's to see, not its peers'.
    managed = roster.managed_agents(store) if session is None else None
    return caller, roster.list_agents(store), ledger.delivery_doubts(store), hosts.list_hosts(store), managed


@handlers.serves("session/announce")
async def announce(app: AppService, p: SessionAnnounceParams) -> OkResult:
    """The caller's `wardian mcp serve` listed its tools to the agent: a provider waiting for that before the first
    task (`LaunchSpec.mcp_connected`) may go on. A session of a generation this app does not run changes nothing."""
    caller = await app.writer.call(roster.authenticate, p.session)
    if not app.runtime.launcher.mcp_announced(caller.agent.uuid, caller.generation):
        log.info("agent %s announced its MCP server for generation %d, which this app does not run",
                 caller.agent.name, caller.generation)
    return {"ok": True}


@handlers.serves("agent/list")
async def list_agents(app: AppService, p: AgentListParams) -> AgentListResult:
    caller, agents, doubts, all_hosts, managed = await app.writer.call(_listing, p.session)
    down = {h.name for h in all_hosts if not h.live}
    agents = [offline(a) if a.host in down else a for a in agents]
    result: AgentListResult = {
        "agents": [agent_result(a) for a in agents],
        "caller": party_result(caller.agent) if caller else None,
        "deliveries": {a.uuid: {"uncertain": d.uncertain, "confirmed_by_lookup": d.confirmed_by_lookup}
                       for a in agents if (d := doubts.get(a.id)) is not None},
        "hosts": {h.name: {"live": h.live, "heartbeat_at": h.heartbeat_at} for h in all_hosts}}
    if managed is not None:
        result["managed"] = {m.uuid: managed_agent_result(m) for m in managed}
    return result


@handlers.serves("agent/add")
async def add_agent(app: AppService, p: AgentAddParams) -> AgentResult:
    workspace = p.workspace  # the CLI sends an absolute path
    auth = None if p.auth is None else await _auth_choice(app, p.provider, p.name, p.auth)
    if p.command:
        # The app starts it, so its executable must be one the app finds (each start finds it again).
        await anyio.to_thread.run_sync(find_command, p.command[0])
    tree: WorktreeRow | None = None
    if p.worktree is not None:
        # Last of the checks: everything else about the agent is known good before git makes anything.
        path, branch, made = await worktrees.make(app, p.name, p.worktree)
        workspace, tree = str(path), (made.repo, branch, made.base, made.made_branch)
    agent = await app.writer.call(_add_agent, p.name, p.provider, workspace, auth, tuple(p.command or ()), tree)
    log.info("agent added: %s %s", agent.name, agent.uuid)
    return agent_result(agent)


async def _auth_choice(app: AppService, provider: str, agent: str, auth: str) -> str | None:
    """What to save of `--auth NAME`: None for the default name (the provider's default credential), else the name
    once a credential of the agent's provider is stored under it.

    Raises: NotSignedIn; Unsupported.
    """
    if auth == DEFAULT_NAME:
        return None
    store = CredentialStore(app.home)
    await anyio.to_thread.run_sync(lambda: check_auth_choice(store, provider, agent, auth))
    return auth


WorktreeRow = tuple[str, str, str | None, bool]
"""A new agent's worktree as the store keeps it: repository, branch, base, whether wardian made the branch."""


def _add_agent(store: Store, name: str, provider: str, workspace: str | None, auth: str | None,
               command: tuple[str, ...], tree: WorktreeRow | None) -> Agent:
    """A new agent with the credential name its starts use (None: its provider's default) and its worktree, in one
    transaction."""
    with store.atomic():
        added = roster.add_agent(store, name, provider, workspace, command)
        if auth is not None:
            roster.set_auth(store, added.id, auth)
        if tree is not None:
            worktree_rows.record(store, added.id, *tree)
    return added


def _new_session(store: Store, name_or_uuid: str) -> tuple[Agent, str]:
    agent = roster.resolve_agent(store, name_or_uuid)
    return agent, roster.create_session(store, agent.id)


@handlers.serves("agent/session")
async def session(app: AppService, p: AgentSessionParams) -> AgentSessionResult:
    agent, token = await app.writer.call(_new_session, p.agent)
    log.info("session issued for agent %s", agent.uuid)  # never the token itself
    return {"agent": agent_result(agent), "session_id": token, "home": str(app.home.root)}


@handlers.serves("agent/remove")
async def remove_agent(app: AppService, p: AgentRemoveParams) -> AgentRemoveResult:
    runtime = app.runtime
    record: Worktree | None = None
    if p.remove_worktree:
        # A worktree with changes refuses the whole removal before anything of the agent changes.
        agent, record = await worktrees.worktree_for_removal(app, p.agent)
    else:
        agent = await app.writer.call(roster.resolve_agent, p.agent)
    # Its runtime ends first, so nothing of it is in flight any more; what that leaves uncertain is reported.
    lost = await runtime.forget(agent.id)
    removed, answered, uncertain = await app.writer.call(_remove_agent, agent.id, runtime.pushes.can_push)
    log.info("agent removed: %s %s (%d open tasks answered)", removed.name, removed.uuid, len(answered))
    for published in answered:
        if published.record_id is not None:
            await runtime.pushes.deliver(published.requester_uuid, published.record_id, published.pushing)
    kept = None if record is None else await _remove_worktree(app, agent, record)
    return {"agent": agent_result(removed), "answered": [a.request_id for a in answered],
            "uncertain": [*lost, *uncertain], "worktree": kept}


async def _remove_worktree(app: AppService, agent: Agent, record: Worktree) -> WorktreeRemovalResult:
    """The removed agent's worktree, removed unless it changed since it was found clean (then kept, and said)."""
    try:
        return await worktrees.remove_worktree(app, agent, record)
    except errors.WardianError as exc:
        return {"path": agent.workspace or "", "branch": record.branch, "removed": False, "branch_deleted": False,
                "note": f"the worktree was kept: {exc.message}"}


def _remove_agent(store: Store, agent_id: int, push: Pushable) -> tuple[Agent, list[Published], list[str]]:
    """The agent off the roster and each of its open tasks answered (or made uncertain), in one transaction."""
    with store.atomic():
        removed = roster.remove_agent(store, agent_id)
        answered, uncertain = ledger.answer_open_tasks(store, agent_id, outcomes.removed_notice(removed.name),
                                                       outcomes.REMOVED_UNCERTAIN, push)
    return removed, answered, uncertain


def _revoke(store: Store, name_or_uuid: str, managed_too: bool) -> tuple[Agent, int]:
    agent = roster.resolve_agent(store, name_or_uuid)
    return agent, roster.revoke_sessions(store, agent.id, managed_too=managed_too)


@handlers.serves("agent/revoke")
async def revoke_sessions(app: AppService, p: AgentRevokeParams) -> AgentRevokeResult:
    agent, revoked = await app.writer.call(_revoke, p.agent, p.all)
    log.info("revoked %d sessions of agent %s", revoked, agent.uuid)
    return {"agent": agent_result(agent), "revoked": revoked}
