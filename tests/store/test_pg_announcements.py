"""What a shared store announces at COMMIT (`wardian.store.postgres.schema`, migration 4): one notification per
statement and recipient, naming that recipient's new records in commit order; a batch's sends are one statement."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg

from tests.store.conftest import Backend
from wardian.model import InteractionKind, Receipt
from wardian.store import Store, mailbox, roster
from wardian.store.events import RecordAnnounced
from wardian.store.postgres.announcements import announced
from wardian_harness.hosts.postgres import PrivateCluster


def test_a_batch_of_sends_is_announced_once_per_recipient_in_order(pg_cluster: PrivateCluster, tmp_path: Path) -> None:
    backend = Backend("postgresql", tmp_path, pg_cluster)
    store = backend.open()
    try:
        me = roster.add_agent(store, "me", "codex", None)
        caller = roster.authenticate(store, roster.create_session(store, me.id))
        a, b = roster.add_agent(store, "a", "codex", None), roster.add_agent(store, "b", "codex", None)

        def send(s: Store, target: str, text: str) -> Receipt:
            return mailbox.admit(s, caller, roster.resolve_target(s, caller, target), InteractionKind.INFORMATION, text)

        warm = [(roster.resolve_target, (caller, "a")), (roster.resolve_target, (caller, "b"))]
        assert [r.error for r in store.run_batch(warm)] == [None, None]  # the targets are cached from here on
        with psycopg.connect(backend.url, autocommit=True) as listener:
            listener.execute("LISTEN wardian")
            ops = [(send, ("a", "1")), (send, ("b", "2")), (send, ("a", "3")), (send, ("a", "4"))]
            results = store.run_batch(ops, bare=[True] * 4)
            assert [r.error for r in results] == [None] * 4
            ids = [r.value.interaction_id for r in results]
            notes = [json.loads(n.payload) for n in listener.notifies(timeout=5, stop_after=2)]
            listener.execute("SELECT 1")  # anything more that was sent has arrived by now
            notes += [json.loads(n.payload) for n in listener.notifies(timeout=0.2)]
    finally:
        backend.close_all()
    assert all(note["e"] == "records" for note in notes)
    assert sorted((note["to"], note["ids"]) for note in notes) == sorted(
        [(a.uuid, [ids[0], ids[2], ids[3]]), (b.uuid, [ids[1]])])


def test_a_records_announcement_reads_as_one_event_per_record() -> None:
    payload = json.dumps({"e": "records", "to": "u", "host": "h", "ids": ["msg_1", "ask_2"], "k": ["information",
                                                                                               "task"]})
    assert announced(payload) == [RecordAnnounced("u", "h", "msg_1", "information"),
                                  RecordAnnounced("u", "h", "ask_2", "task")]
    assert announced(json.dumps({"e": "records", "to": "u", "ids": ["msg_1"], "k": []})) == []  # unreadable: logged
