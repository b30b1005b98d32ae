"""The interaction store on its own: transactions, claims, cursors, replies, text exactness."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.store.conftest import Backend
from wardian import errors
from wardian.model import Caller, ClaimKind, DeliveryDoubts, InteractionKind, ReplyStatus, TaskState
from wardian.store import Store, history, ledger, mailbox, roster
from wardian.store import testing as store_testing
from wardian.store.sqlite import SqliteBackend


def caller_for(store: Store, name: str) -> Caller:
    agent = roster.add_agent(store, name, "codex", None)
    return roster.authenticate(store, roster.create_session(store, agent.id))


def test_a_receipt_waits_for_a_durable_commit(backend: Backend, store: Store) -> None:
    """RCPT-3 (decision 0001): SQLite in WAL mode with synchronous=FULL (receipts survive power loss); PostgreSQL with
    synchronous_commit on (a COMMIT returns once the WAL is flushed, on synchronous standbys too when configured)."""
    if backend.name == "sqlite":
        assert store_testing.execute(store, "PRAGMA journal_mode") == [("wal",)]
        assert store_testing.execute(store, "PRAGMA synchronous") == [(2,)]  # FULL
    else:
        assert store_testing.execute(store, "SHOW synchronous_commit") == [("on",)]
        assert store_testing.execute(store, "SHOW fsync") == [("on",)]


def test_reopening_keeps_epoch_and_records(backend: Backend) -> None:
    """A reopened store is the same store: same epoch (cursors stay valid), same records."""
    s = backend.open()
    a, b = caller_for(s, "a"), caller_for(s, "b")
    receipt = mailbox.admit(s, a, b.agent, InteractionKind.TASK, "hello")
    epoch = s.epoch
    s.close()
    s2 = backend.open()
    assert s2.epoch == epoch
    assert ledger.task(s2, receipt.interaction_id).state is TaskState.PENDING


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(text=st.text(alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"),
                    min_size=1, max_size=400))
def test_text_is_stored_exactly(store: Store, text: str) -> None:
    """TXT-1: message text retains Unicode, line breaks, and punctuation. Byte-exact round trip."""
    a = caller_for(store, "s" + os.urandom(4).hex())
    b = caller_for(store, "r" + os.urandom(4).hex())
    mailbox.admit(store, a, b.agent, InteractionKind.INFORMATION, text)
    page = mailbox.receive(store, b, cursor=None, ack_cursor=None, limit=1)
    assert page.records[0].interaction.text.encode("utf-8") == text.encode("utf-8")


def test_claim_is_won_exactly_once(store: Store) -> None:
    """CLM-2: manual receive and automatic dispatch share a durable claim: only one exposes the task."""
    a, b = caller_for(store, "a"), caller_for(store, "b")
    rid = mailbox.admit(store, a, b.agent, InteractionKind.TASK, "work").request_id
    assert rid is not None
    assert ledger.claim_task(store, rid, ClaimKind.DISPATCH, 0) is True
    assert ledger.claim_task(store, rid, ClaimKind.DISPATCH, 0) is False
    page = mailbox.receive(store, b, cursor=None, ack_cursor=None, limit=10)
    assert page.records[0].new_work is False
    assert page.records[0].task is not None
    assert page.records[0].task.claimed_by is ClaimKind.DISPATCH


def test_receive_claim_blocks_dispatch(store: Store) -> None:
    """A task exposed by receive can no longer be claimed by dispatch."""
    a, b = caller_for(store, "a"), caller_for(store, "b")
    rid = mailbox.admit(store, a, b.agent, InteractionKind.TASK, "work").request_id
    assert rid is not None
    first = mailbox.receive(store, b, cursor=None, ack_cursor=None, limit=10)
    assert first.records[0].new_work is True
    assert ledger.claim_task(store, rid, ClaimKind.DISPATCH, 0) is False
    again = mailbox.receive(store, b, cursor=None, ack_cursor=None, limit=10)
    assert [r.interaction.id for r in again.records] == [rid]
    assert again.records[0].new_work is False


def test_cursor_of_another_recipient_is_invalid(store: Store) -> None:
    """B17: another recipient's valid cursor is invalid_cursor; 0 records acked."""
    a, b = caller_for(store, "a"), caller_for(store, "b")
    mailbox.admit(store, a, b.agent, InteractionKind.INFORMATION, "x")
    mailbox.admit(store, b, a.agent, InteractionKind.INFORMATION, "y")
    cur_b = mailbox.receive(store, b, cursor=None, ack_cursor=None, limit=10).cursor
    assert cur_b is not None
    with pytest.raises(errors.InvalidCursor):
        mailbox.receive(store, a, cursor=None, ack_cursor=cur_b, limit=10)
    with pytest.raises(errors.InvalidCursor):
        mailbox.receive(store, a, cursor=cur_b, ack_cursor=None, limit=10)
    assert mailbox.has_unacked(store, b.agent.id)
    assert mailbox.has_unacked(store, a.agent.id)


@pytest.mark.parametrize("mutate", ["flip_mac", "truncate", "garbage", "prefix_only", "flip_payload"])
def test_forged_cursors_are_invalid(store: Store, mutate: str) -> None:
    """B17: malformed, truncated or bad-MAC cursors are invalid_cursor."""
    a, b = caller_for(store, "a"), caller_for(store, "b")
    mailbox.admit(store, a, b.agent, InteractionKind.INFORMATION, "x")
    cur = mailbox.receive(store, b, cursor=None, ack_cursor=None, limit=10).cursor
    assert cur is not None
    forged = {
        "flip_mac": cur[:-2] + ("A" if cur[-2] != "A" else "B") + cur[-1],
        "truncate": cur[:-5],
        "garbage": "cur1_!!!!",
        "prefix_only": "cur1_",
        "flip_payload": cur[:20] + ("A" if cur[20] != "A" else "B") + cur[21:],
    }[mutate]
    with pytest.raises(errors.InvalidCursor):
        mailbox.receive(store, b, cursor=None, ack_cursor=forged, limit=10)
    assert mailbox.has_unacked(store, b.agent.id)


def test_cursor_of_a_recreated_store_is_stale(backend: Backend) -> None:
    """B18: a cursor from a previous store epoch is stale_cursor."""
    s = backend.open()
    a, b = caller_for(s, "a"), caller_for(s, "b")
    mailbox.admit(s, a, b.agent, InteractionKind.INFORMATION, "x")
    cur = mailbox.receive(s, b, cursor=None, ack_cursor=None, limit=10).cursor
    s.close()
    backend.recreate()
    s2 = backend.open()
    b2 = caller_for(s2, "b")
    assert cur is not None
    with pytest.raises(errors.StaleCursor):
        mailbox.receive(s2, b2, cursor=cur, ack_cursor=None, limit=10)


def test_ack_is_idempotent_and_exact(store: Store) -> None:
    """RCV-8, decision 0005: re-acking succeeds with 0 changes; an ack covers exactly its batch."""
    a, b = caller_for(store, "a"), caller_for(store, "b")
    for i in range(5):
        mailbox.admit(store, a, b.agent, InteractionKind.INFORMATION, f"m{i}")
    first = mailbox.receive(store, b, cursor=None, ack_cursor=None, limit=2)
    assert first.more is True
    second = mailbox.receive(store, b, cursor=first.cursor, ack_cursor=None, limit=2)
    assert [r.interaction.text for r in second.records] == ["m2", "m3"]
    acked = mailbox.receive(store, b, cursor=None, ack_cursor=first.cursor, limit=10)
    assert acked.acked == 2
    assert [r.interaction.text for r in acked.records] == ["m2", "m3", "m4"]
    again = mailbox.receive(store, b, cursor=None, ack_cursor=first.cursor, limit=10)
    assert again.acked == 0


def test_batch_isolates_a_failing_operation(store: Store) -> None:
    """Group commit: one failing operation is rolled back alone; its neighbours commit."""
    a, b = caller_for(store, "a"), caller_for(store, "b")

    def bad(s: Store) -> None:
        mailbox.admit(s, a, b.agent, InteractionKind.INFORMATION, "rolled back")
        raise errors.InvalidTarget("boom")

    results = store.run_batch([(mailbox.admit, (a, b.agent, InteractionKind.INFORMATION, "one")), (bad, ()),
                               (mailbox.admit, (a, b.agent, InteractionKind.INFORMATION, "two"))])
    assert results[0].error is None
    assert results[2].error is None
    assert isinstance(results[1].error, errors.InvalidTarget)
    texts = [r.interaction.text for r in mailbox.receive(store, b, cursor=None, ack_cursor=None, limit=10).records]
    assert texts == ["one", "two"]


def test_a_batch_of_sends_stores_every_body_exactly_in_order(store: Store) -> None:
    """A batch's sends are appended as one statement (on PostgreSQL one JSON parameter): quotes, backslashes, escapes,
    separators, astral characters and a long body come back unchanged, in the batch's order."""
    a, b = caller_for(store, "a"), caller_for(store, "b")
    bodies = ['"quoted" \\ back\\slash', "{\"k\": [1, null]}", "line\nbreak\ttab\r", "\u2028\u2029 \x7f \x01",
              "émoji 🦀 𝄞", "x" * 60000, "null", "0"]
    results = store.run_batch([(mailbox.admit, (a, b.agent, InteractionKind.INFORMATION, t)) for t in bodies],
                              bare=[True] * len(bodies))
    assert [r.error for r in results] == [None] * len(bodies)
    page = mailbox.receive(store, b, cursor=None, ack_cursor=None, limit=20).records
    assert [r.interaction.text for r in page] == bodies
    assert [r.interaction.id for r in page] == [r.value.interaction_id for r in results]


def test_storage_full_admits_nothing(backend: Backend, store: Store) -> None:
    """D5: SQLITE_FULL is storage_full with nothing admitted; the store stays usable."""
    if backend.name != "sqlite":
        pytest.skip("a full disk under PostgreSQL cannot be produced on demand here (SQLite's page cap can)")
    assert isinstance(store.backend, SqliteBackend)
    a, b = caller_for(store, "a"), caller_for(store, "b")
    pages = store_testing.execute(store, "PRAGMA page_count")[0][0]
    store_testing.set_max_page_count(store, pages)
    results = store.run_batch([(mailbox.admit, (a, b.agent, InteractionKind.INFORMATION, "x" * 60000))])
    assert isinstance(results[0].error, errors.StorageFull)
    assert not mailbox.has_unacked(store, b.agent.id)
    store_testing.set_max_page_count(store, 1 << 30)
    mailbox.admit(store, a, b.agent, InteractionKind.INFORMATION, "after")
    assert store.backend.integrity_check() == "ok"


def test_reply_rules(store: Store) -> None:
    """RPL-1, RPL-2: reply completes the request as its authorized recipient, once; the request picks the
    destination."""
    a, b, c = caller_for(store, "a"), caller_for(store, "b"), caller_for(store, "c")
    rid = mailbox.admit(store, a, b.agent, InteractionKind.TASK, "do it").request_id
    info = mailbox.admit(store, a, b.agent, InteractionKind.INFORMATION, "fyi").interaction_id
    assert rid is not None
    with pytest.raises(errors.NotRecipient):
        ledger.reply(store, c, rid, ReplyStatus.DONE, "not mine")
    with pytest.raises(errors.NotATask):
        ledger.reply(store, b, info, ReplyStatus.DONE, "x")
    with pytest.raises(errors.UnknownRequest):
        ledger.reply(store, b, "ask_nope", ReplyStatus.DONE, "x")
    receipt = ledger.reply(store, b, rid, ReplyStatus.BLOCKED, "need input")
    assert receipt.requester.uuid == a.agent.uuid
    with pytest.raises(errors.AlreadyCompleted) as exc:
        ledger.reply(store, b, rid, ReplyStatus.DONE, "again")
    assert exc.value.details == {"status": "blocked", "reply_id": receipt.reply_id}
    page = mailbox.receive(store, a, cursor=None, ack_cursor=None, limit=10)
    assert [(r.interaction.kind, r.interaction.request_id) for r in page.records] == [
        (InteractionKind.REPLY, rid)]


def test_a_session_token_is_bound_to_its_store_and_secret(backend: Backend, store: Store) -> None:
    """S5, B2, B3: wrong secret, missing secret, unknown id, other home."""
    a = caller_for(store, "a")
    token = roster.create_session(store, a.agent.id)
    prefix, tag, sid, secret = token.split("_", 3)
    with pytest.raises(errors.Unauthenticated):
        roster.authenticate(store, f"{prefix}_{tag}_{sid}_{'A' * len(secret)}")
    with pytest.raises(errors.Unauthenticated):
        roster.authenticate(store, f"{prefix}_{tag}_{sid}")
    with pytest.raises(errors.UnknownSession):
        roster.authenticate(store, f"{prefix}_{tag}_99999_{secret}")
    with pytest.raises(errors.UnknownSession):
        roster.authenticate(store, "not-a-session")
    for forged_id in ("\u00b2", "\u0663", "9" * 40, "-1", ""):  # a superscript two, an Arabic-Indic three, no BIGINT
        with pytest.raises(errors.UnknownSession):
            roster.authenticate(store, f"{prefix}_{tag}_{forged_id}_{secret}")
    with pytest.raises(errors.SessionHomeMismatch):
        roster.authenticate(store, f"{prefix}_t\u00e4g_{sid}_{secret}")
    other = backend.other()
    with pytest.raises(errors.SessionHomeMismatch):
        roster.authenticate(other, token)


def test_only_hashes_of_session_secrets_are_stored(backend: Backend, store: Store, tmp_path: Path) -> None:
    """S6: the secret never reaches the database (its files, or any row of the server's)."""
    a = caller_for(store, "a")
    token = roster.create_session(store, a.agent.id)
    secret = token.split("_", 3)[3]
    assert all(len(bytes(r[0])) == 32 for r in store_testing.execute(store, "SELECT secret_hash FROM sessions"))
    if backend.name == "sqlite":
        store.close()
        raw = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("wardian.db"))
        assert secret.encode() not in raw
    else:
        for table in ("meta", "hosts", "agents", "sessions", "interactions", "tasks", "interrupts"):
            dump = store_testing.execute(store, f"SELECT string_agg(t::text, '|') FROM {table} t")[0][0] or ""
            assert secret not in dump


def test_a_planned_message_id_is_kept_with_the_claim_and_a_lookup_is_counted_per_agent(store: Store) -> None:
    """DLV-9, decision 0016: the client-chosen message id is committed with the dispatch claim (released with it); a
    submission confirmed by lookup and one a lookup did not find are task facts, counted per recipient by
    `delivery_doubts`."""
    a, b, c = caller_for(store, "a"), caller_for(store, "b"), caller_for(store, "c")
    first = mailbox.admit(store, a, b.agent, InteractionKind.TASK, "one").request_id
    second = mailbox.admit(store, a, b.agent, InteractionKind.TASK, "two").request_id
    third = mailbox.admit(store, a, c.agent, InteractionKind.TASK, "three").request_id
    assert first is not None
    assert second is not None
    assert third is not None
    assert ledger.delivery_doubts(store) == {}
    assert roster.begin_generation(store, b.agent.id) == 1
    assert roster.begin_generation(store, c.agent.id) == 1
    assert ledger.claim_task(store, first, ClaimKind.DISPATCH, 1, provider_message_id="msg_a", thread_id="ses_1")
    assert ledger.release_claim(store, first, 1)
    assert ledger.claim_task(store, first, ClaimKind.DISPATCH, 1, provider_message_id="msg_b", thread_id="ses_1")
    assert ledger.bind_submission(store, first, 1, "ses_1", "msg_b", lookup="the answer was lost")
    story = history.record_story(store, first)
    assert story.task is not None
    assert (story.task.provider_message_id, story.task.facts.lookup, story.task.lookup_note) == (
        "msg_b", "confirmed", "the answer was lost")
    assert ledger.claim_task(store, second, ClaimKind.DISPATCH, 1, provider_message_id="msg_c")
    ledger.mark_uncertain(store, second, "lost", looked_up=True)
    assert ledger.claim_task(store, third, ClaimKind.DISPATCH, 1)
    ledger.mark_uncertain(store, third, "owner ended")
    assert ledger.task(store, second).lookup == "not_found"
    assert ledger.task(store, third).lookup is None
    assert ledger.delivery_doubts(store) == {b.agent.id: DeliveryDoubts(uncertain=1, confirmed_by_lookup=1),
                                             c.agent.id: DeliveryDoubts(uncertain=1, confirmed_by_lookup=0)}


def test_a_dispatch_claim_is_fenced_by_the_current_generation(backend: Backend, store: Store) -> None:
    """CLM-5, H3: a runtime generation that is no longer the agent's (an app cut off while its host was taken over and
    the agent started again) cannot claim: one conditional UPDATE checks the claim and the generation together; a claim
    of the old generation cannot bind once the new one marked it lost."""
    a, b = caller_for(store, "a"), caller_for(store, "b")
    old = roster.begin_generation(store, b.agent.id)
    first = mailbox.admit(store, a, b.agent, InteractionKind.TASK, "one").request_id
    second = mailbox.admit(store, a, b.agent, InteractionKind.TASK, "two").request_id
    assert first is not None
    assert second is not None
    assert ledger.claim_task(store, first, ClaimKind.DISPATCH, old)
    new = roster.begin_generation(store, b.agent.id)  # taken over elsewhere: a new generation of the same agent
    assert new == old + 1
    assert ledger.claim_task(store, second, ClaimKind.DISPATCH, old) is False  # the stale one is refused
    assert ledger.task(store, second).state.value == "pending"
    ledger.mark_generation_lost(store, b.agent.id, old, "its app lost the host")
    assert ledger.bind_submission(store, first, old, "thr", "turn") is False
    assert ledger.task(store, first).state.value == "uncertain"
    assert ledger.claim_task(store, second, ClaimKind.DISPATCH, new)
