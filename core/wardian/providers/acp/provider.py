"""The ACP provider family: finds and gates an ACP agent's CLI, prepares the agent's private directories and
settings, and returns its runtime (docs/guide/acp.md).

The executable is the agent's `WARDIAN_<NAME>` variable, else the pinned npm one, else PATH. Everything the agent
keeps lives under `<agent dir>/<name>/` (0700), in the directories its CLI reads from environment variables
(`agents.AcpAgent.dirs`), given to its process over the agent's `--env` settings. Its settings file there gets the
quiet settings, then the agent's `-c` settings, journaled and undone at the next start. A `-c env.NAME=value`
setting is given to the process's environment instead (never written to a file). The sign-in (`wardian auth login
<name> --with-api-key`) reaches the process's environment only.

A generic ACP agent (`acp`) runs the command line kept with it (`agent add --command`; its first word an absolute
path or found on the app's PATH), at any version, under a private HOME, XDG directories and TMPDIR; wardian knows
no settings file of it, so its `-c` settings are `env.*` ones only.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import anyio

from wardian import errors
from wardian.auth.model import Credential
from wardian.overrides import Override, ValueSyntax, parse_override
from wardian.providers import journal
from wardian.providers.acp import permissions
from wardian.providers.acp.agents import AcpAgent, for_command, home_dirs
from wardian.providers.acp.compat import generic_capabilities
from wardian.providers.acp.runtime import AcpRuntime, AcpSpec
from wardian.providers.base import LaunchSpec, ProviderInfo
from wardian.providers.homes import ProviderHome, end_left_behind, private_dir
from wardian.providers.journal import JSON, json_value
from wardian.providers.probe import find_command, probe
from wardian.providers.process import child_env
from wardian.providers.version import Version

JOURNAL = "wardian-settings.json"
UNKNOWN = Version(0, 0, 0)


@dataclass(frozen=True, slots=True)
class Settings:
    """The agent's `-c` settings, split: keys for its settings file, and `env.*` values for its environment."""

    file: tuple[Override, ...] = ()
    env: dict[str, str] = field(default_factory=dict)


def parse_settings(overrides: tuple[str, ...] | list[str]) -> Settings:
    """Every setting checked and split. Raises: InvalidArguments (nothing was changed)."""
    kept: list[Override] = []
    env: dict[str, str] = {}
    for text in overrides:
        override = parse_override(text, ValueSyntax.TOML_OR_JSON)
        path, value = override.path, json_value(override.value)
        if path[0] == "env":
            if len(path) != 2 or not isinstance(value, str):
                raise errors.InvalidArguments(
                    "an env setting names one variable and gives it text", field="config",
                    allowed='env.NAME="value"')
            env[path[1]] = value
            continue
        kept.append(Override(path, value))
    return Settings(tuple(kept), env)


def credential_env(agent: AcpAgent, credentials: tuple[Credential, ...], name: str) -> dict[str, str]:
    """The agent's sign-in as its process reads it. Raises: NotSignedIn (a credential it cannot use)."""
    for credential in credentials:
        if credential.provider == agent.name and agent.credential:
            if not credential.secret:
                raise errors.NotSignedIn(f"{agent.gate.label} agent {name} has a {credential.kind} credential, which "
                                         f"it cannot use: run `wardian auth login {agent.name} --with-api-key`",
                                         field="auth")
            return {agent.credential: credential.secret}
    return {}


class AcpProvider:
    settings_syntax = ValueSyntax.TOML_OR_JSON  # the agents' settings files are JSON

    def __init__(self, agent: AcpAgent, command: tuple[str, ...] = ()) -> None:
        self.agent = agent
        self.name = agent.name
        self.command = command

    def with_command(self, command: tuple[str, ...]) -> AcpProvider:
        """The generic ACP provider for an agent whose command line is `command` (`agents.GENERIC`)."""
        return AcpProvider(self.agent, command)

    async def probe(self) -> ProviderInfo:
        if not self.command:
            return await probe(self.agent.gate, self.agent.capabilities)
        # Any version: wardian knows no releases of a generic agent, and asking one for `--version` may start it.
        executable = await anyio.to_thread.run_sync(find_command, self.command[0])
        return ProviderInfo(executable=executable, version="unknown", capabilities=generic_capabilities(UNKNOWN))

    async def prepare(self, spec: LaunchSpec, info: ProviderInfo) -> AcpRuntime:
        return AcpRuntime(await anyio.to_thread.run_sync(self.build_spec, spec, info))

    def build_spec(self, spec: LaunchSpec, info: ProviderInfo) -> AcpSpec:
        """Everything `prepare` decides for this start, with the directories made and the settings written.

        Raises: InvalidArguments (a bad setting or grant), NotSignedIn, CliNotFound.
        """
        agent = for_command(self.command, info.executable) if self.command else self.agent
        settings = parse_settings(spec.overrides)  # every setting checked before anything changes
        if settings.file and not agent.settings:
            raise errors.InvalidArguments(f"wardian knows no settings file of {agent.gate.label}: its -c settings "
                                          "can only be env.NAME ones (or use --env)", field="config",
                                          allowed='env.NAME="value"')
        allowed = permissions.granted(spec.approve_tools)
        signed_in = credential_env(agent, spec.credentials, spec.name)
        root, dirs = home_dirs(agent, spec.agent_dir)
        private = ProviderHome(root, dirs)
        private.make()
        first = next(iter(agent.dirs))
        end_left_behind(spec.pid_path, first, dirs[first], agent=spec.name, label=f"the {agent.gate.label} agent")
        if agent.settings:
            settings_file = dirs[first].joinpath(*agent.settings)
            private_dir(settings_file.parent)  # Gemini CLI's `.gemini/` under its home
            projected: list[tuple[tuple[str, ...], Any]] = [*agent.quiet_settings,
                                                             *((o.path, o.value) for o in settings.file)]
            journal.project(JSON, settings_file, settings_file.with_name(JOURNAL), projected)
        drop = tuple(k for k in os.environ if any(k.startswith(p) if p.endswith("_") else k == p
                                                  for p in agent.drop))
        env = child_env({**spec.env, **private.env(), **agent.quiet_env, **settings.env, **signed_in}, drop=drop)
        return AcpSpec(name=spec.name, agent=agent, executable=info.executable, workspace=spec.workspace, env=env,
                       session_id=spec.thread_id, mcp_servers=[permissions.mcp_server(spec.home, spec.session)],
                       allowed=allowed, capabilities=info.capabilities, stderr_path=spec.log_path,
                       pid_path=spec.pid_path, mcp_connected=spec.mcp_connected, dirs=dirs)
