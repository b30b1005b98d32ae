"""Session tokens and what reads a session: a token's form and digest, the statements that read a session with its
agent, and the check of its secret (in constant time) and generation. The roster's `authenticate` and the shared
store's wait reader (`wardian.store.postgres.wait_reader`) both authenticate through these, so a session is refused
the same way on every path.

A token is `wsn1_<home tag>_<session id>_<secret>`; only a SHA-256 of the 256-bit secret is kept.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Sequence
from typing import Any

from wardian import errors
from wardian.model import Caller
from wardian.store._sql import AGENT_COL_NAMES, agent_of
from wardian.store.cache import SessionHit
from wardian.store.mailbox import UNACKED, UNSEEN_CONTEXT

SESSION_PREFIX = "wsn1"
_MAX_ID_DIGITS = 18  # a session id is a BIGINT (at most 19 digits); 18 never overflows it
_MAX_REMEMBERED_TOKENS = 1024
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


class TokenDigests:
    """The session id a token names and the SHA-256 of its secret, after its form and home are checked.

    A pure function of the token, so it is remembered per exact token (its digest is still compared with the
    session's hash on every call, in constant time, and the session looked up as the roster has it now): the
    split, base64 and SHA-256 were a few µs of every send. One per caller thread (the store's, the wait reader's).
    """

    def __init__(self, home_tag: str) -> None:
        self._home_tag = home_tag
        self._known: dict[str, tuple[int, bytes]] = {}

    def of(self, token: str) -> tuple[int, bytes]:
        """Raises: UnknownSession (not a session token), SessionHomeMismatch (another home's)."""
        known = self._known.get(token)
        if known is not None:
            return known
        parts = token.split("_")
        # ASCII digits only (`str.isdigit` also takes "²", which `int` refuses), and no more than a BIGINT holds.
        if (len(parts) < 3 or parts[0] != SESSION_PREFIX or not parts[2].isascii() or not parts[2].isdigit()
                or len(parts[2]) > _MAX_ID_DIGITS):
            raise errors.UnknownSession(
                "WARDIAN_SESSION_ID is not a wardian session of this home; print a valid one with "
                "`wardian agent env NAME`")
        if not parts[1].isascii() or not hmac.compare_digest(parts[1], self._home_tag):  # it refuses other text
            raise errors.SessionHomeMismatch(
                "WARDIAN_SESSION_ID belongs to another WARDIAN_HOME; set the matching WARDIAN_HOME or "
                "print this home's session with `wardian agent env NAME`")
        secret_text = "_".join(parts[3:])
        try:
            secret = base64.urlsafe_b64decode(secret_text + "=" * (-len(secret_text) % 4))
        except (ValueError, TypeError):
            secret = b""
        known = (int(parts[2]), hashlib.sha256(secret).digest())
        if len(self._known) >= _MAX_REMEMBERED_TOKENS:
            self._known.clear()  # tokens that match nothing must not grow it without bound
        self._known[token] = known
        return known


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

