"""Pi as a provider: finds and gates its CLI, prepares the agent's private home and settings, and returns its runtime
(docs/guide/pi.md).

The executable is `WARDIAN_PI`, else the pinned npm one, else PATH. Everything Pi keeps for the agent lives under
`<agent dir>/pi/` (0700): its agent directory (`PI_CODING_AGENT_DIR`: settings, models, auth) and its sessions
(`PI_CODING_AGENT_SESSION_DIR`), never the person's `~/.pi`; `PI_OFFLINE=1` and `PI_TELEMETRY=0` keep it from the
network at start. An agent's `-c KEY=VALUE` settings go into that `settings.json` after the quiet ones (auto-retry
off: `turns`), `-c models.KEY=VALUE` into its `models.json` (custom providers), both journaled and undone at the next
start; `-c env.NAME=value` into its process's environment. A sign-in (`wardian auth login pi --provider ID
--with-api-key`) reaches the environment only: `models.json` names the variable (`providers.<ID>.apiKey`), which Pi
resolves at each request, and the key is in no file under the home.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from wardian import errors
from wardian.auth.model import Credential
from wardian.home import ENV_HOME, ENV_MCP_ANNOUNCE
from wardian.overrides import Override, ValueSyntax, parse_override
from wardian.providers import journal
from wardian.providers.asking import policy_asks
from wardian.providers.base import LaunchSpec, LostDelivery, ProviderInfo, Recovery
from wardian.providers.homes import ProviderHome, end_left_behind
from wardian.providers.journal import JSON, json_value
from wardian.providers.mcp_command import SERVE_ARGS, wardian_executable
from wardian.providers.pi import approvals, extension, sessions
from wardian.providers.pi.compat import GATE, capabilities
from wardian.providers.pi.runtime import PiRuntime
from wardian.providers.pi.spec import PiSpec
from wardian.providers.probe import probe
from wardian.providers.process import child_env

JOURNAL = "wardian-settings.json"
MODELS_JOURNAL = "wardian-models.json"
AGENT_DIR = "PI_CODING_AGENT_DIR"
SESSION_DIR = "PI_CODING_AGENT_SESSION_DIR"
QUIET_ENV = {"PI_OFFLINE": "1", "PI_TELEMETRY": "0", "PI_SKIP_VERSION_CHECK": "1"}
QUIET_SETTINGS: tuple[tuple[tuple[str, ...], Any], ...] = ((("retry", "enabled"), False),
                                                            (("enableInstallTelemetry",), False))
DROP = ("PI_",)
"""Variables of the person's environment Pi never gets: their own Pi's directories and switches."""
KEY_VARIABLE = "WARDIAN_PI_KEY_"
_PROVIDER_ID = re.compile(r"[A-Za-z0-9_.-]{1,64}")


@dataclass(frozen=True, slots=True)
class Settings:
    """The agent's `-c` settings, split: `settings.json` keys, `models.json` keys, and environment values."""

    file: tuple[Override, ...] = ()
    models: tuple[Override, ...] = ()
    env: dict[str, str] = field(default_factory=dict)


def parse_settings(overrides: Sequence[str]) -> Settings:
    """Every setting checked and split. Raises: InvalidArguments (nothing was changed)."""
    kept: list[Override] = []
    models: list[Override] = []
    env: dict[str, str] = {}
    for text in overrides:
        override = parse_override(text, ValueSyntax.TOML_OR_JSON)
        path, value = override.path, json_value(override.value)
        if path[0] == "env":
            if len(path) != 2 or not isinstance(value, str):
                raise errors.InvalidArguments("an env setting names one variable and gives it text", field="config",
                                              allowed='env.NAME="value"')
            env[path[1]] = value
        elif path[0] == "models":
            if len(path) < 2:
                raise errors.InvalidArguments("a models setting names a key of Pi's models.json", field="config",
                                              allowed='models.providers.ID={baseUrl="...", api="...", models=[...]}')
            models.append(Override(path[1:], value))
        else:
            kept.append(Override(path, value))
    return Settings(tuple(kept), tuple(models), env)


def key_variable(provider_id: str) -> str:
    """The variable a Pi provider's key is given in (`WARDIAN_PI_KEY_OPENAI`)."""
    return KEY_VARIABLE + re.sub(r"[^A-Z0-9]", "_", provider_id.upper())


def sign_in(credentials: Sequence[Credential], name: str) -> tuple[dict[str, str], list[tuple[tuple[str, ...], Any]]]:
    """The agent's keys as its process reads them, and the `models.json` keys naming their variables.
    Raises: NotSignedIn (a credential without a Pi provider id)."""
    env: dict[str, str] = {}
    models: list[tuple[tuple[str, ...], Any]] = []
    for credential in credentials:
        if credential.provider != "pi":
            continue
        if not credential.secret or not credential.provider_id or not _PROVIDER_ID.fullmatch(credential.provider_id):
            raise errors.NotSignedIn(f"Pi agent {name} has a credential without a Pi provider id: run `wardian auth "
                                     "login pi --provider ID --with-api-key`", field="auth")
        variable = key_variable(credential.provider_id)
        env[variable] = credential.secret
        models.append((("providers", credential.provider_id, "apiKey"), variable))
    return env, models


def retry_enabled(projected: Sequence[tuple[tuple[str, ...], Any]]) -> bool:
    """Whether Pi's auto-retry is on once these settings are written (the last that decides it wins)."""
    enabled = True
    for path, value in projected:
        if path == ("retry", "enabled"):
            enabled = value is not False
        elif path == ("retry",) and isinstance(value, dict):
            enabled = value.get("enabled") is not False
    return enabled


class PiProvider:
    name = "pi"
    settings_syntax = ValueSyntax.TOML_OR_JSON  # Pi's settings and models files are JSON

    async def probe(self) -> ProviderInfo:
        return await probe(GATE, capabilities)

    async def prepare(self, spec: LaunchSpec, info: ProviderInfo) -> PiRuntime:
        return PiRuntime(await anyio.to_thread.run_sync(self.build_spec, spec, info))

    def build_spec(self, spec: LaunchSpec, info: ProviderInfo) -> PiSpec:
        """Everything `prepare` decides for this start, with the directories made and the settings written.

        Raises: InvalidArguments (a bad setting or grant), NotSignedIn, CliNotFound.
        """
        settings = parse_settings(spec.overrides)  # every setting checked before anything changes
        allowed = approvals.granted(spec.approve_tools)
        keys, key_names = sign_in(spec.credentials, spec.name)
        serve = [str(wardian_executable()), *SERVE_ARGS]
        private = home_of(spec.agent_dir)
        private.make()
        agent_dir, session_dir = private.dirs[AGENT_DIR], private.dirs[SESSION_DIR]
        end_left_behind(spec.pid_path, AGENT_DIR, agent_dir, agent=spec.name, label="the Pi process")
        projected = [*QUIET_SETTINGS, *((o.path, o.value) for o in settings.file)]
        journal.project(JSON, agent_dir / "settings.json", agent_dir / JOURNAL, projected)
        journal.project(JSON, agent_dir / "models.json", agent_dir / MODELS_JOURNAL,
                        [*((o.path, o.value) for o in settings.models), *key_names])
        wardian = {ENV_HOME: str(spec.home.root), ENV_MCP_ANNOUNCE: "1", "WARDIAN_PI_MCP_COMMAND": json.dumps(serve)}
        if policy_asks(spec.approvals):
            wardian[approvals.ENV_APPROVALS] = "ask"  # the extension asks before Pi's own bash, edit and write
        env = child_env({**spec.env, **private.env(), **QUIET_ENV, **settings.env, **keys, **wardian}, drop=DROP)
        resumed = sessions.session_file(session_dir, spec.thread_id) if spec.thread_id else None
        return PiSpec(name=spec.name, argv=[info.executable, "--mode", "rpc", "-e", str(extension.PATH)],
                      workspace=spec.workspace, env=env, session=spec.session, session_file=resumed,
                      previous_id=spec.thread_id, allowed=allowed, retry=retry_enabled(projected),
                      capabilities=info.capabilities, stderr_path=spec.log_path, pid_path=spec.pid_path,
                      mcp_connected=spec.mcp_connected)

    async def recover_lost(self, deliveries: Sequence[LostDelivery]) -> list[Recovery]:
        """Settle what a killed app lost from the agent's session file (`sessions`), once the Pi process it left
        running is ended (it may still be writing the run)."""
        if not deliveries:
            return []
        return await anyio.to_thread.run_sync(_recover, deliveries)


def _recover(deliveries: Sequence[LostDelivery]) -> list[Recovery]:
    first = deliveries[0]
    private = home_of(first.agent_dir)
    end_left_behind(first.pid_path, AGENT_DIR, private.dirs[AGENT_DIR], agent=first.agent_name,
                    label="the Pi process")
    return sessions.recover(private.dirs[SESSION_DIR], deliveries)


def home_of(agent_dir: Path) -> ProviderHome:
    """The agent's private Pi home: `<agent dir>/pi/` with its agent directory and its sessions."""
    root = agent_dir / "pi"
    return ProviderHome(root, {AGENT_DIR: root / "agent", SESSION_DIR: root / "sessions"})
