"""OpenCode installs nothing from npm into an agent's private config dir unless something there could use it
(docs/providers/opencode.md#plugin-packages): proven with the real `opencode serve`, its npm registry pointed at a
loopback server that records every request."""

from __future__ import annotations

import http.server
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pytest

from tests.conftest import app_on_root, short_home
from tests.providers.opencode.conftest import MixedWorld, opencode_or_skip
from tests.providers.opencode.test_runtime import records_for
from wardian.providers.opencode import plugin_deps, shell_env
from wardian_harness.models.scripted_model import Message, ScriptedModel


class _Registry(http.server.ThreadingHTTPServer):
    def __init__(self) -> None:
        self.paths: list[str] = []
        super().__init__(("127.0.0.1", 0), _RecordingHandler)


class _RecordingHandler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        cast(_Registry, self.server).paths.append(self.path)
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture
def registry() -> Iterator[_Registry]:
    server = _Registry()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def world(registry: _Registry) -> Iterator[MixedWorld]:
    env = {"WARDIAN_OPENCODE": str(opencode_or_skip()), "WARDIAN_SCRIPTED_MODEL_KEY": "dummy-key",
           "npm_config_registry": f"http://127.0.0.1:{registry.server_address[1]}/"}
    with ScriptedModel() as model, app_on_root(short_home("wp"), env) as handle:
        yield MixedWorld(handle, model, env)


def _config_dir(world: MixedWorld, uuid: str) -> Path:
    return world.app.home.agent_dir(uuid) / "opencode" / "config" / "opencode"


def test_a_fresh_agent_installs_nothing_and_still_answers(world: MixedWorld, registry: _Registry) -> None:
    _, lead, _ = world.agent("lead", start=False)
    agent, _, script = world.agent("worker")
    script.add(Message("The answer is 42."))
    world.app.call("task/followup", {"session": lead, "target": "worker", "message": "What is 6 x 7?"})
    assert [r["text"] for r in records_for(world, lead)] == ["The answer is 42."]
    config_dir = _config_dir(world, agent["uuid"])
    assert list((config_dir / "node_modules").iterdir()) == []
    assert json.loads((config_dir / plugin_deps.LOCKFILE).read_text()) == plugin_deps.PLACEHOLDER
    assert registry.paths == []  # OpenCode asked the registry for nothing
    files = sum(len(names) for _, _, names in os.walk(world.app.home.agent_dir(agent["uuid"])))
    assert files < 100  # an install would have left thousands


def test_a_plugin_the_person_configures_is_still_installed(world: MixedWorld, registry: _Registry) -> None:
    """`-c plugin=[…]` asks for a plugin: the placeholders are not written and OpenCode goes to the registry as it
    always does (this registry has nothing, so the install fails, and OpenCode starts without it)."""
    _, lead, _ = world.agent("lead", start=False)
    agent, _, script = world.agent("worker", extra=['plugin=["wardian-probe-plugin"]'])
    script.add(Message("still here"))
    world.app.call("task/followup", {"session": lead, "target": "worker", "message": "ping"})
    assert [r["text"] for r in records_for(world, lead)] == ["still here"]
    lockfile = _config_dir(world, agent["uuid"]) / plugin_deps.LOCKFILE
    assert not lockfile.exists() or json.loads(lockfile.read_text()) != plugin_deps.PLACEHOLDER
    assert any("wardian-probe-plugin" in path for path in registry.paths), registry.paths


@pytest.mark.fast
def test_the_placeholders_follow_what_the_config_dir_holds(tmp_path: Path) -> None:
    assert plugin_deps.settle(tmp_path) is True
    assert json.loads((tmp_path / plugin_deps.LOCKFILE).read_text()) == plugin_deps.PLACEHOLDER
    (tmp_path / "opencode.json").write_text('{"plugin": ["some-plugin"]}')
    assert plugin_deps.settle(tmp_path) is False  # a plugin asked for: the placeholders are taken back
    assert not (tmp_path / plugin_deps.LOCKFILE).exists()
    assert not (tmp_path / "node_modules").exists()
    (tmp_path / "opencode.json").write_text('{"plugin": []}')
    (tmp_path / "tools").mkdir()  # a tool file may import the package
    assert plugin_deps.settle(tmp_path) is False
    assert not (tmp_path / plugin_deps.LOCKFILE).exists()


@pytest.mark.fast
def test_what_opencode_installed_itself_is_left_alone(tmp_path: Path) -> None:
    real = '{"lockfileVersion": 3, "packages": {"": {"dependencies": {"@opencode-ai/plugin": "1.18.33"}}}}'
    (tmp_path / plugin_deps.LOCKFILE).write_text(real)
    (tmp_path / "node_modules" / "@opencode-ai").mkdir(parents=True)
    (tmp_path / "package.json").write_text('{"dependencies": {"left-pad": "1"}}')
    assert plugin_deps.settle(tmp_path) is False
    assert (tmp_path / plugin_deps.LOCKFILE).read_text() == real
    assert (tmp_path / "node_modules" / "@opencode-ai").is_dir()
    (tmp_path / "package.json").unlink()
    assert plugin_deps.settle(tmp_path) is True
    assert (tmp_path / plugin_deps.LOCKFILE).read_text() == real


@pytest.mark.fast
def test_wardians_own_plugin_needs_no_package_but_a_plugin_beside_it_does(tmp_path: Path) -> None:
    """wardian's credentials plugin imports nothing (`shell_env`): the placeholders stay until a file of the
    person's joins it."""
    shell_env.write(tmp_path)
    assert plugin_deps.settle(tmp_path) is True
    (tmp_path / "plugin" / "theirs.ts").write_text('import { tool } from "@opencode-ai/plugin"\n')
    assert plugin_deps.settle(tmp_path) is False
    assert not (tmp_path / plugin_deps.LOCKFILE).exists()
