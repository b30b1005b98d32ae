"""Task deadlines and the loop guard's limits: the bounds, the team's policy as the app applies it, and a task's place
in its chain (docs/guide/teams.md). A deadline's bounds and checks are `wardian.durations`.

Plain records and constants (stdlib only, like `wardian.model`, which holds them in a task's story): the store, the
protocol and the edges all read them.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_MAX_TASK_DEPTH = 8
DEFAULT_MAX_CHAIN_TASKS = 64
# The largest values a team file may give: a guard set past these guards nothing.
MAX_TASK_DEPTH_LIMIT = 1_000
MAX_CHAIN_TASKS_LIMIT = 100_000


@dataclass(frozen=True, slots=True)
class TaskPolicy:
    """What the app applies to every new task: the team file's `task_deadline`, `max_task_depth` and
    `max_chain_tasks` (`wardian up` sets them; a home nobody set them for has the defaults)."""

    task_deadline_ms: int | None = None
    """The deadline of a task whose sender gave none; None: such a task has no deadline."""
    max_task_depth: int = DEFAULT_MAX_TASK_DEPTH
    max_chain_tasks: int = DEFAULT_MAX_CHAIN_TASKS


@dataclass(frozen=True, slots=True)
class Lineage:
    """A new task's place in its chain: the task its sender was working on when it made this one (None: a root),
    the chain's root request id (None: this task is the root) and its depth (a root is 1)."""

    parent_request_id: str | None
    root_request_id: str | None
    depth: int


@dataclass(frozen=True, slots=True)
class TaskBounds:
    """What a task's story tells of its deadline and its chain."""

    deadline_at: int | None
    end_reason: str | None
    """`deadline_exceeded` when the app ended it at its deadline; None otherwise."""
    lineage: Lineage


@dataclass(frozen=True, slots=True)
class Expired:
    """A task the app ended at its deadline: its notice, and the turn still running it (None: none was)."""

    request_id: str
    requester_uuid: str
    record_id: str | None
    pushing: bool
    recipient_uuid: str
    turn_id: str | None
    generation: int | None


@dataclass(frozen=True, slots=True)
class OpenTask:
    """A task not answered yet, as the deadlock guard sees it: who assigned it, who holds it, and whether its
    recipient's model has it (taken by a receive, or the task its running turn `turn_id` started with)."""

    request_id: str
    requester_id: int
    requester: str
    recipient_id: int
    recipient: str
    recipient_uuid: str
    received: bool
    """Taken by a receive of its recipient, not answered, no outcome captured."""
    turn_id: str | None
    """The turn it is bound to when it started that turn (the first task of it) and has no outcome yet; else None."""


@dataclass(frozen=True, slots=True)
class Deadlock:
    """What the deadlock guard tells one waiting agent: every agent of the deadlock, each of their tasks that the
    next holds, and which of those the waiting agent holds itself (it can answer them)."""

    agents: tuple[str, ...]
    tasks: tuple[OpenTask, ...]
    holding: tuple[str, ...]
    waiting_for: tuple[str, ...]
