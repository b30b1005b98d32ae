"""What reads a session: the statements that read a session with its agent, and the check of its secret (in
constant time) and generation. The roster's `authenticate` and the shared store's wait reader
(`wardian.store.postgres.wait_reader`) both authenticate through these, so a session is refused the same way on every
path. A token's form and digest are `wardian.store.tokens.TokenDigests`.
"""

from __future__ import annotations

import hmac
from collections.abc import Sequence
from typing import Any

from wardian import errors
from wardian.model import Caller
from wardian.store._sql import AGENT_COL_NAMES, agent_of
from wardian.store.cache import SessionHit
from wardian.store.mailbox import UNACKED, UNSEEN_CONTEXT

_SESSION_COLS = ("s.generation, s.secret_hash, s.revoked_at, a.removed_at, s.kind, "
                 + ", ".join(f"a.{c}" for c in AGENT_COL_NAMES))
_SESSION_FROM = " FROM sessions s JOIN agents a ON a.id = s.agent_id WHERE s.id = ?"
SESSION_SQL = "SELECT " + _SESSION_COLS + _SESSION_FROM
# What a wait's first look needs, in one read-only statement (the shared store's `postgres.wait_reader`): the session
# and its agent as `authenticate` reads them (then `session_hit`, `session_caller`), whether the agent has a record a
# receive would return (as `has_unacked`) and whether pushed context waits for it (as `take_unseen_context`, which
# would then take it: a write, left to the writer). The answer is the roster as committed now, never a cache's.
WAIT_LOOK_SQL = ("SELECT " + _SESSION_COLS
                 + f", EXISTS (SELECT 1 FROM interactions u WHERE u.recipient_id = a.id AND {UNACKED}), "
                 f"EXISTS (SELECT 1 FROM interactions i WHERE i.recipient_id = a.id AND {UNSEEN_CONTEXT})"
                 + _SESSION_FROM)
WAIT_LOOK_SESSION_COLS = 5 + len(AGENT_COL_NAMES)  # the session's columns of a WAIT_LOOK_SQL row; then the two flags


def session_hit(session_id: int, row: Sequence[Any] | None) -> SessionHit:
    """What `authenticate` keeps of a session from its row (`SESSION_SQL`'s columns, first in `WAIT_LOOK_SQL`'s).

    Raises: UnknownSession (no such session, revoked, or its agent removed)."""
    if row is None or row[2] is not None or row[3] is not None:
        raise errors.UnknownSession(
            "WARDIAN_SESSION_ID names no live session of this home; print a valid one with "
            "`wardian agent env NAME`")
    return SessionHit(bytes(row[1]), Caller(agent=agent_of(row[5:5 + len(AGENT_COL_NAMES)]), session_id=session_id,
                                            generation=row[0]), row[4])


def session_caller(hit: SessionHit, digest: bytes) -> Caller:
    """The caller a session speaks for, once the token's secret (`digest`) matched the session's, in constant time.

    Raises: Unauthenticated (another secret), StaleSession (a managed session of an older runtime generation)."""
    if not hmac.compare_digest(digest, hit.secret_hash):
        raise errors.Unauthenticated("the session could not be authenticated")
    caller = hit.caller
    if hit.kind == "managed" and caller.generation < caller.agent.generation:
        # A newer generation of this agent started and was given its own session: this one speaks for a runtime
        # that is gone (an old MCP server, say), so it may no longer act for the agent.
        raise errors.StaleSession(
            f"this session of agent {caller.agent.name!r} belongs to its runtime generation {caller.generation}; "
            f"the agent now runs generation {caller.agent.generation}, whose MCP server has its own session",
            agent=caller.agent.name, generation=caller.generation, current_generation=caller.agent.generation)
    return caller

