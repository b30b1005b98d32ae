"""The Claude Code provider: finds and gates the Claude Code CLI, prepares an agent's private Claude Code directories
and returns its runtime (docs/providers/claude.md).

The executable is `WARDIAN_CLAUDE`, else the pinned npm one (`node_modules/.bin/claude` of the working directory or
of a source checkout), else `claude` on PATH. The private directories are described in
`wardian.providers.claude.homes`; the process's environment is the person's, without any Claude Code or Anthropic
configuration or credential of theirs (the agent's own come from its settings, and its sign-in on a file
descriptor), with the private directories and the quiet variables on top.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio

from wardian import errors
from wardian.auth.model import Credential, CredentialKind
from wardian.overrides import ValueSyntax
from wardian.providers.asking import policy_asks
from wardian.providers.base import LaunchSpec, LostDelivery, ProviderInfo, Recovery
from wardian.providers.claude import homes, recovery, registration, settings
from wardian.providers.claude.compat import GATE, capabilities
from wardian.providers.claude.runtime import ClaudeRuntime
from wardian.providers.claude.spec import ClaudeSpec, FdCredential
from wardian.providers.journal import JSON
from wardian.providers.mcp_command import write_private
from wardian.providers.probe import probe
from wardian.providers.process import child_env

log = logging.getLogger("wardian.claude")

# No traffic but the model's: no telemetry, error reports, update checks or MCP registry fetches (with the first
# alone the only connection Claude Code makes is to its API base URL; the others say the same for older releases).
QUIET_ENV = {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1", "DISABLE_TELEMETRY": "1",
             "DISABLE_ERROR_REPORTING": "1"}
# The sign-in reaches Claude Code on a file descriptor these variables name, never in its environment, where every
# command the agent runs would inherit it and any process of the user could read it (/proc/<pid>/environ): Claude
# Code 2.1.328 reads the descriptor once at start, keeps the secret in memory and hands its commands neither the
# secret nor the variable (docs/providers/claude.md#private-directories-and-environment).
CREDENTIAL_FD = {CredentialKind.API_KEY: "CLAUDE_CODE_API_KEY_FILE_DESCRIPTOR",
                 CredentialKind.OAUTH_TOKEN: "CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR"}
# The person's own Claude Code identity and session, never an agent's: `CLAUDECODE` and the messaging socket say
# "inside a Claude Code session" (set when wardian itself runs under one), the rest are their configuration.
_DROP = ("CLAUDECODE", "CLAUDE_CONFIG_DIR", "CLAUDE_CODE_OAUTH_TOKEN", "CLAUDE_CODE_ENTRYPOINT", "CLAUDE_CODE_SSE_PORT",
         "CLAUDE_CODE_MESSAGING_SOCKET", "CLAUDE_CODE_MESSAGING_TOKEN", *CREDENTIAL_FD.values())


def fd_credential(credentials: tuple[Credential, ...], agent: str) -> FdCredential | None:
    """The agent's Claude Code credential as Claude Code reads it from a descriptor (none: None; Claude Code then
    reports "Not logged in" unless the agent's settings hold a key). Raises: NotSignedIn (not a Claude credential)."""
    for credential in credentials:
        if credential.provider != "claude":
            continue
        variable = CREDENTIAL_FD.get(credential.kind)
        if variable is None or not credential.secret:
            raise errors.NotSignedIn(
                f"Claude Code agent {agent} has a {credential.kind} credential, which Claude Code cannot use: run "
                "`wardian auth login claude --with-api-key` (or --with-oauth-token)", field="auth")
        return FdCredential(variable, credential.secret)
    return None


def _grants(agent_dir: Path, given: tuple[str, ...]) -> tuple[str, ...]:
    """The agent's tool grants: exactly these (the app keeps an agent's grants with it and passes them at every
    start, so a start with other grants replaces them); written down for a person to read."""
    path = homes.grants_of(agent_dir)
    grants = tuple(dict.fromkeys(given))
    try:
        before = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        before = None
    if before != list(grants):
        write_private(path, json.dumps(list(grants)) + "\n")
    return grants


class ClaudeProvider:
    name = "claude"
    settings_syntax = ValueSyntax.TOML_OR_JSON  # settings.json is JSON: what people paste is JSON

    async def probe(self) -> ProviderInfo:
        return await probe(GATE, capabilities)

    async def recover_lost(self, deliveries: Sequence[LostDelivery]) -> list[Recovery]:
        """Settle the deliveries a killed app lost from the session transcript (`recovery`), after ending the
        process it left running."""
        return await anyio.to_thread.run_sync(recovery.recover, deliveries, abandon_on_cancel=True)

    async def prepare(self, spec: LaunchSpec, info: ProviderInfo) -> ClaudeRuntime:
        claude_spec = await anyio.to_thread.run_sync(self.build_spec, spec, info)
        return ClaudeRuntime(claude_spec)

    @staticmethod
    def build_spec(spec: LaunchSpec, info: ProviderInfo) -> ClaudeSpec:
        """Everything `prepare` decides for this start, with the directories made and the files written.

        Raises: InvalidArguments (a bad setting), NotSignedIn, CliNotFound, Unsupported (the session is held by
        another live process).
        """
        agent_settings = settings.parse(spec.overrides)  # every setting checked before anything changes
        registration.allowed_tools(spec.approve_tools)  # the grants too
        credential = fd_credential(spec.credentials, spec.name)
        private = homes.make_dirs(spec.home, spec.agent_dir)
        config_dir = private.dirs["CLAUDE_CONFIG_DIR"]
        _end_left_behind(spec, config_dir)
        settings.apply(config_dir, agent_settings)
        written = JSON.load(config_dir / settings.SETTINGS)
        check_root_rule(written, agent_settings.env, os.geteuid())
        if credential and (shadows := shadowing(written, agent_settings.env)):
            log.warning("the settings of %s give Claude Code its own credential (%s), which it uses instead of the "
                        "agent's sign-in", spec.name, ", ".join(shadows))
        mcp_config = homes.mcp_config_of(spec.agent_dir)
        registration.write_mcp_config(mcp_config, spec.home, spec.session)
        allowed = registration.allowed_tools(_grants(spec.agent_dir, spec.approve_tools))
        extra = private.env()
        extra["CLAUDE_CODE_TMPDIR"] = extra["TMPDIR"]
        drop = (*_DROP, *(k for k in os.environ if k.startswith("ANTHROPIC_")))
        env = child_env({**spec.env, **extra, **QUIET_ENV, **agent_settings.env}, drop=drop)
        return ClaudeSpec(
            name=spec.name, executable=info.executable, workspace=spec.workspace, env=env, config_dir=config_dir,
            mcp_config=mcp_config, allowed_tools=allowed, session_id=spec.thread_id, capabilities=info.capabilities,
            stderr_path=spec.log_path, pid_path=spec.pid_path, credential=credential,
            permission_prompt=policy_asks(spec.approvals))


_CREDENTIAL_SETTINGS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN")


def shadowing(agent_settings: dict[str, Any], secret_env: dict[str, str]) -> list[str]:
    """The agent's settings that give Claude Code a credential of their own (named, never their values): a `-c`
    secret, an `env` key of settings.json, or an `apiKeyHelper`, each of which Claude Code prefers to (or sends
    beside) the credential of the agent's sign-in."""
    env = agent_settings.get("env")
    named = [f"env.{k}" for k in _CREDENTIAL_SETTINGS
             if k in secret_env or (isinstance(env, dict) and k in env)]
    return [*named, *(["apiKeyHelper"] if agent_settings.get("apiKeyHelper") else [])]


def check_root_rule(agent_settings: dict[str, Any], secret_env: dict[str, str], euid: int) -> None:
    """Claude Code run as root exits at once when told to bypass permissions, unless `IS_SANDBOX=1`: say so before
    the start, naming the fix. Raises: InvalidArguments."""
    permissions = agent_settings.get("permissions")
    mode = permissions.get("defaultMode") if isinstance(permissions, dict) else None
    env = agent_settings.get("env")
    sandbox = (env.get("IS_SANDBOX") if isinstance(env, dict) else None) or secret_env.get("IS_SANDBOX")
    if euid == 0 and mode == "bypassPermissions" and sandbox != "1":
        raise errors.InvalidArguments(
            "Claude Code refuses permissions.defaultMode = bypassPermissions when run as root, unless IS_SANDBOX=1: "
            "on a machine that is a sandbox add -c 'env.IS_SANDBOX=\"1\"', else choose another defaultMode",
            field="config", allowed="default, acceptEdits, plan, dontAsk; bypassPermissions as root only with "
            "IS_SANDBOX=1")


def _end_left_behind(spec: LaunchSpec, config_dir: Path) -> None:
    """End the process a killed app left running for this agent, then refuse to start beside any other live process
    that holds the agent's session: two processes resuming one session write one transcript with diverging
    histories (Claude Code does not lock a session).

    Raises: Unsupported (another live process holds the session).
    """
    recovery.end_recorded(spec.name, spec.pid_path, config_dir)
    if spec.thread_id is None:
        return
    holder = homes.holder_of(config_dir, spec.thread_id)
    if holder is not None:
        raise errors.Unsupported(
            f"Claude Code session {spec.thread_id} of agent {spec.name} is held by another live process (pid "
            f"{holder}); end it first: a second process on one session would diverge from it", field="agent")
