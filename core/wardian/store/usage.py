"""The token usage of agents' turns (docs/guide/teams.md#usage): one row per ended turn of an agent, with what its
provider reported it cost (NULL counts: it reported nothing), and per task that turn answered a link to that row, so
`wardian message show ask_…` gives the task's usage and `wardian status` each agent's totals, a turn counted once
however many tasks it carried.

Invariant: a row is written once, when its turn's end is observed, and never changed.
"""

from __future__ import annotations

from wardian.model import now_ms
from wardian.store.engine import Store
from wardian.usage import AgentUsage, TokenUsage, total


def record(store: Store, agent_id: int, turn_id: str, usage: TokenUsage | None) -> None:
    """Keep the usage of one ended turn (None: unknown) and link to it every task of the agent bound to that turn
    (answered by the turn's end or by an explicit reply during it)."""
    counts = (None, None, None) if usage is None else (usage.input, usage.output, usage.cached)
    with store.atomic():
        row = int(store.db.write(
            "INSERT INTO turn_usage (agent_id, turn_id, input_tokens, output_tokens, cached_tokens, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?) RETURNING id", (agent_id, turn_id, *counts, now_ms())).fetchone()[0])
        store.db.write("INSERT INTO task_usage (request_id, turn_usage_id) SELECT request_id, ? FROM tasks "
                       "WHERE turn_id = ? AND recipient_id = ? ON CONFLICT (request_id) DO NOTHING",
                       (row, turn_id, agent_id))


def of_task(store: Store, request_id: str) -> TokenUsage | None:
    """The usage of the turn that answered the task (None: unknown, or not answered yet)."""
    row = store.db.execute(
        "SELECT u.input_tokens, u.output_tokens, u.cached_tokens FROM task_usage t "
        "JOIN turn_usage u ON u.id = t.turn_usage_id WHERE t.request_id = ?", (request_id,)).fetchone()
    return None if row is None or row[0] is None else TokenUsage(int(row[0]), int(row[1]), _int(row[2]))


def by_agent(store: Store) -> dict[int, AgentUsage]:
    """Each agent's usage totals, by agent id (an agent with no ended turn is absent)."""
    rows = store.db.execute(
        "SELECT agent_id, input_tokens, output_tokens, cached_tokens FROM turn_usage ORDER BY agent_id").fetchall()
    turns: dict[int, list[TokenUsage | None]] = {}
    for agent_id, input_tokens, output_tokens, cached in rows:
        known = None if input_tokens is None else TokenUsage(int(input_tokens), int(output_tokens), _int(cached))
        turns.setdefault(int(agent_id), []).append(known)
    return {agent: AgentUsage(len(u), sum(1 for x in u if x is None), total(u)) for agent, u in turns.items()}


def _int(value: object) -> int | None:
    return None if value is None else int(str(value))
