"""The roster caches: session -> caller and name/UUID -> agents, the two lookups of every send.

Authenticate plus resolve were two queries and ~40 µs of every send, so the embedded store keeps their answers
(`MemoryRosterCache`) for as long as what its one connection sees stays the same: the backend clears it on every
write to agents or sessions and on every rollback. A shared store's cache (`VersionedRosterCache` in
`wardian.store.postgres.roster_cache`) cannot be cleared that way, as other apps change its roster under it (a session
revoked on another host must be refused here at once): its entries are checked against the roster's version
(`roster_version`), which every batch reads in its first round trip, and a batch that used an entry read under an
older version runs again from the database.

A cached session still has its secret checked on every call (`wardian.store.roster`).
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

from wardian.model import Agent, Caller

MAX_CACHED_TARGETS = 4096


class SessionHit(NamedTuple):
    """What `authenticate` keeps of a session: its secret's hash, its caller, and its kind (operator, managed)."""

    secret_hash: bytes
    caller: Caller
    kind: str


class RosterCache(Protocol):
    def session(self, session_id: int) -> SessionHit | None: ...

    def keep_session(self, session_id: int, hit: SessionHit) -> None: ...

    def targets(self, name_or_uuid: str) -> tuple[Agent, ...] | None: ...

    def keep_targets(self, name_or_uuid: str, found: tuple[Agent, ...]) -> None: ...

    def clear(self) -> None:
        """Forget everything (the roster changed, or a transaction that may have filled the cache rolled back)."""
        ...


class MemoryRosterCache:
    """The embedded store's cache, valid for what its connection sees (cleared by the backend, see above)."""

    def __init__(self) -> None:
        self._sessions: dict[int, SessionHit] = {}
        self._targets: dict[str, tuple[Agent, ...]] = {}

    def session(self, session_id: int) -> SessionHit | None:
        return self._sessions.get(session_id)

    def keep_session(self, session_id: int, hit: SessionHit) -> None:
        self._sessions[session_id] = hit

    def targets(self, name_or_uuid: str) -> tuple[Agent, ...] | None:
        return self._targets.get(name_or_uuid)

    def keep_targets(self, name_or_uuid: str, found: tuple[Agent, ...]) -> None:
        if len(self._targets) >= MAX_CACHED_TARGETS:
            self._targets.clear()  # names that match nobody must not grow it without bound
        self._targets[name_or_uuid] = found

    def clear(self) -> None:
        self._sessions.clear()
        self._targets.clear()

