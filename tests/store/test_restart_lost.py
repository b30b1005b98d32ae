"""The restart-lost query: the tasks a killed app left uncertain, read back (with their agent and binding) at the next
start so each agent's provider can settle them; and a restated reason keeps a task uncertain."""

from __future__ import annotations

from wardian.model import Caller, ClaimKind, InteractionKind, LostTask, ReplyStatus, TaskState
from wardian.store import Store, history, ledger, lost, mailbox, roster

LOST = "the app stopped"


def caller_for(store: Store, name: str) -> Caller:
    agent = roster.add_agent(store, name, "claude", None)
    return roster.authenticate(store, roster.create_session(store, agent.id))


def _task(store: Store, sender: Caller, to: Caller, text: str) -> str:
    request_id = mailbox.admit(store, sender, to.agent, InteractionKind.TASK, text).request_id
    assert request_id is not None
    return request_id


def test_restart_lost_tasks_are_those_marked_lost_with_their_binding(store: Store) -> None:
    a, b, c = caller_for(store, "a"), caller_for(store, "b"), caller_for(store, "c")
    gen_b, gen_c = roster.begin_generation(store, b.agent.id), roster.begin_generation(store, c.agent.id)
    bound = _task(store, a, b, "bound")
    claimed = _task(store, a, c, "claimed only")
    captured = _task(store, a, b, "outcome captured before the kill")
    pending = _task(store, a, b, "never claimed")
    other = _task(store, a, c, "uncertain for another reason")
    assert ledger.claim_task(store, bound, ClaimKind.DISPATCH, gen_b, provider_message_id="uuid-1", thread_id="ses-b")
    assert ledger.bind_submission(store, bound, gen_b, "ses-b", "uuid-1")
    assert ledger.claim_task(store, claimed, ClaimKind.DISPATCH, gen_c, provider_message_id="uuid-2", thread_id="ses-c")
    assert ledger.claim_task(store, captured, ClaimKind.DISPATCH, gen_b, provider_message_id="uuid-3")
    assert ledger.bind_submission(store, captured, gen_b, "ses-b", "uuid-3")
    assert ledger.capture_outcome(store, captured, ReplyStatus.DONE, "answer")
    assert ledger.claim_task(store, other, ClaimKind.DISPATCH, gen_c)
    ledger.mark_uncertain(store, other, "its owner ended")
    assert lost.restart_lost_tasks(store, LOST) == []

    assert sorted(ledger.mark_lost_bindings_uncertain(store, LOST)) == sorted([bound, claimed])
    assert lost.restart_lost_tasks(store, LOST) == [LostTask(bound, b.agent.id, "ses-b", "uuid-1"),
                                                    LostTask(claimed, c.agent.id, "ses-c", "uuid-2")]
    assert ledger.task(store, pending).state is TaskState.PENDING

    # A recovered outcome is captured and published: the task leaves the query, answered once.
    assert ledger.capture_outcome(store, bound, ReplyStatus.DONE, "recovered")
    published = ledger.publish_outcome(store, bound)
    assert published is not None
    assert published.record_id is not None
    assert ledger.task(store, bound).state is TaskState.COMPLETED
    assert ledger.publish_outcome(store, bound) is not None  # idempotent: no second reply
    assert ledger.task(store, bound).reply_id == published.record_id
    assert lost.restart_lost_tasks(store, LOST) == [LostTask(claimed, c.agent.id, "ses-c", "uuid-2")]


def test_a_restated_lost_task_stays_uncertain_and_leaves_the_query(store: Store) -> None:
    a, b = caller_for(store, "a"), caller_for(store, "b")
    gen = roster.begin_generation(store, b.agent.id)
    found, absent = _task(store, a, b, "taken"), _task(store, a, b, "never arrived")
    for rid, uuid in ((found, "uuid-f"), (absent, "uuid-a")):
        assert ledger.claim_task(store, rid, ClaimKind.DISPATCH, gen, provider_message_id=uuid, thread_id="ses")
    ledger.mark_lost_bindings_uncertain(store, LOST)
    assert lost.restate_uncertain(store, found, "taken, never answered")
    assert lost.restate_uncertain(store, absent, "not in the transcript", looked_up=True)
    for rid in (found, absent):
        assert ledger.task(store, rid).state is TaskState.UNCERTAIN
    assert (ledger.task(store, found).lookup, ledger.task(store, absent).lookup) == (None, "not_found")
    assert lost.restart_lost_tasks(store, LOST) == []
    story = history.record_story(store, absent)
    assert story.task is not None
    assert story.task.uncertain_reason == "not in the transcript"
    # Only an uncertain task without an answer is restated.
    assert ledger.reply(store, b, found, ReplyStatus.DONE, "late explicit answer").request_id == found
    assert lost.restate_uncertain(store, found, "again") is False
