"""Task deadlines and the loop guard's policy: `operator/followup` with a deadline, and `team/policy`, which `wardian
up` calls with the team file's `task_deadline`, `max_task_depth` and `max_chain_tasks` (docs/guide/teams.md). Its
result, `TeamPolicyResult`, lives with `app/status`'s in `operator`, which shows it too."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, field_validator

from wardian.durations import check_deadline_ms
from wardian.protocol.methods.base import Params
from wardian.protocol.methods.operator import OperatorSendParams
from wardian.taskpolicy import MAX_CHAIN_TASKS_LIMIT, MAX_TASK_DEPTH_LIMIT, TaskPolicy


class OperatorFollowupParams(OperatorSendParams):
    deadline_ms: int | None = None

    @field_validator("deadline_ms")
    @classmethod
    def _deadline(cls, v: int | None) -> int | None:
        return check_deadline_ms(v)


class TeamPolicyParams(Params):
    """The whole policy: a key left out (or null) is its default (no default deadline; depth 8; 64 tasks a chain)."""

    task_deadline_ms: int | None = None
    max_task_depth: Annotated[int, Field(ge=1, le=MAX_TASK_DEPTH_LIMIT)] | None = None
    max_chain_tasks: Annotated[int, Field(ge=1, le=MAX_CHAIN_TASKS_LIMIT)] | None = None

    @field_validator("task_deadline_ms")
    @classmethod
    def _deadline(cls, v: int | None) -> int | None:
        return check_deadline_ms(v, "task_deadline_ms")

    def to_record(self) -> TaskPolicy:
        default = TaskPolicy()
        return TaskPolicy(self.task_deadline_ms, self.max_task_depth or default.max_task_depth,
                          self.max_chain_tasks or default.max_chain_tasks)

