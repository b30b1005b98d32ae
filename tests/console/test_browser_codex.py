"""The web console in a real browser (chromium) against a real app and real Codex agents on the scripted model
(docs/guide/console.md): log in through the one-time URL, watch a real agent, assign it a task and watch its facts
arrive live, open the request view's sequence diagram, interrupt an active turn. Screenshots go to each test's evidence
folder."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.console.conftest import ConsoleWorld, log_in, shoot, start_console_app
from tests.providers.codex.test_runtime import wait_active
from wardian.model import OPERATOR_UUID
from wardian_harness.models.scripted_model import Hold, Message

pytestmark = pytest.mark.timeout(600)

# Records every state a row of the operator's panel shows, as the live stream changes it (no reload in between).
WATCH_ROWS = """
() => {
  window.__noReload = true;
  window.__seen = [];
  const body = document.querySelector("#operator-exchange tbody");
  const note = () => {
    for (const row of body.children) {
      const facts = [...row.querySelectorAll("[data-fact]")].map((f) => f.dataset.fact);
      window.__seen.push({key: row.dataset.key, kind: row.dataset.kind, state: row.dataset.state, facts});
    }
  };
  new MutationObserver(note).observe(body, {childList: true, subtree: true, attributes: true});
  note();
}
"""


def _states(page: Any, key: str) -> list[str]:
    """The distinct states one row went through, in order."""
    out: list[str] = []
    for seen in page.evaluate("window.__seen"):
        if seen["key"] == key and (not out or out[-1] != seen["state"]):
            out.append(seen["state"])
    return out


def test_log_in_with_the_one_time_url_and_see_a_real_codex_agent(console_world: ConsoleWorld, context: Any,
                                                                   evidence: Path) -> None:
    """Decision 0018: `wardian console` gives a one-time URL; the agents page lists a real Codex agent with its status,
    UUID, provider, generation and pending tasks, and follows it live."""
    world = console_world
    agent, _, _ = world.agent("worker")
    page = context.new_page()
    log_in(page, world.web)
    row = page.locator(f'#agents tr[data-key="{agent["uuid"]}"]')
    expect(row).to_have_attribute("data-status", "idle")
    expect(row.locator("td.uuid")).to_have_text(agent["uuid"])
    expect(row).to_contain_text("codex")
    expect(row.locator("[data-pending]")).to_have_text("0")
    expect(page.locator("#live")).to_have_attribute("data-state", "on")
    assert page.locator("#agents").get_by_text(OPERATOR_UUID).count() == 0  # the operator is no agent
    shoot(page, evidence, "agents")

    # Live: the app observes the agent stop; the row follows without a reload.
    page.evaluate("window.__noReload = true")
    world.app.call("agent/stop", {"agent": "worker"}, timeout_s=60)
    expect(row).to_have_attribute("data-status", "off")
    assert page.evaluate("window.__noReload") is True


def test_a_task_assigned_from_the_console_shows_admitted_then_submitted_then_replied_live(
        console_world: ConsoleWorld, context: Any, evidence: Path) -> None:
    """RCPT-2: assign a real Codex agent a task as the operator and watch its separate facts arrive without reloading:
    admitted (pending while the agent is off), submitted to a turn once the console starts the agent, replied when the
    turn ends; then the request view's sequence diagram carries both ids, and `wardian message receive --operator`
    gets the reply."""
    world = console_world
    agent, _, script = world.agent("worker")
    # A first turn, so the agent's conversation exists on disk and a later start resumes it.
    script.add(Message("ready", phase="final_answer"))
    warm_up = world.app.call("operator/followup", {"target": "worker", "message": "Are you there?"})
    got = world.app.call("operator/receive", {"timeout_ms": 60_000}, timeout_s=90)
    assert [r["request_id"] for r in got["records"]] == [warm_up["request_id"]]
    world.app.call("operator/receive", {"ack_cursor": got["cursor"]})
    hold = Hold("working on it", text="The retry loop is fine.", phase="final_answer")
    script.add(hold)
    world.app.call("agent/stop", {"agent": "worker"}, timeout_s=60)  # explicit off: the task waits for a start

    page = context.new_page()
    log_in(page, world.web)
    page.goto(world.web.base + "/act")
    expect(page.locator("#live")).to_have_attribute("data-state", "on")
    page.evaluate(WATCH_ROWS)
    page.fill("#send [name=target]", "worker")
    page.check("#send [name=kind][value=task]")
    page.fill("#send [name=text]", "Review the retry loop.\nReply briefly.")
    page.click("#send button[type=submit]")
    receipt = page.locator("#act-result .result.ok")
    expect(receipt).to_contain_text("admitted for worker")
    request_id = receipt.get_attribute("data-record")
    assert request_id is not None
    assert request_id.startswith("ask_")
    assert page.input_value("#send [name=text]") == ""  # cleared after a success
    row = page.locator(f'#operator-exchange tr[data-key="{request_id}"]')
    expect(row).to_have_attribute("data-state", "pending")
    expect(row.locator('[data-fact="admitted"]')).to_be_visible()
    shoot(page, evidence, "act-admitted")

    # Start the agent from the console (its saved settings): the pending task is dispatched into a turn the Hold keeps.
    page.select_option("#start [name=agent]", agent["uuid"])
    page.click("#start button:not([formaction])")
    expect(page.locator("#flash .result.ok")).to_contain_text("started worker")
    hold.wait_started()
    expect(row).to_have_attribute("data-state", "submitted")
    submitted = row.locator('[data-fact="submitted"]')
    expect(submitted).to_contain_text("turn ")
    shoot(page, evidence, "act-submitted")

    hold.release()
    expect(row).to_have_attribute("data-state", "completed")
    expect(row.locator('[data-fact="replied"]')).to_contain_text("answered done by rep_")
    reply = page.locator(f'#operator-exchange tr[data-kind="reply"][data-request="{request_id}"]')
    expect(reply).to_contain_text("The retry loop is fine.")
    reply_id = reply.get_attribute("data-key")
    assert reply_id is not None
    assert reply_id.startswith("rep_")
    # Claimed is a fact of its own (the dispatch claim commits before the turn starts, the submission after Codex
    # answered): a live update that lands between the two shows it, one that lands later does not.
    assert _states(page, request_id) in (["pending", "submitted", "completed"],
                                         ["pending", "claimed", "submitted", "completed"])
    assert page.evaluate("window.__noReload") is True  # every change arrived over the live stream
    shoot(page, evidence, "act-replied")

    # The sequence diagram of the request: one lane per participant, every id.
    story = world.app.call("request/show", {"id": request_id})
    facts = story["task"]["facts"]
    page.click(f'#operator-exchange tr[data-key="{request_id}"] td.id a')
    page.wait_for_url(re.compile(f".*/requests/{request_id}$"))
    svg = page.locator("svg#sequence")
    expect(svg).to_be_visible()
    text = svg.text_content() or ""
    for value in (request_id, reply_id, facts["thread_id"], facts["turn_id"], "operator", "worker", "wardian"):
        assert value in text, value
    assert svg.locator("g.lane").count() == 3
    expect(page.locator("#state")).to_have_text("completed")
    expect(page.locator("#answer")).to_have_text("The retry loop is fine.")
    shoot(page, evidence, "request")

    page.goto(world.web.base + "/exchange")
    expect(page.locator(f'#exchange tr[data-key="{reply_id}"]')).to_be_visible()
    shoot(page, evidence, "exchange")

    # The operator's mailbox holds the reply: `wardian message receive --operator` reads it.
    got = world.app.cli("message", "receive", "--operator", "--json")
    assert got.returncode == 0, got.stderr
    page_ = json.loads(got.stdout)
    assert [(r["id"], r["kind"], r["request_id"], r["text"]) for r in page_["records"]] == [
        (reply_id, "reply", request_id, "The retry loop is fine.")]
    # The task reached Codex from the operator, never as an agent's identity.
    delivered = "\n".join(script.requests[-1].user_texts())
    assert request_id in delivered
    assert OPERATOR_UUID in delivered


def test_interrupting_an_active_turn_from_the_console_shows_the_blocked_notice(
        console_world: ConsoleWorld, context: Any, evidence: Path) -> None:
    """INT-4: the agents page shows the active turn; its Interrupt button interrupts exactly that turn, and the task's
    blocked notice from Wardian appears live."""
    world = console_world
    agent, _, script = world.agent("worker")
    hold = Hold("long work")
    script.add(hold)
    task = world.app.call("operator/followup", {"target": "worker", "message": "Take your time."})
    hold.wait_started()
    turn_id = wait_active(world, "worker")

    page = context.new_page()
    log_in(page, world.web)
    row = page.locator(f'#agents tr[data-key="{agent["uuid"]}"]')
    expect(row).to_have_attribute("data-status", "active")
    expect(row.locator(".turn")).to_have_attribute("data-turn", turn_id)
    shoot(page, evidence, "agents-active")
    page.evaluate("window.__noReload = true")
    row.locator('button[data-action="interrupt"]').click()
    expect(page.locator("#flash .result.ok")).to_contain_text(f"interrupt requested for worker, turn {turn_id}")
    assert hold.wait_finished() == "disconnected"
    expect(row).to_have_attribute("data-status", "idle")
    assert page.evaluate("window.__noReload") is True

    page.goto(world.web.base + "/act")
    notice = page.locator(f'#operator-exchange tr[data-kind="notice"][data-request="{task["request_id"]}"]')
    expect(notice).to_contain_text("blocked")
    expect(notice).to_contain_text(task["request_id"])
    expect(notice.locator(".who.wardian")).to_be_visible()
    shoot(page, evidence, "act-blocked")

    page.goto(world.web.base + f"/requests/{task['request_id']}")
    svg = page.locator("svg#sequence")
    text = svg.text_content() or ""
    words = " ".join(text.split())
    assert f"interrupt turn {turn_id}" in words
    assert "notice ntc_" in words
    shoot(page, evidence, "request-interrupted")


def test_an_uncertain_delivery_is_explained_in_plain_words(console_world: ConsoleWorld, context: Any,
                                                           evidence: Path) -> None:
    """UNC-2: a task whose turn nobody saw end (the app was killed while it ran) is uncertain; the exchange's uncertain
    filter finds it and its request view says in plain words what happened and what the operator may do: check,
    never resend blindly."""
    world = console_world
    _, _, script = world.agent("worker")
    hold = Hold("working when the app dies")
    script.add(hold)
    task = world.app.call("operator/followup", {"target": "worker", "message": "Migrate the database."})
    hold.wait_started()
    wait_active(world, "worker")
    world.app.proc.kill()  # kill -9: the turn's end can no longer be observed
    world.app.proc.wait(timeout=30)
    world.app.proc = start_console_app(world.app.home.root, world.env)
    assert world.app.call("request/show", {"id": task["request_id"]})["task"]["facts"]["state"] == "uncertain"

    page = context.new_page()
    log_in(page, world.web)
    page.goto(world.web.base + "/exchange?uncertain=1")
    row = page.locator(f'#exchange tr[data-key="{task["request_id"]}"]')
    expect(row).to_have_attribute("data-state", "uncertain")
    expect(row.locator('[data-fact="uncertain"]')).to_be_visible()
    assert page.locator("#exchange tbody tr").count() == 1
    shoot(page, evidence, "exchange-uncertain")
    row.locator("td.id a").click()
    explained = page.locator("section.uncertain")
    expect(explained).to_contain_text("cannot know whether the provider took it")
    expect(explained.locator(".may-do")).to_contain_text("Do not resend it blindly")
    expect(explained.locator(".may-do")).to_contain_text("wardian agent attach worker")
    assert "UNCERTAIN" in (page.locator("svg#sequence").text_content() or "")
    shoot(page, evidence, "request-uncertain")
