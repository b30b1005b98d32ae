"""The task policy of a team file's [team] table: `task_deadline`, `max_task_depth` and `max_chain_tasks`, checked as
the loader checks every key (each problem reported with its line; docs/guide/teams.md)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, cast

from wardian import errors
from wardian.durations import parse_duration
from wardian.taskpolicy import MAX_CHAIN_TASKS_LIMIT, MAX_TASK_DEPTH_LIMIT, TaskPolicy
from wardian.team.values import Key

Report = Callable[[Key, str], None]
"""Records one problem at a key of the document (the loader's `_Checker.on`)."""


def read_policy(on: Report, table: object) -> TaskPolicy:
    """The policy [team] gives; a key left out (or wrong, and reported) is its default, and so is all of it when
    [team] is not a table (the loader reports that)."""
    default = TaskPolicy()
    if not isinstance(table, dict):
        return default
    deadline = None
    if "task_deadline" in table:
        raw: object = table["task_deadline"]
        if not isinstance(raw, str):
            on(("team", "task_deadline"), f'must be a duration such as "30m", not {type(raw).__name__}')
        else:
            try:
                deadline = parse_duration(raw, "task_deadline")
            except errors.WardianError as exc:
                on(("team", "task_deadline"), f"{exc.message}; allowed: {exc.allowed}")
    depth = _limit(on, cast("dict[str, Any]", table), "max_task_depth", MAX_TASK_DEPTH_LIMIT)
    tasks = _limit(on, cast("dict[str, Any]", table), "max_chain_tasks", MAX_CHAIN_TASKS_LIMIT)
    return TaskPolicy(deadline, depth or default.max_task_depth, tasks or default.max_chain_tasks)


def _limit(on: Report, table: Mapping[str, Any], key: str, most: int) -> int | None:
    if key not in table:
        return None
    value = table[key]
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
        on(("team", key), f"must be an integer 1..{most}, not {value!r}"[:200])
        return None
    return value
