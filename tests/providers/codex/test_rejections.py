"""The definite-rejection table of `wardian.providers.codex.rejections`: each entry against the real Codex, which
produces every one of them on demand, and what the app does with each, through the fake app-server speaking the same
lines (a thread the app believes in but Codex does not have, mid-delivery, is not something the real Codex does on
demand)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import AppHandle, stop_app, unavailable
from tests.providers.codex.conftest import OLDEST_CODEX, codex_or_skip
from tests.providers.codex.test_runtime_faults import run, submissions, wait_for
from wardian import errors
from wardian.providers.codex import rejections
from wardian.providers.codex.rejections import DELIVERY_METHODS, RULES, Verdict, classify, matching_rule

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
    """The real `codex app-server` on stdio, one request at a time (notifications skipped; answers to other ids kept
    in `stray`)."""

    def __init__(self, codex: Path, home: Path, *, experimental: bool = True, initialize: bool = True) -> None:
        self.home = home
        self.proc = subprocess.Popen([str(codex), "app-server"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, cwd=home, text=True, encoding="utf-8",
                                     env={**os.environ, "CODEX_HOME": str(home)})
        self.ids = 0
        self.stray: list[dict[str, Any]] = []
        if initialize:
            self.request("initialize", {"clientInfo": {"name": "wardian-test", "title": "t", "version": "0"},
                                        "capabilities": {"experimentalApi": True} if experimental else {}})

    def write(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdout is not None
        self.ids += 1
        self.write(json.dumps({"jsonrpc": "2.0", "id": self.ids, "method": method, "params": params}))
        while True:
            line = self.proc.stdout.readline()
            assert line, f"codex app-server exited while answering {method}"
            msg = json.loads(line)
            if "method" in msg:
                continue
            if msg.get("id") == self.ids:
                return dict(msg)
            self.stray.append(msg)

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


@pytest.fixture(scope="module", params=["pinned", "oldest"])
def codex(request: pytest.FixtureRequest) -> Path:
    """The pinned Codex (0.171.0) and the oldest one wardian drives (0.154.0): the table holds for both."""
    if request.param == "pinned":
        return codex_or_skip()
    if not OLDEST_CODEX.exists():
        unavailable(f"{OLDEST_CODEX} is missing (scripts/setup.sh --with-node installs it)")
    return OLDEST_CODEX


def _server(tmp_path_factory: pytest.TempPathFactory, codex: Path, name: str, **kw: Any) -> AppServer:
    home = tmp_path_factory.mktemp(name)
    (home / "config.toml").write_text(CONFIG, encoding="utf-8")
    return AppServer(codex, home, **kw)


TEXT = [{"type": "text", "text": "hi"}]


def _unknown_thread_cases(server: AppServer) -> dict[str, tuple[str, errors.AppServerError]]:
    unknown = str(uuid.uuid4())
    cases: dict[str, tuple[str, dict[str, Any]]] = {
        "resume_unknown": ("thread/resume", {"threadId": unknown}),
        "start_unknown": ("turn/start", {"threadId": unknown, "input": TEXT}),
        "steer_unknown": ("turn/steer", {"threadId": unknown, "expectedTurnId": "t", "input": TEXT}),
        "inject_unknown": ("thread/inject_items", {"threadId": unknown, "items": []}),
        "interrupt_unknown": ("turn/interrupt", {"threadId": unknown, "turnId": "t"}),
        "start_malformed_id": ("turn/start", {"threadId": "not-a-thread-id", "input": TEXT}),
        "start_missing_field": ("turn/start", {"input": TEXT}),
        "unknown_method": ("turn/bogus", {"threadId": unknown}),
    }
    return {name: (method, server.error(method, params)) for name, (method, params) in cases.items()}


def _idle_thread_cases(server: AppServer) -> dict[str, tuple[str, errors.AppServerError]]:
    idle = server.request("thread/start", {"cwd": str(server.home)})["result"]["thread"]["id"]
    too_long = "x" * (2**20 + 1)  # over Codex's 1,048,576-character input limit
    cases: dict[str, tuple[str, dict[str, Any]]] = {
        "start_invalid_input": ("turn/start", {"threadId": idle, "input": [{"type": "bogus"}]}),
        "start_too_long": ("turn/start", {"threadId": idle, "input": [{"type": "text", "text": too_long}]}),
        "inject_empty": ("thread/inject_items", {"threadId": idle, "items": []}),
        "inject_invalid_item": ("thread/inject_items", {"threadId": idle, "items": [5]}),
        "steer_missing_fence": ("turn/steer", {"threadId": idle, "input": TEXT}),
        "steer_empty_fence": ("turn/steer", {"threadId": idle, "expectedTurnId": "", "input": TEXT}),
        "steer_idle": ("turn/steer", {"threadId": idle, "expectedTurnId": "t", "input": TEXT}),
    }
    return {name: (method, server.error(method, params)) for name, (method, params) in cases.items()}


def _active_turn_cases(server: AppServer) -> dict[str, tuple[str, errors.AppServerError]]:
    # A turn to the dead model URL stays active (Codex retries the network for minutes): a turn to miss.
    busy = server.request("thread/start", {"cwd": str(server.home)})["result"]["thread"]["id"]
    turn = server.request("turn/start", {"threadId": busy, "input": TEXT})["result"]["turn"]["id"]
    cases: dict[str, tuple[str, dict[str, Any]]] = {
        "steer_wrong_turn": ("turn/steer", {"threadId": busy, "expectedTurnId": "wrong-turn-id", "input": TEXT}),
        "interrupt_wrong_turn": ("turn/interrupt", {"threadId": busy, "turnId": "wrong-turn-id"}),
        "steer_empty_input": ("turn/steer", {"threadId": busy, "expectedTurnId": turn, "input": []}),
        # An empty turn/start on an idle thread starts a turn; on an active one Core declines it.
        "start_empty_input": ("turn/start", {"threadId": busy, "input": []}),
        "start_schema_mismatch": ("turn/start", {"threadId": busy, "input": TEXT,
                                                 "outputSchema": {"type": "object"}}),
    }
    got = {name: (method, server.error(method, params)) for name, (method, params) in cases.items()}
    review = server.request("thread/start", {"cwd": str(server.home)})["result"]["thread"]["id"]
    started = server.request("review/start", {"threadId": review, "target": {"type": "custom", "instructions": "x"}})
    got["steer_review"] = ("turn/steer", server.error("turn/steer", {
        "threadId": review, "expectedTurnId": started["result"]["turn"]["id"], "input": TEXT}))
    got["start_during_review"] = ("turn/start", server.error("turn/start", {"threadId": review, "input": TEXT}))
    return got


@pytest.fixture(scope="module")
def codex_errors(tmp_path_factory: pytest.TempPathFactory,
                 codex: Path) -> Iterator[dict[str, tuple[str, errors.AppServerError]]]:
    """What the real Codex answers for each case of the table, by case name: (method, error)."""
    server = _server(tmp_path_factory, codex, "codex-home")
    gated = _server(tmp_path_factory, codex, "codex-gated", experimental=False)
    fresh = _server(tmp_path_factory, codex, "codex-fresh", initialize=False)
    try:
        got = {**_unknown_thread_cases(server), **_idle_thread_cases(server), **_active_turn_cases(server)}
        gated_thread = gated.request("thread/start", {"cwd": str(gated.home)})["result"]["thread"]["id"]
        got["steer_experimental_gate"] = ("turn/steer", gated.error("turn/steer", {
            "threadId": gated_thread, "expectedTurnId": "t", "input": TEXT,
            "additionalContext": {"k": {"kind": "application", "value": "v"}}}))
        got["start_before_initialize"] = ("turn/start", fresh.error("turn/start", {"threadId": gated_thread,
                                                                                  "input": TEXT}))
        yield got
    finally:
        server.close()
        gated.close()
        fresh.close()


EXPECTED = {
    "resume_unknown": Verdict.THREAD_GONE,
    "start_unknown": Verdict.THREAD_GONE,
    "steer_unknown": Verdict.THREAD_GONE,
    "inject_unknown": Verdict.THREAD_GONE,
    "interrupt_unknown": Verdict.THREAD_GONE,
    "start_malformed_id": Verdict.REFUSED,
    "start_missing_field": Verdict.REFUSED,
    "unknown_method": Verdict.UNSUPPORTED,
    "start_invalid_input": Verdict.REFUSED,
    "start_too_long": Verdict.REFUSED,
    "start_empty_input": Verdict.REFUSED,
    "inject_empty": Verdict.REFUSED,
    "inject_invalid_item": Verdict.REFUSED,
    "steer_missing_fence": Verdict.REFUSED,
    "steer_empty_fence": Verdict.REFUSED,
    "steer_empty_input": Verdict.REFUSED,
    "steer_experimental_gate": Verdict.REFUSED,
    "start_before_initialize": Verdict.REFUSED,
    "steer_idle": Verdict.STALE_TURN,
    "steer_wrong_turn": Verdict.STALE_TURN,
    "interrupt_wrong_turn": Verdict.STALE_TURN,
    "start_schema_mismatch": Verdict.STALE_TURN,
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
    """No `real` entry is a guess: each one matches at least one answer the real Codex gave above (the `fake` ones are
    played by the fake app-server below, the code-wide ones checked against the module's table)."""
    for rule in RULES:
        met = [name for name, (method, error) in codex_errors.items() if matching_rule(method, error) is rule]
        assert rule.seen in ("real", "fake", "code")
        if rule.seen == "real":
            assert met, f"no real answer meets the rule for {rule.example!r}"


def test_codex_answers_neither_a_line_it_cannot_read_nor_a_method_it_lacks_with_their_own_codes(
        tmp_path_factory: pytest.TempPathFactory, codex: Path) -> None:
    """The evidence of the -32700 and -32601 rows: a line that is not a JSON-RPC message gets no answer at all (the
    next request's answer is the next one written), and a method Codex does not have is -32600 "Invalid request:
    unknown variant …", not -32601."""
    server = _server(tmp_path_factory, codex, "codex-frames")
    try:
        for line in ('{"jsonrpc": "2.0", "id": 9000, "method": "turn/start", "params": ', "[1, 2]", '"text"'):
            server.write(line)
            assert "result" in server.request("thread/loaded/list", {}), line
        missing = server.error("turn/bogus", {})
        assert server.stray == []
        assert missing.details["rpc_code"] == -32600
        assert missing.message.startswith("Invalid request: unknown variant `turn/bogus`, expected one of ")
    finally:
        server.close()


def test_a_server_that_admits_nothing_now_is_busy_whatever_the_request() -> None:
    """Codex's source: a draining app-server, or one preparing an upgrade, answers -32600 "… retry after reconnecting"
    to any request before a handler runs, and a full root-turn capacity -32001: nothing was admitted, and the same
    request may pass later (the fake app-server plays the first and the last through the app, below)."""
    for method in sorted(DELIVERY_METHODS):
        for code, message in ((-32600, "Server is draining; retry after reconnecting"),
                              (-32600, "Server is preparing an upgrade; retry after reconnecting"),
                              (-32001, "Server is at its root turn capacity; retry later.")):
            assert classify(method, errors.AppServerError(message, rpc_code=code)) is Verdict.BUSY, (method, message)


def test_anything_else_is_an_unknown_outcome() -> None:
    """An error the table does not list (an internal error, a message that only contains a known phrase, a known
    phrase answering a request it does not prove anything for) leaves the outcome unknown: uncertain, never resent."""
    for method, message in (("turn/start", "fake: internal failure, outcome unknown"),
                            ("turn/start", "upstream said: thread not found: x"),
                            ("turn/start", "no active turn to steer"),
                            ("turn/start", "failed to submit turn input: internal error; agent loop died unexpectedly"),
                            ("thread/resume", "thread not found: x")):
        assert classify(method, errors.AppServerError(message, rpc_code=-32603)) is None, (method, message)


# What a message no rule names gets, code by code (the last column of the module's table).
CODE_OUTCOMES: dict[int, Verdict | None] = {
    -32700: Verdict.REFUSED,
    -32600: Verdict.REFUSED,
    -32601: Verdict.UNSUPPORTED,
    -32602: Verdict.REFUSED,
    -32603: None,
    -32001: Verdict.BUSY,
    -32000: None,
    -32099: None,
}


@pytest.mark.parametrize("method", sorted(DELIVERY_METHODS))
@pytest.mark.parametrize("code", sorted(CODE_OUTCOMES))
def test_each_json_rpc_code_has_its_own_outcome(code: int, method: str) -> None:
    """Each code Codex may answer a delivery with has one outcome for a message no rule names: proof of "not
    admitted" (by the code's evidence, rejections.py) or, for -32603 and any other code, uncertain."""
    unnamed = errors.AppServerError("a message no rule of the table names", rpc_code=code)
    assert classify(method, unnamed) is CODE_OUTCOMES[code]


def _table_rows() -> dict[str, str]:
    """The module's per-code table: code (or `other`) -> its last column, its continuation lines joined."""
    rows: dict[str, str] = {}
    key = ""
    for line in (rejections.__doc__ or "").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("| ") else []
        if len(cells) != 3:
            continue
        key = cells[0] or key
        if re.fullmatch(r"-\d+|other", key):
            rows[key] = f"{rows.get(key, '')} {cells[2]}".strip()
    return rows


def test_a_code_wide_rule_stands_on_the_evidence_the_table_gives() -> None:
    """A rule that meets every message of a code (an empty pattern) exists only where the module's table states the
    code-wide evidence for that outcome, and every such row has its rule: no catch-all hides in the table."""
    rows = _table_rows()
    assert set(rows) == {*(str(c) for c in CODE_OUTCOMES if c not in (-32000, -32099)), "other"}
    code_wide = {str(code): r.verdict for r in RULES if not r.pattern.pattern for code in r.codes}
    assert all(r.seen == "code" for r in RULES if not r.pattern.pattern)
    assert all(r.pattern.pattern for r in RULES if r.seen != "code")
    for code, text in rows.items():
        if code in code_wide:
            assert text.startswith(f"`{code_wide[code].name}`, code-wide: "), (code, text)
        else:
            assert text.startswith("uncertain"), (code, text)
    for code, verdict in code_wide.items():
        assert CODE_OUTCOMES[int(code)] is verdict


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


# A request Codex refused before accepting anything, as each code says it: (fake scenario, Codex's words in the
# notice, whether the app logs it as a wardian/Codex version mismatch).
REFUSALS = {
    "refused": ("Invalid request", True),  # -32600: the params do not deserialize
    "unsupported": ("this Codex has no method turn/start", True),  # -32601
    "bad_params": ("Input exceeds the maximum length", True),  # -32602
    "parse_error": ("Parse error", True),  # -32700 naming the request
}


@pytest.mark.parametrize("scenario", sorted(REFUSALS))
def test_a_request_codex_refuses_is_answered_failed_never_uncertain(
        fake_world: tuple[Path, Path, Path], scenario: str) -> None:
    """-32600 "Invalid request: …", -32601, -32602, -32700: nothing was accepted, and sending it again would be
    refused again: the task gets one correlated `failed` notice from Wardian at once, is not resent, and is not
    uncertain. An answer that shows wardian sent what this Codex does not accept is logged as a version mismatch."""
    words, mismatch = REFUSALS[scenario]
    with answered(fake_world, scenario) as done:
        notice = done.app.call("mailbox/receive", {"session": done.lead})["records"]
        assert [(r["kind"], r["status"], r["request_id"]) for r in notice] == [("notice", "failed", done.request_id)]
        assert words in notice[0]["text"]
        story = done.story()
        assert story["facts"]["uncertain_at"] is None
        assert story["rejections"] == 1
        assert len(submissions(fake_world[2])) == 1
        assert done.app.call("agent/list")["deliveries"] == {}
        logged = (done.app.home.log_dir / "app.log").read_text(encoding="utf-8")
        assert ("wardian and this Codex version disagree on the app-server protocol" in logged) is mismatch


@pytest.mark.parametrize("scenario", ["declined_first", "overloaded_first", "draining_first", "capacity_first"])
def test_a_declined_or_overloaded_submission_is_offered_again_not_uncertain(
        fake_world: tuple[Path, Path, Path], scenario: str) -> None:
    """"failed to submit turn input: NotIdle" (-32603) is Core declining the input without recording it (a reason seen
    only in Codex's source); "Server overloaded; retry later." (-32001) the transport refusing a request before any
    handler saw it (the real Codex gives it only under a flood of requests); "Server is draining; retry after
    reconnecting" (-32600) and "Server is at its root turn capacity; retry later." (-32001) an app-server that admits
    no work now (Codex's source). The fake plays each: the claim is released and the task delivered on the next try,
    never uncertain, never answered `failed`."""
    with answered(fake_world, scenario) as done:
        assert done.story()["facts"]["uncertain_at"] is None
        assert len(submissions(fake_world[2])) == 2
        answer = done.app.call("mailbox/receive", {"session": done.lead})["records"]
        assert [(r["kind"], r["status"]) for r in answer] == [("reply", "done")]
