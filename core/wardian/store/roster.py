"""Agents, their observed runtime state and their sessions (the roster half of the store).

Sessions are capabilities: a token is `wsn1_<home tag>_<session id>_<secret>`; only a SHA-256 of the 256-bit
secret is kept, compared in constant time on every call, cached or not (`wardian.store.sessions`).

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
from wardian.store._sql import AGENT_COLS, Tx, agent_of, now_ms, of_this_host
from wardian.store.contracts import SessionKind
from wardian.store.sessions import SESSION_PREFIX, SESSION_SQL, TokenDigests, session_caller, session_hit


class SqlRoster:
    """The roster part of a store (implements `wardian.store.contracts.Roster`)."""

    def __init__(self, tx: Tx, home_tag: str) -> None:
        self._tx = tx
        self._home_tag = home_tag
        self._digests = TokenDigests(home_tag)

    # --- agents ---------------------------------------------------------------------------------------

    def add_agent(self, name: str, provider: str, workspace: str | None) -> Agent:
        with self._tx.atomic():
            agent_id = int(
                self._tx.db.write(
                    "INSERT INTO agents (uuid, name, provider, workspace, created_at, host) VALUES (?, ?, ?, ?, ?, ?) "
                    "RETURNING id",
                    (str(uuidlib.uuid4()), name, provider, workspace, now_ms(), self._tx.host),
                ).fetchone()[0]
            )
        return self.agent(agent_id)

    def agent(self, agent_id: int) -> Agent:
        row = self._tx.db.execute(f"SELECT {AGENT_COLS} FROM agents WHERE id = ?", (agent_id,)).fetchone()
        if row is None:
            raise errors.UnknownAgent(f"no agent with id {agent_id}")
        return agent_of(row)

    def list_agents(self) -> list[Agent]:
        rows = self._tx.db.execute(
            f"SELECT {AGENT_COLS} FROM agents WHERE removed_at IS NULL AND kind = 'agent' "
            "ORDER BY name, created_at, id").fetchall()
        return [agent_of(r) for r in rows]

    def agents_overview(self) -> list[AgentOverview]:
        counts: dict[int, list[int]] = {}
        for i, state in enumerate(("state = 'pending'", "state IN ('claimed', 'submitted')")):
            # Each count is a scan of a partial index (tasks_pending, tasks_in_flight): only open tasks are read.
            for recipient_id, n in self._tx.db.execute(
                    f"SELECT recipient_id, count(*) FROM tasks WHERE {state} GROUP BY recipient_id"):
                counts.setdefault(recipient_id, [0, 0])[i] = n
        return [AgentOverview(a, *counts.get(a.id, (0, 0))) for a in self.list_agents()]

    def operator(self) -> Caller:
        row = self._tx.db.execute(f"SELECT {AGENT_COLS} FROM agents WHERE uuid = ? AND kind = 'operator'",
                               (OPERATOR_UUID,)).fetchone()
        if row is None:  # migration 6 made it; only a store edited by hand lacks it
            raise errors.StorageUnavailable("the store has no operator row; it was changed outside wardian")
        return Caller(agent=agent_of(row), session_id=0, generation=0)

    def find_agents(self, name_or_uuid: str) -> list[Agent]:
        found = self._tx.cache.targets(name_or_uuid)
        if found is None:
            rows = self._tx.db.execute(
                f"SELECT {AGENT_COLS} FROM agents WHERE removed_at IS NULL AND kind = 'agent' "
                "AND (uuid = ? OR name = ?) ORDER BY created_at, id",
                (name_or_uuid, name_or_uuid),
            ).fetchall()
            found = tuple(agent_of(r) for r in rows)
            self._tx.cache.keep_targets(name_or_uuid, found)
        return list(found)

    def resolve_agent(self, name_or_uuid: str) -> Agent:
        found = self.find_agents(name_or_uuid)
        if not found:
            raise errors.UnknownAgent(f"no agent is named {name_or_uuid!r} and no agent has that UUID",
                                      field="agent")
        if len(found) > 1:
            raise errors.AmbiguousTarget(
                f"{len(found)} agents are named {name_or_uuid!r}; use one of their UUIDs",
                field="agent", candidates=[a.uuid for a in found])
        return found[0]

    def resolve_target(self, caller: Caller, target: str) -> Agent:
        found = self.find_agents(target)
        if not found:
            raise errors.UnknownTarget(
                f"no agent is named {target[:80]!r} and no agent has that UUID (UUIDs are matched in their "
                "canonical lowercase form; names exactly, case-sensitively)", field="target")
        if len(found) > 1:
            raise errors.AmbiguousTarget(
                f"{len(found)} agents are named {target!r}; address one of them by UUID",
                field="target", candidates=[a.uuid for a in found])
        agent = found[0]
        if agent.id == caller.agent.id:
            raise errors.InvalidTarget("the target is the caller itself; address another agent", field="target")
        return agent

    # --- sessions -------------------------------------------------------------------------------------

    def create_session(self, agent_id: int, kind: SessionKind = "operator") -> str:
        with self._tx.atomic():
            agent = self.agent(agent_id)
            if agent.uuid == OPERATOR_UUID:
                # Nothing may speak for the operator with a token: it acts only through the control socket.
                raise errors.UnknownAgent("no session can be minted for the operator", field="agent")
            secret = secrets.token_bytes(32)
            session_id = int(
                self._tx.db.write(
                    "INSERT INTO sessions (agent_id, generation, secret_hash, created_at, kind) VALUES (?, ?, ?, ?, ?) "
                    "RETURNING id",
                    (agent.id, agent.generation, hashlib.sha256(secret).digest(), now_ms(), kind),
                ).fetchone()[0]
            )
        secret_text = base64.urlsafe_b64encode(secret).rstrip(b"=").decode("ascii")
        return f"{SESSION_PREFIX}_{self._home_tag}_{session_id}_{secret_text}"

    def authenticate(self, token: str) -> Caller:
        session_id, digest = self._digests.of(token)
        hit = self._tx.cache.session(session_id)
        if hit is None:
            # One statement for the session and its agent, then kept until the roster changes.
            hit = session_hit(session_id, self._tx.db.execute(SESSION_SQL, (session_id,)).fetchone())
            self._tx.cache.keep_session(session_id, hit)
        # The secret is checked on every call, cached or not, in constant time (`session_caller`); revocation and a
        # newer generation come from the session as the roster (or its cache, cleared by every roster change) has it
        # now.
        return session_caller(hit, digest)

    def revoke_sessions(self, agent_id: int, *, managed_too: bool) -> int:
        """Revoke the agent's operator-minted sessions (and with `managed_too` its managed ones); returns how many."""
        with self._tx.atomic():
            return self._tx.db.write(
                "UPDATE sessions SET revoked_at = ? WHERE agent_id = ? AND revoked_at IS NULL AND (kind = 'operator' "
                "OR ? = 1)",
                (now_ms(), agent_id, 1 if managed_too else 0),
            ).rowcount

    def remove_agent(self, agent_id: int) -> Agent:
        """Remove the agent from the roster (its records stay as evidence): its name is free, its sessions are
        revoked, and no target or start resolves to it again. Raises: UnknownAgent."""
        with self._tx.atomic():
            agent = self.agent(agent_id)
            now = now_ms()
            self._tx.db.write(
                "UPDATE agents SET removed_at = ?, desired = 'off', status = 'off', active_turn_id = NULL "
                "WHERE id = ? AND removed_at IS NULL",
                (now, agent_id),
            )
            self._tx.db.write(
                "UPDATE sessions SET revoked_at = ? WHERE agent_id = ? AND revoked_at IS NULL", (now, agent_id)
            )
        return agent

    # --- the provider runtime's view of agents --------------------------------------------------------

    def managed_agent(self, agent_id: int) -> ManagedAgent:
        r = self._tx.db.execute(f"SELECT {_MANAGED_COLS} FROM agents WHERE id = ?", (agent_id,)).fetchone()
        if r is None:
            raise errors.UnknownAgent(f"no agent with id {agent_id}")
        return _managed_of(r)

    def managed_agents(self) -> list[ManagedAgent]:
        return [_managed_of(r) for r in self._tx.db.execute(
            f"SELECT {_MANAGED_COLS} FROM agents WHERE removed_at IS NULL AND kind = 'agent' ORDER BY id")]

    def agents_desired_on(self) -> list[int]:
        mine, args = of_this_host(self._tx, "id")
        return [
            r[0]
            for r in self._tx.db.execute(
                f"SELECT id FROM agents WHERE desired = 'on' AND removed_at IS NULL{mine} ORDER BY id", args
            )
        ]

    def set_desired(
        self, agent_id: int, desired: str, mode: str | None = None, overrides: Sequence[str] | None = None,
        approve_tools: Sequence[str] | None = None,
    ) -> None:
        with self._tx.atomic():
            if overrides is None:
                self._tx.db.write("UPDATE agents SET desired = ? WHERE id = ?", (desired, agent_id))
            else:
                self._tx.db.write(
                    "UPDATE agents SET desired = ?, mode = ?, overrides = ?, approve_tools = ? WHERE id = ?",
                    (desired, mode, json.dumps(list(overrides)), json.dumps(list(approve_tools or ())), agent_id),
                )

    def begin_generation(self, agent_id: int) -> int:
        with self._tx.atomic():
            self._tx.db.write(
                "UPDATE agents SET generation = generation + 1, status = 'starting', "
                "active_turn_id = NULL, signed_out_at = NULL, signed_out_reason = NULL WHERE id = ?",
                (agent_id,),
            )
            return int(self._tx.db.execute("SELECT generation FROM agents WHERE id = ?", (agent_id,)).fetchone()[0])

    def observe(
        self,
        agent_id: int,
        generation: int,
        status: AgentStatus,
        thread_id: str | None = None,
        active_turn_id: str | None = None,
    ) -> None:
        with self._tx.atomic():
            self._tx.db.write(
                "UPDATE agents SET status = ?, active_turn_id = ?, thread_id = COALESCE(?, thread_id) "
                "WHERE id = ? AND generation = ?",
                (status.value, active_turn_id, thread_id, agent_id, generation),
            )

    def replace_thread(self, agent_id: int, generation: int, previous: str, current: str, reason: str) -> bool:
        """The agent's conversation `previous` could not be used (its provider no longer has it) and `current`
        replaced it: recorded unless a newer generation owns the agent. True when recorded."""
        with self._tx.atomic():
            return self._tx.db.write(
                "UPDATE agents SET thread_id = ?, previous_thread_id = ?, thread_replaced_at = ?, "
                "thread_replaced_reason = ? WHERE id = ? AND generation = ?",
                (current, previous, now_ms(), reason, agent_id, generation),
            ).rowcount == 1

    def reset_observed_state(self) -> None:
        mine, args = of_this_host(self._tx, "id")
        with self._tx.atomic():
            self._tx.db.write(
                "UPDATE agents SET status = 'off', active_turn_id = NULL WHERE (status != 'off' "
                f"OR active_turn_id IS NOT NULL){mine}",
                args,
            )

    def set_auth(self, agent_id: int, auth: str | None) -> None:
        """The credential name the agent's starts use from now on (None: its provider's default)."""
        with self._tx.atomic():
            self._tx.db.write("UPDATE agents SET auth = ? WHERE id = ?", (auth, agent_id))

    def mark_signed_out(self, agent_id: int, generation: int, reason: str) -> bool:
        """The provider rejected the agent's credentials during `generation` (shown as `signed_out` until its next
        start); ignored when a newer generation owns the agent. True when recorded."""
        with self._tx.atomic():
            return self._tx.db.write(
                "UPDATE agents SET signed_out_at = ?, signed_out_reason = ? WHERE id = ? AND generation = ?",
                (now_ms(), reason, agent_id, generation)).rowcount == 1

    def mark_errored(self, agent_id: int) -> None:
        with self._tx.atomic():
            self._tx.db.write("UPDATE agents SET status = 'errored', active_turn_id = NULL WHERE id = ?", (agent_id,))


_MANAGED_COLS = ("id, uuid, name, provider, workspace, desired, mode, overrides, generation, thread_id, "
                 "previous_thread_id, thread_replaced_at, thread_replaced_reason, auth, approve_tools")


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
    )
