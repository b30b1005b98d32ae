"""Two-host native acceptance (docs/guide/several-machines.md): two apps on one PostgreSQL store, a real Codex agent on
each, scripted model.

Host `alpha` (its own process and home) serves `lead` and the person `human` (a registered, never-started agent);
host `beta` serves `worker`. In order, on records, the store and the agents' model requests:

1. a task across hosts: `human` asks `lead` (alpha) in plain English; `lead` calls `followup_task` for `worker`;
   beta's app dispatches it into a turn of `worker`; the turn's final answer is the reply, announced to alpha, which
   pushes it into `lead`'s conversation (its `receive_messages` wakes) before `lead` answers;
2. information across hosts, pushed without a turn: `human` (alpha) informs the idle `worker`; beta's app pushes it
   into `worker`'s conversation (no model request); `worker`'s next turn sees it as context, and its
   `receive_messages` says `provider_context_available`;
3. an interrupt across hosts: `human` (alpha) interrupts `worker`'s active turn; the interrupt is recorded in the
   store, beta's app (told by NOTIFY) interrupts exactly that turn, and the task gets its `blocked` notice on alpha;
4. kill -9 of beta's app while a task from `lead` to `worker` is in flight (submitted, its turn held by the model);
   a task admitted on alpha while beta is down; beta's app started again on the same home and host name takes its
   lease over; the in-flight task is uncertain, never replayed and never answered; the task admitted meanwhile is
   dispatched and answered exactly once; every record from before the kill is still there.

Evidence (`report.json`, `report.md`) as the single-host acceptance writes it: records, `message show` stories,
store rows, each agent's model requests and rollouts. Runs through `run-native-e2e` (scripts/acceptance.sh);
without PostgreSQL's server binaries it is skipped, except under CI, where it fails.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e_native.conftest import REPORT_DIR_ENV, RUN_ROOT_ENV, acceptance_enabled
from wardian.app.outcomes import RESTART_LOST
from wardian_harness.acceptance.exchange import PLAIN_REQUEST, SENDER_ANSWER, WORKER_ANSWER, script_exchange
from wardian_harness.acceptance.homes import IsolatedRun
from wardian_harness.acceptance.native import Agent, NativeRunError, poll
from wardian_harness.acceptance.report import executable_evidence, find_rollouts, read_rollout, tool_calls, write_report
from wardian_harness.acceptance.settings import OPERATOR, RECEIVER, SENDER, Settings
from wardian_harness.acceptance.two_hosts import HostRun, TwoHosts
from wardian_harness.hosts.postgres import PgNotFound, find_pg_bin
from wardian_harness.models.scripted_model import (
    Hold,
    Message,
    RecordedRequest,
    Step,
    ToolCall,
    function_call_outputs,
    user_texts,
)
from wardian_harness.processes.proctree import RUN_MARKER_ENV
from wardian_harness.providers.codex_install import discover_codex

pytestmark = pytest.mark.skipif(not acceptance_enabled(), reason="opt-in; run through run-native-e2e")

INFO = "FYI from alpha: the staging database moves to port 6543 tonight."
CHECK_REQUEST = "Check your context for news, then count slowly from one to one million."
LONG_REQUEST = "Ask worker for the full quarterly report; do not wait for it."
LONG_QUESTION = "Write the full quarterly report."
LEAD_LONG_ANSWER = "I asked worker for the quarterly report; it will come later."
DOWN_REQUEST = "While you were away: what is 6 times 7?"
DOWN_ANSWER = "6 times 7 is 42."


def _progress(line: str) -> None:
    print(f"[two-hosts] {line}", flush=True)


@pytest.fixture
def two_hosts() -> Iterator[TwoHosts]:
    """Both hosts' homes on the runner's root (or one of our own), the private server, the model; reaped after."""
    settings = Settings.from_env()
    if settings.real:
        pytest.skip("the two-host acceptance runs on the scripted model only")
    settings = dataclasses.replace(settings, mode="background", lifecycle=False, providers=("codex", "codex"))
    try:
        find_pg_bin()
    except PgNotFound as exc:
        if os.environ.get("CI"):
            pytest.fail(f"PostgreSQL is not installed (scripts/setup.sh --with-system): {exc}")
        pytest.skip(str(exc))
    codex = discover_codex()
    root = os.environ.get(RUN_ROOT_ENV)
    run = IsolatedRun.join(Path(root), os.environ[RUN_MARKER_ENV]) if root else IsolatedRun.create()
    try:
        hosts = TwoHosts.create(settings, run, codex, _progress)
    except BaseException:
        run.close(keep=True)
        raise
    try:
        yield hosts
    finally:
        try:
            leftovers = hosts.close()
        finally:
            run.close(keep=True)  # the runner removes its root; a direct run keeps it for the evidence
        assert leftovers == [], f"processes left behind: {[p.pid for p in leftovers]}"
        hosts.model.check()


@pytest.fixture
def report_dir(tmp_path: Path) -> Path:
    return Path(os.environ.get(REPORT_DIR_ENV) or tmp_path / "report")


# --- helpers -------------------------------------------------------------------------------------------------


def _last_output(body: dict[str, Any]) -> str:
    outputs = function_call_outputs(body)
    return outputs[-1].text if outputs else ""


def _new_input(request: RecordedRequest) -> str:
    """The request's input after its last assistant output: what is new to the model in this request."""
    items = request.body.get("input") or []
    last = max((i for i, item in enumerate(items) if isinstance(item, dict)
                and (item.get("role") == "assistant" or item.get("type") == "function_call")), default=-1)
    return json.dumps(items[last + 1:], ensure_ascii=False)


def _by_request(records: list[dict[str, Any]], request_id: str) -> list[dict[str, Any]]:
    return [r for r in records if r["kind"] in ("reply", "notice") and r["request_id"] == request_id]


def _agent_evidence(host: HostRun, agent: Agent) -> dict[str, Any]:
    script = agent.script
    requests = script.requests if script is not None else []
    threads = list(dict.fromkeys(str(r.body["prompt_cache_key"]) for r in requests if r.body.get("prompt_cache_key")))
    return {
        "name": agent.name, "host": host.host, "uuid": agent.uuid, "workspace": str(agent.workspace),
        "codex_home": str(agent.codex_home), "launch_config": agent.config,
        "tool_grants": list(host.settings.grants(agent.name)), "starts": agent.started, "thread_ids": threads,
        "rollouts": [read_rollout(p) for p in find_rollouts(agent.codex_home)],
        "model_requests": [{"index": r.index, "turn_id": r.turn_id, "thread_id": r.body.get("prompt_cache_key"),
                            "answered_by": r.answered_by, "received_at_ms": r.received_at_ms,
                            "new_input": _new_input(r)[:2000]} for r in requests],
        "tool_calls": tool_calls(r.body for r in requests),
    }


# --- the acceptance --------------------------------------------------------------------------------------------


def test_two_hosts_exchange_push_interrupt_and_kill(two_hosts: TwoHosts, report_dir: Path) -> None:
    """H1, H2: task, reply, information and interrupt across hosts; a killed host loses nothing, exposes nothing
    twice."""
    hosts = two_hosts
    codex = hosts.alpha.codex
    report: dict[str, Any] = {
        "run": {"mode": "two hosts (background)", "real_model": False, "run_root": str(hosts.run.root),
                "hosts": {h.host: {"home": str(h.home.root)} for h in (hosts.alpha, hosts.beta)},
                "store": hosts.store_url, "approve_tools": hosts.alpha.settings.approve_all,
                "codex": {"path": str(codex.executable), "version": str(codex.version),
                          "version_output": codex.version_output,
                          "sha256": executable_evidence(codex.executable, "codex")["sha256"]}},
        "input": {"from": OPERATOR, "to": SENDER, "text": PLAIN_REQUEST,
                  "counts": {"character_count": len(PLAIN_REQUEST),
                             "word_count_whitespace_separated": len(PLAIN_REQUEST.split())}},
        "outcome": "failed", "checks": [], "correlation": {}, "timings_s": {},
    }
    started = time.monotonic()
    try:
        _scenario(hosts, report)
        report["outcome"] = "passed"
    finally:
        report["timings_s"]["total"] = round(time.monotonic() - started, 1)
        try:
            alive = next((h for h in (hosts.alpha, hosts.beta) if h.app_proc is not None), None)
            if alive is not None:
                report["records"] = alive.records()
                report["stories"] = {rid: alive.story(rid) for rid in report["correlation"].values()
                                     if isinstance(rid, str) and rid.startswith(("ask_", "msg_", "rep_", "ntc_"))}
            report["store"] = {
                "hosts": [dict(zip(("name", "live_lease", "pid", "machine", "home"), row, strict=True))
                          for row in hosts.store_sql("SELECT name, lease_owner IS NOT NULL, pid, machine, home "
                                                     "FROM hosts ORDER BY name")],
                "tasks": [dict(zip(("request_id", "state", "claimed_by", "claim_generation", "turn_id",
                                    "outcome_status", "uncertain_reason", "reply_id"), row, strict=True))
                          for row in hosts.store_sql("SELECT request_id, state, claimed_by, claim_generation, "
                                                     "turn_id, outcome_status, uncertain_reason, reply_id "
                                                     "FROM tasks ORDER BY interaction_id")],
                "interrupts": [dict(zip(("id", "caller", "target", "turn_id", "state"), row, strict=True))
                               for row in hosts.store_sql("SELECT i.id, c.name, t.name, i.turn_id, i.state FROM "
                                                          "interrupts i JOIN agents c ON c.id = i.caller_id "
                                                          "JOIN agents t ON t.id = i.target_id ORDER BY i.id")],
            }
            report["agents"] = [_agent_evidence(h, a) for h in (hosts.alpha, hosts.beta)
                                for a in h.agents.values() if a.workspace]
            report["wardian_commands"] = {h.host: h.commands for h in (hosts.alpha, hosts.beta)}
            report["executables"] = [executable_evidence(codex.executable, "codex (as given)")]
        finally:
            secrets = [*hosts.alpha.secrets, *hosts.beta.secrets]
            json_path, md_path = write_report(report, report_dir, secrets=secrets)
            _progress(f"evidence report: {json_path} (summary {md_path}); {report['timings_s']}")


def _scenario(hosts: TwoHosts, report: dict[str, Any]) -> None:
    alpha, beta = hosts.alpha, hosts.beta
    checks: list[str] = report["checks"]
    corr: dict[str, Any] = report["correlation"]
    t0 = time.monotonic()

    def mark(phase: str) -> None:
        report["timings_s"][phase] = round(time.monotonic() - t0, 1)

    # --- two apps, two homes, one store --------------------------------------------------------------------
    alpha.start_app()
    beta.start_app()
    lead = alpha.add_agent(SENDER)
    alpha.add_agent(OPERATOR, workspace=False)  # the person: a registered, never-started agent of alpha
    worker = beta.add_agent(RECEIVER)
    assert lead.script is not None
    assert worker.script is not None
    rows = {a["name"]: a for a in alpha.agent_list()}
    assert (rows[SENDER]["host"], rows[OPERATOR]["host"], rows[RECEIVER]["host"]) == ("alpha", "alpha", "beta"), rows
    assert {n: h["live"] for n, h in alpha.hosts().items()} == {"alpha": True, "beta": True}
    assert {a["name"]: a["host"] for a in beta.agent_list()} == {n: r["host"] for n, r in rows.items()}
    with pytest.raises(NativeRunError, match="belongs to host 'beta'"):
        alpha.cli("agent", "start", RECEIVER)
    checks.append("two apps (own processes and homes) serve hosts alpha and beta of one PostgreSQL store; both see "
                  "the same roster (lead, human on alpha; worker on beta); alpha's app refuses to start beta's agent")

    receipts: list[dict[str, Any]] = []
    script_exchange(lead.script, worker.script, receipts)
    alpha.start_agent(lead)
    beta.start_agent(worker)
    mark("apps_and_agents_started")

    # --- 1. a task across hosts, its turn on beta, the reply back on alpha -----------------------------------
    task = alpha.task(OPERATOR, SENDER, PLAIN_REQUEST)
    corr["operator_request_id"] = task["request_id"]
    answer = alpha.wait_answer(OPERATOR, task["request_id"])
    assert (answer["kind"], answer["status"], answer["text"]) == ("reply", "done", SENDER_ANSWER), answer
    (receipt,) = receipts
    ask = receipt["request_id"]
    records = alpha.records()
    followups = [r for r in records if r["kind"] == "task" and r["sender"] and r["sender"]["name"] == SENDER]
    assert [r["id"] for r in followups] == [ask], records
    replies = _by_request(records, ask)
    assert [(r["sender"]["name"], r["recipient"]["name"], r["status"], r["text"]) for r in replies] == [
        (RECEIVER, SENDER, "done", WORKER_ANSWER)], replies
    story = beta.story(ask)
    assert story["task"]["facts"]["state"] == "completed", story
    assert story["task"]["facts"]["claimed_by"] == "dispatch", story
    assert story["answer"]["id"] == replies[0]["id"], story
    assert alpha.story(ask) == story  # one store: both hosts tell the same story
    delivered = [r for r in worker.script.requests if ask in "\n".join(r.user_texts())]
    assert delivered, "worker's model never saw the task"
    assert "wardian_task_delivery" in "\n".join(delivered[0].user_texts())
    wake = lead.script.requests[-1].function_call_outputs()[-1].text
    pushed = '"wake_reason":"provider_context_available"' in wake
    assert pushed or f'"id":"{replies[0]["id"]}"' in wake, wake
    reply_story = alpha.story(replies[0]["id"])
    if pushed:
        assert reply_story["delivery"]["push"] == "done", reply_story
    corr.update({"followup_request_id": ask, "reply_id": replies[0]["id"], "operator_answer_id": answer["id"]})
    checks.append(f"lead (alpha) called followup_task: {ask} for worker (beta); beta's app dispatched it into a "
                  f"worker turn (claimed_by dispatch); its final answer is the reply {replies[0]['id']}, which lead "
                  + ("got pushed into its conversation on alpha (receive woke with provider_context_available)"
                     if pushed else "received through receive_messages")
                  + " before answering human")
    mark("task_across_hosts")

    # --- 2. information across hosts, pushed into beta's idle conversation without a turn ------------------
    beta.wait_status(RECEIVER, "idle")
    before = len(worker.script.requests)
    checked: list[str] = []

    def check_context(body: dict[str, Any]) -> Step:
        out = _last_output(body)
        if '"wake_reason":"provider_context_available"' not in out:
            raise AssertionError(f"worker's receive did not say provider_context_available: {out[:500]}")
        if INFO not in json.dumps(body.get("input") or [], ensure_ascii=False):
            raise AssertionError("the pushed information is not in worker's conversation")
        checked.append(out)
        return hold

    hold = Hold("counting slowly", timeout_s=120)
    worker.script.add(ToolCall("receive_messages", {"timeout_ms": 10000}), check_context)  # then the hold
    info = alpha.send(OPERATOR, RECEIVER, INFO)
    corr["info_id"] = info["interaction_id"]
    info_story = poll(lambda: (s := beta.story(info["interaction_id"]))["delivery"]["push"] in ("done", "uncertain")
                      and s, "beta's app to push the information", rounds=400, interval_s=0.1)
    assert info_story["delivery"]["push"] == "done", info_story
    assert info_story["delivery"]["received_at"] is None, info_story
    for _ in range(20):  # a bounded look: no turn starts, the model gets no request
        assert beta.row(RECEIVER)["status"] == "idle"
        beta.run_tick()
    assert len(worker.script.requests) == before
    checks.append(f"information {info['interaction_id']} from human (alpha) to the idle worker (beta): admitted on "
                  f"alpha ({info['delivery']}), pushed by beta's app into worker's conversation (push done, never "
                  "on the receive path); no turn started, no model request")

    # --- 3. worker's next turn sees it; an interrupt from alpha stops that turn on beta ---------------------
    check = alpha.task(OPERATOR, RECEIVER, CHECK_REQUEST)
    corr["interrupted_request_id"] = check["request_id"]
    held = hold.wait_started(timeout_s=120)
    assert checked, "worker's turn did not check its context"
    assert INFO in json.dumps(held.body.get("input") or [], ensure_ascii=False)
    checks.append(f"worker's next turn ({check['request_id']}, from human on alpha) had the information in its "
                  "request as context, and its receive_messages said provider_context_available")
    turn = alpha.wait_active_turn(RECEIVER)  # as the store tells alpha
    assert beta.row(RECEIVER)["active_turn_id"] == turn
    result = alpha.interrupt(OPERATOR, RECEIVER)
    assert result["turn_id"] == turn, result
    notice = alpha.wait_answer(OPERATOR, check["request_id"])
    assert (notice["kind"], notice["status"]) == ("notice", "blocked"), notice
    assert turn in notice["text"], notice
    assert hold.wait_finished(timeout_s=60) == "disconnected"
    beta.wait_status(RECEIVER, "idle")
    interrupts = hosts.store_sql("SELECT c.name, t.name, i.turn_id FROM interrupts i JOIN agents c ON "
                                 "c.id = i.caller_id JOIN agents t ON t.id = i.target_id")
    assert interrupts == [(OPERATOR, RECEIVER, turn)], interrupts
    assert "(asked on another host) done" in beta.app_log()
    corr.update({"interrupted_turn_id": turn, "interrupt_id": result.get("interrupt_id"),
                 "interrupt_notice_id": notice["id"]})
    checks.append(f"human (alpha) interrupted worker's active turn {turn} (beta): one row in the store's interrupts "
                  "table, beta's app (told by NOTIFY) interrupted exactly that turn, and the task got a blocked "
                  "notice on alpha")
    mark("push_and_interrupt_across_hosts")

    # --- 4. kill -9 of beta's app with a task in flight; a task admitted meanwhile; the restart -------------
    long_receipts: list[dict[str, Any]] = []
    in_flight = Hold("drafting the report", timeout_s=120)

    def after_long_followup(body: dict[str, Any]) -> Step:
        out = _last_output(body)
        long_receipts.append(json.loads(out.split("Output:\n", 1)[-1] if "Output:" in out else out))
        return Message(LEAD_LONG_ANSWER, phase="final_answer")

    lead.script.add(ToolCall("followup_task", {"target": RECEIVER, "message": LONG_QUESTION}), after_long_followup)
    worker.script.add(in_flight)
    long_task = alpha.task(OPERATOR, SENDER, LONG_REQUEST)
    lead_answer = alpha.wait_answer(OPERATOR, long_task["request_id"])
    assert lead_answer["text"] == LEAD_LONG_ANSWER, lead_answer
    (long_receipt,) = long_receipts
    long_ask = long_receipt["request_id"]
    in_flight.wait_started(timeout_s=120)
    submitted = poll(lambda: (s := beta.story(long_ask))["task"]["facts"]["state"] == "submitted" and s,
                     f"{long_ask} to be bound to worker's turn", rounds=400, interval_s=0.1)
    corr.update({"in_flight_request_id": long_ask, "in_flight_turn_id": submitted["task"]["facts"]["turn_id"]})
    generation = beta.row(RECEIVER)["generation"]
    records_before = alpha.records()
    worker_requests_before = len(worker.script.requests)

    killed = beta.kill_app()
    lease = hosts.store_sql("SELECT pid, lease_expires_at > (extract(epoch FROM clock_timestamp()) * 1000)::bigint "
                            "FROM hosts WHERE name = 'beta'")
    assert lease == [(killed, True)], lease  # the dead app's lease is still live: only its own home may take it
    down = alpha.task(OPERATOR, RECEIVER, DOWN_REQUEST)  # admitted on alpha (committed in the store) while beta is down
    corr["admitted_while_down_request_id"] = down["request_id"]
    assert alpha.story(down["request_id"])["task"]["facts"]["state"] == "pending"

    def answer_down(body: dict[str, Any]) -> Step:
        users = user_texts(body)
        if sum(down["request_id"] in t for t in users) != 1 or sum(long_ask in t for t in users) > 1:
            raise AssertionError(f"worker's input after the restart holds {down['request_id']} not once, or "
                                 f"{long_ask} again: {users}")
        return Message(DOWN_ANSWER, phase="final_answer")

    worker.script.add(answer_down)
    beta.start_app()  # same home, same host name: it takes over the dead app's lease
    assert beta.app_proc is not None
    restarted = beta.app_proc.pid
    host_rows = hosts.store_sql("SELECT pid, home FROM hosts WHERE name = 'beta'")
    assert host_rows == [(restarted, str(beta.home.root))], (host_rows, killed)
    down_answer = alpha.wait_answer(OPERATOR, down["request_id"])
    assert (down_answer["kind"], down_answer["status"], down_answer["text"]) == ("reply", "done", DOWN_ANSWER)
    row = beta.wait_status(RECEIVER, "idle", where=lambda r: r["generation"] > generation)
    assert in_flight.wait_finished(timeout_s=60) == "disconnected"  # the held turn never completed
    lost = beta.story(long_ask)
    assert lost["task"]["facts"]["state"] == "uncertain", lost
    assert lost["task"]["uncertain_reason"] == RESTART_LOST, lost
    assert lost["answer"] is None, lost
    assert alpha.story(long_ask) == lost
    assert f"marked 1 deliveries uncertain after a restart: {long_ask}" in beta.app_log()
    # Nothing more comes: the mailboxes hold no further answer to either request.
    extra = alpha.call("mailbox/receive", {"session": alpha.session(OPERATOR), "timeout_ms": 1000}, timeout_s=30)
    assert [r for r in extra["records"] if r.get("request_id") in (down["request_id"], long_ask)] == [], extra
    lead_mail = alpha.call("mailbox/receive", {"session": alpha.session(SENDER), "timeout_ms": 0}, timeout_s=30)
    assert [r for r in lead_mail["records"] if r.get("request_id") == long_ask] == [], lead_mail
    records_after = alpha.records()
    assert [r["id"] for r in records_after[: len(records_before)]] == [r["id"] for r in records_before]
    assert _by_request(records_after, long_ask) == []
    assert [r["id"] for r in _by_request(records_after, down["request_id"])] == [down_answer["id"]]
    after = worker.script.requests[worker_requests_before:]
    assert len(after) == 1, [r.answered_by for r in after]  # one turn after the restart: the task admitted meanwhile
    assert sum(long_ask in t for t in after[0].user_texts()) <= 1, "the in-flight task was delivered again"
    assert after[0].body.get("prompt_cache_key") == worker.script.requests[0].body.get("prompt_cache_key")  # resumed
    assert worker.script.exhausted_requests == []
    assert lead.script.exhausted_requests == []
    corr.update({"killed_beta_pid": killed, "restarted_beta_pid": restarted,
                 "admitted_while_down_answer_id": down_answer["id"],
                 "worker_generations": [generation, row["generation"]]})
    checks.append(f"kill -9 of beta's app (pid {killed}) while {long_ask} (lead -> worker) was in flight: beta's app "
                  f"started again (pid {restarted}) on the same home and host name took over the dead app's still "
                  "live lease; the held model stream was dropped, never completed; the in-flight task is "
                  "uncertain (the app stopped before its turn was seen to end), has no answer, was not delivered "
                  f"again; {down['request_id']}, admitted on alpha while beta was down, was dispatched after the "
                  f"restart (generation {generation} -> {row['generation']}) and answered exactly once; every "
                  f"record from before the kill ({len(records_before)}) is still there, in order")
    mark("kill_and_restart")


