"""An agent's private provider home is made one way for every provider (`wardian.providers.homes`): a provider folder
that is not a private directory of this user's is refused before anything is written into it."""

from __future__ import annotations

import uuid
from pathlib import Path

import anyio
import pytest

from wardian import errors
from wardian.home import Home
from wardian.providers.base import LaunchSpec, Provider, ProviderInfo
from wardian.providers.codex import compat as codex_compat
from wardian.providers.codex.provider import CodexProvider
from wardian.providers.opencode import compat as opencode_compat
from wardian.providers.opencode.provider import OpenCodeProvider

pytestmark = pytest.mark.fast  # the fast tier (scripts/check test-fast)

PROVIDERS: dict[str, tuple[Provider, ProviderInfo]] = {
    "codex": (CodexProvider(), ProviderInfo("codex", str(codex_compat.GATE.minimum),
                                            codex_compat.capabilities(codex_compat.GATE.minimum))),
    "opencode": (OpenCodeProvider(), ProviderInfo("opencode", str(opencode_compat.MIN_VERSION),
                                                  opencode_compat.capabilities(opencode_compat.MIN_VERSION))),
}


def launch_spec(home: Home, provider: str) -> LaunchSpec:
    agent_uuid = str(uuid.uuid4())
    workspace = home.root / "ws"
    workspace.mkdir(parents=True, exist_ok=True)
    home.run_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    home.log_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    return LaunchSpec(name="lead", uuid=agent_uuid, agent_dir=home.agent_dir(agent_uuid), workspace=workspace,
                      mode="background", overrides=(), approve_tools=(), home=home, session="not-a-real-session",
                      thread_id=None, log_path=home.provider_log_path(provider, agent_uuid),
                      pid_path=home.provider_pid_path(provider, agent_uuid))


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_a_provider_folder_that_is_a_link_is_refused_and_nothing_is_written_through_it(provider: str,
                                                                                       tmp_path: Path) -> None:
    """Our own rule (Claude Code's since its first release, now every provider's): the provider's private home is
    made 0700 and must be a directory of this user's, never a link to somewhere else."""
    home = Home(tmp_path / "home")
    spec = launch_spec(home, provider)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    spec.agent_dir.mkdir(parents=True)
    (spec.agent_dir / provider).symlink_to(elsewhere, target_is_directory=True)
    implementation, info = PROVIDERS[provider]
    with pytest.raises(errors.InsecureRuntimeDir):
        anyio.run(implementation.prepare, spec, info)
    assert list(elsewhere.iterdir()) == []
