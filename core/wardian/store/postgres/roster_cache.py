"""The shared store's roster cache: session -> caller and name/UUID -> agents, checked against the roster's version
in every batch that uses it.

Other apps change the roster under this one (a session revoked or an agent removed on another host must be refused
here at once), so a cached entry is only as good as the version it was read under. Every committed change of
`agents` or `sessions`, from any host, advances `roster_version.v` in its own transaction (schema migration 4). A
batch reads that version in its first round trip, before any of its statements, and may answer from entries read
under that same version; when the version moved, an entry it used may be stale, so the batch is rolled back and run
again from the database (`pipeline.run_pipelined`). Entries read during a batch are kept for the next batches once the
version they were read under is known. The guarantee is the same as reading the roster every time: a roster change
committed before a batch began is seen by that batch.

A LISTEN/NOTIFY invalidation alone could not keep it: a notification reaches the other apps only after its COMMIT
returned, so for a moment a revoked session would still be honoured. The version read rides in the batch's first
round trip (pipeline mode), so checking costs no round trip of its own.

Outside a batch (a tool, a test, the app's start) the cache answers nothing and keeps nothing.
"""

from __future__ import annotations

from wardian.model import Agent
from wardian.store.cache import MAX_CACHED_TARGETS, SessionHit


class VersionedRosterCache:
    """Entries confirmed under `version`, and those read by the open batch (implements `RosterCache`)."""

    def __init__(self) -> None:
        self.version: int | None = None  # the roster version `_sessions`/`_targets` were read under (None: unknown)
        self.active = False  # a batch that reads the version is open
        self.served = False  # the open batch answered from an entry read before it
        self.dirty = False  # the open batch changed the roster itself (the version after it is unknown)
        self._sessions: dict[int, SessionHit] = {}
        self._targets: dict[str, tuple[Agent, ...]] = {}
        self._new_sessions: dict[int, SessionHit] = {}
        self._new_targets: dict[str, tuple[Agent, ...]] = {}

    def begin(self) -> None:
        """A batch starts: it will read the roster's version (see `settle`)."""
        self.active, self.served, self.dirty = True, False, False
        self._new_sessions.clear()
        self._new_targets.clear()

    def settle(self, version: int | None) -> bool:
        """The batch ended; it read `version` (None: it failed, and runs again from the database).

        Returns whether the batch must run again: it answered from an entry read under another version."""
        self.active = False
        stale = self.served and version is not None and version != self.version
        if version != self.version or self.dirty:
            self._sessions.clear()
            self._targets.clear()
        keep = version is not None and not stale and not self.dirty
        if keep:
            self._sessions.update(self._new_sessions)
            if len(self._targets) + len(self._new_targets) > MAX_CACHED_TARGETS:
                self._targets.clear()  # names that match nobody must not grow it without bound
            self._targets.update(self._new_targets)
        # After its own roster change the version it committed is not known: the next batch reads it afresh.
        self.version = None if self.dirty else version
        self._new_sessions.clear()
        self._new_targets.clear()
        return stale

    def roster_written(self) -> None:
        """The open transaction changed agents or sessions: what was read before may no longer hold."""
        self.clear()
        self.dirty = True

    def session(self, session_id: int) -> SessionHit | None:
        if not self.active:
            return None
        hit = self._new_sessions.get(session_id)
        if hit is None and self.version is not None:
            hit = self._sessions.get(session_id)
            self.served = self.served or hit is not None
        return hit

    def keep_session(self, session_id: int, hit: SessionHit) -> None:
        if self.active:
            self._new_sessions[session_id] = hit

    def targets(self, name_or_uuid: str) -> tuple[Agent, ...] | None:
        if not self.active:
            return None
        found = self._new_targets.get(name_or_uuid)
        if found is None and self.version is not None:
            found = self._targets.get(name_or_uuid)
            self.served = self.served or found is not None
        return found

    def keep_targets(self, name_or_uuid: str, found: tuple[Agent, ...]) -> None:
        if self.active and len(self._new_targets) < MAX_CACHED_TARGETS:
            self._new_targets[name_or_uuid] = found

    def clear(self) -> None:
        """Forget everything read so far (a rollback, or the roster changed in this transaction)."""
        self._sessions.clear()
        self._targets.clear()
        self._new_sessions.clear()
        self._new_targets.clear()
