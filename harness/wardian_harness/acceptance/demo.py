"""`wardian demo`: two real agents on the scripted model, and the exchange shown as it happens.

Loaded by core's `wardian demo` through the `wardian.plugins` entry point `demo` (core never imports the
harness). It starts an app on a temporary home, registers `lead` and `worker` (each with its own private provider
home and fixture workspace) and a person, `human`; starts both agents (Codex app-servers by default; `--providers
codex,opencode` makes the worker an OpenCode agent, `claude,codex` the lead a Claude Code agent, `qwen,codex` a Qwen
Code lead; `gemini` is Gemini CLI, `acp` a generic ACP agent, `opencode acp`, and `pi` Pi) on the scripted model
(offline, no account); asks lead in plain English to find something out from worker; and prints every record as the
app commits it: who asked whom, the request id, the delivery state, the reply. At the end it writes the evidence
(records, each Codex agent's rollout file, each OpenCode agent's ask_ <-> ses_/msg_ bindings and its store's
sha256, each Claude Code agent's ask_ <-> session/message uuid bindings checked against its transcript, with the
transcript's sha256, each Pi agent's ask_ <-> session bindings checked against its session file, with the file's
sha256) and stops everything it started.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from wardian_harness.acceptance.exchange import PLAIN_REQUEST, script_exchange
from wardian_harness.acceptance.homes import IsolatedRun
from wardian_harness.acceptance.installs import Installs
from wardian_harness.acceptance.native import Agent, NativeRun, NativeRunError
from wardian_harness.acceptance.report import find_rollouts, read_opencode_store, sha256_file
from wardian_harness.acceptance.settings import OPERATOR, PROVIDERS, RECEIVER, SENDER, Settings, parse_providers
from wardian_harness.models.scripted_model import ScriptedModel
from wardian_harness.processes.proctree import ProcessTree
from wardian_harness.providers.claude_home import transcript_binding
from wardian_harness.providers.cli import CliNotFound
from wardian_harness.providers.codex_install import CodexInstallError
from wardian_harness.providers.pi_home import session_binding

_BOLD, _DIM, _RESET = ("\033[1m", "\033[2m", "\033[0m") if sys.stdout.isatty() else ("", "", "")


def _say(line: str) -> None:
    print(f"{_BOLD}== {line}{_RESET}", flush=True)


def _note(line: str) -> None:
    print(f"   {_DIM}{line}{_RESET}", flush=True)


def _describe(record: dict[str, Any]) -> str:
    sender = record["sender"]["name"] if record.get("sender") else "wardian"
    to = record["recipient"]["name"]
    text = record["text"] if len(record["text"]) <= 100 else record["text"][:97] + "..."
    what = {"task": f"asks {to} (request {record['id']})", "message": f"tells {to} ({record['id']})",
            "reply": f"replies to {to}: request {record['request_id']} is {record['status']} ({record['id']})",
            "notice": f"notifies {to}: request {record['request_id']} is {record['status']}"}
    return f"{sender} {what.get(record['kind'], record['kind'] + ' to ' + to)}\n      \"{text}\""


def _watch(native: NativeRun, request_id: str, rounds: int = 2400) -> dict[str, Any]:
    """Print each new record and agent status change until the reply to `request_id` is committed."""
    seen: set[str] = set()
    statuses: dict[str, str] = {}
    for _ in range(rounds):
        for agent in native.call("agent/list")["agents"]:
            status = agent["status"] + (f" (turn {agent['active_turn_id']})" if agent.get("active_turn_id") else "")
            if agent["name"] in (SENDER, RECEIVER) and statuses.get(agent["name"]) != status:
                statuses[agent["name"]] = status
                _note(f"{agent['name']} is {status}")
        for record in native.call("mailbox/records", {"limit": 1000})["records"]:
            if record["id"] not in seen:
                seen.add(record["id"])
                print(f"   {_describe(record)}", flush=True)
                if record["kind"] in ("reply", "notice") and record.get("request_id") == request_id:
                    return dict(record)
        native.run_tick()
    raise NativeRunError(f"no reply to {request_id} arrived")


def _task_bindings(native: NativeRun, name: str) -> list[dict[str, Any]]:
    """Each task `name` got, with the conversation and the message id its delivery was bound to."""
    bindings = []
    for record in native.records():
        if record["kind"] == "task" and record["recipient"]["name"] == name:
            task = native.story(record["id"])["task"] or {}
            bindings.append({"request_id": record["id"], "session_id": (task.get("facts") or {}).get("thread_id"),
                             "message_id": task.get("provider_message_id")})
    return bindings


def _claude_evidence(native: NativeRun, name: str, directory: Path) -> list[dict[str, Any]]:
    """A Claude Code agent's tasks' bindings, each checked against its transcript (the message uuid the app chose is
    an entry of the session's transcript), and the transcripts copied beside them."""
    agent = native.agents[name]
    assert agent.claude_dir is not None
    bindings = []
    for task in _task_bindings(native, name):
        binding = transcript_binding(agent.claude_dir, task["request_id"], task["session_id"], task["message_id"])
        bindings.append(binding)
        if binding["transcript"] is not None:
            shutil.copyfile(binding["transcript"], directory / f"{name}-{Path(binding['transcript']).name}")
        _note(f"{binding['request_id']} ↔ Claude Code session {binding['session_id']}, message "
              f"{binding['message_id']}: {'in' if binding['in_transcript'] else 'NOT in'} its transcript"
              + (f" (sha256 {binding['transcript_sha256'][:16]}…)" if binding["transcript_sha256"] else ""))
        if not binding["in_transcript"]:
            raise NativeRunError(f"{binding['request_id']}'s message {binding['message_id']} is not in {name}'s "
                                 f"Claude Code transcript ({binding['transcript']})")
    return bindings


def _pi_evidence(native: NativeRun, name: str, directory: Path) -> list[dict[str, Any]]:
    """A Pi agent's tasks' bindings, each checked against its session file (the prompt that carried the task is a user
    message of the session the app recorded), and the session files copied beside them."""
    pi_dir = native.agents[name].pi_dir
    assert pi_dir is not None
    bindings = []
    for task in _task_bindings(native, name):
        binding = session_binding(pi_dir, task["request_id"], task["session_id"])
        bindings.append(binding)
        if binding["session_file"] is not None:
            shutil.copyfile(binding["session_file"], directory / f"{name}-{Path(binding['session_file']).name}")
        _note(f"{binding['request_id']} ↔ Pi session {binding['session_id']}: "
              f"{'in' if binding['in_session'] else 'NOT in'} its session file"
              + (f" (sha256 {binding['session_sha256'][:16]}…)" if binding["session_sha256"] else ""))
        if not binding["in_session"]:
            raise NativeRunError(f"{binding['request_id']} is not in {name}'s Pi session file "
                                 f"({binding['session_file']})")
    return bindings


def _evidence(native: NativeRun, directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "records.json").write_text(json.dumps(native.records(), indent=2, ensure_ascii=False) + "\n",
                                            encoding="utf-8")
    bindings: list[dict[str, Any]] = []
    claude_bindings: list[dict[str, Any]] = []
    pi_bindings: list[dict[str, Any]] = []
    for name in (SENDER, RECEIVER):
        agent = native.agents[name]
        if agent.pi_dir is not None:
            pi_bindings += _pi_evidence(native, name, directory)
            continue
        if agent.claude_dir is not None:
            claude_bindings += _claude_evidence(native, name, directory)
            continue
        if agent.opencode_dir is not None:
            store = read_opencode_store(agent.opencode_dir / "data")
            for f in store["files"]:
                target = directory / f"{name}-{Path(f['path']).name}"
                shutil.copyfile(f["path"], target)
                _note(f"{name}'s OpenCode store: {target} (sha256 {f['sha256'][:16]}…)")
            for binding in _task_bindings(native, name):
                bindings.append(binding)
                _note(f"{binding['request_id']} ↔ OpenCode session {binding['session_id']}, message "
                      f"{binding['message_id']}")
            continue
        for rollout in find_rollouts(agent.codex_home):
            target = directory / f"{name}-{rollout.name}"
            shutil.copyfile(rollout, target)
            _note(f"{name}'s Codex rollout: {target} (sha256 {sha256_file(target)[:16]}…)")
    if bindings:
        (directory / "opencode-bindings.json").write_text(json.dumps(bindings, indent=2) + "\n", encoding="utf-8")
    if pi_bindings:
        (directory / "pi-bindings.json").write_text(json.dumps(pi_bindings, indent=2) + "\n", encoding="utf-8")
    if claude_bindings:
        (directory / "claude-bindings.json").write_text(json.dumps(claude_bindings, indent=2) + "\n",
                                                        encoding="utf-8")
    _note(f"every record: {directory / 'records.json'}")


def _parse_args(argv: Sequence[str] | None) -> tuple[argparse.Namespace, tuple[str, str]]:
    parser = argparse.ArgumentParser(prog="wardian demo", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--evidence", type=Path, default=None,
                        help="where to keep the records and rollouts (default: a new folder under /tmp)")
    parser.add_argument("--providers", default="codex,codex", metavar="LEAD,WORKER",
                        help=f"the lead's and the worker's provider (allowed: {', '.join(PROVIDERS)}; default: "
                             "codex,codex; codex,opencode or claude,codex shows a mixed team)")
    args = parser.parse_args(argv)
    try:
        providers = parse_providers(args.providers, PROVIDERS)
    except ValueError as exc:
        parser.error(str(exc).replace("WARDIAN_E2E_MESSAGING_V2_PROVIDERS=", "--providers "))
    return args, providers


def _installs(providers: tuple[str, str]) -> Installs | None:
    """The Codex (and, for a team with an OpenCode or Claude Code agent, that CLI) to run; None (said why) when one
    is unusable."""
    try:
        return Installs.find(providers)
    except (CodexInstallError, ValueError) as exc:
        print(f"wardian demo: Codex unusable: {exc}\n(scripts/setup.sh --with-node installs the pinned Codex)",
              file=sys.stderr)
    except CliNotFound as exc:
        print(f"wardian demo: {exc.cli} unusable: {exc}\n(scripts/setup.sh --with-node installs the pinned one)",
              file=sys.stderr)
    return None


def _start_team(native: NativeRun, providers: tuple[str, str]) -> tuple[Agent, list[dict[str, Any]]]:
    """Register lead, worker and the person, script the exchange, start both agents; the lead and its receipts."""
    native.start_app()
    lead, worker = native.add_agent(SENDER), native.add_agent(RECEIVER)
    native.add_agent(OPERATOR, workspace=False)
    receipts: list[dict[str, Any]] = []
    assert lead.script is not None
    assert worker.script is not None
    script_exchange(lead.script, worker.script, receipts)
    _say(f"two real agents ({SENDER}: {providers[0]}, {RECEIVER}: {providers[1]}), each with its own "
         "provider home and workspace")
    for agent in (lead, worker):
        started = native.start_agent(agent)
        _note(f"{agent.name}: thread {started['thread_id']}, generation {started['generation']}")
    return lead, receipts


def _exchange(native: NativeRun, lead: Agent, receipts: list[dict[str, Any]]) -> dict[str, Any]:
    """The person's plain-English request and the exchange it sets off, shown as the app commits it; the answer."""
    _say(f"{OPERATOR} asks {SENDER} in plain English")
    task = native.task(OPERATOR, SENDER, PLAIN_REQUEST)
    _note(f"receipt: request {task['request_id']}, delivery {task['delivery']}")
    _say("the exchange, as the app commits it")
    answer = _watch(native, task["request_id"])
    if receipts:
        _note(f"lead's followup_task receipt: request {receipts[0]['request_id']}, "
              f"delivery {receipts[0].get('delivery')}")
    assert lead.script is not None
    woke = [o.text for r in lead.script.requests for o in r.function_call_outputs() if "wake_reason" in o.text]
    if woke and "provider_context_available" in woke[-1]:
        _note("lead's receive_messages woke with provider_context_available: the reply was pushed into "
              "its conversation, and its final request held it")
    elif lead.provider == "opencode" and receipts:
        _note("lead's receive_messages returned the reply (OpenCode takes pushes only between turns, so a "
              "reply that arrives while its turn waits stays on the receive path)")
    return answer


def main(argv: Sequence[str] | None = None) -> int:
    args, providers = _parse_args(argv)
    found = _installs(providers)
    if found is None:
        return 3
    evidence = args.evidence or Path(f"/tmp/wardian-demo-evidence-{time.strftime('%Y%m%d-%H%M%S')}")
    run = IsolatedRun.create(prefix="wdemo")
    tree = ProcessTree(run.run_id)
    status = 1
    try:
        with ScriptedModel() as model:
            native = NativeRun(Settings(providers=providers), run, tree, found.codex, model, progress=_note,
                               opencode=found.opencode, claude=found.claude,
                               acp={n: c for n, c in (("qwen", found.qwen), ("gemini", found.gemini)) if c},
                               pi=found.pi)
            _say(f"an app on a temporary home ({run.wardian_home}), {found.describe()}, a scripted model")
            lead, receipts = _start_team(native, providers)
            answer = _exchange(native, lead, receipts)
            _say(f"{SENDER}'s answer to {OPERATOR}: {answer['text']}")
            _say("evidence")
            _evidence(native, evidence)
            native.stop_app()
            status = 0
    except NativeRunError as exc:
        print(f"wardian demo: {exc}; app log: {run.wardian_home / 'logs' / 'app.log'}", file=sys.stderr)
    finally:
        leftovers = tree.close()
        run.close()
        if leftovers:
            print(f"wardian demo: processes left running: {[p.pid for p in leftovers]}", file=sys.stderr)
            status = 1
        else:
            _say("stopped: the app, both agents' provider servers and their MCP servers; nothing is left running")
    return status


if __name__ == "__main__":
    sys.exit(main())
