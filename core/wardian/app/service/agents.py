"""Agents: registering, listing, starting, stopping and attaching to them, interrupting their turns, removing them,
and the sessions they act under."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import anyio

from wardian import errors
from wardian.app import outcomes
from wardian.app.service.registry import handlers
from wardian.auth.agents import check_auth_choice
from wardian.auth.model import DEFAULT_NAME
from wardian.auth.store import CredentialStore
from wardian.model import Agent, AgentStatus, Caller, InterruptReceipt, Published
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
    agent_result,
    interrupt_result,
    managed_agent_result,
    party_result,
)
from wardian.store import Store

if TYPE_CHECKING:
    from wardian.app.service.app import AppService

log = logging.getLogger("wardian.app")


def offline(agent: Agent) -> Agent:
    """An agent whose host has no live app: off, whatever its row last said, since nobody serves it."""
    return replace(agent, status=AgentStatus.OFF, active_turn_id=None)


@handlers.serves("agent/interrupt")
async def interrupt(app: AppService, p: AgentInterruptParams) -> InterruptResult:
    return await interrupt_as(app, p.target, lambda s: s.authenticate(p.session))


async def interrupt_as(app: AppService, target_name: str, who: Callable[[Store], Caller]) -> InterruptResult:
    """Interrupt `target_name`'s active turn for the caller `who` names (a session's, or the operator)."""
    def op(s: Store) -> InterruptReceipt:
        caller = who(s)
        return s.record_interrupt(caller, s.resolve_target(caller, target_name))

    # A provider that cannot interrupt is refused before anything is recorded.
    target = await app.writer.call(lambda s: s.resolve_target(who(s), target_name))
    local = app.runtime.is_mine(target.host)
    if local:
        app.runtime.check_interruptible(target.uuid)
    receipt = await app.writer.call(op)
    if local:
        await app.runtime.interrupt(receipt.target.uuid, receipt.turn_id)
    # Another host's agent: the app of that host hears of the recorded interrupt from the store and interrupts
    # the exact turn it named.
    return interrupt_result(receipt)


@handlers.serves("agent/start")
async def start_agent(app: AppService, p: AgentStartParams) -> AgentStartResult:
    if p.keep_settings and (p.config is not None or p.mode is not None or p.reset_settings):
        raise errors.InvalidArguments("keep_settings starts the agent with its saved mode and config; give "
                                      "neither, nor reset_settings, with it", field="keep_settings",
                                      allowed="keep_settings alone, or mode and config without it")
    if p.reset_settings and p.config is not None:
        raise errors.InvalidArguments("reset_settings starts the agent without any -c setting; to replace the "
                                      "saved settings give config alone", field="reset_settings",
                                      allowed="reset_settings, or config, not both")
    agent = await app.writer.call(lambda s: s.resolve_agent(p.agent))
    # Everything a start is given is checked before any of it is saved, and a second start of the agent while this
    # one runs is refused with nothing saved: a refused start leaves the agent's settings, grants and sign-in as
    # they were.
    with app.runtime.starting(agent.uuid, agent.name):
        auth = await _auth_choice(app, agent.provider, agent.name, p.auth) if p.auth is not None else None
        # A plain start keeps what the last start was given: its mode and its -c settings (the agent's settings
        # travel with it, as a service's do in `docker compose`); `config` replaces them, `reset_settings` drops them.
        saved = await app.writer.call(lambda s: s.managed_agent(agent.id))
        mode = p.mode or saved.mode or "background"
        config = [] if p.reset_settings else list(saved.overrides) if p.config is None else list(p.config)
        # Grants are kept with the agent too, but an explicit start grants only what it names (no --approve-tools:
        # no grants), so a person never grants a tool by omission; keep_settings (the saved start as a whole) keeps
        # them.
        grants = list(saved.approve_tools) if p.keep_settings and not p.approve_tools else list(p.approve_tools)
        await app.runtime.check_start(agent.id, mode, config, grants)
        if p.auth is not None:
            await app.writer.call(lambda s: s.set_auth(agent.id, auth))
        started = await app.runtime.start_agent(agent.id, mode, config, grants)
    current = await app.writer.call(lambda s: s.agent(agent.id))
    return {"agent": agent_result(current), "thread_id": started["thread_id"],
            "generation": started["generation"], "provider_version": started["provider_version"],
            "warnings": started["warnings"]}


@handlers.serves("agent/attach")
async def attach_agent(app: AppService, p: AgentAttachParams) -> AgentAttachResult:
    agent = await app.writer.call(lambda s: s.resolve_agent(p.agent))
    info = await app.runtime.attach_info(agent.id)
    return {"socket": info["socket"], "workspace": info["workspace"], "codex": info["codex"],
            "codex_home": info["codex_home"], "thread_id": info["thread_id"], "config": info["config"]}


@handlers.serves("agent/stop")
async def stop_agent(app: AppService, p: AgentStopParams) -> AgentStopResult:
    agent = await app.writer.call(lambda s: s.resolve_agent(p.agent))
    stopped = await app.runtime.stop_agent(agent.id)
    current = await app.writer.call(lambda s: s.agent(agent.id))
    return {"agent": agent_result(current), "stopped": stopped}


@handlers.serves("agent/list")
async def list_agents(app: AppService, p: AgentListParams) -> AgentListResult:
    def op(s: Store) -> Any:
        caller = s.authenticate(p.session) if p.session is not None else None
        # What the app keeps to start each agent (its settings) is the operator's to see, not its peers'.
        managed = s.managed_agents() if p.session is None else None
        return caller, s.list_agents(), s.delivery_doubts(), s.hosts(), managed

    caller, agents, doubts, hosts, managed = await app.writer.call(op)
    down = {h.name for h in hosts if not h.live}
    agents = [offline(a) if a.host in down else a for a in agents]
    result: AgentListResult = {
        "agents": [agent_result(a) for a in agents],
        "caller": party_result(caller.agent) if caller else None,
        "deliveries": {a.uuid: {"uncertain": d.uncertain, "confirmed_by_lookup": d.confirmed_by_lookup}
                       for a in agents if (d := doubts.get(a.id)) is not None},
        "hosts": {h.name: {"live": h.live, "heartbeat_at": h.heartbeat_at} for h in hosts}}
    if managed is not None:
        result["managed"] = {m.uuid: managed_agent_result(m) for m in managed}
    return result


@handlers.serves("agent/add")
async def add_agent(app: AppService, p: AgentAddParams) -> AgentResult:
    workspace = p.workspace  # the CLI sends an absolute path
    auth = None if p.auth is None else await _auth_choice(app, p.provider, p.name, p.auth)

    def op(s: Store) -> Agent:
        with s.atomic():
            added = s.add_agent(p.name, p.provider, workspace)
            if auth is not None:
                s.set_auth(added.id, auth)
        return added

    agent = await app.writer.call(op)
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


@handlers.serves("agent/session")
async def session(app: AppService, p: AgentSessionParams) -> AgentSessionResult:
    def op(s: Store) -> tuple[Agent, str]:
        agent = s.resolve_agent(p.agent)
        return agent, s.create_session(agent.id)

    agent, token = await app.writer.call(op)
    log.info("session issued for agent %s", agent.uuid)  # never the token itself
    return {"agent": agent_result(agent), "session_id": token, "home": str(app.home.root)}


@handlers.serves("agent/remove")
async def remove_agent(app: AppService, p: AgentRemoveParams) -> AgentRemoveResult:
    runtime = app.runtime
    agent = await app.writer.call(lambda s: s.resolve_agent(p.agent))
    # Its runtime ends first, so nothing of it is in flight any more; what that leaves uncertain is reported.
    lost = await runtime.forget(agent.id)

    def op(s: Store) -> tuple[Agent, list[Published], list[str]]:
        with s.atomic():
            removed = s.remove_agent(agent.id)
            answered, uncertain = s.answer_open_tasks(agent.id, outcomes.removed_notice(removed.name),
                                                      outcomes.REMOVED_UNCERTAIN, runtime.can_push)
        return removed, answered, uncertain

    removed, answered, uncertain = await app.writer.call(op)
    log.info("agent removed: %s %s (%d open tasks answered)", removed.name, removed.uuid, len(answered))
    for published in answered:
        if published.record_id is not None:
            await runtime.deliver(published.requester_uuid, published.record_id, published.pushing)
    return {"agent": agent_result(removed), "answered": [a.request_id for a in answered],
            "uncertain": [*lost, *uncertain]}


@handlers.serves("agent/revoke")
async def revoke_sessions(app: AppService, p: AgentRevokeParams) -> AgentRevokeResult:
    def op(s: Store) -> tuple[Agent, int]:
        agent = s.resolve_agent(p.agent)
        return agent, s.revoke_sessions(agent.id, managed_too=p.all)

    agent, revoked = await app.writer.call(op)
    log.info("revoked %d sessions of agent %s", revoked, agent.uuid)
    return {"agent": agent_result(agent), "revoked": revoked}
