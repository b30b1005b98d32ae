"""A mixed team (docs/guide/pi.md): a Pi lead hands a task to a Codex worker and gets its reply inside its own run,
and the reverse, each on one app and the scripted model (real Pi, real Codex)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import AppHandle, app_on_root, pinned_npm_tool, short_home
from tests.providers.pi.conftest import REPO, pi_settings
from wardian_harness.models.scripted_model import Message, ScriptedModel, ToolCall
from wardian_harness.providers.codex_home import ScriptedProvider, codex_overrides
from wardian_harness.providers.codex_install import find_codex

QUESTION = "What is six times seven?"


@pytest.fixture
def team() -> Iterator[tuple[AppHandle, ScriptedModel]]:
    env = {"WARDIAN_PI": str(pinned_npm_tool(REPO / "node_modules" / ".bin" / "pi", "Pi CLI")),
           "WARDIAN_CODEX": str(find_codex()), "WARDIAN_SCRIPTED_MODEL_KEY": "scripted"}
    with ScriptedModel() as model, app_on_root(short_home("wpm"), env) as app:
        yield app, model


def _start(app: AppHandle, model: ScriptedModel, name: str, provider: str, approve: list[str]) -> None:
    base_url = model.agent(name).base_url
    config = pi_settings(base_url) if provider == "pi" else codex_overrides(ScriptedProvider(base_url))
    app.call("agent/start", {"agent": name, "approve_tools": approve, "config": config}, timeout_s=300)


@pytest.mark.parametrize(("lead_provider", "worker_provider"), [("pi", "codex"), ("codex", "pi")])
def test_a_lead_gets_its_workers_reply_within_its_own_run(team: tuple[AppHandle, ScriptedModel],
                                                          lead_provider: str, worker_provider: str) -> None:
    app, model = team
    _, operator = app.add_agent("person", "codex")
    app.add_agent("lead", lead_provider)
    app.add_agent("worker", worker_provider)
    namespace: dict[str, Any] = {"namespace": None} if lead_provider == "pi" else {}
    lead = model.agent("lead")
    lead.add(ToolCall("followup_task", {"target": "worker", "message": QUESTION}, **namespace),
             ToolCall("receive_messages", {"timeout_ms": 60000}, **namespace), Message("The worker says 42."))
    worker = model.agent("worker")
    worker.add(Message("42"))
    _start(app, model, "worker", worker_provider, [])
    _start(app, model, "lead", lead_provider, ["followup_task"])
    task = app.call("task/followup", {"session": operator, "target": "lead", "message": "Ask the worker."})
    (reply,) = app.records_for(operator)
    assert (reply["request_id"], reply["status"], reply["text"]) == (task["request_id"], "done",
                                                                     "The worker says 42.")
    asked = re.search(r'\\?"request_id\\?": \\?"(ask_[0-9a-z]+)', json.dumps(worker.requests[0].body))
    assert asked is not None
    final = lead.requests[-1]
    texts = [*final.user_texts(), *(o.text for o in final.function_call_outputs())]
    replies = [t for t in texts if "wardian_inbox_delivery" in t and asked[1] in t]
    assert replies, texts
    assert '"kind": "reply"' in replies[0]
    assert '"text": "42"' in replies[0]
