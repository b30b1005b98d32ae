"""The restart-lost query: the tasks a killed app left uncertain, read back (with their agent and binding) at the next
start so each agent's provider can settle them; and a restated reason keeps a task uncertain."""

from __future__ import annotations

from wardian.model import Caller, ClaimKind, InteractionKind, LostTask, ReplyStatus, TaskState
from wardian.store import Store

LOST = "the app stopped"


def caller_for(store: Store, name: str) -> Caller:
    agent = store.add_agent(name, "claude", None)
    return store.authenticate(store.create_session(agent.id))


def _task(store: Store, sender: Caller, to: Caller, text: str) -> str:
    request_id = store.admit(sender, to.agent, InteractionKind.TASK, text).request_id
    assert request_id is not None
    return request_id


def test_restart_lost_tasks_are_those_marked_lost_with_their_binding(store: Store) -> None:
    a, b, c = caller_for(store, "a"), caller_for(store, "b"), caller_for(store, "c")
    gen_b, gen_c = store.begin_generation(b.agent.id), store.begin_generation(c.agent.id)
    bound = _task(store, a, b, "bound")
    claimed = _task(store, a, c, "claimed only")
    captured = _task(store, a, b, "outcome captured before the kill")
    pending = _task(store, a, b, "never claimed")
    other = _task(store, a, c, "uncertain for another reason")
    assert store.claim_task(bound, ClaimKind.DISPATCH, gen_b, provider_message_id="uuid-1", thread_id="ses-b")
    assert store.bind_submission(bound, gen_b, "ses-b", "uuid-1")
    assert store.claim_task(claimed, ClaimKind.DISPATCH, gen_c, provider_message_id="uuid-2", thread_id="ses-c")
    assert store.claim_task(captured, ClaimKind.DISPATCH, gen_b, provider_message_id="uuid-3")
    assert store.bind_submission(captured, gen_b, "ses-b", "uuid-3")
    assert store.capture_outcome(captured, ReplyStatus.DONE, "answer")
    assert store.claim_task(other, ClaimKind.DISPATCH, gen_c)
    store.mark_uncertain(other, "its owner ended")
    assert store.restart_lost_tasks(LOST) == []

    assert sorted(store.mark_lost_bindings_uncertain(LOST)) == sorted([bound, claimed])
    assert store.restart_lost_tasks(LOST) == [LostTask(bound, b.agent.id, "ses-b", "uuid-1"),
                                              LostTask(claimed, c.agent.id, "ses-c", "uuid-2")]
    assert store.task(pending).state is TaskState.PENDING

    # A recovered outcome is captured and published: the task leaves the query, answered once.
    assert store.capture_outcome(bound, ReplyStatus.DONE, "recovered")
    published = store.publish_outcome(bound)
    assert published is not None
    assert published.record_id is not None
    assert store.task(bound).state is TaskState.COMPLETED
    assert store.publish_outcome(bound) is not None  # idempotent: no second reply
    assert store.task(bound).reply_id == published.record_id
    assert store.restart_lost_tasks(LOST) == [LostTask(claimed, c.agent.id, "ses-c", "uuid-2")]


def test_a_restated_lost_task_stays_uncertain_and_leaves_the_query(store: Store) -> None:
    a, b = caller_for(store, "a"), caller_for(store, "b")
    gen = store.begin_generation(b.agent.id)
    found, absent = _task(store, a, b, "taken"), _task(store, a, b, "never arrived")
    for rid, uuid in ((found, "uuid-f"), (absent, "uuid-a")):
        assert store.claim_task(rid, ClaimKind.DISPATCH, gen, provider_message_id=uuid, thread_id="ses")
    store.mark_lost_bindings_uncertain(LOST)
    assert store.restate_uncertain(found, "taken, never answered")
    assert store.restate_uncertain(absent, "not in the transcript", looked_up=True)
    for rid in (found, absent):
        assert store.task(rid).state is TaskState.UNCERTAIN
    assert (store.task(found).lookup, store.task(absent).lookup) == (None, "not_found")
    assert store.restart_lost_tasks(LOST) == []
    story = store.record_story(absent)
    assert story.task is not None
    assert story.task.uncertain_reason == "not in the transcript"
    # Only an uncertain task without an answer is restated.
    assert store.reply(b, found, ReplyStatus.DONE, "late explicit answer").request_id == found
    assert store.restate_uncertain(found, "again") is False
