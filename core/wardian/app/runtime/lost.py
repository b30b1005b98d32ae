"""At app start, the deliveries a killed app lost (`outcomes.RESTART_LOST`), settled by each agent's provider from its
own records before that agent's runtime starts: an answer on record becomes the task's reply (its evidence captured
first, then published once, like a live result); a message taken but never answered, or not found, stays
uncertain with a reason that says which. Never resent. A provider without a record to read (`lost_recoverer` None)
leaves its agents' deliveries uncertain as they are.

Each agent's recovery is bounded (`RECOVERY_TIMEOUT_S`) and runs beside the others; one that fails or runs out of
time leaves that agent's deliveries uncertain and the app starts anyway.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import anyio

from wardian.app import outcomes
from wardian.app.outcomes import outcome_reply
from wardian.app.writer import StoreWriter
from wardian.home import Home
from wardian.model import LostTask
from wardian.providers import Provider
from wardian.providers.base import Finding, LostDelivery, RecoversLost, Recovery, lost_recoverer
from wardian.store import ledger, lost, roster

log = logging.getLogger("wardian.app.runtime")

RECOVERY_TIMEOUT_S = 20.0
"""How long one agent's provider may take to settle its lost deliveries (it ends the process a killed app left
running, then reads its records)."""


async def recover_lost(home: Home, writer: StoreWriter, providers: Mapping[str, Provider],
                       notify: Callable[[str], None]) -> None:
    """Settle every restart-lost delivery of this host's agents whose provider keeps a record of them."""
    uncertain = await writer.call(lost.restart_lost_tasks, outcomes.RESTART_LOST)
    by_agent: dict[int, list[LostTask]] = {}
    for task in uncertain:
        by_agent.setdefault(task.agent_id, []).append(task)
    async with anyio.create_task_group() as tg:
        for agent_id, tasks in by_agent.items():
            tg.start_soon(_recover_agent, home, writer, providers, notify, agent_id, tasks)


async def _recover_agent(home: Home, writer: StoreWriter, providers: Mapping[str, Provider],
                         notify: Callable[[str], None], agent_id: int, tasks: Sequence[LostTask]) -> None:
    agent = await writer.call(roster.managed_agent, agent_id)
    provider = providers.get(agent.provider)
    recoverer: RecoversLost | None = None if provider is None else lost_recoverer(provider)
    if provider is None or recoverer is None:
        return
    workspace = Path(agent.workspace) if agent.workspace else home.default_workspace(agent.uuid)
    deliveries = [LostDelivery(t.request_id, t.thread_id, t.message_id, agent.name, home.agent_dir(agent.uuid),
                               workspace, home.provider_pid_path(provider.name, agent.uuid)) for t in tasks]
    found: list[Recovery] = []
    with anyio.move_on_after(RECOVERY_TIMEOUT_S) as scope:
        try:
            found = await recoverer.recover_lost(deliveries)
        except Exception:  # a provider's bad record must never stop the app: the deliveries stay uncertain
            log.exception("agent %s: its lost deliveries could not be settled; they stay uncertain", agent.name)
            return
    if scope.cancelled_caught:
        log.warning("agent %s: settling its lost deliveries took over %ss; they stay uncertain", agent.name,
                    RECOVERY_TIMEOUT_S)
        return
    for recovery in found:
        await _settle(writer, notify, agent.name, recovery)


async def _settle(writer: StoreWriter, notify: Callable[[str], None], agent_name: str, recovery: Recovery) -> None:
    rid = recovery.request_id
    reply = None if recovery.outcome is None else outcome_reply(recovery.outcome)
    if recovery.finding is Finding.ANSWERED and reply is not None:
        status, text = reply
        await writer.call(ledger.capture_outcome, rid, status, text)
        published = await writer.call(ledger.publish_outcome, rid)
        if published is not None:
            notify(published.requester_uuid)
        log.warning("agent %s: the result of task %s, lost when the app stopped, was recovered from the "
                    "provider's record (%s)", agent_name, rid, status.value)
    elif recovery.finding is Finding.NOT_FOUND:
        looked_up = True  # the provider's record was searched for its message
        await writer.call(lost.restate_uncertain, rid, outcomes.RESTART_NOT_FOUND, looked_up)
        log.warning("agent %s: task %s is not in the provider's record; it stays uncertain", agent_name, rid)
    else:
        await writer.call(lost.restate_uncertain, rid, outcomes.RESTART_TAKEN)
        log.warning("agent %s: task %s was taken but never answered; it stays uncertain", agent_name, rid)
