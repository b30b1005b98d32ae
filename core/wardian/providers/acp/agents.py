"""What differs between ACP agents: the command, the private directories and the variables that name them, the
settings file, the quiet settings, and the credential's variable (docs/guide/acp.md). Everything else about an ACP
agent is the protocol's, and written once (`runtime`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from wardian.providers.acp.compat import (
    GEMINI_GATE,
    QWEN_GATE,
    gemini_capabilities,
    generic_capabilities,
    qwen_capabilities,
)
from wardian.providers.acp.replay import qwen_finished
from wardian.providers.capabilities import Capabilities
from wardian.providers.version import Version, VersionGate


@dataclass(frozen=True, slots=True)
class AcpAgent:
    name: str
    """The provider's name (`qwen`)."""
    gate: VersionGate
    capabilities: Callable[[Version], Capabilities]
    args: tuple[str, ...]
    """After the executable: what makes it speak ACP on stdio, in the approval mode wardian answers for."""
    dirs: Mapping[str, str]
    """The private directories under `<agent dir>/<name>/`, by the variable the agent reads each from; the first
    names the agent's home, and identifies its process for `end_left_behind`."""
    settings: tuple[str, ...]
    """The settings file, as a path under the first directory; () for an agent wardian knows no settings file of
    (its `-c` settings can only be `env.*` ones)."""
    quiet_env: Mapping[str, str]
    quiet_settings: tuple[tuple[tuple[str, ...], Any], ...]
    """Settings written before the agent's own `-c` ones (which may change them): no telemetry, no update checks."""
    drop: tuple[str, ...]
    """Variables of the person's environment the agent never gets (a prefix ends with `_`): their own config."""
    credential: str
    """The variable the agent reads its API key from (the sign-in reaches its environment only)."""
    exits_at_eof: bool = True
    """Whether the agent exits once its input closes (a stop's polite step, waited for); one that does not is sent
    SIGTERM right after instead."""
    finished: Callable[[Mapping[str, Path], str], Callable[[dict[str, Any]], bool]] | None = None
    """How to read, from the agent's files under its directories, which replayed answers of a session its turns
    finished (`replay`); None: the agent marks none, so its lost tasks stay uncertain."""


QWEN = AcpAgent(
    name="qwen", gate=QWEN_GATE, capabilities=qwen_capabilities,
    # The default mode asks before every MCP tool, so the agent's grants decide; Qwen's own default (`auto`) would
    # let a model classifier decide instead.
    args=("--acp", "--approval-mode", "default"),
    dirs={"QWEN_HOME": "home", "TMPDIR": "tmp"},
    settings=("settings.json",),
    quiet_env={"QWEN_USAGE_STATISTICS_ENABLED": "false"},
    quiet_settings=((("privacy", "usageStatisticsEnabled"), False), (("general", "enableAutoUpdate"), False),
                    (("general", "disableAutoUpdate"), True), (("general", "disableUpdateNag"), True)),
    # XDG_RUNTIME_DIR: Qwen Code makes its per-process socket directory there, else in TMPDIR (which is private).
    drop=("QWEN_", "OPENAI_", "DASHSCOPE_", "XDG_RUNTIME_DIR"),
    credential="OPENAI_API_KEY", finished=qwen_finished)

GEMINI = AcpAgent(
    name="gemini", gate=GEMINI_GATE, capabilities=gemini_capabilities,
    args=("--acp", "--approval-mode", "default"),
    # GEMINI_CLI_HOME stands for the home directory: Gemini CLI keeps everything in its `.gemini/`.
    dirs={"GEMINI_CLI_HOME": "home", "TMPDIR": "tmp"},
    settings=(".gemini", "settings.json"),
    # Without a trusted workspace Gemini CLI silently drops the MCP servers of session/new.
    quiet_env={"GEMINI_CLI_TRUST_WORKSPACE": "true"},
    quiet_settings=((("privacy", "usageStatisticsEnabled"), False), (("telemetry", "enabled"), False),
                    (("general", "enableAutoUpdate"), False), (("general", "enableAutoUpdateNotification"), False)),
    drop=("GEMINI_", "GOOGLE_", "XDG_RUNTIME_DIR"),
    credential="GEMINI_API_KEY",
    # Gemini CLI 0.61 keeps running once its input closes while an MCP server (wardian's) is connected: waiting for
    # it would only delay the SIGTERM that ends it.
    exits_at_eof=False)

GENERIC = AcpAgent(
    name="acp", gate=VersionGate("ACP agent", "acp", "an ACP agent", "", Version(0, 0, 0), pinned=False),
    capabilities=generic_capabilities,
    args=(),  # its own command line (`for_command`)
    # Whatever it keeps goes under its private home: most CLIs keep theirs under HOME or the XDG directories.
    dirs={"HOME": "home", "XDG_CONFIG_HOME": "config", "XDG_DATA_HOME": "data", "XDG_STATE_HOME": "state",
          "XDG_CACHE_HOME": "cache", "TMPDIR": "tmp"},
    settings=(), quiet_env={}, quiet_settings=(), drop=("XDG_RUNTIME_DIR",), credential="")

QUIET_BY_COMMAND: dict[str, dict[str, str]] = {
    # OpenCode: no model-list fetch, no self-update, no sharing, no LSP downloads (docs/providers/opencode.md).
    "opencode": {"OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_AUTOUPDATE": "1",
                 "OPENCODE_DISABLE_SHARE": "1", "OPENCODE_DISABLE_LSP_DOWNLOAD": "1"},
}
"""The quiet variables of the generic ACP agents wardian knows, by the command's executable name."""

AGENTS: dict[str, AcpAgent] = {agent.name: agent for agent in (QWEN, GEMINI)}


def for_command(command: tuple[str, ...], executable: str) -> AcpAgent:
    """The generic ACP agent that `command` starts (its executable already found)."""
    name = Path(executable).name
    return replace(GENERIC, args=command[1:], quiet_env=QUIET_BY_COMMAND.get(name, {}),
                   gate=replace(GENERIC.gate, label=f"ACP agent {name}", command=name))


def home_dirs(agent: AcpAgent, agent_dir: Path) -> tuple[Path, dict[str, Path]]:
    """The agent's private root and its directories by variable."""
    root = agent_dir / agent.name
    return root, {variable: root / sub for variable, sub in agent.dirs.items()}
