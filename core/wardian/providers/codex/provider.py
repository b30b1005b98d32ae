"""The Codex provider: finds and gates the Codex CLI, prepares an agent's private `CODEX_HOME` and returns its owner.

The agent's Codex home is `<agent dir>/codex` (0700): `config.toml` with `[mcp_servers.wardian]` registered for
a session of the new generation, and, in attached mode, the projected launch settings. The app-server listens on
`<agent dir>/app-server.sock` in attached mode. The executable is `WARDIAN_CODEX`, else the first `codex` on PATH.
"""

from __future__ import annotations

from pathlib import Path

import anyio

from wardian.auth.model import CredentialKind
from wardian.overrides import ValueSyntax
from wardian.providers.base import LaunchSpec, ProviderInfo
from wardian.providers.codex import approvals, projection, signin
from wardian.providers.codex.chatgpt_owner import OwnerTokens
from wardian.providers.codex.compat import GATE, capabilities
from wardian.providers.codex.launch import AppServerSpec, app_server_env
from wardian.providers.codex.registration import register_session
from wardian.providers.codex.runtime import CodexRuntime
from wardian.providers.homes import end_left_behind, private_dir
from wardian.providers.probe import probe

# Launch settings of every managed app-server: thread/start waits until wardian's MCP server is ready, so the first turn
# already offers its tools (docs/providers/codex.md#mcp-servers-inside-codex: optional servers are skipped when late).
# Codex gives an MCP server 10 s to start by default; a loaded machine can need more, and a required server that misses
# it fails the whole thread/start.
LAUNCH_OVERRIDES = ("mcp_servers.wardian.required=true", "mcp_servers.wardian.startup_timeout_sec=60")


def codex_home_of(agent_dir: Path) -> Path:
    return agent_dir / "codex"


class CodexProvider:
    name = "codex"
    settings_syntax = ValueSyntax.TOML_OR_STRING  # `codex -c` takes a value that is not TOML as a string

    def __init__(self) -> None:
        self._chatgpt: dict[Path, OwnerTokens] = {}

    async def probe(self) -> ProviderInfo:
        return await probe(GATE, capabilities)

    async def prepare(self, spec: LaunchSpec, info: ProviderInfo) -> CodexRuntime:
        codex_home = codex_home_of(spec.agent_dir)
        await anyio.to_thread.run_sync(self._prepare_home, spec, codex_home)
        return CodexRuntime(AppServerSpec(
            name=spec.name, codex=info.executable, codex_home=codex_home, workspace=spec.workspace,
            overrides=(*spec.overrides, *approvals.launch_overrides(spec.approvals, spec.overrides), *LAUNCH_OVERRIDES),
            env={**app_server_env(codex_home), **spec.env, "CODEX_HOME": str(codex_home)},
            thread_id=spec.thread_id, capabilities=info.capabilities, stderr_path=spec.log_path,
            pid_path=spec.pid_path, mode=spec.mode, socket_path=spec.agent_dir / "app-server.sock",
            config=spec.overrides, credentials=spec.credentials, chatgpt=self._chatgpt_of(spec)))

    def _chatgpt_of(self, spec: LaunchSpec) -> OwnerTokens | None:
        """The home's own ChatGPT session when the agent's credential is the ChatGPT sign-in: one token source per
        home, shared by all its Codex agents, so that one refresh renews every token rejected at the same time
        (docs/guide/sign-in.md#chatgpt)."""
        if not any(c.kind is CredentialKind.CHATGPT for c in spec.credentials):
            return None
        source = self._chatgpt.get(spec.home.root)
        if source is None:
            source = self._chatgpt[spec.home.root] = OwnerTokens(spec.home)
        return source

    @staticmethod
    def _prepare_home(spec: LaunchSpec, codex_home: Path) -> None:
        private_dir(codex_home)
        end_left_behind(spec.pid_path, "CODEX_HOME", codex_home, agent=spec.name, label="the Codex app-server")
        # An earlier attached launch's projection (even one a crash interrupted) is undone first.
        projection.recover(codex_home)
        if spec.mode == "attached":
            # The person's TUI reads config.toml, not our -c: project the launch settings for this owner.
            projection.project(codex_home, list(spec.overrides))
        # Managed startup registers the bundled CLI in the agent's private home, with a session bound to this
        # generation (contract rules CFG-1, SES-3), granting exactly the tools the app keeps with the agent.
        register_session(codex_home, spec.home, spec.session, {"name": spec.name, "uuid": spec.uuid},
                         spec.approve_tools, exact=True)
        # An API key is kept in the app-server's memory only (docs/providers/codex.md#sign-in).
        signin.prepare_home(codex_home, spec.credentials)
