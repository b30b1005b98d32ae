"""The token usage of turns (`store.usage`, docs/guide/teams.md#usage): each ended turn kept once with what its
provider reported (or nothing: unknown), linked to every task bound to it, and summed per agent, on both backends."""

from __future__ import annotations

import sqlite3

import psycopg

from tests.store.conftest import Backend
from tests.store.test_receipts import undo_usage
from tests.store.test_restart_lost import _task, caller_for
from wardian.model import ClaimKind
from wardian.store import Store, history, ledger, roster, usage
from wardian.usage import AgentUsage, TokenUsage


def _bound(store: Store, request_id: str, generation: int, turn_id: str) -> None:
    assert ledger.claim_task(store, request_id, ClaimKind.DISPATCH, generation)
    assert ledger.bind_submission(store, request_id, generation, "thread", turn_id)


def test_a_turn_is_counted_once_per_agent_and_shown_on_each_of_its_tasks(store: Store) -> None:
    a, b = caller_for(store, "a"), caller_for(store, "b")
    gen = roster.begin_generation(store, b.agent.id)
    first, steered, later = (_task(store, a, b, t) for t in ("first", "steered in", "later"))
    _bound(store, first, gen, "turn_1")
    _bound(store, steered, gen, "turn_1")
    _bound(store, later, gen, "turn_2")
    usage.record(store, b.agent.id, "turn_1", TokenUsage(1200, 34, 200))
    usage.record(store, b.agent.id, "turn_2", TokenUsage(100, 5, None))
    usage.record(store, b.agent.id, "turn_3", None)  # a turn without tasks, whose provider reported nothing
    assert usage.of_task(store, first) == usage.of_task(store, steered) == TokenUsage(1200, 34, 200)
    story = history.record_story(store, later).task
    assert story is not None
    assert story.usage == TokenUsage(100, 5, None)
    # Cached is unknown for the sum when one turn did not say it; the unknown turn adds nothing and is counted.
    assert usage.by_agent(store) == {b.agent.id: AgentUsage(3, 1, TokenUsage(1300, 39, None))}


def test_unknown_usage_is_never_zero(store: Store) -> None:
    a, b = caller_for(store, "a"), caller_for(store, "b")
    gen = roster.begin_generation(store, b.agent.id)
    task = _task(store, a, b, "no usage reported")
    assert usage.by_agent(store) == {}
    assert usage.of_task(store, task) is None  # its turn has not ended
    _bound(store, task, gen, "turn_1")
    usage.record(store, b.agent.id, "turn_1", None)
    assert usage.of_task(store, task) is None
    assert usage.by_agent(store) == {b.agent.id: AgentUsage(1, 1, None)}


def test_a_store_of_an_older_schema_gets_the_tables_empty(backend: Backend) -> None:
    """Migration 17 of the embedded store, 11 of the shared one."""
    store = backend.open()
    roster.add_agent(store, "a", "qwen", None)
    backend.close_all()
    if backend.cluster is None:
        with sqlite3.connect(backend.tmp_path / "wardian.db") as db:
            undo_usage(db)
            db.execute("PRAGMA user_version = 16")
    else:
        with psycopg.connect(backend.url, autocommit=True) as db:
            undo_usage(db)
            db.execute("DELETE FROM wardian_schema WHERE version >= 11")
    assert usage.by_agent(backend.open()) == {}
