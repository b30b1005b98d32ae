"""The exchange timeline's store operation (decision 0018): every record newest first, filtered by participant (either
side), kind and uncertainty, paged by `seq`; each page reads only the rows it returns, so a page of a store of a million
records costs what it costs in a small one."""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import AppHandle
from wardian import errors
from wardian.model import OPERATOR_UUID, ClaimKind, InteractionKind, ReplyStatus
from wardian.store import Store, history, ledger, mailbox, open_sqlite, roster
from wardian.store import testing as store_testing

pytestmark = pytest.mark.fast  # the fast tier (scripts/check test-fast)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = open_sqlite(tmp_path / "w.db")
    try:
        yield s
    finally:
        s.close()


def _fill(store: Store, seed: int) -> dict[str, tuple[set[str], str, bool]]:
    """A random exchange between three agents and the operator: information (some pushed, some pushes uncertain),
    tasks (some answered, some uncertain, some answered by a Wardian notice). Returns each record's
    (participants' UUIDs, kind, uncertain)."""
    rng = random.Random(seed)
    agents = [roster.add_agent(store, n, "codex", None) for n in ("ann", "bob", "cat")]
    callers = {a.uuid: roster.authenticate(store, roster.create_session(store, a.id)) for a in agents}
    callers[OPERATOR_UUID] = roster.operator(store)
    facts: dict[str, tuple[set[str], str, bool]] = {}
    for _ in range(160):
        sender = rng.choice(list(callers))
        recipient = rng.choice([a for a in agents if a.uuid != sender])
        caller = callers[sender]
        if rng.random() < 0.5:
            push = rng.random() < 0.3
            r = mailbox.admit(store, caller, recipient, InteractionKind.INFORMATION, "info", push=push)
            uncertain = push and rng.random() < 0.5
            if uncertain:
                mailbox.push_uncertain(store, r.interaction_id, "lost ack")
            elif push:
                mailbox.push_done(store, r.interaction_id)
            facts[r.interaction_id] = ({sender, recipient.uuid}, "information", uncertain)
            continue
        r = mailbox.admit(store, caller, recipient, InteractionKind.TASK, "task")
        rid = r.request_id
        assert rid is not None
        roll = rng.random()
        uncertain = False
        if roll < 0.3:
            reply = ledger.reply(store, callers[recipient.uuid], rid, ReplyStatus.DONE, "done")
            facts[reply.reply_id] = ({recipient.uuid, sender}, "reply", False)
        elif roll < 0.5:
            assert ledger.claim_task(store, rid, ClaimKind.DISPATCH, 0)
            ledger.mark_uncertain(store, rid, "lost")
            uncertain = True
        elif roll < 0.6:
            published = ledger.fail_task(store, rid, 0, "could not start")
            assert published is not None
            assert published.record_id is not None
            facts[published.record_id] = ({sender}, "notice", False)
        facts[rid] = ({sender, recipient.uuid}, "task", uncertain)
    return facts


def _walk(store: Store, participant: int | None, kind: InteractionKind | None, uncertain: bool,
          limit: int, window: int) -> list[str]:
    ids: list[str] = []
    before = None
    for _ in range(10_000):
        page = history.exchange(store, participant=participant, kind=kind, uncertain=uncertain, before=before,
                                limit=limit, window=window)
        assert len(page.records) <= limit
        ids += [r.interaction.id for r in page.records]
        if page.older is None:
            assert page.searched_to is None
            return ids
        if page.searched_to is None:
            assert len(page.records) == limit  # a full page goes on below its last record
            assert page.older == page.records[-1].seq
        else:
            assert participant is not None  # only a participant filter searches a window
            assert page.older == page.searched_to
            assert all(r.seq >= page.searched_to for r in page.records)
        before = page.older
    raise AssertionError("paging did not end")


@pytest.mark.parametrize("seed", [1, 2])
def test_every_filter_and_page_size_returns_exactly_the_matching_records_newest_first(store: Store,
                                                                                      seed: int) -> None:
    facts = _fill(store, seed)
    order = [r.interaction.id for r in history.log_records(store, limit=100_000)][::-1]  # newest first
    assert set(order) == set(facts)
    people = {a.uuid: a.id for a in roster.list_agents(store)} | {OPERATOR_UUID: roster.operator(store).agent.id}
    for who, kind, uncertain, limit, window in itertools.product(
            [None, *people], [None, *InteractionKind], [False, True], [1, 7, 100], [5, 100_000]):
        expected = [i for i in order if (who is None or who in facts[i][0])
                    and (kind is None or facts[i][1] == kind.value) and (not uncertain or facts[i][2])]
        got = _walk(store, people[who] if who else None, kind, uncertain, limit, window)
        assert got == expected, (who, kind, uncertain, limit, window)


def test_a_record_shows_its_separate_facts(store: Store) -> None:
    ann, bob = roster.add_agent(store, "ann", "codex", None), roster.add_agent(store, "bob", "codex", None)
    a = roster.authenticate(store, roster.create_session(store, ann.id))
    b = roster.authenticate(store, roster.create_session(store, bob.id))
    task = mailbox.admit(store, a, bob, InteractionKind.TASK, "x" * 1000)
    assert task.request_id is not None
    mailbox.receive(store, b, cursor=None, ack_cursor=None, limit=10)
    reply = ledger.reply(store, b, task.request_id, ReplyStatus.DONE, "ok")
    [r_reply, r_task] = history.exchange(store, participant=None, kind=None, uncertain=False, before=None,
                                         limit=10).records
    assert r_task.interaction.id == task.request_id
    assert (len(r_task.interaction.text), r_task.text_chars) == (400, 1000)  # a preview; the length of the whole
    assert r_task.task is not None
    assert (r_task.task.claimed_by, r_task.task.reply_id) == (ClaimKind.RECEIVE, reply.reply_id)
    assert r_task.delivery.received_at is not None
    assert (r_reply.interaction.request_id, r_reply.delivery.received_at) == (task.request_id, None)
    assert r_reply.seq > r_task.seq


def test_a_page_reads_only_what_it_returns_whatever_the_size_of_the_store(tmp_path: Path) -> None:
    """The first page of every filter costs the same SQLite work at 4,000 and at 200,000 records: a kind or uncertainty
    filter reads the rows it returns, a participant filter at most its window of records (here 2,000) in the narrow
    kind index. The 1,000,000-record figure is `scripts/bench.py --only console`."""
    costs: list[dict[tuple[str, str, bool], int]] = []
    for size in (4_000, 200_000):
        store = open_sqlite(tmp_path / f"{size}.db")
        try:
            ann, bob = roster.add_agent(store, "ann", "codex", None), roster.add_agent(store, "bob", "codex", None)
            others = [roster.add_agent(store, f"o{i}", "codex", None) for i in range(8)]
            store_testing.seed_information(store, others[0].id, [o.id for o in others[1:]], size, "seed")
            a = roster.authenticate(store, roster.create_session(store, ann.id))
            for i in range(30):  # a few records of the agents the filters look for, on top of the many
                t = mailbox.admit(store, a, bob, InteractionKind.TASK, f"task {i}")
                assert t.request_id is not None
                if i % 3 == 0:
                    assert ledger.claim_task(store, t.request_id, ClaimKind.DISPATCH, 0)
                    ledger.mark_uncertain(store, t.request_id, "lost")
                mailbox.admit(store, a, bob, InteractionKind.INFORMATION, f"info {i}")
                store_testing.seed_information(store, others[0].id, [o.id for o in others[1:]], 20, "between")
            cost = {}
            for who, kind, uncertain in itertools.product([None, ann.id, bob.id], [None, *InteractionKind],
                                                          [False, True]):
                page, steps = store_testing.vm_steps(store, lambda s=store, w=who, k=kind, u=uncertain: (
                    history.exchange(s, participant=w, kind=k, uncertain=u, before=None, limit=50, window=2_000)))
                cost[(str(who), str(kind), uncertain)] = steps
                if who is not None and kind in (InteractionKind.TASK, None):
                    assert page.records  # the filter found the agents' records among the others
            costs.append(cost)
        finally:
            store.close()
    small, large = costs
    for key, steps in large.items():
        assert steps <= 2 * small[key] + 50, (key, small[key], steps)


def test_exchange_page_params_are_checked(app: AppHandle) -> None:
    app.add_agent("ann")
    for params, code in (({"agent": "nobody"}, "unknown_agent"), ({"kind": "memo"}, "invalid_arguments"),
                         ({"before": 0}, "invalid_arguments"), ({"before": "10"}, "invalid_arguments"),
                         ({"limit": 101}, "invalid_limit"), ({"uncertain": "yes"}, "invalid_arguments"),
                         ({"agent": ""}, "invalid_arguments")):
        with pytest.raises(errors.WardianError) as caught:
            app.call("exchange/page", params)
        assert caught.value.code == code, params
    assert app.call("exchange/page", {"agent": "operator"}) == {"records": [], "older": None, "searched_to": None}
