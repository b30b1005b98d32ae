"""Fixtures for the harness tests: the real Codex binary, a running scripted model, private Codex homes."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import unavailable
from wardian_harness.models.scripted_model import AgentScript, ScriptedModel
from wardian_harness.providers.cli import REPO_ROOT
from wardian_harness.providers.codex_home import ScriptedProvider, codex_env, write_codex_config
from wardian_harness.providers.codex_install import (
    EXECUTABLE_ENV,
    CodexInstall,
    CodexNotFound,
    discover_codex,
)

# Where the session that set up this machine installed the pinned Codex for experiments; used only when neither
# WARDIAN_E2E_CODEX_EXECUTABLE nor the repo's node_modules provides one.
EXPERIMENT_CODEX = Path("/tmp/cx171/node_modules/.bin/codex")


@pytest.fixture(scope="session")
def codex() -> CodexInstall:
    """The real Codex CLI; skipped when absent, unless CI is set, where absence fails the run."""
    env = dict(os.environ)
    local = REPO_ROOT / "node_modules" / ".bin" / "codex"
    if not env.get(EXECUTABLE_ENV) and not local.exists() and EXPERIMENT_CODEX.exists():
        env[EXECUTABLE_ENV] = str(EXPERIMENT_CODEX)
    try:
        return discover_codex(env=env)
    except CodexNotFound as exc:
        unavailable(str(exc))


@pytest.fixture
def model() -> Iterator[ScriptedModel]:
    with ScriptedModel() as running:
        yield running


@dataclass(frozen=True)
class AgentHome:
    """One agent's private directories, provider settings and child environment."""

    script: AgentScript
    provider: ScriptedProvider
    codex_home: Path
    workspace: Path
    env: dict[str, str]
    stderr: Path


@pytest.fixture
def agent_home(model: ScriptedModel, tmp_path: Path) -> AgentHome:
    """Agent "alice" on the scripted model, with config.toml written into a fresh CODEX_HOME."""
    return make_agent_home(model, tmp_path, "alice")


def make_agent_home(model: ScriptedModel, root: Path, name: str, *, write_config: bool = True) -> AgentHome:
    script = model.agent(name)
    provider = ScriptedProvider(script.base_url)
    codex_home, home, workspace = root / name / "codex", root / name / "home", root / name / "workspace"
    for path in (home, workspace):
        path.mkdir(parents=True)
    if write_config:
        write_codex_config(codex_home, provider)
    else:
        codex_home.mkdir(mode=0o700)
    return AgentHome(script=script, provider=provider, codex_home=codex_home, workspace=workspace,
                     env=codex_env(codex_home, home=home, provider=provider), stderr=root / name / "stderr.txt")
