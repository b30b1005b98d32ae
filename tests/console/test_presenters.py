"""The console's presenters and its live diff, without an app or a browser: the request view's sequence diagram puts
every fact of a task's story in time order on its participant's lane, and a live stream sends only what changed."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import pytest

from wardian.console.live import SentView
from wardian.console.presenters.diagram import FIRST_STEP_Y, LANE_GAP, MARGIN_X, diagram
from wardian.console.presenters.records import explain_uncertain
from wardian.console.presenters.views import Row, View, query

pytestmark = pytest.mark.fast  # the fast tier (scripts/check test-fast)

LEAD = {"name": "lead", "uuid": "u-lead"}
WORKER = {"name": "worker", "uuid": "u-worker"}
WATCHER = {"name": "watcher", "uuid": "u-watcher"}


def _delivery(**given: Any) -> dict[str, Any]:
    return {"received_at": None, "acked_at": None, "push": None, "pushed_at": None, "push_note": None, **given}


def _task_trace() -> Any:
    """A task from lead to worker: dispatched, submitted, interrupted by a third agent, uncertain, then answered."""
    facts = {"state": "uncertain", "claimed_by": "dispatch", "claim_generation": 2, "claimed_at": 1_010,
             "submitted_at": 1_020, "thread_id": "th-1", "turn_id": "turn-1", "uncertain_at": 1_040,
             "completed_at": None, "reply_status": None, "reply_id": None, "lookup": None}
    story = {"id": "ask-1", "kind": "task", "sender": LEAD, "sender_kind": "agent", "recipient": WORKER,
             "text": "check the loop", "created_at": 1_000, "request_id": "ask-1", "status": None,
             "delivery": _delivery(),
             "task": {"requester": LEAD, "facts": facts, "uncertain_reason": "the connection dropped",
                      "provider_message_id": "pm-1", "outcome_status": None, "outcome_at": None,
                      "lookup_note": None, "rejections": 0, "rejection_note": None},
             "answer": None}
    answer = {"id": "rep-1", "kind": "reply", "sender": WORKER, "sender_kind": "agent", "recipient": LEAD,
              "text": "done", "created_at": 1_050, "request_id": "ask-1", "status": "done",
              "delivery": _delivery(push="done", pushed_at=1_060), "task": None, "answer": None}
    interrupt = {"interrupt_id": 7, "caller": WATCHER, "caller_kind": "agent", "target": WORKER,
                 "turn_id": "turn-1", "created_at": 1_030}
    return {"story": story, "answer": answer, "interrupts": [interrupt], "turn_tasks": ["ask-1", "ask-2"]}


def test_the_diagram_has_a_lane_per_participant_and_a_step_per_fact_in_time_order() -> None:
    out = diagram(_task_trace())
    assert [lane.key for lane in out.lanes] == ["u-lead", "u-watcher", "wardian", "u-worker"]
    assert [lane.x for lane in out.lanes] == [MARGIN_X + i * LANE_GAP for i in range(4)]
    x = {lane.key: lane.x for lane in out.lanes}
    steps = [(s.x1, s.x2, s.lines[0], s.style) for s in out.steps]
    assert steps == [
        (x["u-lead"], x["wardian"], "task ask-1", "call"),
        (x["wardian"], x["wardian"], "claimed for dispatch (generation 2)", "note"),
        (x["wardian"], x["u-worker"], "submitted: thread th-1", "call"),
        (x["u-worker"], x["u-worker"], "the same turn carries", "note"),
        (x["u-watcher"], x["wardian"], "interrupt turn turn-1", "call"),
        (x["wardian"], x["u-worker"], "interrupt turn turn-1", "call"),
        (x["wardian"], x["u-worker"], "UNCERTAIN: may or may not have been taken", "uncertain"),
        (x["u-worker"], x["wardian"], "reply rep-1", "answer"),
        (x["wardian"], x["u-lead"], "pushed into lead's conversation", "answer"),
    ]
    assert out.steps[2].lines == ("submitted: thread th-1", "turn turn-1", "provider message pm-1")
    assert [s.at for s in out.steps][:3] == ["+0 ms", "+10 ms", "+20 ms"]
    assert out.steps[0].y == FIRST_STEP_Y + 16  # two label lines: the arrow sits under both
    assert all(a.y < b.y for a, b in pairwise(out.steps))
    assert out.height > out.steps[-1].y


def test_an_uncertain_task_is_explained_with_what_the_operator_may_do() -> None:
    """UNC-2: the console tells the operator to check the turn, never to resend blindly."""
    [explanation] = explain_uncertain(_task_trace()["story"])
    assert "the connection dropped" in explanation.what
    assert "turn turn-1" in explanation.what
    assert "Do not resend it blindly" in explanation.may_do


def test_a_live_stream_sends_only_what_changed() -> None:
    sent = SentView()
    first = View(rows=(Row("a", 0, "<tr>a</tr>"), Row("b", 1, "<tr>b</tr>")), pager="<nav>1</nav>")
    assert sent.patch(first) == {"upsert": [{"key": "a", "seq": 0, "html": "<tr>a</tr>"},
                                            {"key": "b", "seq": 1, "html": "<tr>b</tr>"}], "pager": "<nav>1</nav>"}
    assert sent.patch(first) == {}
    second = View(rows=(Row("b", 0, "<tr>b2</tr>"),), pager="<nav>1</nav>")
    assert sent.patch(second) == {"upsert": [{"key": "b", "seq": 0, "html": "<tr>b2</tr>"}], "remove": ["a"]}
    assert SentView().patch(View(block="<p>x</p>")) == {"replace": "<p>x</p>"}


def test_a_live_streams_query_keeps_only_the_filters_set() -> None:
    assert query({"agent": "worker one", "kind": None, "uncertain": True}) == "agent=worker+one&uncertain=1"
    assert query({"uncertain": False}) == ""


@pytest.mark.parametrize(("provider", "word"), [("claude", "session"), ("opencode", "session"), ("codex", "thread"),
                                                ("someday", "conversation"), (None, "conversation")])
def test_the_request_view_names_the_conversation_with_its_providers_word(provider: str | None, word: str) -> None:
    """A Claude Code (or OpenCode) agent's conversation is a session, a Codex agent's a thread: the diagram and the
    evidence table of the request view say so."""
    from wardian.console.presenters.records import conversation_word
    from wardian.console.presenters.views import request_view
    from wardian.console.render import environment

    assert conversation_word(provider) == word
    trace = _task_trace()
    assert diagram(trace, word).steps[2].lines[0] == f"submitted: {word} th-1"
    block = request_view(environment().get_template("_request.j2"), trace, word).block or ""
    assert f'{word} <span class="mono" data-id="thread">th-1</span>' in block
    if word != "thread":
        assert "thread th-1" not in block
        assert " thread <span" not in block
