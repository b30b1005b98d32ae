"""OpenCode bad input and faults (rows F1-F6), each against the real `opencode serve` on the scripted model, except
where the fault is one the real binary cannot show on demand (an old version): there a stand-in prints only a
version."""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import stat
import sys
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from tests.conftest import AppHandle
from tests.providers.opencode.conftest import MixedWorld, opencode_or_skip
from tests.providers.opencode.test_runtime import records_for, settle, wait_active
from wardian import errors
from wardian_harness.models.scripted_model import Hold, HttpError, Message
from wardian_harness.providers.opencode_home import ScriptedOpenCode, opencode_overrides


def test_an_unknown_provider_lists_every_provider(app: AppHandle) -> None:
    with pytest.raises(errors.InvalidProvider) as exc:
        app.call("agent/add", {"name": "carol", "provider": "claude-code"})
    assert exc.value.allowed == "codex, opencode, claude, qwen, gemini, pi, acp"
    assert app.call("agent/add", {"name": "carol", "provider": "opencode"})["provider"] == "opencode"


def _script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body, encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.mark.parametrize("case", ["missing", "too_old"])
def test_a_missing_or_too_old_opencode_is_a_clear_error_naming_the_variable(case: str, tmp_path: Path) -> None:
    from tests.conftest import short_home, start_app, stop_app
    from wardian.client import AppClient
    from wardian.home import Home

    exe = tmp_path / "nope" if case == "missing" else _script(tmp_path / "opencode", 'echo "1.2.0"\n')
    root = short_home("wo")
    proc = start_app(root, {"WARDIAN_OPENCODE": str(exe)})
    app = AppHandle(Home(root), proc, AppClient(Home(root)))
    try:
        app.add_agent("worker", "opencode")
        with pytest.raises(errors.Unsupported) as exc:
            app.call("agent/start", {"agent": "worker"}, timeout_s=60)
        assert "WARDIAN_OPENCODE" in exc.value.message
        assert exc.value.field == "opencode"
        assert next(a for a in app.call("agent/list")["agents"] if a["name"] == "worker")["status"] == "errored"
    finally:
        stop_app(proc)


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def test_serve_failing_to_start_answers_each_pending_task_with_one_failed_notice(
        mixed_world: MixedWorld, taken_port: int, tmp_path: Path) -> None:
    """F5: port taken / serve dies during start -> a definite failure before submission: one correlated `failed`
    notice per pending task, committed with the task's failure; nothing submitted."""
    world = mixed_world
    _, lead, _ = world.agent("lead", start=False)
    _, _, script = world.agent("worker")
    real = opencode_or_skip()
    # The real binary, told to listen on a port something else holds: it exits with ServeError.
    wrapper = _script(tmp_path / "opencode", f'if [ "$1" = serve ]; then exec "{real}" serve --hostname 127.0.0.1 '
                                             f'--port {taken_port}; fi\nexec "{real}" "$@"\n')
    world.env["WARDIAN_OPENCODE"] = str(wrapper)
    world.restart_app()  # the agent is desired on: the app tries to start it, and fails
    rid = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "x"})["request_id"]
    notices = records_for(world, lead)
    assert [(r["kind"], r["status"], r["request_id"], r["sender_kind"]) for r in notices] == [
        ("notice", "failed", rid, "wardian")]
    assert "could not be started" in notices[0]["text"]
    assert script.requests == []


def test_serve_killed_mid_turn_leaves_the_delivery_uncertain_and_never_resends_it(mixed_world: MixedWorld) -> None:
    """F3: serve killed mid-turn -> the in-flight delivery is uncertain; the next task starts a new generation;
    nothing is resent."""
    world = mixed_world
    _, lead, _ = world.agent("lead", start=False)
    agent, _, script = world.agent("worker")
    hold = Hold("working")
    script.add(hold, Message("fresh answer"))
    first = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "doomed"})["request_id"]
    hold.wait_started(120)
    wait_active(world, "worker")
    pid = int(world.app.home.provider_pid_path("opencode", agent["uuid"]).read_text())
    os.killpg(pid, signal.SIGKILL)
    for _ in range(1200):
        if world.app.call("request/show", {"id": first})["task"]["facts"]["state"] == "uncertain":
            break
        settle()
    story = world.app.call("request/show", {"id": first})
    assert story["task"]["facts"]["state"] == "uncertain"
    assert "ended before" in story["task"]["uncertain_reason"]
    second = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "fresh"})["request_id"]
    replies = records_for(world, lead)
    assert [(r["request_id"], r["text"]) for r in replies] == [(second, "fresh answer")]
    facts = world.app.call("request/show", {"id": second})["task"]["facts"]
    assert facts["claim_generation"] == 2
    sent = [t for r in script.requests for t in r.user_texts() if "wardian_task_delivery" in t]
    assert sum("doomed" in t for t in sent[-1:]) == 0  # the new generation's loop does not carry the old task again
    assert world.app.call("request/show", {"id": first})["task"]["facts"]["state"] == "uncertain"


def test_a_refused_password_is_provider_unavailable_and_nothing_is_admitted_twice(mixed_world: MixedWorld) -> None:
    """F6: 401 from a wrong password -> provider_unavailable: the claim goes back, the runtime ends, and the next
    start delivers each task exactly once."""
    world = mixed_world
    _, lead, _ = world.agent("lead", start=False)
    agent, _, script = world.agent("worker")
    script.add(Message("one"), Message("two"))
    password = world.app.home.agent_dir(agent["uuid"]) / "opencode" / "server.password"
    password.write_text("not-the-password\n", encoding="utf-8")
    first = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "t1"})["request_id"]
    for _ in range(600):
        row = next(a for a in world.app.call("agent/list")["agents"] if a["name"] == "worker")
        if row["status"] == "off":
            break
        settle()
    assert world.app.call("request/show", {"id": first})["task"]["facts"]["state"] == "pending"
    second = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "t2"})["request_id"]
    got: dict[str, str] = {}
    while len(got) < 2:
        for r in records_for(world, lead):
            got[r["request_id"]] = r["text"]
    assert set(got) == {first, second}
    deliveries = [t for r in script.requests for t in r.user_texts() if "wardian_task_delivery" in t]
    assert sum(first in t for t in set(deliveries)) == 1
    assert sum(second in t for t in set(deliveries)) == 1


def test_model_errors_that_opencode_retries_do_not_duplicate_the_task_and_one_it_does_not_fails_it(
        mixed_world: MixedWorld) -> None:
    """F6: a model HTTP 500 is retried by OpenCode itself; the task is submitted once and answered once. Then a model
    error OpenCode does not retry (401) ends the next loop with an error: that task's reply is `failed`."""
    world = mixed_world
    _, lead, _ = world.agent("lead", start=False)
    _, _, script = world.agent("worker")
    script.add(HttpError(500, "scripted outage"), Message("answer after a retry"))
    rid = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "retry me"})["request_id"]
    replies = records_for(world, lead)
    assert [(r["request_id"], r["text"]) for r in replies] == [(rid, "answer after a retry")]
    assert len(script.requests) == 2
    last = script.requests[-1].user_texts()
    assert sum("retry me" in t for t in last) == 1
    script.add(HttpError(401, "scripted refusal"))
    rid = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "fail"})["request_id"]
    notices = records_for(world, lead)
    assert [(r["kind"], r["status"], r["request_id"]) for r in notices] == [("notice", "failed", rid)]
    assert "scripted refusal" in notices[0]["text"]


def test_opencode_settings_are_kept_with_the_agent(mixed_world: MixedWorld) -> None:
    """`-c` sets keys of the agent's private opencode.json; a later start without one removes it (unless edited)."""
    world = mixed_world
    agent, _, script = world.agent("worker", extra=['instructions=["a.md"]'])
    config = world.app.home.agent_dir(agent["uuid"]) / "opencode" / "config" / "opencode" / "opencode.json"
    assert '"instructions"' in config.read_text(encoding="utf-8")
    world.app.call("agent/start", {"agent": "worker", "config": opencode_overrides(ScriptedOpenCode(
        script.base_url))}, timeout_s=300)
    assert '"instructions"' not in config.read_text(encoding="utf-8")
    assert oct(config.stat().st_mode & 0o777) == "0o600"


@pytest.mark.parametrize(("params", "field"), [({"mode": "attached"}, "mode"),
                                               ({"approve_tools": ["followup_task"]}, "approve_tools")])
def test_what_opencode_cannot_do_is_refused_before_anything_is_saved(
        mixed_world: MixedWorld, params: dict[str, object], field: str) -> None:
    """No attached TUI and no approval step: an attached start or a tool grant is refused, and the agent's saved
    mode, settings and status are what they were."""
    world = mixed_world
    world.agent("worker", start=False)

    def saved() -> tuple[object, ...]:
        row = next(a for a in world.app.call("agent/list")["agents"] if a["name"] == "worker")
        with closing(sqlite3.connect(f"file:{world.app.home.db_path}?mode=ro", uri=True)) as db:
            return (row, *db.execute("SELECT desired, mode, overrides FROM agents WHERE name = 'worker'").fetchone())

    before = saved()
    with pytest.raises(errors.Unsupported) as exc:
        world.app.call("agent/start", {"agent": "worker", "config": ['model="x/y"'], **params}, timeout_s=60)
    assert exc.value.field == field
    assert "opencode" in exc.value.message
    assert saved() == before


def _lossy(tmp_path: Path, mode: str) -> Path:
    """An `opencode` whose serve loses the first prompt_async answer (or request) on the wire: lossy_serve.py."""
    relay = Path(__file__).with_name("lossy_serve.py")
    return _script(tmp_path / "opencode", f'exec "{sys.executable}" "{relay}" --real "{opencode_or_skip()}" '
                                          f'--mode {mode} "$@"\n')


def test_a_lost_answer_is_settled_by_a_lookup_that_finds_the_message(mixed_world: MixedWorld, tmp_path: Path) -> None:
    """F2, UNC-5, DLV-9 (decision 0016): the prompt_async reached OpenCode but its answer was lost. The app looks the
    message up by the msg_ id it chose, finds it, and the delivery is confirmed, not uncertain: the loop's answer is the
    reply, nothing is sent twice, and `agent list`, `list_agents` and the operator log say it was confirmed by
    lookup."""
    world = mixed_world
    world.env["WARDIAN_OPENCODE"] = str(_lossy(tmp_path, "drop_answer"))
    world.restart_app()
    _, lead, _ = world.agent("lead", start=False)
    agent, _, script = world.agent("worker")
    script.add(Message("found it"))
    rid = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "lookup me"})["request_id"]
    replies = records_for(world, lead)
    assert [(r["kind"], r["status"], r["request_id"], r["text"]) for r in replies] == [
        ("reply", "done", rid, "found it")]
    story = world.app.call("request/show", {"id": rid})["task"]
    assert story["facts"]["lookup"] == "confirmed"
    assert story["facts"]["state"] == "completed"
    assert story["lookup_note"]
    assert story["facts"]["turn_id"] == story["provider_message_id"]
    listed = world.app.call("agent/list")
    assert listed["deliveries"] == {agent["uuid"]: {"uncertain": 0, "confirmed_by_lookup": 1}}
    assert sum("lookup me" in t for r in script.requests for t in r.user_texts()[-1:]) == 1
    shown = world.app.cli("message", "show", rid)
    assert b"LOOKUP" in shown.stdout
    assert b"confirmed by lookup" in world.app.cli("agent", "list").stdout
    assert b"confirmed by lookup" in world.app.cli("message", "log").stdout


def test_a_lost_request_is_uncertain_after_a_lookup_that_finds_nothing(mixed_world: MixedWorld, tmp_path: Path) -> None:
    """F2: the connection closed before OpenCode got the prompt_async; the lookup finds no message, so the delivery
    stays uncertain (never resent), and the agent list counts it."""
    world = mixed_world
    world.env["WARDIAN_OPENCODE"] = str(_lossy(tmp_path, "drop_request"))
    world.restart_app()
    _, lead, _ = world.agent("lead", start=False)
    agent, _, script = world.agent("worker")
    rid = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "lost"})["request_id"]
    story = world.app.call("request/show", {"id": rid})["task"]
    for _ in range(1200):
        if story["facts"]["state"] == "uncertain":
            break
        settle()
        story = world.app.call("request/show", {"id": rid})["task"]
    assert (story["facts"]["state"], story["facts"]["lookup"]) == ("uncertain", "not_found"), story
    assert "not found" in story["uncertain_reason"]
    assert world.app.call("agent/list")["deliveries"] == {agent["uuid"]: {"uncertain": 1, "confirmed_by_lookup": 0}}
    assert b"1 uncertain" in world.app.cli("agent", "list").stdout
    assert b"lookup found nothing" in world.app.cli("message", "log").stdout
    assert not any("lost" in t for r in script.requests for t in r.user_texts())


def test_after_an_uncertain_delivery_the_agent_shows_the_loop_it_started_and_takes_the_next_task(
        mixed_world: MixedWorld, tmp_path: Path) -> None:
    """The prompt_async reached OpenCode and started a loop, but its answer was lost and no lookup could tell
    (`drop_answer_blind`): the task is uncertain, and the runtime reads the session's real status at once, so the
    agent shows `active` while that loop runs (not `idle` until some event happens by), no task is sent into the
    running loop, and the next task is delivered once it ends."""
    world = mixed_world
    world.env["WARDIAN_OPENCODE"] = str(_lossy(tmp_path, "drop_answer_blind"))
    world.restart_app()
    _, lead, _ = world.agent("lead", start=False)
    _, _, script = world.agent("worker")
    hold = Hold("working", text="first answer")
    script.add(hold, Message("second answer"))
    first = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "blind"})["request_id"]
    hold.wait_started(120)
    for _ in range(1200):
        if world.app.call("request/show", {"id": first})["task"]["facts"]["state"] == "uncertain":
            break
        settle()
    assert world.app.call("request/show", {"id": first})["task"]["facts"]["state"] == "uncertain"
    shown = []
    for _ in range(20):  # within a second of the uncertain mark: the status it read, not a guess
        shown.append(next(a for a in world.app.call("agent/list")["agents"] if a["name"] == "worker")["status"])
        if shown[-1] == "active":
            break
        settle()
    assert shown[-1] == "active", shown
    second = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "next"})["request_id"]
    assert world.app.call("request/show", {"id": second})["task"]["facts"]["state"] == "pending"  # waits for the loop
    hold.release()
    replies = records_for(world, lead)
    assert [(r["request_id"], r["text"]) for r in replies] == [(second, "second answer")]
    assert world.app.call("request/show", {"id": first})["task"]["facts"]["state"] == "uncertain"  # never resent
    sent = [t for r in script.requests for t in r.user_texts() if "wardian_task_delivery" in t]
    assert sum("blind" in t for t in set(sent)) == 1


def test_a_json_provider_block_reaches_opencode_as_an_object_and_the_agent_works(mixed_world: MixedWorld) -> None:
    """`-c provider={...}` in JSON (what OpenCode users write: opencode.json is JSON) is written into the agent's
    opencode.json as an object, and the agent answers a task through it. Previously the object was passed on as a
    string, OpenCode refused its config and the start failed ("opencode serve exited (1) before it listened")."""
    world = mixed_world
    _, lead, _ = world.agent("lead", start=False)
    agent, _, script = world.agent("worker", start=False)
    block = {"scripted": {"npm": "@ai-sdk/openai-compatible", "name": "Scripted model",
                          "options": {"baseURL": script.base_url, "apiKey": "wardian-scripted-model-dummy-key"},
                          "models": {"model": {"tool_call": True}}}}
    started = world.app.cli("agent", "start", "worker", "-c", f"provider={json.dumps(block)}",
                            "-c", 'model="scripted/model"', "-c", 'small_model="scripted/model"')
    assert started.returncode == 0, started.stderr
    config = world.app.home.agent_dir(agent["uuid"]) / "opencode" / "config" / "opencode" / "opencode.json"
    assert json.loads(config.read_text(encoding="utf-8"))["provider"] == block
    script.add(Message("through the JSON block"))
    rid = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "hello"})["request_id"]
    assert [(r["request_id"], r["text"]) for r in records_for(world, lead)] == [(rid, "through the JSON block")]


def test_an_opencode_value_that_is_neither_toml_nor_json_is_refused_and_nothing_is_saved(
        mixed_world: MixedWorld) -> None:
    """Exit 2 naming the key and both syntaxes; the agent's saved settings and status are what they were."""
    world = mixed_world
    world.agent("worker", start=False)
    before = world.app.call("agent/list")
    refused = world.app.cli("agent", "start", "worker", "-c", "model=scripted/model")
    assert refused.returncode == 2, refused.stderr
    assert b"invalid_arguments" in refused.stderr
    for word in (b"model", b"TOML", b"JSON"):
        assert word in refused.stderr
    assert world.app.call("agent/list") == before
