"""`wardian pi register` (docs/guide/pi.md#your-own-pi): wardian's extension installed into the extensions dir of a
Pi a person runs, keeping what is there; that Pi, started with the agent's variables, acts as the agent."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.conftest import pinned_npm_tool, wardian_cmd
from tests.providers.pi.conftest import MODEL, REPO, PiApp, pi_settings
from wardian.providers.mcp_command import wardian_executable
from wardian_harness.models.scripted_model import Message, ToolCall


def _cli(world: PiApp, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*wardian_cmd(), "--home", str(world.app.home.root), *args], capture_output=True,
                          text=True, encoding="utf-8", timeout=120, check=False, env=world.app.env())


def test_register_installs_the_extension_beside_the_persons_own_and_their_pi_acts_as_the_agent(
        pi_app: PiApp, tmp_path: Path) -> None:
    world = pi_app
    _, lead, _ = world.agent("lead", start=False)
    world.agent("worker", start=False)
    agent_dir = tmp_path / "agent"
    extensions = agent_dir / "extensions"
    extensions.mkdir(parents=True)
    (extensions / "mine.ts").write_text("export default function () {}\n", encoding="utf-8")
    first = _cli(world, "pi", "register", "--agent", "worker", "--extensions-dir", str(extensions))
    assert first.returncode == 0, first.stderr
    assert "installed wardian's extension" in first.stdout
    installed = (extensions / "wardian.ts").read_text(encoding="utf-8")
    assert json.dumps([str(wardian_executable()), "mcp", "serve"]) in installed
    assert (extensions / "mine.ts").read_text(encoding="utf-8") == "export default function () {}\n"
    again = _cli(world, "pi", "register", "--agent", "worker", "--extensions-dir", str(extensions), "--json")
    assert json.loads(again.stdout)["created"] is False

    script = world.model.agent("worker")
    script.add(ToolCall("list_agents", {}, namespace=None, call_id="call_list"), Message("listed"))
    provider = json.loads(pi_settings(script.base_url)[0].split("=", 1)[1])
    (agent_dir / "models.json").write_text(json.dumps({"providers": {"scripted": provider}}), encoding="utf-8")
    variables = json.loads(_cli(world, "agent", "env", "worker", "--json").stdout)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WARDIAN_", "PI_"))}
    env.update(variables, PI_CODING_AGENT_DIR=str(agent_dir), PI_OFFLINE="1", PI_TELEMETRY="0")
    pi = str(pinned_npm_tool(REPO / "node_modules" / ".bin" / "pi", "Pi CLI"))
    done = subprocess.run([pi, "--no-session", "--model", f"scripted/{MODEL}", "-p", "who is there?"],
                          capture_output=True, text=True, encoding="utf-8", timeout=120, check=False, env=env,
                          cwd=tmp_path, stdin=subprocess.DEVNULL)
    assert done.stdout.strip() == "listed", done.stderr
    (output,) = [o.text for r in script.requests for o in r.function_call_outputs() if o.call_id == "call_list"]
    assert '"lead"' in output
    assert lead not in output


def test_register_refuses_a_wardian_ts_that_is_not_ours_and_changes_nothing(pi_app: PiApp, tmp_path: Path) -> None:
    world = pi_app
    world.agent("worker", start=False)
    (tmp_path / "wardian.ts").write_text("// someone else's\n", encoding="utf-8")
    done = _cli(world, "pi", "register", "--agent", "worker", "--extensions-dir", str(tmp_path))
    assert done.returncode != 0
    assert "registration_conflict" in done.stderr
    assert (tmp_path / "wardian.ts").read_text(encoding="utf-8") == "// someone else's\n"
