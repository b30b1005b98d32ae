"""Agents, their observed runtime state and their sessions (the roster part of the store): functions of a `Store`.

Sessions are capabilities: a token is `wsn1_<home tag>_<session id>_<secret>` (`wardian.store.tokens`); only a
SHA-256 of the 256-bit secret is kept, compared in constant time on every call, cached or not
(`wardian.store.sessions`).

The operator is a row of `agents` of kind `operator` (migration 6): a participant records can come from and go
to, never an agent. No listing, target, name or UUID resolution returns it, and no session can be minted for it; the
app reaches it only through `operator()`, for callers the control socket vouches for.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import uuid as uuidlib
from collections.abc import Sequence
from typing import Any

from wardian import errors
from wardian.model import OPERATOR_UUID, Agent, AgentOverview, AgentStatus, Caller, ManagedAgent
from wardian.store._sql import AGENT_COLS, agent_of, now_ms, of_this_host
from wardian.store.api import SessionKind
from wardian.store.engine import Store
from wardian.store.sessions import SESSION_SQL, session_caller, session_hit
from wardian.store.tokens import SESSION_PREFIX


# --- agents ---------------------------------------------------------------------------------------
def add_agent(store: Store, name: str, provider: str, workspace: str | None,
              command: Sequence[str] = ()) -> Agent:
    with store.atomic():
        agent_id = int(
            store.db.write(
                "INSERT INTO agents (uuid, name, provider, workspace, created_at, host, command) "
                "VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (str(uuidlib.uuid4()), name, provider, workspace, now_ms(), store.host,
                 json.dumps(list(command)) if command else None),
            ).fetchone()[0]
        )
    return agent(store, agent_id)


def agent(store: Store, agent_id: int) -> Agent:
    """Raises: UnknownAgent."""
    row = store.db.execute(f"SELECT {AGENT_COLS} FROM agents WHERE id = ?", (agent_id,)).fetchone()
    if row is None:
        raise errors.UnknownAgent(f"no agent with id {agent_id}")
    return agent_of(row)


def list_agents(store: Store) -> list[Agent]:
    """Every agent not removed, by name (never the operator)."""
    rows = store.db.execute(
        f"SELECT {AGENT_COLS} FROM agents WHERE removed_at IS NULL AND kind = 'agent' "
        "ORDER BY name, created_at, id").fetchall()
    return [agent_of(r) for r in rows]


def agents_overview(store: Store) -> list[AgentOverview]:
    """`list_agents` with each agent's pending and in-flight task counts (the console's agents page)."""
    counts: dict[int, list[int]] = {}
    for i, state in enumerate(("state = 'pending'", "state IN ('claimed', 'submitted')")):
        # Each count is a scan of a partial index (tasks_pending, tasks_in_flight): only open tasks are read.
        for recipient_id, n in store.db.execute(
                f"SELECT recipient_id, count(*) FROM tasks WHERE {state} GROUP BY recipient_id"):
            counts.setdefault(recipient_id, [0, 0])[i] = n
    return [AgentOverview(a, (c := counts.get(a.id, [0, 0]))[0], c[1]) for a in list_agents(store)]


def operator(store: Store) -> Caller:
    """The operator as a caller: the reserved participant the control socket's owner acts as."""
    row = store.db.execute(f"SELECT {AGENT_COLS} FROM agents WHERE uuid = ? AND kind = 'operator'",
                           (OPERATOR_UUID,)).fetchone()
    if row is None:  # migration 6 made it; only a store edited by hand lacks it
        raise errors.StorageUnavailable("the store has no operator row; it was changed outside wardian")
    return Caller(agent=agent_of(row), session_id=0, generation=0)


def find_agents(store: Store, name_or_uuid: str) -> list[Agent]:
    """Agents whose UUID (exact, canonical lowercase) or name (exact) is `name_or_uuid`."""
    found = store.cache.targets(name_or_uuid)
    if found is None:
        rows = store.db.execute(
            f"SELECT {AGENT_COLS} FROM agents WHERE removed_at IS NULL AND kind = 'agent' "
            "AND (uuid = ? OR name = ?) ORDER BY created_at, id",
            (name_or_uuid, name_or_uuid),
        ).fetchall()
        found = tuple(agent_of(r) for r in rows)
        store.cache.keep_targets(name_or_uuid, found)
    return list(found)


def resolve_agent(store: Store, name_or_uuid: str) -> Agent:
    """The one agent an operator names. Raises: UnknownAgent, AmbiguousTarget."""
    found = find_agents(store, name_or_uuid)
    if not found:
        raise errors.UnknownAgent(f"no agent is named {name_or_uuid!r} and no agent has that UUID",
                                  field="agent")
    if len(found) > 1:
        raise errors.AmbiguousTarget(
            f"{len(found)} agents are named {name_or_uuid!r}; use one of their UUIDs",
            field="agent", candidates=[a.uuid for a in found])
    return found[0]


def resolve_target(store: Store, caller: Caller, target: str) -> Agent:
    """The exact recipient of a caller's record. Raises: UnknownTarget, AmbiguousTarget, InvalidTarget."""
    found = find_agents(store, target)
    if not found:
        raise errors.UnknownTarget(
            f"no agent is named {target[:80]!r} and no agent has that UUID (UUIDs are matched in their "
            "canonical lowercase form; names exactly, case-sensitively)", field="target")
    if len(found) > 1:
        raise errors.AmbiguousTarget(
            f"{len(found)} agents are named {target!r}; address one of them by UUID",
            field="target", candidates=[a.uuid for a in found])
    recipient = found[0]
    if recipient.id == caller.agent.id:
        raise errors.InvalidTarget("the target is the caller itself; address another agent", field="target")
    return recipient


# --- sessions -------------------------------------------------------------------------------------
def create_session(store: Store, agent_id: int, kind: SessionKind = "operator") -> str:
    """A new session token for the agent's current generation; only its hash is kept. `managed`: minted by a start
    for its generation (stale once a newer generation starts); `operator`: valid until revoked."""
    with store.atomic():
        owner = agent(store, agent_id)
        if owner.uuid == OPERATOR_UUID:
            # Nothing may speak for the operator with a token: it acts only through the control socket.
            raise errors.UnknownAgent("no session can be minted for the operator", field="agent")
        secret = secrets.token_bytes(32)
        session_id = int(
            store.db.write(
                "INSERT INTO sessions (agent_id, generation, secret_hash, created_at, kind) VALUES (?, ?, ?, ?, ?) "
                "RETURNING id",
                (owner.id, owner.generation, hashlib.sha256(secret).digest(), now_ms(), kind),
            ).fetchone()[0]
        )
    secret_text = base64.urlsafe_b64encode(secret).rstrip(b"=").decode("ascii")
    return f"{SESSION_PREFIX}_{store.home_tag}_{session_id}_{secret_text}"


def authenticate(store: Store, token: str) -> Caller:
    """Raises: UnknownSession, SessionHomeMismatch, Unauthenticated, StaleSession."""
    session_id, digest = store.digests.of(token)
    hit = store.cache.session(session_id)
    if hit is None:
        # One statement for the session and its agent, then kept until the roster changes.
        hit = session_hit(session_id, store.db.execute(SESSION_SQL, (session_id,)).fetchone())
        store.cache.keep_session(session_id, hit)
    # The secret is checked on every call, cached or not, in constant time (`session_caller`); revocation and a
    # newer generation come from the session as the roster (or its cache, cleared by every roster change) has it
    # now.
    return session_caller(hit, digest)


def revoke_sessions(store: Store, agent_id: int, *, managed_too: bool) -> int:
    """Revoke the agent's operator-minted sessions (and with `managed_too` its managed ones); returns how many."""
    with store.atomic():
        return store.db.write(
            "UPDATE sessions SET revoked_at = ? WHERE agent_id = ? AND revoked_at IS NULL AND (kind = 'operator' "
            "OR ? = 1)",
            (now_ms(), agent_id, 1 if managed_too else 0),
        ).rowcount


def remove_agent(store: Store, agent_id: int) -> Agent:
    """Remove the agent from the roster (its records stay as evidence): its name is free, its sessions are
    revoked, and no target or start resolves to it again. Raises: UnknownAgent."""
    with store.atomic():
        removed = agent(store, agent_id)
        now = now_ms()
        store.db.write(
            "UPDATE agents SET removed_at = ?, desired = 'off', status = 'off', active_turn_id = NULL "
            "WHERE id = ? AND removed_at IS NULL",
            (now, agent_id),
        )
        store.db.write(
            "UPDATE sessions SET revoked_at = ? WHERE agent_id = ? AND revoked_at IS NULL", (now, agent_id)
        )
    return removed


# --- the provider runtime's view of agents --------------------------------------------------------
def managed_agent(store: Store, agent_id: int) -> ManagedAgent:
    r = store.db.execute(f"SELECT {_MANAGED_COLS} FROM agents WHERE id = ?", (agent_id,)).fetchone()
    if r is None:
        raise errors.UnknownAgent(f"no agent with id {agent_id}")
    return _managed_of(r)


def managed_agents(store: Store) -> list[ManagedAgent]:
    """Every agent not removed, as the runtime manages it (saved mode and settings, conversation), by id."""
    return [_managed_of(r) for r in store.db.execute(
        f"SELECT {_MANAGED_COLS} FROM agents WHERE removed_at IS NULL AND kind = 'agent' ORDER BY id")]


def agents_desired_on(store: Store) -> list[int]:
    mine, args = of_this_host(store, "id")
    return [
        r[0]
        for r in store.db.execute(
            f"SELECT id FROM agents WHERE desired = 'on' AND removed_at IS NULL{mine} ORDER BY id", args
        )
    ]


def set_desired(
    store: Store, agent_id: int, desired: str, mode: str | None = None, overrides: Sequence[str] | None = None,
    approve_tools: Sequence[str] | None = None, env: Sequence[str] = (),
) -> None:
    with store.atomic():
        if overrides is None:
            store.db.write("UPDATE agents SET desired = ? WHERE id = ?", (desired, agent_id))
        else:
            store.db.write(
                "UPDATE agents SET desired = ?, mode = ?, overrides = ?, approve_tools = ?, env = ? WHERE id = ?",
                (desired, mode, json.dumps(list(overrides)), json.dumps(list(approve_tools or ())),
                 json.dumps(list(env)), agent_id),
            )


def begin_generation(store: Store, agent_id: int) -> int:
    """A new runtime generation for the agent (a new owner); returns its number."""
    with store.atomic():
        store.db.write(
            "UPDATE agents SET generation = generation + 1, status = 'starting', "
            "active_turn_id = NULL, signed_out_at = NULL, signed_out_reason = NULL WHERE id = ?",
            (agent_id,),
        )
        return int(store.db.execute("SELECT generation FROM agents WHERE id = ?", (agent_id,)).fetchone()[0])


def observe(
    store: Store,
    agent_id: int,
    generation: int,
    status: AgentStatus,
    thread_id: str | None = None,
    active_turn_id: str | None = None,
) -> None:
    """Record the observed runtime state, unless a newer generation already owns the agent."""
    with store.atomic():
        store.db.write(
            "UPDATE agents SET status = ?, active_turn_id = ?, thread_id = COALESCE(?, thread_id) "
            "WHERE id = ? AND generation = ?",
            (status.value, active_turn_id, thread_id, agent_id, generation),
        )


def replace_thread(store: Store, agent_id: int, generation: int, previous: str, current: str, reason: str) -> bool:
    """The agent's conversation `previous` could not be used (its provider no longer has it) and `current`
    replaced it: recorded unless a newer generation owns the agent. True when recorded."""
    with store.atomic():
        return store.db.write(
            "UPDATE agents SET thread_id = ?, previous_thread_id = ?, thread_replaced_at = ?, "
            "thread_replaced_reason = ? WHERE id = ? AND generation = ?",
            (current, previous, now_ms(), reason, agent_id, generation),
        ).rowcount == 1


def reset_observed_state(store: Store) -> None:
    """At app startup no owner runs yet: every agent is observed off, with no active turn."""
    mine, args = of_this_host(store, "id")
    with store.atomic():
        store.db.write(
            "UPDATE agents SET status = 'off', active_turn_id = NULL WHERE (status != 'off' "
            f"OR active_turn_id IS NOT NULL){mine}",
            args,
        )


def set_auth(store: Store, agent_id: int, auth: str | None) -> None:
    """The credential name the agent's starts use from now on (None: its provider's default)."""
    with store.atomic():
        store.db.write("UPDATE agents SET auth = ? WHERE id = ?", (auth, agent_id))


def mark_signed_out(store: Store, agent_id: int, generation: int, reason: str) -> bool:
    """The provider rejected the agent's credentials during `generation` (shown as `signed_out` until its next
    start); ignored when a newer generation owns the agent. True when recorded."""
    with store.atomic():
        return store.db.write(
            "UPDATE agents SET signed_out_at = ?, signed_out_reason = ? WHERE id = ? AND generation = ?",
            (now_ms(), reason, agent_id, generation)).rowcount == 1


def mark_errored(store: Store, agent_id: int) -> None:
    with store.atomic():
        store.db.write("UPDATE agents SET status = 'errored', active_turn_id = NULL WHERE id = ?", (agent_id,))


_MANAGED_COLS = ("id, uuid, name, provider, workspace, desired, mode, overrides, generation, thread_id, "
                 "previous_thread_id, thread_replaced_at, thread_replaced_reason, auth, approve_tools, env, "
                 "command, approvals, approval_timeout_ms, allow_rules")


def _managed_of(r: Sequence[Any]) -> ManagedAgent:
    return ManagedAgent(
        id=r[0],
        uuid=r[1],
        name=r[2],
        provider=r[3],
        workspace=r[4],
        desired=r[5],
        mode=r[6],
        overrides=tuple(json.loads(r[7])) if r[7] else (),
        generation=r[8],
        thread_id=r[9],
        previous_thread_id=r[10],
        thread_replaced_at=r[11],
        thread_replaced_reason=r[12],
        auth=r[13],
        approve_tools=tuple(json.loads(r[14])) if r[14] else (),
        env=tuple(json.loads(r[15])) if r[15] else (),
        command=tuple(json.loads(r[16])) if r[16] else (),
        approvals=r[17],
        approval_timeout_ms=r[18],
        allow=tuple(json.loads(r[19])) if r[19] else (),
    )
