"""What the store's parts share beyond the store itself: row to record conversion, the columns they read, and the
host filter. Statements are plain SQL with `?` parameters over the schema of the backends' migrations
(`sqlite/migrations.py`, `postgres/schema.py`), run on `store.db` (`wardian.store.api.Db`); the parts (`roster`,
`mailbox`, `history`, `ledger`, `hosts`, `lost`) are functions of a `wardian.store.engine.Store`.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import Any

from wardian.model import (
    ID_PREFIX,
    Agent,
    AgentStatus,
    ClaimKind,
    InteractionKind,
    Party,
    ReplyStatus,
    TaskFacts,
    TaskState,
    now_ms,
)
from wardian.store.api import Db
from wardian.store.engine import Store

__all__ = [
    "AGENT_COLS",
    "AGENT_COL_NAMES",
    "KINDS",
    "STATUSES",
    "TASK_FACT_COLS",
    "TASK_FACT_COUNT",
    "agent_of",
    "facts_of",
    "new_public_id",
    "now_ms",
    "of_this_host",
    "party_by_id",
    "party_of",
    "party_of_id",
]


def new_public_id(kind: InteractionKind) -> str:
    """A kind-prefixed, time-ordered, unguessable id (`ask_…` for tasks)."""
    return f"{ID_PREFIX[kind]}_{now_ms():011x}{secrets.token_hex(8)}"


AGENT_COL_NAMES = (
    "id",
    "uuid",
    "name",
    "provider",
    "workspace",
    "status",
    "generation",
    "active_turn_id",
    "created_at",
    "host",
    "signed_out_at",
)
AGENT_COLS = ", ".join(AGENT_COL_NAMES)
TASK_FACT_COLS = (
    "state, claimed_by, claim_generation, claimed_at, submitted_at, thread_id, turn_id, uncertain_at, "
    "completed_at, reply_status, reply_id, lookup"
)
TASK_FACT_COUNT = TASK_FACT_COLS.count(",") + 1
KINDS = {k.value: k for k in InteractionKind}
STATUSES: dict[str | None, ReplyStatus | None] = {None: None, **{s.value: s for s in ReplyStatus}}
_STATES = {s.value: s for s in TaskState}
_CLAIMS: dict[str | None, ClaimKind | None] = {None: None, **{c.value: c for c in ClaimKind}}


def agent_of(row: Sequence[Any]) -> Agent:
    return Agent(
        id=row[0],
        uuid=row[1],
        name=row[2],
        provider=row[3],
        workspace=row[4],
        status=_shown_status(AgentStatus(row[5]), row[10]),
        generation=row[6],
        active_turn_id=row[7],
        created_at=row[8],
        host=row[9],
    )


def _shown_status(observed: AgentStatus, signed_out_at: int | None) -> AgentStatus:
    """A running agent whose provider rejected its credentials since its last start shows `signed_out`."""
    if signed_out_at is not None and observed in (AgentStatus.IDLE, AgentStatus.ACTIVE):
        return AgentStatus.SIGNED_OUT
    return observed


def party_of(agent: Agent) -> Party:
    return Party(name=agent.name, uuid=agent.uuid)


def facts_of(row: Sequence[Any]) -> TaskFacts:
    """TaskFacts from the `TASK_FACT_COLS` of a row, in that order."""
    return TaskFacts(_STATES[row[0]], _CLAIMS[row[1]], row[2], row[3], row[4], row[5], row[6], row[7], row[8],
                     STATUSES[row[9]], row[10], row[11])


def of_this_host(store: Store, agent_column: str) -> tuple[str, tuple[Any, ...]]:
    """A WHERE term keeping rows whose `agent_column` (an agent id) is an agent of this host, and its argument;
    nothing before a host is claimed (a store opened by a tool or a test sees every agent)."""
    if store.host is None:
        return "", ()
    return f" AND {agent_column} IN (SELECT id FROM agents WHERE host = ?)", (store.host,)


def party_by_id(db: Db, agent_id: int | None, cache: dict[int, Party]) -> Party | None:
    """The party of an agent id (None for none), read once per `cache` (one page of records)."""
    if agent_id is None:
        return None
    party = cache.get(agent_id)
    if party is None:
        row = db.execute("SELECT name, uuid FROM agents WHERE id = ?", (agent_id,)).fetchone()
        party = cache[agent_id] = Party(row[0], row[1])
    return party


def party_of_id(db: Db, agent_id: int, cache: dict[int, Party]) -> Party:
    """`party_by_id` of an id that is never None (a record's recipient, an interrupt's caller)."""
    party = party_by_id(db, agent_id, cache)
    assert party is not None
    return party
