"""The console's approvals page (docs/guide/console.md, docs/guide/approvals.md) and the approval notification, on a
real app with its console and a notify command, a real Claude Code worker on the scripted model whose shell command
waits for a person, and the real Chromium: the pending approval appears live; Allow runs the command and the task's
reply is `done`; Deny with a reason keeps it from running and the model reads the reason; an ended approval's buttons
say `approval_ended`; a post without its token or from another Origin changes nothing; the notification carries
what the approval shows, never the agent's key, and a command that holds on to it holds nothing up."""

from __future__ import annotations

import json
import re
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.app.test_notify import events, recorder, until
from tests.conftest import app_on_a_fresh_home
from tests.console.conftest import ConsoleApp, log_in, shoot
from tests.providers.claude.conftest import ClaudeApp, claude_or_skip, records_for
from wardian_harness.models.scripted_model import Message, ScriptedModel, ToolCall
from wardian_harness.providers.claude_home import DUMMY_KEY, ScriptedClaude, claude_overrides

pytestmark = pytest.mark.timeout(600)

KEY = "sk-ant-api03-canary-notify-5b7e2d9c41"


def event_of(folder: Path, approval_id: str) -> dict[str, Any]:
    """The notify command's event of `approval_id` (bounded wait): other tests of the module leave events of their
    own in the folder, and the commands run side by side, so it is found by its id, not by a count."""
    return dict(until(lambda: next((e for e in events(folder) if e.get("approval_id") == approval_id), None),
                      f"the event of {approval_id}"))


@dataclass
class World:
    claude: ClaudeApp
    web: ConsoleApp
    events: Path
    lead: str
    workspace: Path

    def task(self, name: str, *steps: Any) -> str:
        """A task from the lead to the worker, whose turn plays `steps`."""
        self.claude.model.agent("worker").add(*steps)
        task = self.claude.app.call("task/followup", {"session": self.lead, "target": "worker", "message": name})
        return str(task["request_id"])

    def pending(self, request_id: str) -> dict[str, Any]:
        return until(lambda: next((a for a in self.claude.app.call("approval/list", {})["approvals"]
                                   if a["request_id"] == request_id), None), f"an approval of {request_id}")

    def reply(self) -> dict[str, Any]:
        (reply,) = records_for(self.claude, self.lead)
        return reply


def touch(path: Path) -> ToolCall:
    return ToolCall("Bash", {"command": f"touch {path}", "description": "Make a file"}, namespace=None)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    env = {"WARDIAN_CLAUDE": str(claude_or_skip())}
    folder = tmp_path_factory.mktemp("events")
    args = ("--console", "127.0.0.1:0", "--notify-command", recorder(folder))
    with ScriptedModel() as model, app_on_a_fresh_home(prefix="wca", extra_env=env, extra_args=args) as handle:
        claude = ClaudeApp(handle, model, env)
        _, lead = handle.add_agent("lead", "claude")
        worker, _ = handle.add_agent("worker", "claude")
        config = [c.replace(DUMMY_KEY, KEY) for c in claude_overrides(ScriptedClaude(model.agent("worker").base_url))]
        handle.call("agent/start", {"agent": "worker", "approvals": "person", "config": config}, timeout_s=300)
        yield World(claude, ConsoleApp(handle), folder, lead, handle.home.default_workspace(worker["uuid"]))


def answer_form(csrf: str | None, approval_id: str, decision: str) -> bytes:
    fields = {"approval_id": approval_id, "decision": decision}
    if csrf is not None:
        fields["csrf"] = csrf
    return urllib.parse.urlencode(fields).encode()


def test_a_pending_approval_appears_live_and_allow_in_the_browser_runs_the_command(
        world: World, context: Any, evidence: Path) -> None:
    """The page is open before the agent asks: the row arrives by the live stream; Allow answers as a person, the
    command runs after the click and the task's reply is `done`. The notify command, held on to meanwhile, holds
    nothing up."""
    made = world.workspace / "allowed"
    page = context.new_page()
    log_in(page, world.web)
    page.goto(world.web.base + "/approvals")
    expect(page.locator("#approvals tbody tr.empty")).to_have_count(1)
    (world.events / "hold").touch()  # every notify command from now on waits until it is removed
    try:
        request_id = world.task("make a file", touch(made), Message("made it"))
        asked = world.pending(request_id)
        row = page.locator(f'tr[data-approval="{asked["approval_id"]}"]')
        expect(row).to_contain_text(f"touch {made}")
        expect(row.locator("td").nth(2)).to_have_text(request_id)
        offered = "allow_always" in {o["kind"] for o in asked["options"]}
        expect(row.locator('button[data-action="always"]')).to_have_count(1 if offered else 0)
        shoot(page, evidence, "pending")
        event = event_of(world.events, asked["approval_id"])
        assert not made.exists()
        row.locator('button[data-action="allow"]').click()
        expect(page.locator("#flash .result.ok")).to_contain_text(f"{asked['approval_id']} allowed")
        reply = world.reply()
        assert (reply["request_id"], reply["status"], reply["text"]) == (request_id, "done", "made it")
        assert made.exists()
        expect(row).to_have_count(0)  # no longer pending: gone from the live view
        shoot(page, evidence, "allowed")
        assert not list(world.events.glob("*.done"))  # its notify command still held on
    finally:
        (world.events / "hold").unlink()
    assert (event["event"], event["agent"], event["task"], event["kind"], event["tool"]) == (
        "approval_waiting", "worker", request_id, "command", "Bash")
    assert (event["summary"], event["deadline_at"]) == (asked["summary"], asked["deadline_at"])
    ended = world.claude.app.call("approval/show", {"approval_id": asked["approval_id"]})
    assert (ended["status"], ended["decided_by"]) == ("allowed", "person")


def test_deny_with_a_reason_in_the_browser_keeps_the_command_from_running_and_the_model_reads_it(
        world: World, context: Any) -> None:
    made = world.workspace / "denied"
    page = context.new_page()
    log_in(page, world.web)
    page.goto(world.web.base + "/approvals")
    request_id = world.task("make another", touch(made), Message("could not"))
    asked = world.pending(request_id)
    row = page.locator(f'tr[data-approval="{asked["approval_id"]}"]')
    row.locator('input[name="reason"]').fill("not on a Friday")
    row.locator('button[data-action="deny"]').click()
    expect(page.locator("#flash .result.ok")).to_contain_text(f"{asked['approval_id']} denied")
    reply = world.reply()
    assert (reply["request_id"], reply["status"], reply["text"]) == (request_id, "done", "could not")
    assert not made.exists()
    assert "not on a Friday" in world.claude.model.agent("worker").requests[-1].function_call_outputs()[-1].text
    ended = world.claude.app.call("approval/show", {"approval_id": asked["approval_id"]})
    assert (ended["status"], ended["reason"]) == ("denied", "not on a Friday")


def test_an_ended_approvals_buttons_say_approval_ended_and_change_nothing(world: World, context: Any) -> None:
    """A page whose live view is cut still shows the approval after someone else answered it: its Allow gets the
    clear `approval_ended` error, and the approval stays as that answer left it."""
    made = world.workspace / "ended"
    page = context.new_page()
    log_in(page, world.web)
    page.route(re.compile(r".*/events/approvals$"), lambda route: route.abort())
    request_id = world.task("make a third", touch(made), Message("refused"))
    asked = world.pending(request_id)
    page.goto(world.web.base + "/approvals")
    row = page.locator(f'tr[data-approval="{asked["approval_id"]}"]')
    expect(row).to_have_count(1)
    assert world.claude.app.cli("approval", "deny", asked["approval_id"]).returncode == 0
    assert world.reply()["request_id"] == request_id
    row.locator('button[data-action="allow"]').click()
    error = page.locator('#flash .result.error[data-code="approval_ended"]')
    expect(error).to_contain_text(f"approval {asked['approval_id']} already ended: denied")
    assert world.claude.app.call("approval/show", {"approval_id": asked["approval_id"]})["status"] == "denied"
    assert not made.exists()


@pytest.mark.parametrize(("origin", "with_csrf"), [("http://evil.example", True), (None, True), ("SELF", False),
                                                   ("SELF", "forged")])
def test_an_answer_without_its_token_or_from_another_origin_is_refused_and_changes_nothing(
        world: World, origin: str | None, with_csrf: bool | str) -> None:
    made = world.workspace / "refused"
    request_id = world.task("make a fourth", touch(made), Message("stopped"))
    asked = world.pending(request_id)
    web = world.web
    cookie = web.login_cookie()
    csrf = web.csrf(cookie) if with_csrf is True else (with_csrf or None)
    headers = {"Content-Type": "application/x-www-form-urlencoded", "Cookie": cookie}
    if origin is not None:
        headers["Origin"] = web.base if origin == "SELF" else origin
    status, _, body = web.http("POST", "/act/approval", headers, answer_form(csrf, asked["approval_id"], "allow"))
    assert status == 403
    assert b"nothing was changed" in body
    assert world.claude.app.call("approval/show", {"approval_id": asked["approval_id"]})["status"] == "pending"
    assert not made.exists()
    # The same post with the token and the console's Origin is answered (a plain form post: a redirect).
    headers["Origin"] = web.base
    status, got, _ = web.http("POST", "/act/approval", headers, answer_form(web.csrf(cookie), asked["approval_id"],
                                                                            "deny"))
    assert (status, got["location"]) == (303, "/approvals")
    assert world.reply()["request_id"] == request_id
    assert world.claude.app.call("approval/show", {"approval_id": asked["approval_id"]})["status"] == "denied"


def test_the_notification_of_an_approval_never_carries_the_agents_key(world: World) -> None:
    """docs/guide/approvals.md#secrets: the model writes the agent's key into its command; the approval, its page and
    its notification show `[redacted]`."""
    request_id = world.task("print your key", touch(world.workspace / KEY), Message("refused"))
    asked = world.pending(request_id)
    event = event_of(world.events, asked["approval_id"])
    assert "[redacted]" in event["summary"]
    cookie = world.web.login_cookie()
    _, _, page = world.web.http("GET", "/approvals", {"Cookie": cookie})
    assert world.claude.app.cli("approval", "deny", asked["approval_id"]).returncode == 0
    assert world.reply()["request_id"] == request_id
    assert KEY not in json.dumps(event)
    assert KEY.encode() not in page
    assert all(KEY.encode() not in p.read_bytes() for p in world.events.glob("*.json"))
