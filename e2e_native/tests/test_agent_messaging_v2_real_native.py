"""Native acceptance (docs/design/contract.md, ACC-1..ACC-8): two fresh managed agents and a plain-English request.

The sender must actually call `followup_task`, the receiver's turn answers that request (the app publishes
its final answer as the reply), and the sender must consume the correlated reply (pushed into its
conversation; its `receive_messages` wakes with `provider_context_available`) before its final answer. A
matching final string is not enough: the tool call, the receipt's request id, the reply record's request id
and the sender's final request holding the reply are all checked, and bound to each agent's rollout in the
evidence report. Modes: WARDIAN_E2E_MESSAGING_V2_MODE=background | attached_tui (see e2e_native/conftest.py).
Teams: WARDIAN_E2E_MESSAGING_V2_PROVIDERS=lead,worker (codex,codex by default; codex,opencode, opencode,codex,
claude,codex, codex,claude and claude,opencode are the mixed teams, background mode). For an OpenCode agent the
evidence is its own store (`opencode.db`): every ask_ it got is bound to the ses_/msg_ ids the app chose, and checked
against the stored messages and tool parts. For a Claude Code agent it is its own transcript: every ask_ it got is
bound to the session id and the message uuid the app chose, and that uuid is found in the session's transcript,
under an entry of that session carrying the ask_ id (the transcript's sha256 is in the report).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from e2e_native.conftest import acceptance_enabled
from wardian_harness.acceptance.exchange import (
    LATER_REQUEST,
    PLAIN_REQUEST,
    RECALL_ANSWER,
    SENDER_ANSWER,
    WARMUP_ANSWER,
    WORKER_ANSWER,
    script_exchange,
    script_recall,
)
from wardian_harness.acceptance.native import Agent, NativeRun
from wardian_harness.acceptance.report import (
    executable_evidence,
    find_rollouts,
    read_opencode_store,
    read_rollout,
    text_counts,
    tool_calls,
    write_report,
)
from wardian_harness.acceptance.settings import OPERATOR, RECEIVER, SENDER
from wardian_harness.models.scripted_model import Hold, Message
from wardian_harness.models.scripted_model.reading import role_texts
from wardian_harness.processes.terminal import capture, wait_for_text
from wardian_harness.providers.claude_home import transcript_binding

pytestmark = pytest.mark.skipif(not acceptance_enabled(), reason="opt-in; run through run-native-e2e")


def _by_id(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in records}


def _thread_ids(native: NativeRun, agent: Agent) -> list[str]:
    ids = [str(s["thread_id"]) for s in agent.started if s.get("thread_id")]
    if agent.opencode_dir is not None:
        stored = read_opencode_store(agent.opencode_dir / "data")["sessions"]
        return list(dict.fromkeys([*ids, *(s["id"] for s in stored)]))
    if agent.claude_dir is not None:
        return list(dict.fromkeys(ids))  # the session id the app chose is the thread id
    if agent.script is not None:
        ids += [str(r.body.get("prompt_cache_key")) for r in agent.script.requests if r.body.get("prompt_cache_key")]
    for path in find_rollouts(agent.codex_home):
        meta = read_rollout(path)["session_meta"]
        if meta.get("id"):
            ids.append(str(meta["id"]))
    return list(dict.fromkeys(ids))


def _bindings(native: NativeRun, agent: Agent, store: dict[str, Any]) -> list[dict[str, Any]]:
    """Each task `agent` got, bound to the OpenCode session and the msg_ id the app chose for it, and what
    OpenCode stored under that id (the user message holding the ask_ id, the assistant messages answering it)."""
    out: list[dict[str, Any]] = []
    for record in native.records() if native.app_proc is not None else []:
        if record["kind"] != "task" or record["recipient"]["name"] != agent.name:
            continue
        task = native.story(record["id"])["task"] or {}
        facts = task.get("facts") or {}
        msg, ses = task.get("provider_message_id"), facts.get("thread_id")
        stored = next((m for m in store["messages"] if m["id"] == msg), None)
        answers = [m for m in store["messages"] if m["parent_id"] == msg and m["role"] == "assistant"]
        out.append({"request_id": record["id"], "session_id": ses, "message_id": msg,
                    "turn_id": facts.get("turn_id"), "state": facts.get("state"),
                    "stored": stored is not None and stored["session_id"] == ses
                    and any(record["id"] in t for t in stored["texts"]),
                    "answered_by": [m["id"] for m in answers],
                    "final_text": next((t for m in reversed(answers) for t in reversed(m["texts"]) if t), None)})
    return out


def _claude_bindings(native: NativeRun, agent: Agent) -> list[dict[str, Any]]:
    """Each task a Claude Code agent got, bound to its session and the message uuid the app chose, checked against
    the agent's transcript."""
    assert agent.claude_dir is not None
    out: list[dict[str, Any]] = []
    for record in native.records() if native.app_proc is not None else []:
        if record["kind"] == "task" and record["recipient"]["name"] == agent.name:
            task = native.story(record["id"])["task"] or {}
            out.append(transcript_binding(agent.claude_dir, record["id"], (task.get("facts") or {}).get("thread_id"),
                                          task.get("provider_message_id")))
    return out


def _agent_evidence(native: NativeRun, agent: Agent) -> dict[str, Any]:
    threads = _thread_ids(native, agent)
    out: dict[str, Any] = {
        "name": agent.name, "uuid": agent.uuid, "provider": agent.provider, "workspace": str(agent.workspace),
        "launch_config": agent.config, "tool_grants": list(native.settings.grants(agent.name)),
        "starts": agent.started, "thread_ids": threads,
    }
    if agent.opencode_dir is not None:
        store = read_opencode_store(agent.opencode_dir / "data", threads)
        out.update({"opencode_home": str(agent.opencode_dir), "opencode_store": store,
                    "bindings": _bindings(native, agent, store), "rollouts": []})
    elif agent.claude_dir is not None:
        out.update({"claude_dir": str(agent.claude_dir), "bindings": _claude_bindings(native, agent),
                    "rollouts": []})
    else:
        out.update({"codex_home": str(agent.codex_home),
                    "rollouts": [read_rollout(p) for p in find_rollouts(agent.codex_home, threads)]})
    if agent.script is not None:
        requests = agent.script.requests
        out["model_requests"] = [{"index": r.index, "turn_id": r.turn_id, "model": r.body.get("model"),
                                  "reasoning": r.body.get("reasoning"), "thread_id": r.body.get("prompt_cache_key"),
                                  "answered_by": r.answered_by, "has_authorization": r.has_authorization}
                                 for r in requests]
        out["title_requests"] = len(agent.script.title_requests)
        out["turn_ids"] = list(dict.fromkeys(r.turn_id for r in requests if r.turn_id))
        out["offered_tools"] = requests[0].offered_tools() if requests else {}
        out["tool_calls"] = tool_calls(r.body for r in requests)
    else:
        out["turn_ids"] = [t for ro in out["rollouts"] for t in ro["turn_ids"]]
        out["tool_calls"] = [c for ro in out["rollouts"] for c in ro["tool_calls"]]
        out["offered_tools"] = "see the rollout (real model: the request is not observable)"
    if agent.terminal is not None:
        out["visible_output"] = [{"label": label, "screen": screen} for label, screen in agent.terminal.captures]
    return out


def _executables(native: NativeRun) -> list[dict[str, Any]]:
    exes = [executable_evidence(native.codex.executable, "codex (as given)")]
    if native.opencode is not None:
        exes.append(executable_evidence(native.opencode.executable, f"opencode {native.opencode.version}"))
    if native.claude is not None:
        exes.append(executable_evidence(native.claude.executable, f"claude {native.claude.version}"))
    # npm's layout: the platform package with the native binary sits beside @openai/codex.
    vendor = sorted(Path(native.codex.executable).resolve().parents[2].glob("codex-*/vendor/*/bin/codex*"))
    exes += [executable_evidence(v, "codex (native binary)") for v in vendor]
    for role, cmd in (("wardian CLI", native.settings.cli), ("wardian app", native.settings.app)):
        path = Path(cmd[0]) if len(cmd) == 1 else Path(sys.executable)
        entry = executable_evidence(path, role + ("" if len(cmd) == 1 else " (source: python -m wardian)"))
        exes.append(entry)
    registered = Path(sys.executable).parent / "wardian"
    if len(native.settings.cli) > 1 and registered.exists():
        exes.append(executable_evidence(registered, "wardian (registered as the MCP server command)"))
    return exes


def test_a_sender_agent_assigns_work_and_consumes_the_correlated_reply(native: NativeRun, report_dir: Path) -> None:
    """ACC-1, ACC-2, ACC-8: the exchange, proven on records and evidence."""
    s = native.settings
    report: dict[str, Any] = {
        "run": {"mode": s.mode, "providers": {SENDER: s.providers[0], RECEIVER: s.providers[1]},
                "lifecycle": s.lifecycle, "real_model": s.real, "trust_fixture_workspaces": s.trust,
                "approve_tools": s.approve_all, "run_root": str(native.run.root),
                "codex": {"path": str(native.codex.executable), "version": str(native.codex.version),
                          "version_output": native.codex.version_output,
                          "sha256": executable_evidence(native.codex.executable, "codex")["sha256"]}},
        "input": {"from": OPERATOR, "to": SENDER, "text": PLAIN_REQUEST, "counts": text_counts(PLAIN_REQUEST)},
        "outcome": "failed", "checks": [], "correlation": {},
    }
    checks: list[str] = report["checks"]
    try:
        _exchange(native, report, checks)
        report["outcome"] = "passed"
    finally:
        try:
            report["executables"] = _executables(native)
            report["records"] = native.records() if native.app_proc is not None else report.get("records", [])
            report["agents"] = [_agent_evidence(native, a) for a in native.agents.values() if a.workspace]
            report["wardian_commands"] = native.commands
        finally:
            auth = [a.codex_home / "auth.json" for a in native.agents.values()]
            json_path, md_path = write_report(report, report_dir, secrets=native.secrets, auth_files=auth)
            print(f"[native] evidence report: {json_path} (summary {md_path})", flush=True)


def _exchange(native: NativeRun, report: dict[str, Any], checks: list[str]) -> None:
    s = native.settings
    native.start_app()
    lead, worker = native.add_agent(SENDER), native.add_agent(RECEIVER)
    native.add_agent(OPERATOR, workspace=False)  # the person: a registered, never-started agent
    receipts: list[dict[str, Any]] = []
    if lead.script is not None and worker.script is not None:
        if s.attached and s.trust:
            for agent in (lead, worker):
                assert agent.script is not None
                agent.script.add(Message(WARMUP_ANSWER, phase="final_answer"))  # see NativeRun.warm_up
        script_exchange(lead.script, worker.script, receipts)
    for agent in (lead, worker):
        native.start_agent(agent)
    if s.attached:
        for agent in (lead, worker):
            native.attach(agent)
        if not s.trust:
            _untrusted_diagnostic(native, report, checks, lead, worker)
            return
        for agent in (lead, worker):
            native.wait_status(agent.name, "idle")
            native.warm_up(agent)
            native.wait_status(agent.name, "idle")
            assert agent.terminal is not None
            capture(agent.terminal, "attached, idle")
        checks.append("both attached TUIs' threads were observed before any delivery (status idle)")
    threads_before = {a.name: _thread_ids(native, a) for a in (lead, worker)}

    native.progress(f"{OPERATOR} asks {SENDER}: {PLAIN_REQUEST!r}")
    task = native.task(OPERATOR, SENDER, PLAIN_REQUEST)
    report["correlation"]["operator_request_id"] = task["request_id"]
    answer = native.wait_answer(OPERATOR, task["request_id"])
    native.progress(f"{SENDER} answered {task['request_id']}: {answer['text']!r}")
    records = native.records()
    report["records"] = records
    followups = [r for r in records if r["kind"] == "task" and r["sender"] and r["sender"]["name"] == SENDER
                 and r["recipient"]["name"] == RECEIVER]
    assert len(followups) == 1, records
    ask = followups[0]["id"]
    replies = [r for r in records if r["kind"] == "reply" and r["request_id"] == ask]
    assert [(r["sender"]["name"], r["status"]) for r in replies] == [(RECEIVER, "done")], replies
    report["correlation"].update({"followup_request_id": ask, "reply_id": replies[0]["id"],
                                  "reply_request_id": replies[0]["request_id"], "operator_answer_id": answer["id"]})
    checks.append(f"{SENDER} assigned exactly one task to {RECEIVER} ({ask}); {RECEIVER}'s reply "
                  f"{replies[0]['id']} answers that request")
    assert answer["kind"] == "reply"
    assert answer["status"] == "done"
    assert answer["request_id"] == task["request_id"]

    if lead.script is not None and worker.script is not None:
        _check_scripted_exchange(native, lead, worker, receipts, ask, replies[0], answer, checks)
    else:
        _check_real_exchange(native, lead, ask, replies[0], checks)

    if s.attached:
        assert lead.terminal is not None
        assert worker.terminal is not None
        wait_for_text(worker.terminal, WORKER_ANSWER if worker.script else ask, native.run_tick)
        capture(worker.terminal, "after the exchange")
        wait_for_text(lead.terminal, SENDER_ANSWER if lead.script else "France", native.run_tick)
        capture(lead.terminal, "after the exchange")
        assert lead.terminal.is_alive()
        assert worker.terminal.is_alive()
        assert {a.name: _thread_ids(native, a)[: len(threads_before[a.name])] for a in (lead, worker)} == threads_before
        checks.append("both TUIs show the exchange and stayed on the same owned threads")
        if s.lifecycle:
            _lifecycle(native, lead, worker, report, checks)
    else:
        _later_task(native, lead, report, checks)
    for agent in (lead, worker):
        if agent.claude_dir is not None:
            _check_every_claude_binding(native, agent, checks)


def _check_every_claude_binding(native: NativeRun, agent: Agent, checks: list[str]) -> None:
    """Every ask_ a Claude Code agent got (the report keeps these bindings): bound to a session the app started it
    on and to the message uuid the app chose, and Claude Code's own transcript of that session records that uuid
    under an entry of that session that carries the ask_ id; the transcript's sha256 is the one the report keeps."""
    bindings = _claude_bindings(native, agent)
    assert bindings, f"{agent.name} got no task"
    sessions = set(_thread_ids(native, agent))
    for b in bindings:
        assert b["session_id"] in sessions, (b, sessions)
        assert b["message_id"], b
        assert b["in_transcript"], b
        assert b["holds_request"], b
        assert len(b["transcript_sha256"] or "") == 64, b
    checks.append(f"each of the {len(bindings)} ask_ {agent.name} got is bound to its Claude Code session and "
                  "message uuid, found in that session's transcript under an entry carrying the ask_ id: "
                  + "; ".join(f"{b['request_id']} ↔ {b['session_id']}/{b['message_id']} (sha256 "
                              f"{b['transcript_sha256'][:16]}…)" for b in bindings))


def _check_scripted_exchange(native: NativeRun, lead: Agent, worker: Agent, receipts: list[dict[str, Any]],
                             ask: str, reply: dict[str, Any], answer: dict[str, Any], checks: list[str]) -> None:
    assert lead.script is not None
    assert worker.script is not None
    requests = lead.script.requests
    # Claude Code offers its MCP tools once ToolSearch has loaded them (deferred tools), the others from the start.
    offering = requests if lead.claude_dir is not None else requests[:1]
    assert any("followup_task" in r.offered_tools() for r in offering)
    # Only wardian's tools: Claude Code first loads its deferred MCP tools with ToolSearch.
    calls = [c for c in tool_calls(r.body for r in requests) if c["namespace"] == "mcp__wardian"]
    assert [(c["namespace"], c["name"]) for c in calls][:2] == [("mcp__wardian", "followup_task"),
                                                                ("mcp__wardian", "receive_messages")], calls
    (receipt,) = receipts
    assert receipt["request_id"] == ask == reply["request_id"]
    checks.append(f"{SENDER} called followup_task; its receipt names {ask}, the request the reply answers")
    final_request = requests[-1]
    wake = final_request.function_call_outputs()[-1].text
    # Either path consumes the correlated reply: pushed into the conversation while lead waited (the usual
    # case), or, when lead's receive ran after the reply was committed but before the app pushed it, returned
    # by receive_messages itself (the runtime then does not push it again).
    pushed = '"wake_reason":"provider_context_available"' in wake
    received = f'"request_id":"{ask}"' in wake and f'"id":"{reply["id"]}"' in wake
    assert pushed or received, wake
    if lead.opencode_dir is not None:
        # OpenCode takes pushes only between turns (inject_while_active=False): the reply that arrives while the
        # sender's turn waits in receive_messages stays on the receive path, and that receive returns it.
        assert received, wake
    checks.append(f"{SENDER} consumed the reply "
                  + ("pushed into its conversation (receive woke with provider_context_available)" if pushed
                     else "through receive_messages (OpenCode takes pushes only between turns)"
                     if lead.opencode_dir is not None
                     else "through receive_messages (it was committed before the app pushed it)"))
    seen = "\n".join([*final_request.user_texts(), *role_texts(final_request.body, "system"),
                      *(o.text for o in final_request.function_call_outputs())])
    assert ask in seen
    assert WORKER_ANSWER in seen
    checks.append(f"{SENDER}'s final request held the reply to {ask} before it answered")
    assert answer["text"] == SENDER_ANSWER
    delivered = next(t for r in worker.script.requests if ask in (t := "\n".join(r.user_texts())))
    assert "wardian_task_delivery" in delivered
    assert ask in delivered
    checks.append(f"{RECEIVER}'s turn got {ask} as a structured wardian_task_delivery item")
    if worker.opencode_dir is not None:
        _check_opencode_binding(native, worker, ask, WORKER_ANSWER, checks)
    if worker.claude_dir is not None:
        _check_claude_binding(native, worker, ask, checks)
    if lead.opencode_dir is not None:
        store = read_opencode_store(lead.opencode_dir / "data")
        parts = [c for m in store["messages"] for c in m["tool_calls"]]
        followup = [c for c in parts if c["tool"] == "wardian_followup_task"]
        assert len(followup) == 1, parts
        assert followup[0]["status"] == "completed"
        assert ask in str(followup[0]["output"]), followup
        checks.append(f"{SENDER}'s OpenCode store holds its wardian_followup_task tool part, whose output (the "
                      f"receipt) names {ask}")
    assert lead.script.exhausted_requests == []
    assert worker.script.exhausted_requests == []


def _check_claude_binding(native: NativeRun, agent: Agent, request_id: str, checks: list[str]) -> None:
    """The ask_ is bound to the agent's session and the message uuid the app chose, and Claude Code's own transcript
    of that session records a message with that uuid."""
    (binding,) = [b for b in _claude_bindings(native, agent) if b["request_id"] == request_id]
    assert binding["in_transcript"], binding
    assert binding["holds_request"], binding
    checks.append(f"{request_id} is bound to {agent.name}'s Claude Code session {binding['session_id']} and message "
                  f"{binding['message_id']}, which its transcript records (sha256 {binding['transcript_sha256']})")


def _check_opencode_binding(native: NativeRun, agent: Agent, request_id: str, final: str, checks: list[str]) -> None:
    """The ask_ is bound to the session and the msg_ the app chose; OpenCode stored the delivery under that id and
    answered it (assistant messages whose parentID is that id) with the text the reply carries."""
    assert agent.opencode_dir is not None
    story = native.story(request_id)
    task = story["task"]
    msg, ses = task["provider_message_id"], task["facts"]["thread_id"]
    assert msg.startswith("msg_"), task
    assert ses.startswith("ses_"), task
    assert (task["facts"]["state"], task["outcome_status"]) == ("completed", "done"), task
    store = read_opencode_store(agent.opencode_dir / "data", [ses])
    stored = next(m for m in store["messages"] if m["id"] == msg)
    assert stored["session_id"] == ses
    assert stored["role"] == "user"
    assert any(request_id in t and "wardian_task_delivery" in t for t in stored["texts"]), stored
    answers = [m for m in store["messages"] if m["parent_id"] == msg]
    assert answers, store["messages"]
    assert answers[-1]["texts"][-1] == final == story["answer"]["text"], (answers, story["answer"])
    checks.append(f"{request_id} ↔ OpenCode session {ses}, message {msg}: stored with the delivery and answered by "
                  f"{[m['id'] for m in answers]} with the reply's text")


def _check_real_exchange(native: NativeRun, lead: Agent, ask: str, reply: dict[str, Any], checks: list[str]) -> None:
    rollouts = [read_rollout(p) for p in find_rollouts(lead.codex_home)]
    calls = [c for ro in rollouts for c in ro["tool_calls"]]
    assert any(c["name"] == "followup_task" and ask in str(c["output"]) for c in calls), calls
    checks.append(f"{SENDER}'s rollout holds the followup_task call whose output names {ask}")
    messages = [m for ro in rollouts for m in ro["assistant_messages"]]
    assert messages, "the sender's rollout holds no answer"
    raw = "\n".join(p.read_text(encoding="utf-8") for p in find_rollouts(lead.codex_home))
    assert reply["id"] in raw or reply["text"][:40] in raw
    checks.append(f"{SENDER}'s rollout holds the reply {reply['id']} before its final answer")


def _untrusted_diagnostic(native: NativeRun, report: dict[str, Any], checks: list[str], *agents: Agent) -> None:
    """WARDIAN_E2E_MESSAGING_V2_TRUST_FIXTURE_WORKSPACES=0: Codex asks for trust; we answer nothing."""
    for agent in agents:
        assert agent.terminal is not None
        screen = wait_for_text(agent.terminal, "trust", native.run_tick)
        capture(agent.terminal, "untrusted startup: trust screen (not answered)")
        assert native.row(agent.name)["status"] == "starting"  # no thread yet, so nothing is delivered
        report.setdefault("diagnostic", {})[agent.name] = screen
    checks.append("untrusted diagnostic: both TUIs show the trust screen and no delivery started")


def _later_task(native: NativeRun, lead: Agent, report: dict[str, Any], checks: list[str]) -> None:
    """Background mode: the owner exits; a new generation resumes the same conversation and recalls."""
    before = native.row(SENDER)
    threads = _thread_ids(native, lead)
    if lead.script is not None:
        script_recall(lead.script)
    native.stop_app()
    native.start_app()  # the agents are desired on: the new app starts new generations that resume
    row = native.wait_status(SENDER, "idle", where=lambda r: r["generation"] > before["generation"])
    task = native.task(OPERATOR, SENDER, LATER_REQUEST)
    answer = native.wait_answer(OPERATOR, task["request_id"])
    report["correlation"].update({"later_request_id": task["request_id"], "later_answer_id": answer["id"],
                                  "generations": [before["generation"], row["generation"]]})
    report["later_input"] = {"text": LATER_REQUEST, "counts": text_counts(LATER_REQUEST)}
    if lead.opencode_dir is not None or lead.claude_dir is not None:
        assert answer["text"] == RECALL_ANSWER
        sessions = {native.story(rid)["task"]["facts"]["thread_id"]
                    for rid in (report["correlation"]["operator_request_id"], task["request_id"])}
        assert len(sessions) == 1, sessions
        assert sessions <= set(threads), (sessions, threads)
        if lead.opencode_dir is not None:
            _check_opencode_binding(native, lead, task["request_id"], RECALL_ANSWER, checks)
        else:
            _check_claude_binding(native, lead, task["request_id"], checks)
    elif lead.script is not None:
        assert answer["text"] == RECALL_ANSWER
        later = lead.script.requests[-1]
        assert later.body["prompt_cache_key"] == lead.script.requests[0].body["prompt_cache_key"]
        assert later.body["prompt_cache_key"] in threads
    else:
        assert "Paris" in answer["text"], answer
    checks.append(f"after the owner exited, generation {row['generation']} resumed the same thread and recalled "
                  "the earlier result without being given it again")


def _lifecycle(native: NativeRun, lead: Agent, worker: Agent, report: dict[str, Any], checks: list[str]) -> None:
    """Attached + WARDIAN_E2E_MESSAGING_V2_LIFECYCLE=1: idle information starts no turn; one interrupt stops
    exactly the observed active turn."""
    assert worker.terminal is not None
    count = len(worker.script.requests) if worker.script else 0
    hold = Hold("counting slowly") if worker.script else None
    if worker.script is not None and hold is not None:
        worker.script.add(hold, Message("never reached", phase="final_answer"))
    info = native.send(OPERATOR, RECEIVER, "FYI: the build is green.")
    assert info["delivery"] == "provider_visible", info
    for _ in range(20):  # a bounded look: the worker stays idle and its model gets no request
        assert native.row(RECEIVER)["status"] == "idle"
        native.run_tick()
    if worker.script is not None:
        assert len(worker.script.requests) == count
    checks.append("information to an idle agent was provider_visible and started no turn")
    lead_requests = len(lead.script.requests) if lead.script else 0
    long_task = native.task(OPERATOR, RECEIVER, "Count slowly from one to one million.")
    if hold is not None:
        started = hold.wait_started(timeout_s=120)
        assert "FYI: the build is green." in "\n".join(started.user_texts())  # the injected info, seen next turn
    turn = native.wait_active_turn(RECEIVER)
    result = native.interrupt(OPERATOR, RECEIVER)
    assert result["turn_id"] == turn
    notice = native.wait_answer(OPERATOR, long_task["request_id"])
    assert (notice["kind"], notice["status"]) == ("notice", "blocked"), notice
    assert turn in notice["text"], notice
    if hold is not None:
        assert hold.wait_finished(timeout_s=60) == "disconnected"
    native.wait_status(RECEIVER, "idle")
    assert native.row(SENDER)["status"] == "idle"
    if lead.script is not None:
        assert len(lead.script.requests) == lead_requests  # the sender's conversation was not touched
    interrupts = [r for r in native.records() if r["kind"] == "interrupt"]
    assert len(interrupts) <= 1
    capture(worker.terminal, "after the interrupt")
    report["correlation"].update({"lifecycle_info_id": info["interaction_id"], "interrupted_turn_id": turn,
                                  "interrupted_request_id": long_task["request_id"], "interrupt": result})
    checks.append(f"one interrupt stopped exactly the observed active turn {turn}; its task got a blocked notice")
