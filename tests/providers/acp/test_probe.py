"""An agent's start asks its CLI for its version once (the start's check and its launch share the probe): a Node
CLI's `--version` is a whole process start of it (docs/benchmarks.md, `acp_cold_start_to_idle`)."""

from __future__ import annotations

import shlex
from pathlib import Path

from tests.conftest import app_on_root, pinned_npm_tool, short_home
from tests.providers.acp.conftest import REPO, AcpApp
from wardian_harness.models.scripted_model import Message, ScriptedModel


def test_agent_start_asks_the_cli_its_version_once_and_the_agent_works(tmp_path: Path) -> None:
    cli = pinned_npm_tool(REPO / "node_modules" / ".bin" / "qwen", "qwen CLI")
    calls = tmp_path / "calls.txt"
    wrapper = tmp_path / "qwen"
    wrapper.write_text(f'#!/bin/sh\necho "$*" >> {shlex.quote(str(calls))}\nexec {shlex.quote(str(cli))} "$@"\n',
                       encoding="utf-8")
    wrapper.chmod(0o755)
    env = {"WARDIAN_QWEN": str(wrapper)}
    with ScriptedModel() as model, app_on_root(short_home("wv"), env) as handle:
        world = AcpApp(handle, model, env, "qwen")
        _, lead, _ = world.agent("lead", start=False)
        _, _, script = world.agent("worker")
        assert calls.read_text(encoding="utf-8").splitlines().count("--version") == 1
        script.add(Message("probed once"))
        world.app.call("task/followup", {"session": lead, "target": "worker", "message": "hello"})
        (reply,) = world.app.records_for(lead)
        assert reply["text"] == "probed once"
        world.start("worker")  # a restart with the same settings: its own probe, once
        assert calls.read_text(encoding="utf-8").splitlines().count("--version") == 2
