"""The store's roster caches (session -> caller, name/UUID -> agents) never answer with a stale roster (on both
backends; the shared store's cache is checked against the roster's version in every batch, since other apps change
its roster).

TOOL-3: the app owns attribution — a cached session must still check its secret on every call, and any
change to agents or sessions (or a rollback of one) must be seen by the very next call.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.store.conftest import Backend
from wardian import errors
from wardian.model import AgentStatus, InteractionKind, Receipt
from wardian.store import Store, mailbox, roster
from wardian.store import testing as store_testing
from wardian_harness.hosts.postgres import PrivateCluster

pytestmark = pytest.mark.fast  # the fast tier (scripts/check test-fast)


def test_a_cached_session_still_checks_its_secret_every_time(store: Store) -> None:
    agent = roster.add_agent(store, "a", "codex", None)
    token = roster.create_session(store, agent.id)
    assert roster.authenticate(store, token).agent.uuid == agent.uuid  # now cached
    forged = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
    for _ in range(2):  # the token's digest is remembered; the comparison is not
        with pytest.raises(errors.Unauthenticated):
            roster.authenticate(store, forged)
    assert roster.authenticate(store, token).agent.uuid == agent.uuid


def test_a_remembered_token_is_refused_the_same_way_every_time(store: Store) -> None:
    """A token's form and home are checked once and remembered only when they pass; a bad one fails each call."""
    agent = roster.add_agent(store, "a", "codex", None)
    token = roster.create_session(store, agent.id)
    prefix, tag, session_id, secret = token.split("_", 3)
    other_home = "_".join((prefix, "x" * len(tag), session_id, secret))
    no_session = "_".join((prefix, tag, str(int(session_id) + 1000), secret))
    for _ in range(2):
        with pytest.raises(errors.UnknownSession):
            roster.authenticate(store, "wsn1_nope")
        with pytest.raises(errors.SessionHomeMismatch):
            roster.authenticate(store, other_home)
        with pytest.raises(errors.UnknownSession):
            roster.authenticate(store, no_session)
    assert roster.authenticate(store, token).agent.uuid == agent.uuid
    roster.revoke_sessions(store, agent.id, managed_too=True)
    with pytest.raises(errors.UnknownSession):
        roster.authenticate(store, token)


def test_a_name_that_becomes_shared_is_ambiguous_at_once(store: Store) -> None:
    """TGT-2: a name shared by two agents is an error listing the candidates, even right after a send."""
    caller = roster.authenticate(store, roster.create_session(store, roster.add_agent(store, "me", "codex", None).id))
    first = roster.add_agent(store, "bob", "codex", None)
    assert roster.resolve_target(store, caller, "bob").uuid == first.uuid  # cached
    second = roster.add_agent(store, "bob", "codex", None)
    with pytest.raises(errors.AmbiguousTarget) as info:
        roster.resolve_target(store, caller, "bob")
    assert set(info.value.to_data()["candidates"]) == {first.uuid, second.uuid}


def test_an_unknown_name_that_appears_later_resolves(store: Store) -> None:
    caller = roster.authenticate(store, roster.create_session(store, roster.add_agent(store, "me", "codex", None).id))
    with pytest.raises(errors.UnknownTarget):
        roster.resolve_target(store, caller, "late")
    late = roster.add_agent(store, "late", "codex", None)
    assert roster.resolve_target(store, caller, "late").uuid == late.uuid


def test_runtime_state_of_a_target_is_never_stale(store: Store) -> None:
    """An interrupt is recorded against the target's *current* turn, so a cached target must follow it."""
    caller = roster.authenticate(store, roster.create_session(store, roster.add_agent(store, "me", "codex", None).id))
    target = roster.add_agent(store, "worker", "codex", None)
    assert roster.resolve_target(store, caller, "worker").active_turn_id is None
    generation = roster.begin_generation(store, target.id)
    roster.observe(store, target.id, generation, AgentStatus.ACTIVE, thread_id="th", active_turn_id="turn-1")
    assert roster.resolve_target(store, caller, "worker").active_turn_id == "turn-1"
    assert mailbox.record_interrupt(store, caller, roster.resolve_target(store, caller, "worker")).turn_id == "turn-1"


def test_a_session_whose_agent_is_removed_stops_working(store: Store) -> None:
    agent = roster.add_agent(store, "gone", "codex", None)
    token = roster.create_session(store, agent.id)
    roster.authenticate(store, token)  # cached
    with store.atomic():  # any writer of the table must be seen, not only the store's own operations
        store_testing.execute(store, "UPDATE agents SET removed_at = 1 WHERE id = ?", (agent.id,))
    with pytest.raises(errors.UnknownSession):
        roster.authenticate(store, token)


def test_a_revoked_session_stops_working(store: Store) -> None:
    agent = roster.add_agent(store, "a", "codex", None)
    token = roster.create_session(store, agent.id)
    roster.authenticate(store, token)
    with store.atomic():
        store_testing.execute(store, "UPDATE sessions SET revoked_at = 1")
    with pytest.raises(errors.UnknownSession):
        roster.authenticate(store, token)


def test_what_a_rolled_back_operation_saw_is_forgotten(store: Store) -> None:
    """A batch op that added an agent, resolved it (filling the cache) and then failed leaves no trace."""
    caller = roster.authenticate(store, roster.create_session(store, roster.add_agent(store, "me", "codex", None).id))

    def adds_then_fails(s: Store) -> None:
        roster.add_agent(s, "ghost", "codex", None)
        roster.resolve_target(s, caller, "ghost")
        raise errors.InvalidArguments("boom")

    def sends_to_ghost(s: Store) -> object:
        return mailbox.admit(s, caller, roster.resolve_target(s, caller, "ghost"), InteractionKind.INFORMATION, "hi")

    results = store.run_batch([(adds_then_fails, ()), (sends_to_ghost, ())])
    assert isinstance(results[0].error, errors.InvalidArguments)
    assert isinstance(results[1].error, errors.UnknownTarget)
    assert [a.name for a in roster.list_agents(store)] == ["me"]


def test_bare_operations_commit_with_their_batch(store: Store) -> None:
    """A bare op (no savepoint of its own) fails cleanly before it writes and commits with the batch."""
    caller = roster.authenticate(store, roster.create_session(store, roster.add_agent(store, "me", "codex", None).id))
    peer = roster.add_agent(store, "peer", "codex", None)

    def send(target: str):
        return lambda s: mailbox.admit(s, caller, roster.resolve_target(s, caller, target), InteractionKind.INFORMATION,
                                       target)

    results = store.run_batch([(send(peer.uuid), ()), (send("nobody"), ()), (send("peer"), ())],
                              bare=[True, True, True])
    assert results[0].error is None
    assert results[2].error is None
    assert isinstance(results[1].error, errors.UnknownTarget)
    peer_caller = roster.authenticate(store, roster.create_session(store, peer.id))
    page = mailbox.receive(store, peer_caller, cursor=None, ack_cursor=None, limit=10)
    assert [r.interaction.text for r in page.records] == [peer.uuid, "peer"]


def test_a_cached_managed_session_goes_stale_when_a_new_generation_starts(store: Store) -> None:
    """SES-3: a start's managed session stops authenticating once the agent's next generation begins, though it was
    cached; an operator-minted session of the older generation stays valid."""
    agent = roster.add_agent(store, "w", "codex", None)
    roster.begin_generation(store, agent.id)
    managed = roster.create_session(store, agent.id, "managed")
    operator = roster.create_session(store, agent.id)
    assert roster.authenticate(store, managed).generation == 1
    roster.begin_generation(store, agent.id)
    with pytest.raises(errors.StaleSession) as exc:
        roster.authenticate(store, managed)
    assert (exc.value.details["generation"], exc.value.details["current_generation"]) == (1, 2)
    assert roster.authenticate(store, operator).agent.generation == 2
    current = roster.create_session(store, agent.id, "managed")
    assert roster.authenticate(store, current).generation == 2
    assert roster.revoke_sessions(store, agent.id, managed_too=False) == 1
    with pytest.raises(errors.UnknownSession):
        roster.authenticate(store, operator)
    assert roster.authenticate(store, current).generation == 2


# --- the shared store: a cache checked against the roster's version in every batch --------------------------------


def _batch(store: Store, op: object) -> object:
    """`op` run the way the app runs it: inside a batch (the only place a shared store's cache answers)."""
    result = store.run_batch([(op, ())])[0]  # type: ignore[list-item]
    if result.error is not None:
        raise result.error
    return result.value


def test_a_session_revoked_through_another_connection_is_refused_by_the_next_batch(
        pg_cluster: PrivateCluster, tmp_path: Path) -> None:
    """Two stores of one shared database (two apps): what one revokes or removes, the other's next batch refuses,
    though it had just answered from its cache (an embedded store has one app, so this is the shared store's)."""
    backend = Backend("postgresql", tmp_path, pg_cluster)
    try:
        _revoked_elsewhere(backend.open(), backend.open())
    finally:
        backend.close_all()


def _revoked_elsewhere(here: Store, there: Store) -> None:
    agent = roster.add_agent(here, "a", "codex", None)
    peer = roster.add_agent(here, "peer", "codex", None)
    token = roster.create_session(here, agent.id)
    def send(s: Store) -> Receipt:
        caller = roster.authenticate(s, token)
        return mailbox.admit(s, caller, roster.resolve_target(s, caller, "peer"), InteractionKind.INFORMATION, "hi")

    for _ in range(3):
        _batch(here, send)  # the later ones answer from the cache
    assert store_testing.backdoor(here).roster_cache.version is not None  # type: ignore[attr-defined]
    roster.revoke_sessions(there, agent.id, managed_too=True)
    with pytest.raises(errors.UnknownSession):
        _batch(here, send)
    fresh = roster.create_session(there, agent.id)
    assert _batch(here, lambda s: roster.authenticate(s, fresh).agent.uuid) == agent.uuid
    with there.atomic():
        store_testing.execute(there, "UPDATE agents SET removed_at = 1 WHERE id = ?", (peer.id,))
    with pytest.raises(errors.UnknownTarget):
        _batch(here, lambda s: roster.resolve_target(s, roster.authenticate(s, fresh), "peer"))
    twin = roster.add_agent(there, "twin", "codex", None)
    assert _batch(here, lambda s: roster.resolve_target(s, roster.authenticate(s, fresh), "twin").uuid) == twin.uuid
    roster.add_agent(there, "twin", "codex", None)
    with pytest.raises(errors.AmbiguousTarget):
        _batch(here, lambda s: roster.resolve_target(s, roster.authenticate(s, fresh), "twin"))


def test_a_statement_that_fails_inside_a_batch_fails_only_its_operation(store: Store) -> None:
    """A database error (here a duplicate key) in the middle of a batch: on a shared store the batch's pipeline is
    rolled back and the batch runs again operation by operation, so only that operation fails."""
    caller = roster.authenticate(store, roster.create_session(store, roster.add_agent(store, "me", "codex", None).id))
    peer = roster.add_agent(store, "peer", "codex", None)

    def send(text: str):
        return lambda s: mailbox.admit(s, caller, roster.resolve_target(s, caller, "peer"), InteractionKind.INFORMATION,
                                       text)

    def duplicate_key(s: Store) -> None:
        store_testing.execute(s, "INSERT INTO meta (key, value) VALUES ('epoch', ?)", (b"x",))

    results = store.run_batch([(send("one"), ()), (duplicate_key, ()), (send("two"), ())],
                              bare=[True, False, True])
    assert results[0].error is None
    assert results[2].error is None
    assert isinstance(results[1].error, errors.WardianError)
    peer_caller = roster.authenticate(store, roster.create_session(store, peer.id))
    page = mailbox.receive(store, peer_caller, cursor=None, ack_cursor=None, limit=10)
    assert [r.interaction.text for r in page.records] == ["one", "two"]
