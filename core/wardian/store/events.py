"""What a shared store announces of other apps' commits (`wardian.store.postgres.Announcements`)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["InterruptAnnounced", "RecordAnnounced", "Resynced", "StoreEvent"]


@dataclass(frozen=True, slots=True)
class RecordAnnounced:
    """Another app committed a record for `recipient` (an agent's UUID) of host `host`."""

    recipient: str
    host: str | None
    public_id: str
    kind: str


@dataclass(frozen=True, slots=True)
class InterruptAnnounced:
    """Another app recorded an interrupt of `target`'s turn `turn_id`."""

    target: str
    host: str | None
    interrupt_id: int
    turn_id: str


@dataclass(frozen=True, slots=True)
class Resynced:
    """The announcement stream was (re)connected: announcements may have been missed before this, so whoever
    listens reads durable state again (subscribe, then check)."""


StoreEvent = RecordAnnounced | InterruptAnnounced | Resynced
