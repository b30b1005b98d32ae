"""The definite-rejection table of `wardian.providers.codex.rejections`: each entry against the real Codex, which
produces every one of them on demand, and what the app does with each, through the fake app-server speaking the same
lines (a thread the app believes in but Codex does not have, mid-delivery, is not something the real Codex does on
demand)."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import AppHandle, stop_app
from tests.providers.codex.conftest import codex_or_skip
from tests.providers.codex.test_runtime_faults import run, submissions, wait_for
from wardian import errors
from wardian.providers.codex.rejections import RULES, Verdict, classify, matching_rule

CONFIG = """model = "mock-model"
model_provider = "mock"
approval_policy = "never"
sandbox_mode = "read-only"
[model_providers.mock]
name = "Mock"
base_url = "http://127.0.0.1:9/v1"
wire_api = "responses"
requires_openai_auth = false
request_max_retries = 0
stream_max_retries = 0
[features]
plugins = false
apps = false
"""


class AppServer:
    """The real `codex app-server` on stdio, one request at a time (notifications skipped)."""

    def __init__(self, codex: Path, home: Path, *, experimental: bool = True) -> None:
        self.home = home
        self.proc = subprocess.Popen([str(codex), "app-server"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, cwd=home, text=True, encoding="utf-8",
                                     env={**os.environ, "CODEX_HOME": str(home)})
        self.ids = 0
        self.request("initialize", {"clientInfo": {"name": "wardian-test", "title": "t", "version": "0"},
                                    "capabilities": {"experimentalApi": True} if experimental else {}})

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self.ids += 1
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": self.ids, "method": method, "params": params}) + "\n")
        self.proc.stdin.flush()
        while True:
            line = self.proc.stdout.readline()
            assert line, f"codex app-server exited while answering {method}"
            msg = json.loads(line)
            if msg.get("id") == self.ids and "method" not in msg:
                return dict(msg)

    def error(self, method: str, params: dict[str, Any]) -> errors.AppServerError:
        answer = self.request(method, params)
        assert "error" in answer, (method, answer)
        return errors.AppServerError(answer["error"]["message"], rpc_code=answer["error"]["code"])

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        finally:
            assert self.proc.stdout is not None
            self.proc.stdout.close()


def _server(tmp_path_factory: pytest.TempPathFactory, name: str, **kw: Any) -> AppServer:
    home = tmp_path_factory.mktemp(name)
    (home / "config.toml").write_text(CONFIG, encoding="utf-8")
    return AppServer(codex_or_skip(), home, **kw)


@pytest.fixture(scope="module")
def codex_errors(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[str, errors.AppServerError]]]:
    """What the pinned Codex answers for each case of the table, by case name: (method, error)."""
    server = _server(tmp_path_factory, "codex-home")
    gated = _server(tmp_path_factory, "codex-gated", experimental=False)
    try:
        unknown = str(uuid.uuid4())
        text = [{"type": "text", "text": "hi"}]
        cases: dict[str, tuple[str, dict[str, Any]]] = {
            "resume_unknown": ("thread/resume", {"threadId": unknown}),
            "start_unknown": ("turn/start", {"threadId": unknown, "input": text}),
            "steer_unknown": ("turn/steer", {"threadId": unknown, "expectedTurnId": "t", "input": text}),
            "inject_unknown": ("thread/inject_items", {"threadId": unknown, "items": []}),
            "interrupt_unknown": ("turn/interrupt", {"threadId": unknown, "turnId": "t"}),
            "start_malformed_id": ("turn/start", {"threadId": "not-a-thread-id", "input": text}),
        }
        got = {name: (method, server.error(method, params)) for name, (method, params) in cases.items()}
        idle = server.request("thread/start", {"cwd": str(server.home)})["result"]["thread"]["id"]
        too_long = "x" * (2**20 + 1)  # over Codex's 1,048,576-character input limit
        for name, method, params in (
                ("start_invalid_input", "turn/start", {"threadId": idle, "input": [{"type": "bogus"}]}),
                ("start_too_long", "turn/start", {"threadId": idle, "input": [{"type": "text", "text": too_long}]}),
                ("inject_empty", "thread/inject_items", {"threadId": idle, "items": []}),
                ("steer_missing_fence", "turn/steer", {"threadId": idle, "input": text}),
                ("steer_idle", "turn/steer", {"threadId": idle, "expectedTurnId": "t", "input": text})):
            got[name] = (method, server.error(method, params))
        gated_thread = gated.request("thread/start", {"cwd": str(gated.home)})["result"]["thread"]["id"]
        got["steer_experimental_gate"] = ("turn/steer", gated.error("turn/steer", {
            "threadId": gated_thread, "expectedTurnId": "t", "input": text,
            "additionalContext": {"k": {"kind": "application", "value": "v"}}}))
        # A turn to the dead model URL stays active (Codex retries the network for minutes): a turn to miss.
        busy = server.request("thread/start", {"cwd": str(server.home)})["result"]["thread"]["id"]
        server.request("turn/start", {"threadId": busy, "input": text})
        got["steer_wrong_turn"] = ("turn/steer", server.error(
            "turn/steer", {"threadId": busy, "expectedTurnId": "wrong-turn-id", "input": text}))
        got["interrupt_wrong_turn"] = ("turn/interrupt", server.error(
            "turn/interrupt", {"threadId": busy, "turnId": "wrong-turn-id"}))
        review = server.request("thread/start", {"cwd": str(server.home)})["result"]["thread"]["id"]
        turn = server.request("review/start", {"threadId": review, "target": {"type": "custom", "instructions": "x"}})
        got["steer_review"] = ("turn/steer", server.error("turn/steer", {
            "threadId": review, "expectedTurnId": turn["result"]["turn"]["id"], "input": text}))
        got["start_during_review"] = ("turn/start", server.error("turn/start", {"threadId": review, "input": text}))
        yield got
    finally:
        server.close()
        gated.close()


EXPECTED = {
    "resume_unknown": Verdict.THREAD_GONE,
    "start_unknown": Verdict.THREAD_GONE,
    "steer_unknown": Verdict.THREAD_GONE,
    "inject_unknown": Verdict.THREAD_GONE,
    "interrupt_unknown": Verdict.THREAD_GONE,
    "start_malformed_id": Verdict.REFUSED,
    "start_invalid_input": Verdict.REFUSED,
    "start_too_long": Verdict.REFUSED,
    "inject_empty": Verdict.REFUSED,
    "steer_missing_fence": Verdict.REFUSED,
    "steer_experimental_gate": Verdict.REFUSED,
    "steer_idle": Verdict.STALE_TURN,
    "steer_wrong_turn": Verdict.STALE_TURN,
    "interrupt_wrong_turn": Verdict.STALE_TURN,
    "steer_review": Verdict.STALE_TURN,
    "start_during_review": Verdict.STALE_TURN,
}


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_each_definite_rejection_of_the_real_codex_is_classified(
        codex_errors: dict[str, tuple[str, errors.AppServerError]], case: str) -> None:
    method, error = codex_errors[case]
    assert classify(method, error) is EXPECTED[case], (method, error.details.get("rpc_code"), error.message)


def test_every_rule_of_the_table_is_met_by_a_real_answer(
        codex_errors: dict[str, tuple[str, errors.AppServerError]]) -> None:
    """No `real` entry is a guess: each one matches at least one answer the pinned Codex gave above (the `fake` ones
    are played by the fake app-server below)."""
    for rule in RULES:
        met = [name for name, (method, error) in codex_errors.items() if matching_rule(method, error) is rule]
        assert rule.seen in ("real", "fake")
        if rule.seen == "real":
            assert met, f"no real answer meets the rule for {rule.example!r}"


def test_anything_else_is_an_unknown_outcome() -> None:
    """An error the table does not list (an internal error, a message that only contains a known phrase, a known
    phrase answering a request it does not prove anything for) leaves the outcome unknown: uncertain, never resent."""
    for method, message in (("turn/start", "fake: internal failure, outcome unknown"),
                            ("turn/start", "upstream said: thread not found: x"),
                            ("turn/start", "no active turn to steer"),
                            ("thread/resume", "thread not found: x")):
        assert classify(method, errors.AppServerError(message, rpc_code=-32603)) is None, (method, message)


@dataclass
class Answered:
    """One task given to a worker on the fake app-server under a scenario, once it is completed."""

    app: AppHandle
    lead: str
    worker_uuid: str
    first_thread: str
    request_id: str

    def story(self) -> dict[str, Any]:
        return dict(self.app.call("request/show", {"id": self.request_id})["task"])


@contextmanager
def answered(fake_world: tuple[Path, Path, Path], scenario: str) -> Iterator[Answered]:
    """Start `worker` on the fake app-server playing `scenario`, give it one task and wait until it is completed."""
    root, exe, log = fake_world
    app = run(root, exe, log, scenario)
    try:
        _, lead = app.add_agent("lead")
        worker, _ = app.add_agent("worker")
        first_thread = app.call("agent/start", {"agent": "worker"}, timeout_s=60)["thread_id"]
        rid = app.call("task/followup", {"session": lead, "target": "worker", "message": "go"})["request_id"]
        wait_for(lambda: app.call("request/show", {"id": rid})["task"]["facts"]["state"] == "completed", app, lead)
        yield Answered(app, lead, worker["uuid"], first_thread, rid)
    finally:
        stop_app(app.proc)


def test_a_thread_codex_does_not_have_is_replaced_and_the_task_delivered_there(
        fake_world: tuple[Path, Path, Path]) -> None:
    """`turn/start` answered "thread not found": nothing was accepted, so the claim is released, a fresh thread is
    started, and the task is delivered on it: never `uncertain`. Its story and the agent's record say what happened."""
    with answered(fake_world, "thread_gone") as done:
        story = done.story()
        managed = done.app.call("agent/list")["managed"][done.worker_uuid]
        assert managed["previous_thread_id"] == done.first_thread
        assert managed["thread_id"] not in (None, done.first_thread)
        assert f"thread not found: {done.first_thread}" in (managed["thread_replaced_reason"] or "")
        assert story["facts"]["thread_id"] == managed["thread_id"]
        assert story["facts"]["uncertain_at"] is None
        assert story["rejections"] == 1
        assert "thread not found" in (story["rejection_note"] or "")
        log = fake_world[2]
        assert [s["params"]["threadId"] for s in submissions(log)] == [done.first_thread, managed["thread_id"]]
        assert done.app.call("mailbox/receive", {"session": done.lead})["records"][0]["status"] == "done"
        shown = done.app.cli("message", "show", done.request_id)
        assert b"rejected   1 time(s)" in shown.stdout
        assert b"UNCERTAIN" not in shown.stdout


def test_a_request_codex_refuses_as_invalid_is_answered_failed_never_uncertain(
        fake_world: tuple[Path, Path, Path]) -> None:
    """"Invalid request: …": nothing was accepted, and sending it again would be refused again: the task gets one
    correlated `failed` notice from Wardian at once, is not resent, and is not uncertain."""
    with answered(fake_world, "refused") as done:
        notice = done.app.call("mailbox/receive", {"session": done.lead})["records"]
        assert [(r["kind"], r["status"], r["request_id"]) for r in notice] == [("notice", "failed", done.request_id)]
        assert "Invalid request" in notice[0]["text"]
        story = done.story()
        assert story["facts"]["uncertain_at"] is None
        assert story["rejections"] == 1
        assert len(submissions(fake_world[2])) == 1
        assert done.app.call("agent/list")["deliveries"] == {}


@pytest.mark.parametrize("scenario", ["declined_first", "overloaded_first"])
def test_a_declined_or_overloaded_submission_is_offered_again_not_uncertain(
        fake_world: tuple[Path, Path, Path], scenario: str) -> None:
    """"failed to submit turn input: NotIdle" (-32603) is Core declining the input without recording it (a reason seen
    only in Codex's source); "Server overloaded; retry later." (-32001) the transport refusing a request before any
    handler saw it (the real Codex gives it only under a flood of requests). The fake plays both: the claim is
    released and the task delivered on the next try, never uncertain."""
    with answered(fake_world, scenario) as done:
        assert done.story()["facts"]["uncertain_at"] is None
        assert len(submissions(fake_world[2])) == 2
