"""What the store's operation modules share: the connection they run statements on, the roster caches, and row
to record conversion. Statements are plain SQL with `?` parameters over the schema of `migrations.py`.

A backend (`SqliteStore`) provides the connection and the transaction rules (`atomic`, batches); the operations
(`roster`, `mailbox`, `ledger`) are written once against `Db`.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from wardian.model import (
    ID_PREFIX,
    Agent,
    AgentStatus,
    Caller,
    ClaimKind,
    InteractionKind,
    Party,
    ReplyStatus,
    TaskFacts,
    TaskState,
    now_ms,
)


class Cursor(Protocol):
    @property
    def rowcount(self) -> int: ...

    @property
    def lastrowid(self) -> int | None: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Any: ...


class Db(Protocol):
    """The part of a DB-API connection the operations use."""

    def execute(self, sql: str, parameters: Sequence[Any] = ..., /) -> Any: ...

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> Any: ...


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
        status=AgentStatus(row[5]),
        generation=row[6],
        active_turn_id=row[7],
        created_at=row[8],
        host=row[9],
    )


def party_of(agent: Agent) -> Party:
    return Party(name=agent.name, uuid=agent.uuid)


def facts_of(row: Sequence[Any]) -> TaskFacts:
    """TaskFacts from the `TASK_FACT_COLS` of a row, in that order."""
    return TaskFacts(_STATES[row[0]], _CLAIMS[row[1]], row[2], row[3], row[4], row[5], row[6], row[7], row[8],
                     STATUSES[row[9]], row[10], row[11])


class SqlBase:
    """State shared by the operation mixins; a backend sets it up and implements `atomic`."""

    _db: Db
    epoch: bytes
    _cursor_key: bytes
    # Roster caches (#2: authenticate + resolve were two queries and ~40 µs of every send). The backend clears
    # them on every write to agents or sessions and on every rollback.
    _sessions: dict[int, tuple[bytes, Caller, str]]
    _targets: dict[str, tuple[Agent, ...]]

    @property
    def home_tag(self) -> str:
        """A short public tag of this store, embedded in session tokens to spot another home's token."""
        return self.epoch.hex()[:8]

    _depth: int  # open transaction (1) and savepoints (more) of `atomic`

    def atomic(self) -> AbstractContextManager[None]:
        raise NotImplementedError  # the backend's

    def claim_for_receive(self, interaction_id: int, generation: int, now: int) -> bool:
        raise NotImplementedError  # the task ledger's

    host: str | None  # the host this store session serves (HostOps)

    def _mine(self, agent_column: str) -> tuple[str, tuple[Any, ...]]:
        """A WHERE term keeping rows whose `agent_column` (an agent id) is an agent of this host, and its argument;
        nothing before a host is claimed (a store opened by a tool or a test sees every agent)."""
        if self.host is None:
            return "", ()
        return f" AND {agent_column} IN (SELECT id FROM agents WHERE host = ?)", (self.host,)

    def _index_hint(self, index: str) -> str:
        """A clause that makes the backend read `index` for the table named before it ("" where there is none)."""
        return ""

    def task_facts_of(self, interaction_id: int) -> TaskFacts:
        raise NotImplementedError  # the task ledger's

    def _party_by_id(self, agent_id: int | None, cache: dict[int, Party]) -> Party | None:
        if agent_id is None:
            return None
        party = cache.get(agent_id)
        if party is None:
            row = self._db.execute("SELECT name, uuid FROM agents WHERE id = ?", (agent_id,)).fetchone()
            party = cache[agent_id] = Party(row[0], row[1])
        return party
