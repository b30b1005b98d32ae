"""The OpenCode provider: finds and gates the OpenCode CLI, prepares an agent's private OpenCode homes and returns its
runtime.

An agent's OpenCode lives under `<agent dir>/opencode/` (0700): `config/` (its XDG_CONFIG_HOME: `opencode/opencode.json`
with `mcp.wardian` registered for a session of the new generation, and the agent's `-c` settings;
`opencode/plugin/wardian-credentials.js`, which keeps serve's secrets out of the agent's commands), `data/`,
`cache/`, `state/` (its XDG dirs: sessions, logs), and `server.password` (0600: the Basic-auth password of the
`opencode serve` this start runs; never printed or logged). The agent's credentials go into serve's environment
only (`signin`), never into these dirs. The executable is `WARDIAN_OPENCODE`, else the pinned
npm one (`node_modules/.bin/opencode` of the working directory or of a source checkout), else `opencode` on PATH.
"""

from __future__ import annotations

import secrets
from pathlib import Path

import anyio

from wardian.overrides import ValueSyntax
from wardian.providers.base import LaunchSpec, ProviderInfo
from wardian.providers.homes import ProviderHome, end_left_behind, private_dir
from wardian.providers.mcp_command import write_private
from wardian.providers.opencode import approvals, plugin_deps, registration, settings, shell_env, signin
from wardian.providers.opencode.compat import GATE, capabilities
from wardian.providers.opencode.runtime import OpenCodeRuntime, ServeSpec
from wardian.providers.probe import probe
from wardian.providers.process import child_env

# Offline and quiet: no model-list fetch, no self-update, no sharing, no LSP downloads
# (docs/providers/opencode.md#offline-configuration).
OFFLINE_ENV = {"OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_AUTOUPDATE": "1",
               "OPENCODE_DISABLE_SHARE": "1", "OPENCODE_DISABLE_LSP_DOWNLOAD": "1"}
XDG = ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME")


def opencode_home(agent_dir: Path) -> ProviderHome:
    """The agent's private OpenCode home: its XDG dirs, by variable."""
    base = agent_dir / "opencode"
    return ProviderHome(base, {"XDG_CONFIG_HOME": base / "config", "XDG_DATA_HOME": base / "data",
                               "XDG_CACHE_HOME": base / "cache", "XDG_STATE_HOME": base / "state"})


def config_dir_of(agent_dir: Path) -> Path:
    return opencode_home(agent_dir).dirs["XDG_CONFIG_HOME"] / "opencode"


class OpenCodeProvider:
    name = "opencode"
    settings_syntax = ValueSyntax.TOML_OR_JSON  # opencode.json is JSON: what people paste is JSON

    async def probe(self) -> ProviderInfo:
        return await probe(GATE, capabilities)

    async def prepare(self, spec: LaunchSpec, info: ProviderInfo) -> OpenCodeRuntime:
        """Raises: InvalidArguments (a credential OpenCode cannot take), RegistrationConflict, CliNotFound."""
        keys = signin.api_keys(spec.name, spec.credentials)  # checked before anything changes
        password_path = spec.agent_dir / "opencode" / "server.password"
        env = await anyio.to_thread.run_sync(self._prepare_homes, spec, password_path)
        data_dir = opencode_home(spec.agent_dir).dirs["XDG_DATA_HOME"]
        warnings: list[str] = []
        if keys:
            # The key map travels in serve's environment only (`signin`); OpenCode then never reads auth.json.
            env[signin.ENV_AUTH_CONTENT] = signin.auth_content(keys)
        left = await anyio.to_thread.run_sync(signin.scrub_auth_file, data_dir, keys)
        if (stale := signin.stale_auth_warning(spec.name, data_dir, left, bool(keys))) is not None:
            warnings.append(stale)
        runtime = OpenCodeRuntime(ServeSpec(
            name=spec.name, opencode=info.executable, workspace=spec.workspace, env=env, password_path=password_path,
            session_id=spec.thread_id, capabilities=info.capabilities, stderr_path=spec.log_path,
            pid_path=spec.pid_path, keys=keys, data_dir=data_dir))
        for warning in warnings:
            runtime.warn(warning)
        return runtime

    @staticmethod
    def _prepare_homes(spec: LaunchSpec, password_path: Path) -> dict[str, str]:
        private = opencode_home(spec.agent_dir)
        config_dir = config_dir_of(spec.agent_dir)
        private.make()
        private_dir(config_dir)
        end_left_behind(spec.pid_path, "XDG_CONFIG_HOME", private.dirs["XDG_CONFIG_HOME"], agent=spec.name,
                        label="the opencode serve")
        # The agent's -c settings, then wardian's registration with this generation's session (contract rules
        # CFG-1, SES-3, the same rules for OpenCode).
        settings.apply(config_dir, list(spec.overrides))
        registration.register_session(config_dir, spec.home, spec.session, {"name": spec.name, "uuid": spec.uuid})
        shell_env.write(config_dir)  # the agent's commands get serve's environment without its secrets
        plugin_deps.settle(config_dir)  # no npm install at start unless the config could use it
        write_private(password_path, secrets.token_urlsafe(32) + "\n")
        password = password_path.read_text(encoding="utf-8").strip()
        extra = private.env()
        # The password is always set: serve answers every route, `/provider` with the resolved keys among them, to
        # those who give it (docs/providers/opencode.md#sign-in). Our own OPENCODE_AUTH_CONTENT never comes from
        # the app's environment: it is the agent's credentials or nothing. OPENCODE_PURE would drop the plugin that
        # keeps both out of the agent's commands (`shell_env`).
        env = child_env({**spec.env, **extra, **OFFLINE_ENV, "OPENCODE_SERVER_PASSWORD": password},
                        drop=(*XDG, "OPENCODE_CONFIG", "OPENCODE_CONFIG_CONTENT", "OPENCODE_CONFIG_DIR",
                              "OPENCODE_SERVER_PASSWORD", "OPENCODE_PERMISSION", "OPENCODE_PURE",
                              signin.ENV_AUTH_CONTENT))
        # Asking policies: `ask` where the agent's own permission settings say nothing (`approvals`).
        env.update(approvals.permission_env(spec.approvals, registration.read_config(
            registration.config_file(config_dir))))
        return env
